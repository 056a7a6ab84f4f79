#!/usr/bin/env bash
# The page's speed against wllama 3.8.1 (llama.cpp compiled to wasm) in the same headless
# Chromium, same GGUF, same prompt, served with COOP/COEP (cross-origin isolation, which
# wllama's threaded build needs); then the demo question end to end in the page.
#
#   scripts/bench-page.sh [GEN_TOKENS] [RUNS]
#
# Builds and serves the demo bundle and the web app (scripts/page-site.sh), and a wllama page
# from npm @wllama/wllama (package.json); Chromium runs without WebGPU, as for a reader
# without a GPU. Prints one JSON object (scripts/bench-page.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
gen=${1:-128}; runs=${2:-3}
question="Who did Alice follow down the rabbit hole?"
work=$(mktemp -d); trap 'kill ${server:-} 2>/dev/null || true; rm -rf "$work"' EXIT
source scripts/page-site.sh

mkdir -p "$work/site/wllama"
cp -r node_modules/@wllama/wllama/esm "$work/site/wllama/esm"
cp scripts/bench-page/wllama.html "$work/site/wllama/index.html"
cp scripts/bench-page/wllama-bench.js "$work/site/wllama/bench.js"
cp "$model" "$work/site/model.gguf"

serve_site
node scripts/bench-page.mjs "http://127.0.0.1:$port/" demo "$question" "$gen" "$runs"
