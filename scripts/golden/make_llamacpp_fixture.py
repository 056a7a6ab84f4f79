#!/usr/bin/env python3
"""Records llama.cpp's greedy continuations of SmolLM2-135M-Instruct (Q4_1 GGUF) as a small
fixture, so CI can compare the engine against llama.cpp without Python.

    python3 scripts/fetch-assets.py smollm2
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pip install llama-cpp-python
    python scripts/golden/make_llamacpp_fixture.py [GGUF]

Writes tests/fixtures/smollm2-llamacpp.json: per prompt, llama.cpp's prompt tokens, 32 greedy
tokens, and at every step the top-2 (id, logit) pairs, so a disagreement can be judged a near tie.
"""
import json, os, sys

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GGUF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("LOREKEEPER_CACHE", os.path.expanduser("~/.cache/lorekeeper")),
    "assets", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "Alice was beginning to get very tired of sitting by her sister on the bank, and",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite one sentence about the moon.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
]
N = 32

llm = llama_cpp.Llama(model_path=GGUF, n_ctx=512, n_threads=2, logits_all=True, verbose=False)
cases = []
for text in PROMPTS:
    toks = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    llm.reset()
    llm.eval(toks)
    out, top2 = [], []
    for _ in range(N):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-logits, kind="stable")[:2]
        top2.append([[int(order[0]), round(float(logits[order[0]]), 4)], [int(order[1]), round(float(logits[order[1]]), 4)]])
        nxt = int(order[0])
        out.append(nxt)
        if nxt == llm.token_eos():
            break
        llm.eval([nxt])
    cases.append({"prompt": text, "prompt_tokens": toks, "greedy": out, "top2": top2})
    print(repr(text[:40]), "->", repr(llm.detokenize(out).decode("utf-8", "replace")))

path = os.path.join(ROOT, "tests", "fixtures", "smollm2-llamacpp.json")
with open(path, "w") as f:
    json.dump({"generator": f"llama-cpp-python {llama_cpp.__version__}", "gguf": os.path.basename(GGUF), "cases": cases}, f, indent=1)
print("wrote", path)
