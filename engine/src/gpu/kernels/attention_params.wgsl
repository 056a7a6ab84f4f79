// Prepended to the flash-decoding kernels (attention_split, attention_decode: `shader!(NAME,
// attention_params)`): their uniform parameters, the layout of `Params` in attention.rs.

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,     // position of query 0
    scale: f32,    // score scale, usually head_dim^-0.5
    causal: u32,   // 1: query t sees keys 0..=pos0+t; 0: every query sees 0..pos0+tokens
    split: u32,    // keys per range, a multiple of WG
    n_splits: u32, // ranges
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
