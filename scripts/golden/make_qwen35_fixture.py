#!/usr/bin/env python3
"""Generates the Qwen3.5 hybrid-decoder golden fixture from transformers + peft (CPU torch).

    /path/to/venv/bin/python scripts/golden/make_qwen35_fixture.py

Writes tests/fixtures/qwen35-lora/:
  base/       a tiny random Qwen3.5 text model (model_type qwen3_5_text, 4 layers: 3 Gated
              DeltaNet linear-attention layers + 1 gated full-attention layer; 2 key heads
              serving 4 value heads; partial rotary 0.25; config.json, model.safetensors f32,
              tokenizer.json over the 256 byte tokens)
  adapter/    a PEFT LoRA (r 8, alpha 16) with random A and B on q/k/v/o_proj, in_proj_qkv,
              in_proj_z, out_proj and the MLP
  merged.safetensors   peft's merge_and_unload() weights
  golden.json          logits at every prompt position (transformers' chunked delta rule, chunk
                       64, so the 70-token prompt spans two chunks) and greedy continuations
                       (transformers' cached decode: the recurrent rule) of the merged model
Both base and adapter are briefly trained on affine byte sequences so next-token distributions
are peaked (as in make_lora_fixture.py). CI reads these files; it never runs Python.
"""
import os, sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_lora_fixture import byte_tokenizer, rule_seq, train, write_merged_and_golden  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "qwen35-lora")


def main():
    torch.manual_seed(3535)
    cfg = Qwen3_5TextConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.25},
        max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
        tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))  # gated norm: plain weight
            elif "norm" in n:
                p.copy_(0.1 * torch.randn_like(p))  # (1 + w) norms
            elif n.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(1.0, 8.0).log())
            elif n.endswith("dt_bias"):
                p.copy_(0.5 * torch.randn_like(p))
            elif "conv1d" in n:
                p.normal_(0.0, 0.3)
            else:
                p.normal_(0.0, 0.08)
    base_rules = [(5, 3), (9, 7), (13, 1)]
    print("base loss", train(model, list(model.parameters()), base_rules, 300, 1))
    base_dir = os.path.join(OUT, "base")
    os.makedirs(base_dir, exist_ok=True)
    model.save_pretrained(base_dir, safe_serialization=True)
    gc = os.path.join(base_dir, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    byte_tokenizer().save(os.path.join(base_dir, "tokenizer.json"))

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "out_proj",
               "gate_proj", "up_proj", "down_proj"]
    lcfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, bias="none", target_modules=targets,
                      task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lcfg)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_A" in n or "lora_B" in n:
                p.normal_(0.0, 0.05)
    trainable = [p for n, p in peft_model.named_parameters() if p.requires_grad]
    print("adapter loss", train(peft_model, trainable, base_rules[:2] + [(17, 5)], 200, 2))
    adapter_dir = os.path.join(OUT, "adapter")
    peft_model.save_pretrained(adapter_dir)
    readme = os.path.join(adapter_dir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)

    write_merged_and_golden(peft_model, adapter_dir, OUT,
                            [rule_seq(4, 17, 5, 5), rule_seq(200, 9, 7, 11), rule_seq(128, 17, 5, 70)])
    print("written", OUT)


if __name__ == "__main__":
    main()
