// Rotary position embedding, in place, rotate-half (NeoX / Hugging Face) pairing:
// for i < rot/2: (a, b) = (x[i], x[i + rot/2]) -> (a*cos - b*sin, b*cos + a*sin).
// Dimensions rot..head_dim pass through (partial rotary). One thread per (token, head, pair).
// Prelude: common.wgsl.

struct Params {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    rot_dim: u32,
    pos0: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;   // [tokens][heads][head_dim]
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>; // [positions][rot_dim/2] (cos, sin)

@compute @workgroup_size(WG)
fn main(g: Ids) {
    let half = p.rot_dim / 2u;
    let id = item_index(g);
    if (id >= p.tokens * p.heads * half) {
        return;
    }
    let i = id % half;
    let th = id / half;          // token * heads + head
    let t = th / p.heads;
    let base = th * p.head_dim;
    let cs = table[(p.pos0 + t) * half + i];
    let a = x[base + i];
    let b = x[base + i + half];
    x[base + i] = a * cs.x - b * cs.y;
    x[base + i + half] = b * cs.x + a * cs.y;
}
