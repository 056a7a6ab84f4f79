// RoPE of a layer's queries and keys with the keys and values appended to the KV caches, in
// one dispatch: rope.wgsl twice and kv_pack.wgsl (or copy_range.wgsl) for a layer without
// q / k norms (Llama, SmolLM2). Full rotary, rotate-half pairing (i, i + half), head_dim a
// multiple of 4 and the append starting at an even value, so that each invocation owns whole
// pairs of cache values (whole words of an f16 cache). Items, in this order:
//   q: one per (token, head, i < head_dim/2): (q[i], q[i + half]) rotated in place;
//   k: one per (token, kv_head, j < head_dim/4): the pairs of values (2j, 2j + 1) and
//      (2j + half, 2j + half + 1), rotated, written back to k and stored in the cache;
//   v: one per (token, kv_head, j < head_dim/2): values (2j, 2j + 1) stored in the cache.
// Preludes: common.wgsl and kv_store_f32.wgsl or kv_store_f16.wgsl (bindings 5 and 6, the
// caches, written a pair of values at a time by store_k() and store_v()).

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,
    dst2: u32,  // the append's first cache value / 2: its first pair
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;      // [tokens][heads][head_dim]
@group(0) @binding(2) var<storage, read_write> k: array<f32>;      // [tokens][kv_heads][head_dim]
@group(0) @binding(3) var<storage, read> v: array<f32>;            // [tokens][kv_heads][head_dim]
@group(0) @binding(4) var<storage, read> table: array<vec2<f32>>; // [positions][head_dim/2] (cos, sin)
// bindings 5, 6: the caches kc, vc, [ctx][kv_heads][head_dim] (the kv_store prelude)

// (a, b) rotated by the angle whose (cos, sin) is cs.
fn rot(a: f32, b: f32, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a * cs.x - b * cs.y, b * cs.x + a * cs.y);
}

@compute @workgroup_size(WG)
fn main(g: Ids) {
    let half = p.head_dim / 2u;
    let quarter = half / 2u;
    let nq = p.tokens * p.heads * half;
    let nk = p.tokens * p.kv_heads * quarter;
    let nv = p.tokens * p.kv_heads * half;
    var id = item_index(g);
    if (id < nq) {
        let i = id % half;
        let th = id / half;  // token * heads + head
        let base = th * p.head_dim;
        let cs = table[(p.pos0 + th / p.heads) * half + i];
        let r = rot(q[base + i], q[base + i + half], cs);
        q[base + i] = r.x;
        q[base + i + half] = r.y;
        return;
    }
    id -= nq;
    if (id < nk) {
        let i = 2u * (id % quarter);
        let th = id / quarter;  // token * kv_heads + kv_head
        let base = th * p.head_dim;
        let row = (p.pos0 + th / p.kv_heads) * half;
        let r0 = rot(k[base + i], k[base + i + half], table[row + i]);
        let r1 = rot(k[base + i + 1u], k[base + i + 1u + half], table[row + i + 1u]);
        k[base + i] = r0.x;
        k[base + i + 1u] = r1.x;
        k[base + i + half] = r0.y;
        k[base + i + half + 1u] = r1.y;
        store_k(p.dst2 + (base + i) / 2u, vec2<f32>(r0.x, r1.x));
        store_k(p.dst2 + (base + i + half) / 2u, vec2<f32>(r0.y, r1.y));
        return;
    }
    id -= nk;
    if (id < nv) {
        store_v(p.dst2 + id, vec2<f32>(v[2u * id], v[2u * id + 1u]));
    }
}
