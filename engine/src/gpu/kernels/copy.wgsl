// Plain buffer copy, the bandwidth yardstick for the benchmarks: out[i] = x[i] (vec4).
// Prelude: common.wgsl.

struct Params { n4: u32, _p0: u32, _p1: u32, _p2: u32 }  // n4: vec4 elements

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;          // [n4]
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;  // [n4]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.n4) { out[i] = x[i]; }
}
