// Ranges of buffers into others inside the compute pass (KV cache appends): out[p.dst + i] =
// x[p.src + i] for i < p.n, and with p.pair = 1 the same from x2 into out2 for invocations
// n..2n (a layer's keys and values in one dispatch). A transfer command would end the pass,
// and a GPU pays a pass boundary per append. Prelude: common.wgsl.

struct Params { n: u32, src: u32, dst: u32, pair: u32 }  // elements; offsets in elements

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // [p.src + p.n]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // [p.dst + p.n]
@group(0) @binding(3) var<storage, read> x2: array<f32>;          // pair: [p.src + p.n]
@group(0) @binding(4) var<storage, read_write> out2: array<f32>;  // pair: [p.dst + p.n]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.n) {
        out[p.dst + i] = x[p.src + i];
    } else if (p.pair != 0u && i < 2u * p.n) {
        out2[p.dst + i - p.n] = x2[p.src + i - p.n];
    }
}
