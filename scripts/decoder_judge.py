#!/usr/bin/env python3
"""The decoder as a relevance judge (issues 27 and 28): measured, not landed.

Scores with a GGUF decoder under llama.cpp (llama-cpp-python), outside the engine:

  passages RANKINGS.json GGUF [--k 20] [--limit N]
      Reranks each question's first K passages of the convex fused ranking (recomputed from
      `lorekeeper eval-retrieval --rankings` output: min-max scaled dense and BM25 scores over
      each source's first 100, equal weights) by the mean log P(question | passage) (UPR), and
      prints recall@10 / MRR fused, fused + w * UPR, and UPR alone.

  spans EVAL.json QUESTIONS.jsonl GGUF
      Re-scores the reader's 8 best spans of each answerable question (`lorekeeper eval --json`
      items' `spans`) with the mean log P(span | question) ("a") and log P(question | span)
      ("b") added to the reader's score at several weights, and prints how many best spans hold
      a gold answer.

  read QUESTIONS.jsonl BUNDLE GGUF [--k 3] [--lorekeeper BIN]
      A base model as a generative reader: each answerable question's first K passages
      (`lorekeeper search --k K --json`) after two worked examples from a story of no eval set,
      `Question: … Answer:`, greedy up to 24 tokens; prints how many answers hold a gold answer
      and how many of the passages shown do.

  spans-in-context EVAL.json QUESTIONS.jsonl BUNDLE GGUF [--k 6] [--limit N]
      The reader's 8 best spans scored by the decoder after the same prompt with the first K
      passages shown (log P(span | passages, question): mean, first token, sum), added to the
      reader's score at several weights.

README, "Measured: the decoder as a judge, and signals that do not separate".
"""
import json
import math
import sys

import numpy as np
from llama_cpp import Llama

PROMPT_UPR = (
    "<|im_start|>user\nRead this passage and write a question about it.\n\n"
    "Passage: {}<|im_end|>\n<|im_start|>assistant\n"
)
PROMPT_ANSWER = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


class Judge:
    def __init__(self, gguf):
        self.llm = Llama(model_path=gguf, n_ctx=1024, logits_all=True, n_threads=2, verbose=False)

    def tok(self, text, special=False):
        return self.llm.tokenize(text.encode(), add_bos=False, special=special)

    def mean_logprob(self, prefix, target):
        """Mean log-probability of `target`'s tokens after `prefix` (chat template kept)."""
        pre, tgt = self.tok(prefix, True), self.tok(target)
        if not tgt:
            return 0.0
        self.llm.reset()
        self.llm.eval(pre + tgt)
        total = 0.0
        for j, t in enumerate(tgt):
            row = np.array(self.llm.scores[len(pre) + j - 1], dtype=np.float64)
            m = row.max()
            total += row[t] - (m + math.log(np.exp(row - m).sum()))
        return total / len(tgt)


