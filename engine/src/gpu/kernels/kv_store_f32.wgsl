// Prepended to rope_append.wgsl over an f32 cache: bindings 5 and 6 as pairs of values, and
// their writers (index i: values 2i, 2i + 1).

@group(0) @binding(5) var<storage, read_write> kc: array<vec2<f32>>;  // [ctx][kv_heads][head_dim / 2]
@group(0) @binding(6) var<storage, read_write> vc: array<vec2<f32>>;  // [ctx][kv_heads][head_dim / 2]

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = x;
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = x;
}
