#!/usr/bin/env bash
# The web app's browser test (issue 7): builds the site with Trunk, two tiny bundles from the
# tiny Qwen3 fixture (f32 weights, byte-level vocabulary) over a short corpus with hostile
# markup, records the native engine's answer to the test question, serves everything on
# 127.0.0.1 and drives Debian's headless Chromium through tests/web-app/e2e.mjs.
#   SCREENSHOTS=docs/screenshots tests/web-app/run.sh   also writes the screenshots.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export PATH="$root/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
# LOREKEEPER_WEBAPP_WORK=DIR keeps the bundles and the site there (for debugging).
work="${LOREKEEPER_WEBAPP_WORK:-$(mktemp -d /tmp/lorekeeper-webapp.XXXXXX)}"
mkdir -p "$work" && rm -rf "$work/site"
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "${LOREKEEPER_WEBAPP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT

question="What did the visitor leave in the logbook?"

echo "== web app: native binaries and the tiny bundle =="
# The test profile and the whole workspace's features, dev-dependencies included (the benches
# and examples need them): the build ./test.sh's native phase already made, with the same
# command. Without the benches and examples cargo resolves wgpu's features without the
# dev-dependencies and rebuilds wgpu and the engine (3 minutes of a CI run); a package-only
# build would too.
cargo build --quiet --profile test --workspace --bins --benches --examples
bin="${CARGO_TARGET_DIR:-target}/debug"
"$bin/index-builder" model --base tests/fixtures/qwen3-lora/base --quant f32 --out "$work/tiny" >/dev/null
"$bin/index-builder" index --corpus tests/web-app/corpus.md --out "$work/tiny" >/dev/null
# The grounded protocol (the page's test sets it too): `auto` answers a model this small
# extractively, without the tokens the page's streaming and Stop checks need.
"$bin/lorekeeper" ask --bundle "$work/tiny" --backend cpu --json --seed 7 --temperature 0.7 \
  --max-tokens 48 --mode grounded "$question" > "$work/native.json"
"$bin/lorekeeper" ask --bundle "$work/tiny" --backend cpu --json "$question" > "$work/native-auto.json"
export E2E_NATIVE_AUTO="$work/native-auto.json"

echo "== web app: trunk build --cargo-profile web-test --features test-hooks =="
# The test hooks (lose the GPU device, crash the worker) exist only in this build; ./run.sh's
# release build has none (a unit test in app/src/protocol.rs checks the messages are refused).
# The `web-test` profile (Cargo.toml): release semantics at opt-level 1, no wasm-opt.
if ! trunk build --cargo-profile web-test --features test-hooks; then
  # Trunk reports only cargo's exit status, and CI keeps only the end of the log: print cargo's
  # own error last, with the disk and memory left (a full disk fails the build late).
  echo "== web app: Trunk's cargo build failed; cargo's own output, disk and memory ==" >&2
  df -h . >&2 || true
  free -m >&2 || true
  for b in lorekeeper-app worker; do
    cargo build --target=wasm32-unknown-unknown --manifest-path app/Cargo.toml \
      --profile web-test --bin "$b" --features test-hooks 2>&1 | tail -40 >&2 || true
  done
  exit 1
fi
site="$work/site"
cp -r dist "$site"
cp -r "$work/tiny" "$site/bundles/tiny"
cp -r "$work/tiny" "$site/bundles/tiny-slow"
cp -r "$work/tiny" "$site/bundles/tiny-corrupt"
cp -r "$work/tiny" "$site/bundles/tiny-cut"
cp -r "$work/tiny" "$site/bundles/tiny-huge"
# A manifest that says its first shard holds 5 GiB: more than a page can hold.
python3 - "$site/bundles/tiny-huge/manifest.json" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
m["shards"][0]["bytes"] = 5 << 30
m["total_bytes"] = sum(s["bytes"] for s in m["shards"])
json.dump(m, open(p, "w"), indent=1)
PY
# One flipped byte in the middle of the model shard.
shard=$(ls "$site/bundles/tiny-corrupt"/model-*.bin | head -1)
python3 - "$shard" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x5A
open(p, "wb").write(bytes(b))
PY
pin=$(sha256sum "$work/tiny/manifest.json" | cut -d' ' -f1)
wrong=$(printf '%s' "$pin" | tr '0-9a-f' '1-9a-f0')
cat > "$site/bundles/index.json" <<JSON
{"bundles": [
  {"id": "tiny", "title": "Test: tiny Qwen3 over the lighthouse story", "path": "bundles/tiny/", "description": "Random weights; for the browser test.", "manifest_sha256": "$pin"},
  {"id": "tiny-repinned", "title": "Test: the same, pinned to another manifest", "path": "bundles/tiny/", "description": "The catalog's manifest_sha256 does not match.", "manifest_sha256": "$wrong"},
  {"id": "tiny-slow", "title": "Test: the same, served slowly", "path": "bundles/tiny-slow/", "description": "Throttled download."},
  {"id": "tiny-corrupt", "title": "Test: the same with a damaged shard", "path": "bundles/tiny-corrupt/", "description": "One flipped byte."},
  {"id": "tiny-cut", "title": "Test: the same over a connection that drops", "path": "bundles/tiny-cut/", "description": "Every model-shard transfer from byte 0 breaks off."},
  {"id": "tiny-huge", "title": "Test: a manifest claiming 5 GiB", "path": "bundles/tiny-huge/", "description": "More than a page can hold."}
]}
JSON

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export E2E_REQUEST_LOG="$work/requests.log"
: > "$E2E_REQUEST_LOG"
python3 tests/web-app/serve.py "$site" --port "$port" --throttle /bundles/tiny-slow/model-=60000 \
  --cut /bundles/tiny-cut/model-=1500 --log "$E2E_REQUEST_LOG" &
server=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done

echo "== web app: headless Chromium =="
node tests/web-app/e2e.mjs "http://127.0.0.1:$port/" "$work/native.json" "$question" "${SCREENSHOTS:-}"
