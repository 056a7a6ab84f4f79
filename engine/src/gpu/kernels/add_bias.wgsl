// Bias add in place: x[r][c] += bias[c] (linear layers with bias). One thread per element.

override WG: u32 = 64u;

struct Params {
    rows: u32,
    cols: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;  // [rows][cols]
@group(0) @binding(2) var<storage, read> bias: array<f32>;     // [cols]

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid;
    if (i >= p.rows * p.cols) {
        return;
    }
    x[i] = x[i] + bias[i % p.cols];
}
