#!/usr/bin/env python3
"""llama.cpp peer for `lorekeeper perplexity`: perplexity of GGUF models on the *same tokens*.

    python perplexity_llamacpp.py --tokens TOKENS.json --window W [--quantize Q4_0,Q4_K_M] MODEL.gguf

TOKENS.json is what `lorekeeper perplexity --dump-tokens` writes. The text is cut into windows of
W tokens; in each window every token after the first is scored from its prefix (the same rule as
`lorekeeper perplexity`). `--quantize` also requantizes MODEL.gguf with llama.cpp's own quantizer
(`llama_model_quantize`, allow_requantize) into each listed type and measures those too.
Prints one JSON object per model: {"model", "type", "bits_per_weight", "tokens_scored", "nll", "ppl"}.
"""
import argparse, json, math, os, tempfile

import llama_cpp
import numpy as np

FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15, "Q4_K_S": 14, "Q5_K_M": 17, "Q6_K": 18}


def quantize(src, dst, name):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = FTYPES[name]
    p.allow_requantize = True
    p.nthread = os.cpu_count() or 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {name} failed ({rc})")


def perplexity(path, tokens, window, label):
    llm = llama_cpp.Llama(model_path=path, n_ctx=window, n_batch=window, n_ubatch=window,
                          n_threads=os.cpu_count() or 2, logits_all=True, verbose=False)
    bpw = 8.0 * llama_cpp.llama_model_size(llm.model) / llama_cpp.llama_model_n_params(llm.model)
    nll, count = 0.0, 0
    for s in range(0, len(tokens) - 1, window):
        w = tokens[s:s + window]
        if len(w) < 2:
            break
        llm.reset()
        llm.eval(w)
        logits = np.asarray(llm.scores[:len(w)], dtype=np.float64)
        m = logits.max(axis=1, keepdims=True)
        lse = (m[:, 0] + np.log(np.exp(logits - m).sum(axis=1)))
        for i in range(len(w) - 1):
            nll += lse[i] - logits[i, w[i + 1]]
            count += 1
    return {"model": os.path.basename(path), "type": label, "bits_per_weight": round(bpw, 3),
            "tokens_scored": count, "nll": nll / count, "ppl": math.exp(nll / count)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--quantize", default="")
    ap.add_argument("--keep", help="folder to keep the requantized files in (NAME.gguf)")
    ap.add_argument("model")
    a = ap.parse_args()
    tokens = json.load(open(a.tokens))
    print(json.dumps(perplexity(a.model, tokens, a.window, "source")), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in [q for q in a.quantize.split(",") if q]:
            dst = os.path.join(a.keep or tmp, f"{name}.gguf")
            quantize(a.model, dst, name)
            print(json.dumps(perplexity(dst, tokens, a.window, name)), flush=True)


if __name__ == "__main__":
    main()
