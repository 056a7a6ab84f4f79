#!/usr/bin/env python3
"""Writes the binary seeds the fuzzer starts from (fuzz/seeds/): a tiny Llama GGUF with one
tensor of every block type the reader knows, and a two-tensor safetensors file. The other seeds
are copies of small real files (fixtures' config.json, a tiny bundle's manifest and index)."""
import json, os, random, struct

here = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(7)


def out(target, name, data):
    d = os.path.join(here, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, ty, val):
    b = gstr(key) + struct.pack("<I", ty)
    if ty == 4:
        b += struct.pack("<I", val)
    elif ty == 6:
        b += struct.pack("<f", val)
    elif ty == 7:
        b += struct.pack("<B", val)
    elif ty == 8:
        b += gstr(val)
    elif ty == 9:
        ety, items = val
        b += struct.pack("<IQ", ety, len(items))
        for it in items:
            b += gstr(it) if ety == 8 else struct.pack("<i", it)
    return b


# (weights, bytes) per block by ggml type id
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 12: (256, 144),
         14: (256, 210), 30: (1, 2)}


def tensor_bytes(ty, n):
    w, b = BLOCK[ty]
    if ty == 0:
        return b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(n))
    data = bytearray(rng.getrandbits(8) for _ in range(n // w * b))
    if ty in (1, 2, 3, 6, 7, 8, 12, 14):
        # small finite f16 scales where the block keeps them
        pos = {1: None, 2: [0], 3: [0, 2], 6: [0], 7: [0, 2], 8: [0], 12: [0, 2], 14: [208]}[ty]
        for blk in range(n // w):
            for p in pos or []:
                data[blk * b + p:blk * b + p + 2] = struct.pack("<e", rng.uniform(0.001, 0.05))
        if ty == 1:
            data = bytearray(b"".join(struct.pack("<e", rng.uniform(-1, 1)) for _ in range(n)))
    return bytes(data)


def gguf(file="tiny-llama.gguf", types=None):
    """A tiny llama GGUF; `types` overrides tensor types by name."""
    tokens = ["a", "b", "c", "ab", "Ġ", "Ġa", "<|endoftext|>", "<|im_end|>"]
    meta = [
        kv("general.architecture", 8, "llama"),
        kv("general.alignment", 4, 32),
        kv("llama.block_count", 4, 1),
        kv("llama.context_length", 4, 64),
        kv("llama.embedding_length", 4, 32),
        kv("llama.feed_forward_length", 4, 64),
        kv("llama.attention.head_count", 4, 4),
        kv("llama.attention.head_count_kv", 4, 2),
        kv("llama.rope.freq_base", 6, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        kv("tokenizer.ggml.model", 8, "gpt2"),
        kv("tokenizer.ggml.pre", 8, "smollm"),
        kv("tokenizer.ggml.tokens", 9, (8, tokens)),
        kv("tokenizer.ggml.token_type", 9, (5, [1] * 6 + [3, 3])),
        kv("tokenizer.ggml.merges", 9, (8, ["a b", "Ġ a"])),
        kv("tokenizer.ggml.eos_token_id", 4, 7),
        kv("tokenizer.ggml.add_bos_token", 7, 0),
    ]
    h, ff, v = 32, 64, len(tokens)
    tensors = [
        ("token_embd.weight", [h, v], 8),
        ("blk.0.attn_norm.weight", [h], 0),
        ("blk.0.attn_q.weight", [h, h], 2),
        ("blk.0.attn_k.weight", [h, 16], 3),
        ("blk.0.attn_v.weight", [h, 16], 1),
        ("blk.0.attn_output.weight", [h, h], 12),
        ("blk.0.ffn_norm.weight", [h], 0),
        ("blk.0.ffn_gate.weight", [h, ff], 14),
        ("blk.0.ffn_up.weight", [h, ff], 30),
        ("blk.0.ffn_down.weight", [ff, h], 0),
        ("output_norm.weight", [h], 0),
    ]
    infos, data = b"", b""
    for name, dims, ty in tensors:
        ty = (types or {}).get(name, ty)
        n = 1
        for d in dims:
            n *= d
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ty, len(data))
        data += tensor_bytes(ty, n)
        data += b"\0" * (-len(data) % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + infos
    head += b"\0" * (-len(head) % 32)
    out("gguf", file, head + data)


def safetensors():
    tensors = {"model.norm.weight": ("F32", [6], 4), "model.embed_tokens.weight": ("BF16", [3, 5], 2)}
    header, data = {}, b""
    for name, (dt, shape, size) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n * size]}
        data += bytes(rng.getrandbits(8) for _ in range(n * size))
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header).encode()
    body = struct.pack("<Q", len(hb)) + hb + data
    # the target's first byte splits the rest into two shards: 255 keeps it whole
    out("safetensors", "two-tensors", b"\xff" + body)
    index = {"metadata": {}, "weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors",
                                           "model.embed_tokens.weight": "model-00002-of-00002.safetensors"}}
    out("safetensors", "index.json", json.dumps(index).encode())


gguf()
safetensors()
# Last, so the seeds above keep their bytes: the 5-bit types in the down and up projections.
gguf("tiny-llama-q5.gguf", {"blk.0.ffn_down.weight": 6, "blk.0.ffn_up.weight": 7})
