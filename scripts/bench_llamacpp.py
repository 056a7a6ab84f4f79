#!/usr/bin/env python3
"""llama.cpp peer for `lorekeeper bench`: same GGUF, same prompt tokens, greedy decode.

    python bench_llamacpp.py MODEL.gguf '[token ids]' GEN_TOKENS THREADS

Prints {"prefill_tok_s", "decode_tok_s", "ttft_s"} (median of 3 runs) as JSON: llama.cpp's best
configuration, i.e. for each figure the better of flash attention off and on (flash attention
speeds up prefill; `flash_attn` says which configuration gave each figure).
"""
import json, sys, time

import llama_cpp
import numpy as np

gguf, tokens, gen, threads = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def measure(flash):
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=len(tokens) + gen + 16, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, logits_all=False, flash_attn=flash, verbose=False)
    n_vocab = llm.n_vocab()

    def last_argmax():
        # Only the last position's logits are computed (logits_all=False): read them from the context.
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))))

    llm.reset(); llm.eval(tokens[:8]); last_argmax()  # warm-up
    pre, dec, ttft = [], [], []
    for _ in range(3):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        t = last_argmax()
        t1 = time.perf_counter()
        for _ in range(gen):
            llm.eval([t])
            t = last_argmax()
        t2 = time.perf_counter()
        pre.append(len(tokens) / (t1 - t0)); ttft.append(t1 - t0); dec.append(gen / (t2 - t1))
    med = lambda v: sorted(v)[len(v) // 2]
    return {"prefill_tok_s": med(pre), "decode_tok_s": med(dec), "ttft_s": med(ttft)}


runs = {flash: measure(flash) for flash in (False, True)}
pf = max(runs, key=lambda f: runs[f]["prefill_tok_s"])
df = max(runs, key=lambda f: runs[f]["decode_tok_s"])
print(json.dumps({"prefill_tok_s": runs[pf]["prefill_tok_s"], "ttft_s": runs[pf]["ttft_s"],
                  "decode_tok_s": runs[df]["decode_tok_s"],
                  "flash_attn": {"prefill": pf, "decode": df}, "runs": {str(f): r for f, r in runs.items()}}))
