// Bias add in place: x[r][c] += bias[c] (linear layers with bias). Prelude: common.wgsl.

struct Params { rows: u32, cols: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;  // [rows][cols]
@group(0) @binding(2) var<storage, read> bias: array<f32>;     // [cols]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.rows * p.cols) { x[i] = x[i] + bias[i % p.cols]; }
}
