// Block-quantized (LQ4, lq4h, or with KIND 2 q8_0) matrix-matrix product for prefill on CPU
// rasterisers (lavapipe, SwiftShader; GPUs run q4_gemm.wgsl): out[m][n] = sum_k x[m][k] * W[n][k].
//
// q4_gemm.wgsl stages tiles in workgroup memory between barriers and reads them back per
// lane: on a rasteriser every barrier switches between the workgroup's SIMD vectors and every
// lane's load is a scalar load of its own, so it ran slower per token than decode's GEMV. Here,
// as in q4_gemv_groups.wgsl, a lane walks the 32-weight groups in order with everything in
// registers, no workgroup memory and no barrier; it takes R rows (WG apart) and T consecutive
// activation rows (tokens), so each group's codes are loaded and unpacked once for T tokens
// and each token's activations loaded once for R rows. Per group of row n and token m:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// (lq4h and q8_0: d = dmin = 1). The 4-bit codes are masked in place and the activations
// scaled back (no shift: SwiftShader runs a vector shift one lane at a time), as in
// q4_gemv_groups.wgsl, whose `dot8` this splits into the codes (once per group and row) and
// the dot (per token).
// The rows and tokens are named variables, not arrays (a rasteriser keeps an indexed private
// array in memory): q4_matmul.rs writes the lines marked `//@ r` once per row, `//@ t` once
// per token and `//@ r t` once per (row, token), with {r} and {t} filled in, and R and T.
// Prelude: gemv_common.wgsl (WG lanes a workgroup; TPR unused).

const R: u32 = {R}u;  // rows per lane
const T: u32 = {T}u;  // tokens per lane

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;  // words of W[n][k], 4 (q8_0: 8) per group

// Word `i` of `w` (the scale sections are not 16-byte aligned).
fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// Activation scales that undo a nibble's place (q4_gemv_groups.wgsl).
const PLACE = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
const PLACE_HI = vec4<f32>(1.0 / 65536.0, 1.0 / 1048576.0, 1.0 / 16777216.0, 1.0 / 268435456.0);

// One token's 32 activations of a group, scaled for the codes' places (4-bit), their sum and
// 8 * its elements 8j + 7 (unscaled: the flipped top codes' offset; 0 for q8_0).
struct Acts {
    x: array<vec4<f32>, 8>,
    sum: f32,
    top8: f32,
}

fn acts(mi: u32, gi: u32) -> Acts {
    let xb = mi * (p.k / 4u) + 8u * gi;
    let xs = array<vec4<f32>, 8>(
        x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u],
        x[xb + 4u], x[xb + 5u], x[xb + 6u], x[xb + 7u],
    );
    let s4 = (xs[0] + xs[1]) + (xs[2] + xs[3]) + (xs[4] + xs[5]) + (xs[6] + xs[7]);
    let sum = s4.x + s4.y + s4.z + s4.w;
    if (KIND == 2u) {
        return Acts(xs, sum, 0.0);
    }
    let top8 = 8.0 * (xs[1].w + xs[3].w + xs[5].w + xs[7].w);
    return Acts(array<vec4<f32>, 8>(
        xs[0] * PLACE, xs[1] * PLACE_HI, xs[2] * PLACE, xs[3] * PLACE_HI,
        xs[4] * PLACE, xs[5] * PLACE_HI, xs[6] * PLACE, xs[7] * PLACE_HI,
    ), sum, top8);
}

// A group's 32 codes in their places (4-bit word j: its low four codes masked in place, then
// its high four with the top code's high bit flipped; q8_0: 2^24 times each code) and its
// (sc, mn), the 2^-24 of q8_0 folded into sc.
struct Codes {
    c: array<vec4<f32>, 8>,
    sc: vec2<f32>,
}

fn lo4(v: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v) & vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u)));
}

fn hi4(v: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v ^ 0x80000000u)
        & vec4<u32>(0xF0000u, 0xF00000u, 0xF000000u, 0xF0000000u)));
}

fn codes24(v: u32) -> vec4<f32> {
    let t = (vec4<u32>(v) * vec4<u32>(16777216u, 65536u, 256u, 1u)) & vec4<u32>(0xFF000000u);
    return vec4<f32>(bitcast<vec4<i32>>(t));
}

fn group_codes(row: u32, gi: u32, groups: u32) -> Codes {
    let g = row * groups + gi;
    let sc = group_scales(p.sm_off, g);
    if (KIND == 2u) {
        let a = w[2u * g];
        let b = w[2u * g + 1u];
        return Codes(array<vec4<f32>, 8>(
            codes24(a.x), codes24(a.y), codes24(a.z), codes24(a.w),
            codes24(b.x), codes24(b.y), codes24(b.z), codes24(b.w),
        ), vec2<f32>(sc.x * (1.0 / 16777216.0), sc.y));
    }
    let q = w[g];
    return Codes(array<vec4<f32>, 8>(
        lo4(q.x), hi4(q.x), lo4(q.y), hi4(q.y), lo4(q.z), hi4(q.z), lo4(q.w), hi4(q.w),
    ), sc);
}

// (sc * dot(x, q), mn * sum(x)) of one group and token.
fn apply(c: Codes, a: Acts) -> vec2<f32> {
    let d = dot(c.c[0], a.x[0]) + dot(c.c[1], a.x[1]) + dot(c.c[2], a.x[2]) + dot(c.c[3], a.x[3])
        + dot(c.c[4], a.x[4]) + dot(c.c[5], a.x[5]) + dot(c.c[6], a.x[6]) + dot(c.c[7], a.x[7]);
    return vec2<f32>(c.sc.x * (d + a.top8), c.sc.y * a.sum);
}

// Stores (row, token) unless either lies past the product: d * (scaled dot) - dmin * (scaled sum).
fn finish(row: u32, mi: u32, r: vec2<f32>) {
    if (row < p.n && mi < p.m) {
        let d = row_scales(p.rows_off, row);
        store(p.out_off + mi * p.out_stride + row, d.x * r.x - d.y * r.y);
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row0 = (wid.x + wid.y * nwg.x) * WG * R + lid;
    let m0 = wid.z * T;
    let groups = p.k / 32u;
    // Rows and tokens past the product read the last ones (their sums are never stored).
    let r{r} = min(row0 + {r}u * WG, p.n - 1u);  //@ r
    let t{t} = min(m0 + {t}u, p.m - 1u);  //@ t
    var a{r}_{t} = vec2<f32>(0.0);  //@ r t
    if (row0 < p.n) {
        for (var gi = 0u; gi < groups; gi++) {
            let x{t} = acts(t{t}, gi);  //@ t
            let c{r} = group_codes(r{r}, gi, groups);  //@ r
            a{r}_{t} += apply(c{r}, x{t});  //@ r t
        }
    }
    finish(row0 + {r}u * WG, m0 + {t}u, a{r}_{t});  //@ r t
}
