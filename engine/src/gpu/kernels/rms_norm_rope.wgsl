// RMSNorm of each head followed by rotary position embedding, in one pass (Qwen3's per-head
// q_norm / k_norm before RoPE): row r = token * heads + head of x[rows][dim] becomes
//   y = x / sqrt(mean(x^2) + eps) * (weight + weight_offset),
//   out[i], out[i + rot/2] = y[i] cos - y[i + rot/2] sin, y[i + rot/2] cos + y[i] sin  (i < rot/2)
// with (cos, sin) at position pos0 + token (rope.wgsl's rotate-half pairing); dims rot.. pass
// through normalised. One workgroup per row. With p.rows2 > 0 one dispatch also takes a second
// tensor (Qwen3's keys beside its queries: x2, weight2, out2, p.heads2 heads per token), its
// rows after the first's. Prelude: common.wgsl.

struct Params {
    rows: u32,           // tokens * heads
    dim: u32,            // head_dim
    eps: f32,
    weight_offset: f32,  // 0 for Qwen3, 1 for (1 + w)
    heads: u32,
    rot_dim: u32,        // even, <= dim
    pos0: u32,
    rows2: u32,          // tokens * heads2 of the second tensor; 0: none
    heads2: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;             // [rows][dim]
@group(0) @binding(2) var<storage, read> weight: array<f32>;        // [dim]
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;   // [positions][rot_dim/2] (cos, sin)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;     // [rows][dim]
@group(0) @binding(5) var<storage, read> x2: array<f32>;            // [rows2][dim]
@group(0) @binding(6) var<storage, read> weight2: array<f32>;       // [dim]
@group(0) @binding(7) var<storage, read_write> out2: array<f32>;    // [rows2][dim]

// Element `i` of the input, of the second tensor's where `second`.
fn xin(second: bool, i: u32) -> f32 {
    if (second) {
        return x2[i];
    }
    return x[i];
}

// The norm's weight `i` plus the offset.
fn wt(second: bool, i: u32) -> f32 {
    if (second) {
        return weight2[i] + p.weight_offset;
    }
    return weight[i] + p.weight_offset;
}

// Writes output element `i`.
fn put(second: bool, i: u32, v: f32) {
    if (second) {
        out2[i] = v;
    } else {
        out[i] = v;
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = row_index(wid, nwg);
    if (r >= p.rows + p.rows2) {  // uniform per workgroup: the whole group leaves together
        return;
    }
    let second = r >= p.rows;
    let row = select(r, r - p.rows, second);
    let heads = select(p.heads, p.heads2, second);
    let base = row * p.dim;
    var ss = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        let v = xin(second, base + i);
        ss += v * v;
    }
    let inv = inverseSqrt(reduce_sum(lid, ss) / f32(p.dim) + p.eps);
    let half = p.rot_dim / 2u;
    let cs0 = (p.pos0 + row / heads) * half;
    for (var i = lid; i < half; i += WG) {
        let a = xin(second, base + i) * inv * wt(second, i);
        let b = xin(second, base + i + half) * inv * wt(second, i + half);
        let cs = table[cs0 + i];
        put(second, base + i, a * cs.x - b * cs.y);
        put(second, base + i + half, b * cs.x + a * cs.y);
    }
    for (var i = p.rot_dim + lid; i < p.dim; i += WG) {
        put(second, base + i, xin(second, base + i) * inv * wt(second, i));
    }
}
