#!/usr/bin/env bash
# Retrieval latency on one bundle, natively and in the browser's wasm, in the same run:
#
#   scripts/bench-search.sh BUNDLE_DIR QUESTIONS.jsonl [REPEAT]
#
# 1. native: `lorekeeper eval-retrieval --json` (query embedding and fused search per question);
# 2. wasm: the web app built with Trunk, the bundle served as `bench`, loaded in headless
#    Chromium, and the worker's `bench` message (scripts/bench-search-wasm.mjs): fused search
#    REPEAT times per question, query embedding on WebGPU (SwiftShader here) and on the wasm
#    CPU backend.
# Prints both JSON objects and the wasm / native ratios of the p50s. The bundle needs a model
# part (the page loads whole bundles); e.g. `index-builder model --base SmolLM2.gguf --quant q4
# --out B` next to `index-builder index … --out B`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"   # wasm-opt (npm binaryen), trunk
bundle=${1:?BUNDLE_DIR}; questions=${2:?QUESTIONS.jsonl}; repeat=${3:-20}
work=$(mktemp -d); trap 'kill ${server:-} 2>/dev/null || true; rm -rf "$work"' EXIT

cargo build --quiet --release -p lorekeeper-app --bin lorekeeper
echo "== native: lorekeeper eval-retrieval ==" >&2
./target/release/lorekeeper eval-retrieval --bundle "$bundle" --questions "$questions" --json \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"chunks": d["chunks"], "questions": d["questions"], **d["latency"]}))' \
  > "$work/native.json"
cat "$work/native.json"

echo "== wasm: the web app's worker in headless Chromium ==" >&2
trunk build --release --dist "$work/site" > "$work/trunk.log" 2>&1 || { tail -20 "$work/trunk.log" >&2; exit 1; }
mkdir -p "$work/site/bundles"
cp -r "$bundle" "$work/site/bundles/bench"
echo '{"bundles": [{"id": "bench", "title": "benchmark bundle", "path": "bundles/bench/", "description": "scripts/bench-search.sh"}]}' \
  > "$work/site/bundles/index.json"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 tests/web-app/serve.py "$work/site" --port "$port" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done
node scripts/bench-search-wasm.mjs "http://127.0.0.1:$port/" bench "$questions" "$repeat" > "$work/wasm.json"
python3 - "$work/native.json" "$work/wasm.json" <<'PY'
import json, sys
n, w = (json.load(open(p)) for p in sys.argv[1:3])
print(json.dumps({k: v for k, v in w.items() if k != "top_ids"}))
print(f"search p50: wasm {w['search']['p50_ms']:.2f} ms, native {n['search_ms_p50']:.2f} ms "
      f"-> wasm/native {w['search']['p50_ms'] / n['search_ms_p50']:.2f}x; "
      f"p99 wasm {w['search']['p99_ms']:.2f} ms, native {n['search_ms_p99']:.2f} ms")
if w["embed_query_wasm_cpu"]["n"]:
    print(f"query embedding p50: wasm CPU {w['embed_query_wasm_cpu']['p50_ms']:.1f} ms, "
          f"WebGPU ({w['adapter']}) {w['embed_query_webgpu']['p50_ms']:.1f} ms, "
          f"native CPU {n['embed_ms_p50']:.1f} ms")
PY
