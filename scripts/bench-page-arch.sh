#!/usr/bin/env bash
# `lorekeeper bench-arch`'s synthetic decoders (random LQ4 weights: Qwen3-4B's shape by
# default) on the page's WebGPU in headless Chromium (SwiftShader here), this tree's engine
# against other commits' in the same run (scripts/bench-page-arch.mjs; rounds alternate them).
#
#   scripts/bench-page-arch.sh [MODEL] [CONTEXT] [GEN_TOKENS] [ROUNDS] [COMMIT …]
#
# MODEL: qwen3-4b (default), qwen3.5-4b or smollm2. Each build is scripts/page-arch (a wasm
# library compiled with that commit's engine; app/src/bin/lorekeeper/synthetic.rs and the
# harness are this tree's, copied into a worktree of the commit) served on its own port.
# Prints one JSON object: per build, every round's result.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-qwen3-4b}; ctx=${2:-1024}; gen=${3:-3}; rounds=${4:-3}
commits=("${@:5}")
root=$PWD
work=$(mktemp -d); pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; for w in "$work"/src-*; do [ -d "$w" ] && git -C "$root" worktree remove --force "$w"; done; rm -rf "$work"' EXIT
export PATH="$HOME/.cargo/bin:$PATH"

# build TREE OUT [FEATURES]: the harness against TREE's engine, wasm-bindgen'd into OUT/pkg.
build() {
  local tree=$1 out=$2 features=${3:-}
  (cd "$tree/scripts/page-arch" && cp "$tree/Cargo.lock" . &&
    CARGO_TARGET_DIR="$tree/target" cargo build -q --release --target wasm32-unknown-unknown ${features:+--features "$features"})
  mkdir -p "$out"
  wasm-bindgen --target web --no-typescript --out-dir "$out/pkg" \
    "$tree/target/wasm32-unknown-unknown/release/page_arch.wasm"
  cp "$root/scripts/page-arch/index.html" "$out/"
}

echo "building this tree's page-arch" >&2
build "$root" "$work/site-0" verify
sites=("$work/site-0"); names=("$(git rev-parse --short HEAD)")
i=0
for c in "${commits[@]}"; do
  i=$((i + 1)); src="$work/src-$i"
  git worktree add -q --detach "$src" "$c"
  mkdir -p "$src/scripts/page-arch"
  cp "$root/scripts/page-arch/Cargo.toml" "$root/scripts/page-arch/lib.rs" "$src/scripts/page-arch/"
  cp "$root/app/src/bin/lorekeeper/synthetic.rs" "$src/app/src/bin/lorekeeper/"
  echo "building $c's page-arch" >&2
  # Its own target folder beside the worktree's (LK_ARCH_TARGET_<i> to reuse one).
  var="LK_ARCH_TARGET_$i"; tgt=${!var:-}
  if [ -n "$tgt" ]; then ln -s "$tgt" "$src/target"; fi
  build "$src" "$work/site-$i"
  sites+=("$work/site-$i"); names+=("$c")
done
urls=()
for s in "${sites[@]}"; do
  p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 -m http.server "$p" --bind 127.0.0.1 --directory "$s" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$p/" >/dev/null && break; sleep 0.2; done
  urls+=("http://127.0.0.1:$p/?model=$model&ctx=$ctx&gen=$gen")
done
node scripts/bench-page-arch.mjs "$rounds" "${names[*]}" "${urls[@]}"
