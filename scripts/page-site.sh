# Sourced by scripts/bench-page.sh and scripts/soak-page.sh: builds the demo bundle (as ./run.sh:
# SmolLM2-135M-Instruct Q4_1 → 4-bit bundle + Alice with all-MiniLM-L6-v2; another GGUF with
# LOREKEEPER_PAGE_GGUF) unless it exists, the web app with Trunk and its threaded engine worker into
# $work/site, and serves it with COOP/COEP (cross-origin isolation: wasm threads) on $port.
# Expects $work (a scratch folder the caller removes); sets $model, $port and $server.
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"   # wasm-opt (npm binaryen), trunk
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

bash scripts/setup.sh >&2
python3 scripts/fetch-assets.py smollm2 minilm alice >&2
assets="${LOREKEEPER_CACHE:-$HOME/.cache/lorekeeper}/assets"
model="$assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
bundle=target/demo-bundle
# LOREKEEPER_PAGE_GGUF=FILE: another GGUF (e.g. a Q4_K_M file) in the bundle and beside wllama.
if [ -n "${LOREKEEPER_PAGE_GGUF:-}" ]; then
  model=$LOREKEEPER_PAGE_GGUF
  bundle=target/page-bundle-$(basename "$model" .gguf)
fi
# LOREKEEPER_PAGE_BUNDLE=DIR: a bundle already built (model and index) instead.
bundle=${LOREKEEPER_PAGE_BUNDLE:-$bundle}
if [ ! -f "$bundle/manifest.json" ]; then
  cargo build --quiet --release -p index-builder
  ./target/release/index-builder model --base "$model" --quant q4 --out "$bundle" >&2
  ./target/release/index-builder index --corpus "$assets/texts/alice29.txt" \
    --embedder "$assets/all-minilm-l6-v2" --out "$bundle" >&2
fi

trunk build --release --dist "$work/site" > "$work/trunk.log" 2>&1 || { tail -20 "$work/trunk.log" >&2; exit 1; }
# The threaded engine worker beside it (the page runs it: the server sends COOP/COEP).
bash scripts/build-threads.sh "$work/site" > "$work/threads.log" 2>&1 || { tail -20 "$work/threads.log" >&2; exit 1; }
mkdir -p "$work/site/bundles"
cp -r "$bundle" "$work/site/bundles/demo"
echo '{"bundles": [{"id": "demo", "title": "demo bundle", "path": "bundles/demo/", "description": "scripts/page-site.sh"}]}' \
  > "$work/site/bundles/index.json"

serve_site() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 tests/web-app/serve.py "$work/site" --port "$port" --isolate >/dev/null 2>&1 &
  server=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done
}
