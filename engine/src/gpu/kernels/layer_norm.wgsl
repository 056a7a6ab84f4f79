// LayerNorm over rows: out[r][i] = (x[r][i] - mean) / sqrt(var + eps) * weight[i] + bias[i]
// (BERT-family encoders). One workgroup per row (rows folded into a 2-D grid); two reductions:
// the mean, then the variance around it (numerically safer than E[x^2] - E[x]^2).
// Prelude: common.wgsl.

struct Params { rows: u32, dim: u32, eps: f32, _p0: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [rows][dim]
@group(0) @binding(2) var<storage, read> weight: array<f32>;     // [dim]
@group(0) @binding(3) var<storage, read> bias: array<f32>;       // [dim]
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // [rows][dim]

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
    var s = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        s += x[base + i];
    }
    let mean = reduce_sum(lid, s) / f32(p.dim);
    var ss = 0.0;
    for (var i = lid; i < p.dim; i += WG) {
        let d = x[base + i] - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(reduce_sum(lid, ss) / f32(p.dim) + p.eps);
    for (var i = lid; i < p.dim; i += WG) {
        out[base + i] = (x[base + i] - mean) * inv * weight[i] + bias[i];
    }
}
