#!/usr/bin/env python3
"""Reference sentence embeddings of all-MiniLM-L6-v2 from sentence-transformers (CPU torch).

    /path/to/venv/bin/python scripts/golden/make_minilm_fixture.py [MODEL_DIR]

MODEL_DIR defaults to the asset fetched by `scripts/fetch-assets.py minilm`. The pipeline is the
model's own: Transformer (max_seq_length 256) -> mean pooling -> Normalize. Writes
tests/fixtures/minilm-golden.json: texts, token ids and embeddings. CI never runs Python.
"""
import json, os, sys

from sentence_transformers import SentenceTransformer, models

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
d = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/lorekeeper/assets/all-minilm-l6-v2")
word = models.Transformer(d, max_seq_length=256)
model = SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), "mean"), models.Normalize()], device="cpu")
alice = open(os.path.expanduser("~/.cache/lorekeeper/assets/texts/alice29.txt"), encoding="utf-8").read()
texts = [
    "Who did Alice follow down the rabbit hole?",
    "Alice was beginning to get very tired of sitting by her sister on the bank.",
    "`Off with her head!' the Queen shouted at the top of her voice.",
    "What did the Caterpillar smoke?",
    "The Mock Turtle's story",
    "a",
    "林黛玉进贾府",
    "Tea-party: the Hatter, the March Hare and the Dormouse.",
    " ".join(alice[20000:24000].split()),  # far over 256 tokens: truncation
]
emb = model.encode(texts, batch_size=4, convert_to_numpy=True)
ids = [word.tokenizer(t, truncation=True, max_length=256)["input_ids"] for t in texts]
out = {"generator": "sentence-transformers " + __import__("sentence_transformers").__version__,
       "texts": texts, "ids": ids, "embeddings": [[round(float(x), 8) for x in e] for e in emb]}
with open(os.path.join(ROOT, "tests", "fixtures", "minilm-golden.json"), "w") as f:
    json.dump(out, f)
print("wrote", len(texts), "embeddings; token counts", [len(i) for i in ids])
