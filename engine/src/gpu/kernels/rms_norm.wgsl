// RMSNorm over rows: out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * (weight[i] + weight_offset)
// One workgroup per row (rows folded into a 2-D grid); WG threads stride over the row.
// Prelude: common.wgsl.

struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    weight_offset: f32,  // 0 for Llama/Qwen3, 1 for Qwen3.5's (1 + w)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [rows][dim]
@group(0) @binding(2) var<storage, read> weight: array<f32>;     // [dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [rows][dim]

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
    for (var i = lid; i < p.dim; i += WG) {
        out[base + i] = x[base + i] * inv * (weight[i] + p.weight_offset);
    }
}