def fuse(q):
    out = {}
    for src in ("dense", "sparse"):
        ranked = q[src][:100]
        if not ranked:
            continue
        vals = [v for _, v in ranked]
        lo, hi = min(vals), max(vals)
        for i, v in ranked:
            out[i] = out.get(i, 0.0) + 0.5 * ((v - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(out.items(), key=lambda x: -x[1])


def recall_mrr(rows, order_of):
    r10 = mrr = 0.0
    for r in rows:
        order = order_of(r)
        rank = next((i for i, c in enumerate(order) if c in r["rel"]), None)
        if rank is not None:
            mrr += 1 / (rank + 1)
            r10 += rank < 10
    return round(r10 / len(rows), 3), round(mrr / len(rows), 3)


def passages(rankings, gguf, k, limit):
    d = json.load(open(rankings))
    judge = Judge(gguf)
    rows = []
    for q in d["qs"]:
        if not q["rel"]:
            continue
        if len(rows) == limit:
            break
        fused = fuse(q)[:k]
        upr = [judge.mean_logprob(PROMPT_UPR.format(d["chunks"][i][:900]), q["q"]) for i, _ in fused]
        rows.append({"rel": q["rel"], "fused": fused, "upr": upr})
        print(f"{len(rows)} questions scored", file=sys.stderr)
    print("fused", recall_mrr(rows, lambda r: [c for c, _ in r["fused"]]))
    for w in (0.05, 0.1, 0.2, 0.5, 1, 2):
        def order(r, w=w):
            s = [f + w * u for (_, f), u in zip(r["fused"], r["upr"])]
            return [r["fused"][i][0] for i in sorted(range(len(s)), key=lambda i: -s[i])]
        print(f"fused + {w} * UPR", recall_mrr(rows, order))
    print("UPR alone", recall_mrr(rows, lambda r: [r["fused"][i][0] for i in sorted(
        range(len(r["upr"])), key=lambda i: -r["upr"][i])]))


def contains_gold(text, answers):
    return any(a.lower() in text.lower() for a in answers)


def spans(eval_json, questions, gguf):
    d = json.load(open(eval_json))
    qs = {json.loads(line)["id"]: json.loads(line) for line in open(questions)}
    judge = Judge(gguf)
    res = []
    for it in d["items"]:
        q = qs[it["id"]]
        if q.get("unanswerable") or not it["spans"]:
            continue
        rows = []
        for s in it["spans"]:
            score, _dense, _lexical, _lead, rest = s.split(" ", 4)
            text = rest.split(": ", 1)[1]
            rows.append({
                "score": float(score),
                "text": text,
                "a": judge.mean_logprob(PROMPT_ANSWER.format(q["question"]), text),
                "b": judge.mean_logprob(PROMPT_UPR.format(text), q["question"]),
            })
        res.append((q["answers"], rows))
        print(f"{len(res)} questions scored", file=sys.stderr)
    print("questions", len(res), "best span holds gold",
          sum(contains_gold(rows[0]["text"], a) for a, rows in res),
          "a span of the 8 holds gold", sum(any(contains_gold(r["text"], a) for r in rows) for a, rows in res))
    for key in ("a", "b"):
        for w in (0.05, 0.1, 0.2, 0.5, 1, 3, 100):
            n = sum(contains_gold(max(rows, key=lambda r: r["score"] + w * r[key])["text"], a)
                    for a, rows in res)
            print(f"reader + {w} * {key}: {n}")


SHOTS = (
    "Passage: Tom: Where did you leave the key?\nMary: Under the blue stone by the gate.\n"
    "Question: Who left the key under the stone?\nAnswer: Mary\n\n"
    "Passage: The old miller had three sons. When he died, the eldest got the mill, the second "
    "the donkey, and the youngest, Hans, only a cat.\n"
    "Question: What did the youngest son inherit?\nAnswer: only a cat\n\n"
)


def reader_prompt(passages, question):
    shown = "".join(f"Passage: {t}\n" for t in passages)
    return ("Answer each question with a few words from its passages.\n\n" + SHOTS + shown
            + f"Question: {question}\nAnswer:")


def search(lorekeeper, bundle, question, k):
    import subprocess
    out = subprocess.run([lorekeeper, "search", "--bundle", bundle, "--query", question,
                          "--k", str(k), "--json"], capture_output=True, text=True, check=True)
    return [h["text"] for h in json.loads(out.stdout)]


def read(questions, bundle, gguf, k, lorekeeper):
    llm = Llama(model_path=gguf, n_ctx=4096, n_threads=2, verbose=False)
    n = hit = shown = 0
    for line in open(questions):
        q = json.loads(line)
        if q.get("unanswerable") or not q.get("answers"):
            continue
        passages = search(lorekeeper, bundle, q["question"], k)
        out = llm(reader_prompt(passages, q["question"]), max_tokens=24, temperature=0,
                  stop=["\n", "Question:"])
        answer = out["choices"][0]["text"].strip()
        n += 1
        hit += contains_gold(answer, q["answers"])
        shown += contains_gold(" ".join(passages), q["answers"])
        print(f"{q['id']}\t{answer}", file=sys.stderr)
    print(f"answers holding gold {hit}/{n}; passages shown holding gold {shown}/{n}")


def spans_in_context(eval_json, questions, bundle, gguf, k, limit, lorekeeper):
    import llama_cpp
    llm = Llama(model_path=gguf, n_ctx=4096, n_threads=2, verbose=False)

    def last():
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1),
                                    shape=(llm.n_vocab(),)).astype(np.float64)
        m = row.max()
        return row - (m + math.log(np.exp(row - m).sum()))

    d = json.load(open(eval_json))
    qs = {json.loads(line)["id"]: json.loads(line) for line in open(questions)}
    res = []
    for it in d["items"]:
        q = qs[it["id"]]
        if q.get("unanswerable") or not it["spans"]:
            continue
        if limit is not None and len(res) >= limit:
            break
        passages = search(lorekeeper, bundle, q["question"], k)
        prefix = llm.tokenize(reader_prompt(passages, q["question"]).encode(), add_bos=True)
        llm.reset()
        llm.eval(prefix)
        first = last()
        rows = []
        for s in it["spans"]:
            score, _dense, _lexical, _lead, rest = s.split(" ", 4)
            text = rest.split(": ", 1)[1]
            tgt = llm.tokenize((" " + text).encode(), add_bos=False)[:24]
            llm._ctx.kv_cache_seq_rm(-1, len(prefix), -1)
            llm.n_tokens = len(prefix)
            lp = []
            for j, t in enumerate(tgt):
                lp.append((first if j == 0 else last())[t])
                if j + 1 < len(tgt):
                    llm.eval([t])
            rows.append({"score": float(score), "text": text, "mean": sum(lp) / len(lp),
                         "first": lp[0], "sum": sum(lp)})
        res.append((q["answers"], rows))
        print(f"{len(res)} questions scored", file=sys.stderr)
    print("questions", len(res), "best span holds gold",
          sum(contains_gold(rows[0]["text"], a) for a, rows in res))
    for key in ("mean", "first", "sum"):
        got = [sum(contains_gold(max(rows, key=lambda r: r["score"] + w * r[key])["text"], a)
                   for a, rows in res) for w in (0.05, 0.1, 0.2, 0.5, 1, 3, 100)]
        print(f"reader + w * {key}, w = 0.05 / 0.1 / 0.2 / 0.5 / 1 / 3 / 100:", got)


def option(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv):
    if len(argv) >= 3 and argv[0] == "passages":
        k = int(argv[argv.index("--k") + 1]) if "--k" in argv else 20
        limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
        passages(argv[1], argv[2], k, limit)
    elif len(argv) == 4 and argv[0] == "spans":
        spans(argv[1], argv[2], argv[3])
    elif len(argv) >= 4 and argv[0] == "read":
        read(argv[1], argv[2], argv[3], int(option(argv, "--k", 3)),
             option(argv, "--lorekeeper", "target/release/lorekeeper"))
    elif len(argv) >= 5 and argv[0] == "spans-in-context":
        limit = option(argv, "--limit", None)
        spans_in_context(argv[1], argv[2], argv[3], argv[4], int(option(argv, "--k", 6)),
                         int(limit) if limit else None,
                         option(argv, "--lorekeeper", "target/release/lorekeeper"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
