#!/usr/bin/env python3
"""Writes a synthetic Qwen3-4B-shaped model (random bf16 weights with the real shapes, ~8 GB)
and optionally a PEFT LoRA adapter with random A and B, for the index-builder memory and time
benchmark. Outside git; numpy only; streams tensor by tensor (never holds the model).

    python3 scripts/bench/make_synthetic_qwen3_4b.py OUT_DIR [--lora-rank 64] [--layers 36]

OUT_DIR/base: config.json (Qwen3-4B's shapes), model-0000N-of-0000M.safetensors + index,
              tokenizer.json (copied from the Qwen3 tokenizer asset when present)
OUT_DIR/lora: adapter_config.json (r, alpha = 2r, q/k/v/o/gate/up/down), adapter_model.safetensors
"""
import argparse, json, os, shutil, struct

import numpy as np

CFG = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936,
           hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
           num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
           max_position_embeddings=40960, tie_word_embeddings=True, hidden_act="silu",
           torch_dtype="bfloat16", eos_token_id=151645, bos_token_id=151643)


def shapes(cfg):
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, nq, kv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = [("model.embed_tokens.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += [(f"{p}.input_layernorm.weight", (h,)), (f"{p}.self_attn.q_proj.weight", (nq * hd, h)),
                (f"{p}.self_attn.k_proj.weight", (kv * hd, h)), (f"{p}.self_attn.v_proj.weight", (kv * hd, h)),
                (f"{p}.self_attn.o_proj.weight", (h, nq * hd)), (f"{p}.self_attn.q_norm.weight", (hd,)),
                (f"{p}.self_attn.k_norm.weight", (hd,)), (f"{p}.post_attention_layernorm.weight", (h,)),
                (f"{p}.mlp.gate_proj.weight", (f, h)), (f"{p}.mlp.up_proj.weight", (f, h)),
                (f"{p}.mlp.down_proj.weight", (h, f))]
    out.append(("model.norm.weight", (h,)))
    return out


def bf16_random(rng, n, std, norm):
    if norm:
        x = (1.0 + 0.05 * rng.standard_normal(n, dtype=np.float32))
    else:
        x = std * rng.standard_normal(n, dtype=np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, rng, std=0.02):
    """tensors: [(name, shape)] all bf16, data generated while writing."""
    header, off = {}, 0
    for name, shape in tensors:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape in tensors:
            n = int(np.prod(shape))
            step = 1 << 24
            for s in range(0, n, step):
                f.write(bf16_random(rng, min(step, n - s), std, name.endswith("norm.weight")).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--lora-rank", type=int, default=64)
    ap.add_argument("--layers", type=int, default=36)
    a = ap.parse_args()
    cfg = dict(CFG, num_hidden_layers=a.layers)
    rng = np.random.default_rng(0)
    base = os.path.join(a.out, "base")
    os.makedirs(base, exist_ok=True)
    json.dump(cfg, open(os.path.join(base, "config.json"), "w"), indent=1)
    tok = os.path.expanduser("~/.cache/lorekeeper/assets/qwen3-tokenizer/tokenizer.json")
    if os.path.exists(tok):
        shutil.copy(tok, os.path.join(base, "tokenizer.json"))
    all_t = shapes(cfg)
    # Shards of ~4 GB, as Hugging Face writes them.
    groups, cur, size = [], [], 0
    for t in all_t:
        n = int(np.prod(t[1])) * 2
        if cur and size + n > 4_000_000_000:
            groups.append(cur); cur, size = [], 0
        cur.append(t); size += n
    groups.append(cur)
    weight_map = {}
    for i, g in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(base, name), g, rng)
        weight_map.update({t[0]: name for t in g})
        print("wrote", name, flush=True)
    json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(base, "model.safetensors.index.json"), "w"))
    if a.lora_rank > 0:
        r = a.lora_rank
        lora = os.path.join(a.out, "lora")
        os.makedirs(lora, exist_ok=True)
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        json.dump({"peft_type": "LORA", "r": r, "lora_alpha": 2 * r, "use_rslora": False, "use_dora": False,
                   "fan_in_fan_out": False, "bias": "none", "target_modules": targets, "modules_to_save": None,
                   "rank_pattern": {}, "alpha_pattern": {}, "task_type": "CAUSAL_LM"},
                  open(os.path.join(lora, "adapter_config.json"), "w"), indent=1)
        lt = []
        for name, shape in all_t:
            if len(shape) == 2 and any(f".{t}." in name for t in targets):
                m = "base_model.model." + name[: -len(".weight")]
                lt += [(f"{m}.lora_A.weight", (r, shape[1])), (f"{m}.lora_B.weight", (shape[0], r))]
        write_safetensors(os.path.join(lora, "adapter_model.safetensors"), lt, rng, std=0.01)
        print("wrote adapter, rank", r, flush=True)


if __name__ == "__main__":
    main()
