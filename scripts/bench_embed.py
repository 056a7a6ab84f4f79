#!/usr/bin/env python3
"""Embedding-throughput peer: sentence-transformers (CPU torch) on the same chunk texts that
`index-builder index --dump-chunks FILE` embedded, with the same model folder.

    python bench_embed.py MODEL_DIR CHUNKS.json [THREADS]

Prints {"passages_per_s", "seconds", "passages", "threads"} as JSON (single pass after a
warm-up on 8 texts; batch size 32; max_seq_length 256 as all-MiniLM-L6-v2 is used).
"""
import json, sys, time

import torch
from sentence_transformers import SentenceTransformer, models

model_dir, chunks = sys.argv[1], json.load(open(sys.argv[2]))
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
torch.set_num_threads(threads)
word = models.Transformer(model_dir, max_seq_length=256)
m = SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), "mean"), models.Normalize()], device="cpu")
m.encode(chunks[:8])
t = time.perf_counter()
m.encode(chunks, batch_size=32)
dt = time.perf_counter() - t
print(json.dumps({"passages_per_s": len(chunks) / dt, "seconds": dt, "passages": len(chunks), "threads": threads}))
