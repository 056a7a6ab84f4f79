// KV cache appends into an f16 cache inside the compute pass (copy_range.wgsl's form for an
// f32 cache): values x[p.src + i], i < p.n, into halves p.dst + i of out (half e is the lower
// half of word e / 2 when e is even, as `pack2x16float` orders them), and with p.pair = 1 the
// same from x2 into out2 (a layer's keys and values in one dispatch). One invocation per word
// touched; a word the range covers only one half of keeps its other half (the position before
// p.dst, or after the range), so any offset and length work. Prelude: common.wgsl.

struct Params { n: u32, src: u32, dst: u32, pair: u32 }  // values; offsets in values

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [p.src + p.n]
@group(0) @binding(2) var<storage, read_write> out: array<u32>;  // [(p.dst + p.n + 1) / 2] words
@group(0) @binding(3) var<storage, read> x2: array<f32>;         // pair: [p.src + p.n]
@group(0) @binding(4) var<storage, read_write> out2: array<u32>; // pair: [(p.dst + p.n + 1) / 2]

// Which halves of word w the range covers (bit 0 the lower, bit 1 the upper), and where in
// the source each half's value lies (a half not covered reads the range's first value: any
// in-bounds index, masked below).
fn covered(w: u32) -> vec3<u32> {
    let e = 2u * w;
    let lo = e >= p.dst && e < p.dst + p.n;
    let hi = e + 1u >= p.dst && e + 1u < p.dst + p.n;
    let slo = select(p.src, p.src + e - p.dst, lo);
    let shi = select(p.src, p.src + e + 1u - p.dst, hi);
    return vec3<u32>(u32(lo) | (u32(hi) << 1u), slo, shi);
}

// The new word: the covered halves from `pair`, the others from `old`.
fn merged(old: u32, pair: vec2<f32>, halves: u32) -> u32 {
    let mask = select(0u, 0xffffu, (halves & 1u) != 0u) | select(0u, 0xffff0000u, (halves & 2u) != 0u);
    return (pack2x16float(pair) & mask) | (old & ~mask);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    let w0 = p.dst / 2u;
    let words = (p.dst + p.n + 1u) / 2u - w0;
    if (i < words) {
        let w = w0 + i;
        let c = covered(w);
        let v = vec2<f32>(x[c.y], x[c.z]);
        out[w] = merged(out[w], v, c.x);
    } else if (p.pair != 0u && i < 2u * words) {
        let w = w0 + i - words;
        let c = covered(w);
        let v = vec2<f32>(x2[c.y], x2[c.z]);
        out2[w] = merged(out2[w], v, c.x);
    }
}
