#!/usr/bin/env bash
# The page's decode on WebGPU in headless Chromium (SwiftShader: a browser's software adapter),
# this build against other builds of the page in the same run (scripts/bench-page-gpu.mjs).
#
#   scripts/bench-page-gpu.sh [GEN_TOKENS] [ROUNDS] [PROMPT_TOKENS] [SITE_DIR | ?QUERY …]
#
# Builds and serves this web app with the demo bundle (scripts/page-site.sh). Each SITE_DIR is
# another build's `trunk build` output with its own bundle under bundles/demo (e.g. an older
# commit's, to measure a change), served beside it; each ?QUERY is this build again with that
# query (e.g. '?gpu_tuning=gemv_rpl:2'). Rounds alternate the pages. Prints one JSON object.
# LK_PROFILE=1 adds each run's per-kernel profile (timestamps in the page) on stderr;
# LK_CHROME_ARGS passes Chromium more flags (--enable-webgpu-developer-features: unrounded
# timestamps).
set -euo pipefail
cd "$(dirname "$0")/.."
gen=${1:-16}; rounds=${2:-3}; prompt=${3:-64}
others=("${@:4}")
work=$(mktemp -d); pids=()
trap 'kill ${server:-} "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
source scripts/page-site.sh
serve_site
urls=("http://127.0.0.1:$port/")
for dir in "${others[@]}"; do
  if [[ $dir == \?* ]]; then urls+=("http://127.0.0.1:$port/$dir"); continue; fi
  p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 tests/web-app/serve.py "$dir" --port "$p" --isolate >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$p/" >/dev/null && break; sleep 0.2; done
  urls+=("http://127.0.0.1:$p/")
done
node scripts/bench-page-gpu.mjs demo "$prompt" "$gen" "$rounds" "${urls[@]}"
