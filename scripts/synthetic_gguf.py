#!/usr/bin/env python3
"""A Llama-shaped GGUF of realistic width with random weights, quantized by llama.cpp: for
speed comparisons on the block formats users bring (Q4_K_M above all) at widths that are
multiples of 256, which SmolLM2-135M (width 576) is not, so its "Q4_K_M" is mostly fallbacks.

    python synthetic_gguf.py OUT_DIR [--types q4_k_m,q4_1] [--layers 16]

Writes OUT_DIR/syn-f16.gguf (TinyLlama-1.1B's widths: hidden 2048, FFN 5632, 32 heads, 4 KV
heads; 16 of its 22 layers by default; SmolLM2-135M's tokenizer and vocabulary, read from the
asset cache, so both engines tokenize the same prompt) and OUT_DIR/syn-TYPE.gguf per type, made
by llama.cpp's own quantizer (`llama_model_quantize`, as `llama-quantize` does). Weights are
N(0, 0.02): the text they produce is noise; only the speed is measured. Needs the Python that
runs the llama.cpp peer (llama-cpp-python) with PyPI `gguf` beside it.
"""
import argparse
import ctypes
import os
import sys

import numpy as np

try:
    import gguf
    import llama_cpp
except ImportError as e:
    sys.exit(f"synthetic_gguf.py needs llama-cpp-python and PyPI gguf in this Python: {e}")

FTYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
TOKENIZER = os.path.expanduser("~/.cache/lorekeeper/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def copy_tokenizer(src, w):
    """Every `tokenizer.*` field of `src` into the writer; returns the vocabulary size."""
    vocab = None
    for name, f in src.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = f.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            if f.types[1] == gguf.GGUFValueType.STRING:
                vals = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            else:
                vals = [f.parts[i][0].item() for i in f.data]
            w.add_array(name, vals)
            if name == "tokenizer.ggml.tokens":
                vocab = len(vals)
        elif kind == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[f.data[0]]).decode())
        elif kind == gguf.GGUFValueType.UINT32:
            w.add_uint32(name, int(f.parts[f.data[0]][0]))
        elif kind == gguf.GGUFValueType.BOOL:
            w.add_bool(name, bool(f.parts[f.data[0]][0]))
        else:
            sys.exit(f"{TOKENIZER}: field {name} has type {kind}, not copied by this script")
    if vocab is None:
        sys.exit(f"{TOKENIZER}: no tokenizer.ggml.tokens")
    return vocab


def write_f16(path, layers, hidden=2048, ffn=5632, heads=32, kv_heads=4):
    w = gguf.GGUFWriter(path, "llama")
    vocab = copy_tokenizer(gguf.GGUFReader(TOKENIZER), w)
    hd = hidden // heads
    w.add_context_length(8192)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    w.add_file_type(1)
    w.add_vocab_size(vocab)
    rng = np.random.default_rng(0)

    def matrix(name, rows, cols):
        w.add_tensor(name, (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16))

    matrix("token_embd.weight", vocab, hidden)
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    matrix("output.weight", vocab, hidden)
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(hidden, np.float32))
        matrix(p + "attn_q.weight", heads * hd, hidden)
        matrix(p + "attn_k.weight", kv_heads * hd, hidden)
        matrix(p + "attn_v.weight", kv_heads * hd, hidden)
        matrix(p + "attn_output.weight", hidden, heads * hd)
        matrix(p + "ffn_gate.weight", ffn, hidden)
        matrix(p + "ffn_up.weight", ffn, hidden)
        matrix(p + "ffn_down.weight", hidden, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--types", default="q4_k_m,q4_1")
    ap.add_argument("--layers", type=int, default=16)
    a = ap.parse_args()
    types = a.types.split(",")
    for t in types:
        if t not in FTYPES:
            sys.exit(f"--types: unknown type {t!r} (known: {', '.join(FTYPES)})")
    os.makedirs(a.out, exist_ok=True)
    f16 = os.path.join(a.out, "syn-f16.gguf")
    write_f16(f16, a.layers)
    for t in types:
        p = llama_cpp.llama_model_quantize_default_params()
        p.ftype = FTYPES[t]
        p.nthread = os.cpu_count() or 1
        out = os.path.join(a.out, f"syn-{t}.gguf")
        if llama_cpp.llama_model_quantize(f16.encode(), out.encode(), ctypes.byref(p)) != 0:
            sys.exit(f"llama_model_quantize failed for {t}")
        print(out)


if __name__ == "__main__":
    main()
