#!/usr/bin/env python3
"""Generates the decoder golden fixtures from Hugging Face transformers (CPU torch).

    /path/to/venv/bin/python scripts/golden/make_decoder_fixtures.py

Writes, for a tiny random Qwen3 (tied embeddings, q/k norm, GQA) and a tiny random Llama
(untied, GQA):
  tests/fixtures/<name>/config.json, model.safetensors   (the model, f32)
  tests/fixtures/<name>/golden.json                       (prompts, logits of every position,
                                                           greedy continuations)
CI reads these files; it never runs Python. Re-run only to change the fixtures.
"""
import json, os, sys

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")
PROMPTS = [[1, 17, 42, 99, 7], [5, 5, 5, 200, 3, 140, 66, 12, 9, 250, 31], [128]]
GREEDY = 24


def build(name, cfg):
    torch.manual_seed(1234)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    # Larger-than-default init so logits are spread out and greedy decoding is not a tie-fest.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    model.eval()
    out_dir = os.path.join(ROOT, name)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    for extra in ("generation_config.json",):
        path = os.path.join(out_dir, extra)
        if os.path.exists(path):
            os.remove(path)
    cases = []
    with torch.no_grad():
        for ids in PROMPTS:
            x = torch.tensor([ids])
            logits = model(x).logits[0].float()
            gen = model.generate(x, max_new_tokens=GREEDY, do_sample=False, pad_token_id=0)
            new = gen[0, len(ids):].tolist()
            # Top-2 gap at each greedy step, to tell near ties from real disagreements.
            seq = gen[0].tolist()
            step_logits = model(torch.tensor([seq])).logits[0]
            gaps = []
            for t in range(len(ids) - 1, len(seq) - 1):
                top = torch.topk(step_logits[t], 2).values
                gaps.append(round(float(top[0] - top[1]), 6))
            cases.append({
                "prompt": ids,
                "logits": [[round(float(v), 7) for v in row] for row in logits],
                "greedy": new,
                "greedy_top2_gap": gaps,
            })
    golden = {
        "generator": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}",
        "cases": cases,
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f)
    print(name, "params", sum(p.numel() for p in model.parameters()), "->", out_dir)


common = dict(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2)
build("qwen3-tiny", Qwen3Config(head_dim=32, tie_word_embeddings=True, rope_theta=1_000_000.0, **common))
build("llama-tiny", LlamaConfig(tie_word_embeddings=False, rope_theta=10_000.0, **common))
