#!/usr/bin/env bash
# The NEON kernels on an x86 machine: builds the engine's CPU tests and the real-model greedy
# tests for aarch64 and runs them under qemu-aarch64 (user-mode emulation; correctness only,
# emulated speed means nothing). `Isa::best()` picks NEON there, and the kernel tests compare
# every ISA the machine has against the f64 / scalar forms.
#
#   scripts/test-neon.sh        (≈ 12 min here: two cross builds of ≈ 4 min, 3.5 min of tests)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  apt-get install -y -q qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
fi
rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 || true
python3 scripts/fetch-assets.py smollm2 >/dev/null
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
T=aarch64-unknown-linux-gnu
cargo test -q -p lorekeeper-engine --lib --target $T -- cpu:: quant format::
cargo test -q -p lorekeeper-tests --test smollm2 --target $T -- smollm2_cpu --nocapture
