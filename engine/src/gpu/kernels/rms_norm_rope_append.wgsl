// Qwen3's steps between its projections and its attention in one dispatch: RMSNorm of each
// head of the queries and keys, then RoPE (rms_norm_rope.wgsl's rows, full rotary), the
// queries written back in place, the keys into the K cache and the values into the V cache
// (rms_norm_rope_pair and kv_pack / copy_range in one). One workgroup per row, in order:
//   [0, p.rows): query heads (token * heads + head), normalised and rotated in place;
//   [p.rows, p.rows + p.rows2): key heads, normalised and rotated into workgroup memory, then
//     stored to the cache a pair of adjacent values at a time (whole words of an f16 cache);
//   [p.rows + p.rows2, p.rows + 2 p.rows2): value heads, stored to the cache.
// head_dim even and <= 256, the append starting at an even value. The queries are rotated in
// place so that the dispatch binds eight storage buffers (WebGPU's default limit), not nine.
// Preludes: common.wgsl and kv_store_f32.wgsl or kv_store_f16.wgsl (bindings 5 and 6).

struct Params {
    rows: u32,           // tokens * heads
    dim: u32,            // head_dim
    eps: f32,
    weight_offset: f32,  // 0 for Qwen3
    heads: u32,
    kv_heads: u32,
    pos0: u32,
    rows2: u32,          // tokens * kv_heads
    dst2: u32,           // the append's first cache value / 2: its first pair
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;     // [rows][dim], in place
@group(0) @binding(2) var<storage, read> wq: array<f32>;          // [dim] (q_norm)
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>; // [positions][dim/2] (cos, sin)
@group(0) @binding(4) var<storage, read> k: array<f32>;           // [rows2][dim]
// bindings 5, 6: the caches kc, vc, [ctx][kv_heads][head_dim] (the kv_store prelude)
@group(0) @binding(7) var<storage, read> wk: array<f32>;          // [dim] (k_norm)
@group(0) @binding(8) var<storage, read> v: array<f32>;           // [rows2][dim]

var<workgroup> kr: array<f32, 256>;  // a key row, normalised and rotated

// Element `i` of the queries, or of the keys where `key`.
fn xin(key: bool, i: u32) -> f32 {
    if (key) {
        return k[i];
    }
    return q[i];
}

// The norm's weight `i` plus the offset.
fn wt(key: bool, i: u32) -> f32 {
    if (key) {
        return wk[i] + p.weight_offset;
    }
    return wq[i] + p.weight_offset;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = row_index(wid, nwg);
    let half = p.dim / 2u;
    if (r >= p.rows + 2u * p.rows2) {  // uniform per workgroup: the whole group leaves together
        return;
    }
    if (r >= p.rows + p.rows2) {
        let base = (r - p.rows - p.rows2) * p.dim;
        for (var j = lid; j < half; j += WG) {
            store_v(p.dst2 + base / 2u + j, vec2<f32>(v[base + 2u * j], v[base + 2u * j + 1u]));
        }
        return;
    }
    let key = r >= p.rows;
    let row = select(r, r - p.rows, key);
    let heads = select(p.heads, p.kv_heads, key);
    let base = row * p.dim;
    var ss = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        let x = xin(key, base + i);
        ss += x * x;
    }
    let inv = inverseSqrt(reduce_sum(lid, ss) / f32(p.dim) + p.eps);
    let cs0 = (p.pos0 + row / heads) * half;
    for (var i = lid; i < half; i += WG) {
        let a = xin(key, base + i) * inv * wt(key, i);
        let b = xin(key, base + i + half) * inv * wt(key, i + half);
        let cs = table[cs0 + i];
        let ra = a * cs.x - b * cs.y;
        let rb = b * cs.x + a * cs.y;
        if (key) {
            kr[i] = ra;
            kr[i + half] = rb;
        } else {
            q[base + i] = ra;
            q[base + i + half] = rb;
        }
    }
    if (key) {
        workgroupBarrier();
        for (var j = lid; j < half; j += WG) {
            store_k(p.dst2 + base / 2u + j, vec2<f32>(kr[2u * j], kr[2u * j + 1u]));
        }
    }
}
