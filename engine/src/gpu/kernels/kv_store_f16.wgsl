// Prepended to rope_append.wgsl over an f16 cache (the layout kv_pack.wgsl writes): bindings 5
// and 6 as words of two halves, and their writers (index i: values 2i, 2i + 1, the lower half
// first, as `pack2x16float` orders them).

@group(0) @binding(5) var<storage, read_write> kc: array<u32>;  // [ctx][kv_heads][head_dim / 2] words
@group(0) @binding(6) var<storage, read_write> vc: array<u32>;  // [ctx][kv_heads][head_dim / 2] words

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = pack2x16float(x);
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = pack2x16float(x);
}
