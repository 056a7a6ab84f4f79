#!/usr/bin/env bash
# Installs what Lorekeeper's build and tests need, skipping what is already there at the
# right version. Safe to run repeatedly. Needs root for apt (CI and dev machines are root).
#   scripts/setup.sh               everything
#   scripts/setup.sh --no-tools    everything but the two cargo-installed tools
#   scripts/setup.sh --tools       wasm-bindgen-cli and Trunk alone (.ci/run compiles them in
#                                  the background: only the browser tests, at the end, need them)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case "$mode" in
  all|--no-tools|--tools) ;;
  *) echo "usage: scripts/setup.sh [--no-tools|--tools]" >&2; exit 2 ;;
esac

WASM_BINDGEN_VERSION=0.2.130

log() { printf '[setup] %s\n' "$*"; }

# The cargo-installed tools, one install at a time (flock: a second caller waits for the first
# and finds them done).
# - wasm-bindgen-cli, pinned to the crate version (no --locked: it fails on webpki-roots), at
#   opt-level 1 and without TLS (its test runner talks plain HTTP to chromedriver on localhost).
# - Trunk (builds the web app; 0.22 needs a newer rustc than the pinned 1.95), a debug build
#   without debug info or TLS (Trunk.toml: offline): Trunk only runs cargo, wasm-bindgen and
#   wasm-opt.
# Both compile while .ci/run's native build runs, on the same two cores: 11 minutes alone as
# release and debug builds with their default features, 8.5 minutes so.
TRUNK_VERSION=0.21.14
install_tools() {
  exec 9>/tmp/lorekeeper-setup-tools.lock
  flock 9
  if ! wasm-bindgen --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION"; then
    log "cargo install wasm-bindgen-cli@$WASM_BINDGEN_VERSION (~4 min cold)"
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --quiet --force --no-default-features \
      "wasm-bindgen-cli@$WASM_BINDGEN_VERSION"
  fi
  if ! trunk --version 2>/dev/null | grep -q " $TRUNK_VERSION"; then
    log "cargo install --debug --locked --no-default-features trunk@$TRUNK_VERSION (~5 min cold)"
    CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --debug --locked --no-default-features \
      "trunk@$TRUNK_VERSION"
  fi
  exec 9>&-
}
if [ "$mode" = --tools ]; then
  install_tools
  log "tools ready"
  exit 0
fi

# 1. Debian packages: lavapipe (software Vulkan) for native GPU tests, Chromium + driver for
#    browser tests.
need=()
for p in mesa-vulkan-drivers libvulkan1 chromium chromium-driver; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. Rust components and the wasm target.
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# The page's threaded build rebuilds std with atomics on nightly (scripts/threads-env.sh).
rustup component list --toolchain nightly --installed 2>/dev/null | grep -q "^rust-src" \
  || rustup component add rust-src --toolchain nightly

# 3. npm tools pinned in package-lock.json: binaryen 132 (wasm-opt for Trunk; Debian's 108
#    produces wasm that fails in the browser), playwright-core (drives Debian's Chromium) and
#    wllama 3.8.1 (the page benchmark's peer).
if ! node_modules/.bin/wasm-opt --version 2>/dev/null | grep -q "version 132" \
   || [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/@wllama/wllama ]; then
  log "npm ci (binaryen, playwright-core, wllama)"
  npm ci --no-audit --no-fund --silent
fi

[ "$mode" = --no-tools ] || install_tools

# Mesa prints a harmless error without it.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  log "note: export XDG_RUNTIME_DIR to silence Mesa's warning"
fi
log "ready"
