// Sampling's filter: each logit as the grammar's mask and the repetition penalty leave it,
// written for the top-k stages (`topk.wgsl`), so a constrained or penalized step reads back
// k pairs instead of the whole row. A token outside the mask becomes LOWEST: the top-k ranks
// it last and the normaliser (`sum_exp.wgsl`) skips it. Prelude: common.wgsl.

struct Params {
    n: u32,        // logits
    penalty: f32,  // repetition penalty, >= 1
    flags: u32,    // bit 0: `allowed` is bound; bit 1: `penalized` is bound
    _p0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;        // [n]
@group(0) @binding(2) var<storage, read> allowed: array<u32>;       // [ceil(n / 32)] bitset
@group(0) @binding(3) var<storage, read> penalized: array<u32>;     // [ceil(n / 32)] bitset
@group(0) @binding(4) var<storage, read_write> out: array<f32>;     // [n]

const LOWEST: f32 = -0x1.fffffep+127f;  // -f32::MAX, exact

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i >= p.n) {
        return;
    }
    let w = i / 32u;
    let bit = 1u << (i % 32u);
    var v = logits[i];
    if ((p.flags & 2u) != 0u && (penalized[w] & bit) != 0u) {
        // CTRL / Hugging Face: a positive logit divided by the penalty, any other multiplied.
        v = select(v * p.penalty, v / p.penalty, v > 0.0);
    }
    if ((p.flags & 1u) != 0u && (allowed[w] & bit) == 0u) {
        v = LOWEST;
    }
    out[i] = v;
}
