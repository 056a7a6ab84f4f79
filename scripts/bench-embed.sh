#!/usr/bin/env bash
# Embedding throughput against sentence-transformers (CPU torch), same texts, same machine,
# same run:
#
#   scripts/bench-embed.sh CORPUS MODEL_DIR PYTHON [THREADS]
#
# 1. `index-builder index --corpus CORPUS --embedder MODEL_DIR --dump-chunks` embeds every chunk
#    on the CPU backend (RAYON_NUM_THREADS=THREADS) and reports passages/s for the embedding
#    alone (tokenizing and index building excluded);
# 2. scripts/bench_embed.py embeds the very chunk texts it dumped with sentence-transformers on
#    torch.set_num_threads(THREADS), batch 32;
# then prints both and the ratio ours / sentence-transformers. PYTHON is an interpreter with
# sentence-transformers and CPU torch, e.g.
#   python3 -m venv /tmp/st && /tmp/st/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
#   /tmp/st/bin/pip install sentence-transformers
# (or whichever index `/work/.library/env` lists for PyPI on this machine). MODEL_DIR is a
# sentence-transformers folder (all-MiniLM-L6-v2 from scripts/fetch-assets.py).
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:?CORPUS}; model=${2:?MODEL_DIR}; python=${3:?PYTHON}; threads=${4:-2}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

cargo build --quiet --release -p index-builder
RAYON_NUM_THREADS=$threads ./target/release/index-builder index --corpus "$corpus" \
  --embedder "$model" --out "$work/bundle" --dump-chunks "$work/chunks.json" --json > "$work/ours.json"
"$python" scripts/bench_embed.py "$model" "$work/chunks.json" "$threads" > "$work/peer.json"
"$python" - "$work/ours.json" "$work/peer.json" <<'PY'
import json, sys
ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
print(json.dumps({"lorekeeper": {k: ours[k] for k in ("chunks", "embed_seconds", "passages_per_s", "tokens_per_s") if k in ours},
                  "sentence_transformers": peer}))
print(f"embedding: lorekeeper {ours['passages_per_s']:.1f} passages/s, sentence-transformers "
      f"{peer['passages_per_s']:.1f} passages/s ({peer['threads']} threads) -> ratio "
      f"{ours['passages_per_s'] / peer['passages_per_s']:.2f}")
PY
