// Output gate: out[i] = x[i] * sigmoid(gate[i]) (Qwen3.5's gated full attention).

override WG: u32 = 64u;

struct Params {
    n: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;            // [n]
@group(0) @binding(2) var<storage, read> gate: array<f32>;         // [n]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // [n]

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
    out[i] = x[i] / (1.0 + exp(-gate[i]));
}
