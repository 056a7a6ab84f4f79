// SwiGLU gate: out[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)).

override WG: u32 = 64u;

struct Params {
    n: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;      // [n]
@group(0) @binding(2) var<storage, read> up: array<f32>;        // [n]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [n]

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
    let g = gate[i];
    out[i] = g / (1.0 + exp(-g)) * up[i];
}
