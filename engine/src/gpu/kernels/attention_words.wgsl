// Prepended (after attention_params.wgsl) to the rasterisers' attention templates
// (attention_lanes.wgsl, attention_rows.wgsl) by attention_lanes.rs, which fills in the
// placeholders in braces: a row's vec4s and cache words, the cache word's type, and how a
// cache word becomes values.

const D4: u32 = {D4}u;  // head_dim / 4
const W: u32 = {W}u;    // cache words per row of one KV head

@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // [tokens][heads][D4]
@group(0) @binding(2) var<storage, read> kc: array<{WORD}>;   // [ctx][kv_heads][W]
@group(0) @binding(3) var<storage, read> vc: array<{WORD}>;   // [ctx][kv_heads][W]

// Values 4h .. 4h + 3 of a cache word (the word's only four for an f32 cache or a narrow f16
// word; an f16 word of 16 bytes holds eight).
fn x4(word: {WORD}, h: u32) -> vec4<f32> {
    {X4}
}
