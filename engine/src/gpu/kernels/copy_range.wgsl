// A range of one buffer into another inside the compute pass (a KV cache append): out[p.dst +
// i] = x[p.src + i] for i < p.n. A transfer command would end the pass, and a GPU pays a pass
// boundary per append (two per layer and token). Prelude: common.wgsl.

struct Params { n: u32, src: u32, dst: u32, _p: u32 }  // elements; offsets in elements

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // [p.src + p.n]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // [p.dst + p.n]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.n) {
        out[p.dst + i] = x[p.src + i];
    }
}
