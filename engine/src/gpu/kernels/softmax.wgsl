// Row-wise softmax: out[r][i] = exp(x[r][i] - max_r) / sum_i exp(x[r][i] - max_r).
// One workgroup per row (2-D grid for many rows). Prelude: common.wgsl.

struct Params { rows: u32, cols: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [rows][cols]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // [rows][cols]

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
    let base = row * p.cols;
    var mx = -3.0e38;
    for (var i = lid; i < p.cols; i += WG) {
        mx = max(mx, x[base + i]);
    }
    mx = reduce_max(lid, mx);
    var sum = 0.0;
    for (var i = lid; i < p.cols; i += WG) {
        sum += exp(x[base + i] - mx);
    }
    let inv = 1.0 / reduce_sum(lid, sum);
    for (var i = lid; i < p.cols; i += WG) {
        out[base + i] = exp(x[base + i] - mx) * inv;
    }
}
