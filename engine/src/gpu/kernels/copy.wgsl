// Plain buffer copy, the bandwidth yardstick for the benchmarks: out[i] = x[i] (vec4).

override WG: u32 = 64u;

struct Params {
    n4: u32,  // vec4 elements
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;          // [n4]
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;  // [n4]

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid;
    if (i < p.n4) {
        out[i] = x[i];
    }
}
