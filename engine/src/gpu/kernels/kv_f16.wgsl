// Prepended to the attention kernels that read the KV cache one value at a time (attention,
// attention_split) over an f16 cache (`kv_pack.wgsl` writes it): value i is half i % 2 of
// word i / 2 (`pack2x16float`'s order: the lower half first). Bindings 2 and 3, and their
// accessors.

@group(0) @binding(2) var<storage, read> kc: array<u32>;  // [ctx][kv_heads][head_dim] halves
@group(0) @binding(3) var<storage, read> vc: array<u32>;  // [ctx][kv_heads][head_dim] halves

fn key(i: u32) -> f32 {
    return unpack2x16float(kc[i >> 1u])[i & 1u];
}

fn val(i: u32) -> f32 {
    return unpack2x16float(vc[i >> 1u])[i & 1u];
}
