#!/usr/bin/env python3
"""Generates the LoRA-merge golden fixture from transformers + peft (CPU torch).

    /path/to/venv/bin/python scripts/golden/make_lora_fixture.py

Writes tests/fixtures/qwen3-lora/:
  base/       a tiny random Qwen3 (config.json, model.safetensors f32, tokenizer.json: byte-level
              BPE over the 256 byte tokens, so every id decodes)
  adapter/    a PEFT LoRA adapter with random A and B (r 8, alpha 16, q/k/v/o/gate/up/down)
              plus `model.norm` in modules_to_save (a replaced module)
  merged.safetensors   peft's merge_and_unload() weights (the reference for the merge)
  golden.json          logits of every prompt position and greedy continuations of the merged
                       model
Both the base model and the adapter are briefly trained (on affine sequences x' = a*x + c mod 256)
so that, as in a real model, next-token distributions are peaked: greedy continuations then have
clear winners, and a quantized bundle can be required to reproduce them exactly.
CI reads these files; it never runs Python. Re-run only to change the fixture.
"""
import json, os

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import AutoModelForCausalLM, Qwen3Config

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "qwen3-lora")
PROMPTS = None  # built from the training rules in main()
GREEDY = 16


def byte_tokenizer():
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # GPT-2's byte-to-unicode map, in byte order, so id == byte value.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_char = {b: chr(c) for b, c in zip(bs, cs)}
    assert set(byte_char.values()) == set(alphabet)
    vocab = {byte_char[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def rule_seq(x0, a, c, n):
    out = [x0]
    for _ in range(n - 1):
        out.append((a * out[-1] + c) % 256)
    return out


def train(model, params, rules, steps, seed):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=3e-3)
    model.train()
    for _ in range(steps):
        batch = []
        for _ in range(32):
            a, c = rules[int(torch.randint(len(rules), (1,), generator=g))]
            batch.append(rule_seq(int(torch.randint(256, (1,), generator=g)), a, c, 24))
        x = torch.tensor(batch)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss)


def write_merged_and_golden(peft_model, adapter_dir, out, prompts, greedy=GREEDY):
    """Writes peft's merged weights (merged.safetensors) and golden.json: the merged model's
    logits at every prompt position and its greedy continuation with the top-2 gap per step."""
    merged = peft_model.merge_and_unload()
    merged.eval()
    sd = {k: v.contiguous() for k, v in merged.state_dict().items() if k != "lm_head.weight"}
    save_file(sd, os.path.join(out, "merged.safetensors"))
    cases = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids])
            logits = merged(x).logits[0].float()
            gen = merged.generate(x, max_new_tokens=greedy, do_sample=False, pad_token_id=0)
            seq = gen[0].tolist()
            step_logits = merged(torch.tensor([seq])).logits[0]
            gaps = []
            for t in range(len(ids) - 1, len(seq) - 1):
                top = torch.topk(step_logits[t], 2).values
                gaps.append(round(float(top[0] - top[1]), 6))
            cases.append({"prompt": ids,
                          "logits": [[round(float(v), 7) for v in row] for row in logits],
                          "greedy": seq[len(ids):], "greedy_top2_gap": gaps})
    import peft, transformers
    golden = {"generator": f"transformers {transformers.__version__}, peft {peft.__version__}, torch {torch.__version__}",
              "cases": cases}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f)
    from safetensors import safe_open
    with safe_open(os.path.join(adapter_dir, "adapter_model.safetensors"), "pt") as f:
        keys = sorted(f.keys())
    print("min greedy top-2 gap", min(min(c["greedy_top2_gap"]) for c in cases))
    print("adapter tensors:", len(keys), keys[:4])


def main():
    torch.manual_seed(4321)
    cfg = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                      max_position_embeddings=128, rms_norm_eps=1e-6, bos_token_id=1,
                      eos_token_id=2, tie_word_embeddings=True, rope_theta=1_000_000.0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    base_rules = [(5, 3), (9, 7), (13, 1)]
    print("base loss", train(model, list(model.parameters()), base_rules, 400, 1))
    base_dir = os.path.join(OUT, "base")
    os.makedirs(base_dir, exist_ok=True)
    model.save_pretrained(base_dir, safe_serialization=True)
    gc = os.path.join(base_dir, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    byte_tokenizer().save(os.path.join(base_dir, "tokenizer.json"))

    lcfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, bias="none",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                      modules_to_save=["model.norm"], task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lcfg)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_A" in n or "lora_B" in n:
                # B is zero at init; random A and B make every delta non-trivial.
                p.normal_(0.0, 0.05)
            elif "modules_to_save" in n:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    # Teach the adapter a new rule on top of the base's (the LoRA matters for the outputs).
    trainable = [p for n, p in peft_model.named_parameters() if p.requires_grad]
    print("adapter loss", train(peft_model, trainable, base_rules[:2] + [(17, 5)], 300, 2))
    adapter_dir = os.path.join(OUT, "adapter")
    peft_model.save_pretrained(adapter_dir)
    readme = os.path.join(adapter_dir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)

    write_merged_and_golden(peft_model, adapter_dir, OUT,
                            [rule_seq(4, 17, 5, 5), rule_seq(200, 9, 7, 11), rule_seq(128, 13, 1, 3)])
    print("written", OUT)


if __name__ == "__main__":
    main()
