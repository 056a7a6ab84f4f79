// Row-wise softmax: out[r][i] = exp(x[r][i] - max_r) / sum_i exp(x[r][i] - max_r).
// One workgroup per row (2-D grid for many rows). Prelude: common.wgsl.

struct Params { rows: u32, cols: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [rows][cols]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // [rows][cols]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let row = group_index(ids);
    if (row >= p.rows) {  // uniform per workgroup: the whole group leaves together
        return;
    }
    let base = row * p.cols;
    var mx = -3.0e38;
    for (var i = ids.lid; i < p.cols; i += WG) {
        mx = max(mx, x[base + i]);
    }
    mx = reduce_max(ids.lid, mx);
    var sum = 0.0;
    for (var i = ids.lid; i < p.cols; i += WG) {
        sum += exp(x[base + i] - mx);
    }
    let inv = 1.0 / reduce_sum(ids.lid, sum);
    for (var i = ids.lid; i < p.cols; i += WG) {
        out[base + i] = exp(x[base + i] - mx) * inv;
    }
}
