#!/usr/bin/env bash
# The page's threaded engine worker, beside the stable build in dist/ (run after `trunk build`):
# nightly Rust with std rebuilt for wasm threads (+atomics, shared memory), the worker binary
# only. The page runs it where it is cross-origin isolated (public/worker-boot.js) and starts
# one Web Worker per extra CPU pool thread (public/pool-worker.js).
#   scripts/build-threads.sh [DIST]    (default dist/; needs `rustup component add rust-src
#                                       --toolchain nightly`, wasm-bindgen-cli and wasm-opt)
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
# shellcheck source=scripts/threads-env.sh
source scripts/threads-env.sh
cargo build --release --target wasm32-unknown-unknown -p lorekeeper-app --bin worker \
  -Z build-std=std,panic_abort
out=target/threads/bindgen
wasm-bindgen --target no-modules --no-typescript --out-dir "$out" --out-name worker-mt \
  target/threads/wasm32-unknown-unknown/release/worker.wasm
cp "$out/worker-mt.js" "$dist/"
opt=node_modules/.bin/wasm-opt
if [ -x "$opt" ]; then
  "$opt" -O3 --enable-threads --enable-bulk-memory --enable-simd --enable-relaxed-simd --enable-mutable-globals \
    "$out/worker-mt_bg.wasm" -o "$dist/worker-mt_bg.wasm"
else
  cp "$out/worker-mt_bg.wasm" "$dist/"
fi
echo "threaded worker: $dist/worker-mt.js, $dist/worker-mt_bg.wasm"
