// Prepended to attention_decode.wgsl over an f16 cache (`kv_pack.wgsl` writes it): bindings 2
// and 3 as 8-byte vectors of four halves (head_dim a multiple of 4), and their accessors
// (index i: values 4i..4i+3, half the bytes of the f32 cache's 16-byte loads).

@group(0) @binding(2) var<storage, read> kc: array<vec2<u32>>;  // [ctx][kv_heads][head_dim / 4]
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;  // [ctx][kv_heads][head_dim / 4]

fn key4(i: u32) -> vec4<f32> {
    let w = kc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn val4(i: u32) -> vec4<f32> {
    let w = vc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
