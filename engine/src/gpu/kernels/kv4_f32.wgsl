// Prepended to attention_decode.wgsl over an f32 cache: bindings 2 and 3 as 16-byte vectors
// (head_dim a multiple of 4), and their accessors (index i: values 4i..4i+3).

@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>;  // [ctx][kv_heads][head_dim / 4]
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>;  // [ctx][kv_heads][head_dim / 4]

fn key4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn val4(i: u32) -> vec4<f32> {
    return vc[i];
}
