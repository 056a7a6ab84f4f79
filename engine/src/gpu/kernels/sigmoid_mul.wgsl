// Output gate: out[i] = x[i] * sigmoid(gate[i]) (Qwen3.5's gated full attention).
// Prelude: common.wgsl.

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [n]
@group(0) @binding(2) var<storage, read> gate: array<f32>;       // [n]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [n]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.n) { out[i] = x[i] / (1.0 + exp(-gate[i])); }
}
