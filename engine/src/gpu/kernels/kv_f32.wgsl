// Prepended to the attention kernels that read the KV cache one value at a time (attention,
// attention_split) over an f32 cache: bindings 2 and 3, and their accessors.

@group(0) @binding(2) var<storage, read> kc: array<f32>;  // [ctx][kv_heads][head_dim]
@group(0) @binding(3) var<storage, read> vc: array<f32>;  // [ctx][kv_heads][head_dim]

fn key(i: u32) -> f32 {
    return kc[i];
}

fn val(i: u32) -> f32 {
    return vc[i];
}
