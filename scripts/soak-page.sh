#!/usr/bin/env bash
# A soak of the page: N questions (default 200) asked one after another through the UI of one
# page, as a reader would, in headless Chromium without WebGPU (a reader without a GPU), with
# wasm threads (the site is served with COOP/COEP). The worker's wasm memory, the renderer
# processes' resident memory and the page's JS heap are sampled after the first answer and
# every 50 answers; the first pass's answers are compared with `lorekeeper eval` on the same
# bundle and questions natively.
#
#   scripts/soak-page.sh [N] [QUESTIONS.jsonl]
#
# Builds and serves the demo bundle and the web app (scripts/page-site.sh). Prints one JSON
# object (scripts/soak-page.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}; questions=${2:-eval/alice.jsonl}
work=$(mktemp -d); trap 'kill ${server:-} 2>/dev/null || true; rm -rf "$work"' EXIT
source scripts/page-site.sh

cargo build --quiet --release -p lorekeeper-app --bin lorekeeper
./target/release/lorekeeper eval --bundle target/demo-bundle --questions "$questions" --backend cpu --json \
  > "$work/native.json"
serve_site
node scripts/soak-page.mjs "http://127.0.0.1:$port/" demo "$questions" "$n" "$work/native.json"
