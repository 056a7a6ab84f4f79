#!/usr/bin/env bash
# Quantization quality: perplexity of SmolLM2-135M-Instruct on Alice in Wonderland for our f32,
# q8, q4 (the GGUF's own blocks), lq4 (LQ4, requantized) and lq4 calibrated on Botchan (LQ4
# weighted by the activations measured on another book) bundles, for llama.cpp's Q4_1 (the
# source), Q4_0, Q4_K_M and Q5_K_M, and for our q4 bundles of llama.cpp's Q4_K_M and Q5_K_M files,
# on the same tokens. Needs a Python with llama-cpp-python for the peer (LLAMA_CPP_PYTHON, default
# /work/venv/bin/python); without it only our rows are printed.
#
#   scripts/quality.sh [TOKENS] [WINDOW]        (defaults 4096 and 512)
set -euo pipefail
cd "$(dirname "$0")/.."
TOKENS=${1:-4096}
WINDOW=${2:-512}
PY=${LLAMA_CPP_PYTHON:-/work/venv/bin/python}
ASSETS=$(python3 scripts/fetch-assets.py smollm2 alice botchan | awk '{print $2}')
GGUF=$(echo "$ASSETS" | grep gguf)
TEXT=$(echo "$ASSETS" | grep alice29)
CALIB=$(echo "$ASSETS" | grep botchan)
OUT=${QUALITY_OUT:-target/quality}
mkdir -p "$OUT"
cargo build --release -q -p lorekeeper-app -p index-builder
for q in f32 q8 q4 lq4; do
  rm -rf "$OUT/smollm2-$q"
  ./target/release/index-builder model --base "$GGUF" --quant $q --out "$OUT/smollm2-$q" --json > "$OUT/build-$q.json"
done
rm -rf "$OUT/smollm2-lq4c"
./target/release/index-builder model --base "$GGUF" --quant lq4 --calibration "$CALIB" \
  --out "$OUT/smollm2-lq4c" --json > "$OUT/build-lq4c.json"
./target/release/lorekeeper perplexity --model "$GGUF" --backend cpu --weights f32 --text "$TEXT" \
  --tokens "$TOKENS" --window "$WINDOW" --dump-tokens "$OUT/tokens.json" --json > "$OUT/ppl-source.json"
for q in f32 q8 q4 lq4 lq4c; do
  ./target/release/lorekeeper perplexity --model "$OUT/smollm2-$q" --backend cpu --text "$TEXT" \
    --tokens "$TOKENS" --window "$WINDOW" --json > "$OUT/ppl-$q.json"
done
rm -f "$OUT/ppl-kmq4.json" "$OUT/ppl-kmq5.json"
if "$PY" -c "import llama_cpp" 2>/dev/null; then
  "$PY" scripts/perplexity_llamacpp.py --tokens "$OUT/tokens.json" --window "$WINDOW" \
    --quantize Q4_0,Q4_K_M,Q5_K_M --keep "$OUT" "$GGUF" > "$OUT/ppl-llamacpp.jsonl"
  # llama.cpp's Q4_K_M and Q5_K_M files imported as a user would bring them.
  for k in 4 5; do
    rm -rf "$OUT/smollm2-kmq$k"
    ./target/release/index-builder model --base "$OUT/Q${k}_K_M.gguf" --quant q4 --out "$OUT/smollm2-kmq$k" --json > "$OUT/build-kmq$k.json"
    ./target/release/lorekeeper perplexity --model "$OUT/smollm2-kmq$k" --backend cpu --text "$TEXT" \
      --tokens "$TOKENS" --window "$WINDOW" --json > "$OUT/ppl-kmq$k.json"
  done
else
  echo "(no llama-cpp-python at $PY: peer rows skipped)" >&2
  : > "$OUT/ppl-llamacpp.jsonl"
fi
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
src = json.load(open(f"{out}/ppl-source.json"))
rows = []
labels = {"f32": "Lorekeeper f32", "q8": "Lorekeeper q8", "q4": "Lorekeeper q4 (the GGUF's own Q4_1 + Q8_0 blocks)",
          "lq4": "Lorekeeper lq4 (LQ4, requantized)",
          "lq4c": "Lorekeeper lq4 calibrated (LQ4 weighted by activations on 4096 tokens of Botchan)", "kmq4": "Lorekeeper q4 of llama.cpp's Q4_K_M file",
          "kmq5": "Lorekeeper q4 of llama.cpp's Q5_K_M file"}
for q in ["f32", "q8", "q4", "lq4", "lq4c", "kmq4", "kmq5"]:
    if not os.path.exists(f"{out}/ppl-{q}.json"):
        continue
    b = json.load(open(f"{out}/build-{q}.json")); p = json.load(open(f"{out}/ppl-{q}.json"))
    rows.append((labels[q], b["bits_per_weight"], b["matrix_bits_per_weight"], p["ppl"], p["tokens_scored"]))
peer = [json.loads(l) for l in open(f"{out}/ppl-llamacpp.jsonl") if l.strip()]
base = None
for r in peer:
    label = "llama.cpp Q4_1 (source GGUF)" if r["type"] == "source" else f"llama.cpp {r['type']} (requantized from Q4_1)"
    rows.append((label, r["bits_per_weight"], None, r["ppl"], r["tokens_scored"]))
    if r["type"] == "source":
        base = r["ppl"]
ref = rows[0][3]
print(f"Perplexity of SmolLM2-135M-Instruct on alice29.txt, first {rows[0][4]} scored tokens")
print(f"(f32 = exact dequantization of the Q4_1 GGUF: {ref:.4f}; llama.cpp on the same file: {base if base else float('nan'):.4f})\n")
print("| weights | bits/weight (all) | bits/weight (matrices) | perplexity | vs f32 | vs llama.cpp on the Q4_1 file |")
print("|---|---|---|---|---|---|")
for name, bpw, mbpw, ppl, n in rows:
    m = f"{mbpw:.3f}" if mbpw else "—"
    vs = f"{100*(ppl/base-1):+.2f} %" if base else "—"
    print(f"| {name} | {bpw:.3f} | {m} | {ppl:.4f} | {100*(ppl/ref-1):+.2f} % | {vs} |")
PY
