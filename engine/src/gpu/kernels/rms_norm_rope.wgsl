// RMSNorm of each head followed by rotary position embedding, in one pass (Qwen3's per-head
// q_norm / k_norm before RoPE): row r = token * heads + head of x[rows][dim] becomes
//   y = x / sqrt(mean(x^2) + eps) * (weight + weight_offset),
//   out[i], out[i + rot/2] = y[i] cos - y[i + rot/2] sin, y[i + rot/2] cos + y[i] sin  (i < rot/2)
// with (cos, sin) at position pos0 + token (rope.wgsl's rotate-half pairing); dims rot.. pass
// through normalised. One workgroup per row. Prelude: common.wgsl.

struct Params {
    rows: u32,           // tokens * heads
    dim: u32,            // head_dim
    eps: f32,
    weight_offset: f32,  // 0 for Qwen3, 1 for (1 + w)
    heads: u32,
    rot_dim: u32,        // even, <= dim
    pos0: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;             // [rows][dim]
@group(0) @binding(2) var<storage, read> weight: array<f32>;        // [dim]
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;   // [positions][rot_dim/2] (cos, sin)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;     // [rows][dim]

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = row_index(wid, nwg);
    if (row >= p.rows) {  // uniform per workgroup: the whole group leaves together
        return;
    }
    let base = row * p.dim;
    var ss = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        ss += x[base + i] * x[base + i];
    }
    let inv = inverseSqrt(reduce_sum(lid, ss) / f32(p.dim) + p.eps);
    let half = p.rot_dim / 2u;
    let cs0 = (p.pos0 + row / p.heads) * half;
    for (var i = lid; i < half; i += WG) {
        let a = x[base + i] * inv * (weight[i] + p.weight_offset);
        let b = x[base + i + half] * inv * (weight[i + half] + p.weight_offset);
        let cs = table[cs0 + i];
        out[base + i] = a * cs.x - b * cs.y;
        out[base + i + half] = b * cs.x + a * cs.y;
    }
    for (var i = p.rot_dim + lid; i < p.dim; i += WG) {
        out[base + i] = x[base + i] * inv * (weight[i] + p.weight_offset);
    }
}
