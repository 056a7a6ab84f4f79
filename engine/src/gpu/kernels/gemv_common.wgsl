// Prepended to the block GEMV kernels (q4_gemv, q4_gemv_groups, q8_gemv: `shader!(LABEL =
// NAME, gemv_common, REDUCE)`): their tuning constants, parameters, the bindings they share
// (binding 1, the weights, each kernel declares in the type it reads them as, with `fn word(i)`
// reading its word i), where an invocation works and the 4-bit scales. REDUCE is the reduction
// over a row's lanes, `row_sum`: gemv_reduce.wgsl (workgroup memory) or gemv_reduce_sg.wgsl
// (subgroup shuffles, where the adapter has them).
// TPR threads cooperate on one output row, WG/TPR rows per workgroup.

override WG: u32 = 64u;   // invocations per workgroup, power of two, <= 256
override TPR: u32 = 8u;   // threads per output row, power of two, <= WG
override ACC: bool = false;  // add the product to `out` (a residual add in the epilogue)
// The weights' layout, p.kind as a constant: 0 LQ4, 1 lq4h, 2 q8_0. A rasteriser runs both
// sides of a branch on a uniform value (SwiftShader: the GEMV 0.60 -> 0.76 GB/s without the
// dead side), so the pipeline is built per layout.
override KIND: u32 = 0u;

struct Params {
    m: u32,          // activation rows
    n: u32,          // output features (rows of W)
    k: u32,          // input features (cols of W), multiple of 32
    sm_off: u32,     // word offset of the scale section in `w` (LQ4: sub-scale/min bytes;
                     // lq4h, q8_0: one f16 (s, m) word per group)
    rows_off: u32,   // word offset of the per-row (d, dmin) f32 pairs in `w` (LQ4 only)
    out_stride: u32, // elements between consecutive rows of `out`
    out_off: u32,    // element offset of out[0][0]
    kind: u32,       // 0: LQ4; 1: lq4h; 2: q8_0 (the kernels read KIND, its constant)
    // q4_gemv.wgsl with PARTS > 1 (several matrices of one width and layout, one dispatch):
    // the second and third matrices' rows, section offsets in `w2` / `w3` and first
    // workgroups (the first matrix's workgroups come first); unused elsewhere.
    n1: u32,
    sm_off1: u32,
    rows_off1: u32,
    start1: u32,
    n2: u32,
    sm_off2: u32,
    rows_off2: u32,
    start2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;  // [m][k/4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [m][out_stride]

var<workgroup> part: array<vec2<f32>, 256>;  // per-thread (scaled dot, scaled sum) partials

// Writes output element `i`: the value, or (ACC) the value added to what is there.
fn store(i: u32, v: f32) {
    if (ACC) {
        out[i] = out[i] + v;
    } else {
        out[i] = v;
    }
}

// The 4-bit codes of the low 16 bits of `v` as four values.
fn nib(v: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(v, v >> 4u, v >> 8u, v >> 12u) & vec4<u32>(15u));
}

// The four signed bytes of `v` (q8_0 codes), sign-extended by an arithmetic shift (GPUs'
// q8_gemv.wgsl; the rasterisers' group kernel has `codes24`, without a shift).
fn codes(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}

// Where an invocation works: its output row, its lane among the row's TPR, its activation row.
struct Slot {
    row: u32,
    lane: u32,
    mi: u32,
}

// The slot of invocation `lid` of workgroup `wid` (rows over x and y, activation rows over z).
fn slot(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> Slot {
    let wg_linear = wid.x + wid.y * nwg.x;
    return Slot(wg_linear * (WG / TPR) + lid / TPR, lid % TPR, wid.z);
}

// The (sc, mn) scales of 4-bit group `g` of the matrix whose scale section starts at word
// `sm_off` (g = row * groups + group): LQ4's sub-scale and min bytes, lq4h's f16 (s, m) pair.
fn group_scales(sm_off: u32, g: u32) -> vec2<f32> {
    if (KIND != 0u) {
        return unpack2x16float(word(sm_off + g));
    }
    // Group g's two bytes are bytes 2(g % 2) and 2(g % 2) + 1 of word g / 2; multiplied up to
    // the word's top half and masked there (no shift: SwiftShader runs WGSL's shifts one lane
    // at a time), then scaled back down (exact).
    let t = word(sm_off + g / 2u) * select(65536u, 1u, (g & 1u) == 1u);
    return vec2<f32>(f32(t & 0xFF0000u) * (1.0 / 65536.0), f32(t & 0xFF000000u) * (1.0 / 16777216.0));
}

// The (d, dmin) of row `row` of a 4-bit matrix whose row scales start at word `rows_off`:
// LQ4's f32 pair, (1, 1) for lq4h.
fn row_scales(rows_off: u32, row: u32) -> vec2<f32> {
    if (KIND != 0u) {
        return vec2<f32>(1.0);
    }
    return vec2<f32>(bitcast<f32>(word(rows_off + 2u * row)), bitcast<f32>(word(rows_off + 2u * row + 1u)));
}
