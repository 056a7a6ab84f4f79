// Residual add in place: acc[i] += x[i].

override WG: u32 = 64u;

struct Params {
    n: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> acc: array<f32>; // [n]
@group(0) @binding(2) var<storage, read> x: array<f32>;         // [n]

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid;
    if (i >= p.n) {
        return;
    }
    acc[i] = acc[i] + x[i];
}
