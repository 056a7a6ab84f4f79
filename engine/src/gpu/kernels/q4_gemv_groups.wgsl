// Block-quantized (LQ4, lq4h, or with KIND 2 q8_0) matrix-vector product for decode:
// out[m][n] = sum_k x[m][k] * W[n][k]. Layouts and dequantization: engine/src/quant.rs. Per
// group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (KIND = 1) and q8_0 (KIND = 2, 8 code words a group, not 4) a group's (sc, mn) is its f16 (s, m) pair and
// d = dmin = 1.
// The variant for CPU rasterisers (lavapipe, SwiftShader; GPUs run q4_gemv.wgsl and
// q8_gemv.wgsl): TPR threads cooperate on one row (TPR = 1 there: one row per lane), one
// 32-weight group per step, its codes one vec4<u32> (two for q8_0): 16-byte loads, since a
// rasteriser's per-lane gathers cost per load more than per byte. With TPR = 1 a lane takes RPL
// rows (WG/TPR rows apart): the 32 activations of a group, eight loads of a lane's own on a
// rasteriser, are loaded once for RPL rows. (WG/TPR)·RPL rows per workgroup.
// No shift in the loop: SwiftShader's code generator (Subzero) runs a shift of a vector by a
// vector one lane at a time, and every WGSL shift is one (its amount a splat); codes are
// masked in place, or multiplied up to the word's top byte, then scaled back in the float
// activations or the group's scale (exact: powers of two only move exponents). SwiftShader,
// SmolLM2's q8_0 head: 51 -> 31 ms a dispatch in Chromium.
// Prelude: gemv_common.wgsl.

override RPL: u32 = 1u;  // rows per lane: 1, 2, 4 or 8 (more than 1 only with TPR = 1)

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;  // words of W[n][k], 4 (q8_0: 8) per group

// Word `i` of `w` (the scale sections are not 16-byte aligned).
fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// Activation scales that undo a nibble's place: code j of the low four, masked in place, is
// 16^j q_j; of the high four (PLACE_HI), 16^(j+4) q_(j+4).
const PLACE = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
const PLACE_HI = vec4<f32>(1.0 / 65536.0, 1.0 / 1048576.0, 1.0 / 16777216.0, 1.0 / 268435456.0);

// dot(x[8j .. 8j + 8], codes of word v) - 8 * x[8j + 7], the activations scaled by PLACE and
// PLACE_HI: word j of a group holds elements 8j .. 8j + 7, each code masked in its place. The
// top code's high bit is flipped first, so that masked in place and read as an i32 it is
// q_7 - 8 (16^7 times), a signed value that converts exactly; the caller adds the 8 * x back
// once per group for all its rows.
fn dot8(v: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    let lo = vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v) & vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u)));
    let hi = vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v ^ 0x80000000u)
        & vec4<u32>(0xF0000u, 0xF00000u, 0xF000000u, 0xF0000000u)));
    return dot(lo, xa) + dot(hi, xb);
}

// The four signed bytes of q8_0 word `v`, each multiplied up to the word's top byte and masked
// there: 2^24 times the codes (the caller's scale takes the 2^-24).
fn codes24(v: u32) -> vec4<f32> {
    let t = (vec4<u32>(v) * vec4<u32>(16777216u, 65536u, 256u, 1u)) & vec4<u32>(0xFF000000u);
    return vec4<f32>(bitcast<vec4<i32>>(t));
}

// Group `gi` of row `row` against the group's activations: (sc * dot(x, q), mn * sum(x)).
// `top8` is 8 * the group's elements 8j + 7 (unscaled), which dot8 left out.
fn group_terms(row: u32, gi: u32, groups: u32, xs: array<vec4<f32>, 8>, sum: f32, top8: f32) -> vec2<f32> {
    let g = row * groups + gi;
    let sc = group_scales(p.sm_off, g);
    if (KIND == 2u) {
        // q8_0: row n's codes are words n*K/4.., so group g's eight are vec4s 2g and 2g + 1;
        // word j holds elements 4j .. 4j + 3.
        let a = w[2u * g];
        let b = w[2u * g + 1u];
        let d = dot(codes24(a.x), xs[0]) + dot(codes24(a.y), xs[1]) + dot(codes24(a.z), xs[2])
            + dot(codes24(a.w), xs[3]) + dot(codes24(b.x), xs[4]) + dot(codes24(b.y), xs[5])
            + dot(codes24(b.z), xs[6]) + dot(codes24(b.w), xs[7]);
        return vec2<f32>(sc.x * (1.0 / 16777216.0) * d, sc.y * sum);
    }
    let q = w[g];
    let d = dot8(q.x, xs[0], xs[1]) + dot8(q.y, xs[2], xs[3]) + dot8(q.z, xs[4], xs[5])
        + dot8(q.w, xs[6], xs[7]) + top8;
    return vec2<f32>(sc.x * d, sc.y * sum);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per = WG / TPR;  // lanes' rows apart
    let lane = lid % TPR;
    let row0 = (wid.x + wid.y * nwg.x) * per * RPL + lid / TPR;
    let mi = wid.z;
    let groups = p.k / 32u;
    // Rows past the matrix read its last row (their sums are never stored).
    let last = p.n - 1u;
    let r1 = min(row0 + per, last);
    let r2 = min(row0 + 2u * per, last);
    let r3 = min(row0 + 3u * per, last);
    let r4 = min(row0 + 4u * per, last);
    let r5 = min(row0 + 5u * per, last);
    let r6 = min(row0 + 6u * per, last);
    let r7 = min(row0 + 7u * per, last);

    // (sum_g sc_g * dot(x_g, q_g), sum_g mn_g * sum(x_g)) per row, in registers.
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    var a2 = vec2<f32>(0.0);
    var a3 = vec2<f32>(0.0);
    var a4 = vec2<f32>(0.0);
    var a5 = vec2<f32>(0.0);
    var a6 = vec2<f32>(0.0);
    var a7 = vec2<f32>(0.0);
    if (row0 < p.n) {
        let xbase = mi * (p.k / 4u);
        for (var gi = lane; gi < groups; gi += TPR) {
            let xb = xbase + 8u * gi;
            var xs = array<vec4<f32>, 8>(
                x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u],
                x[xb + 4u], x[xb + 5u], x[xb + 6u], x[xb + 7u],
            );
            let s4 = (xs[0] + xs[1]) + (xs[2] + xs[3]) + (xs[4] + xs[5]) + (xs[6] + xs[7]);
            let sum = s4.x + s4.y + s4.z + s4.w;
            let top8 = 8.0 * (xs[1].w + xs[3].w + xs[5].w + xs[7].w);
            if (KIND != 2u) {
                xs = array<vec4<f32>, 8>(
                    xs[0] * PLACE, xs[1] * PLACE_HI, xs[2] * PLACE, xs[3] * PLACE_HI,
                    xs[4] * PLACE, xs[5] * PLACE_HI, xs[6] * PLACE, xs[7] * PLACE_HI,
                );
            }
            a0 += group_terms(row0, gi, groups, xs, sum, top8);
            if (RPL > 1u) {
                a1 += group_terms(r1, gi, groups, xs, sum, top8);
            }
            if (RPL > 2u) {
                a2 += group_terms(r2, gi, groups, xs, sum, top8);
                a3 += group_terms(r3, gi, groups, xs, sum, top8);
            }
            if (RPL > 4u) {
                a4 += group_terms(r4, gi, groups, xs, sum, top8);
                a5 += group_terms(r5, gi, groups, xs, sum, top8);
                a6 += group_terms(r6, gi, groups, xs, sum, top8);
                a7 += group_terms(r7, gi, groups, xs, sum, top8);
            }
        }
    }
    let r = row_sum(lid, lane, a0);
    if (lane == 0u && row0 < p.n) {
        finish(mi, row0, r);
    }
    // RPL > 1 runs with TPR = 1 only: a lane's sums are its rows' (no reduction, no barrier).
    if (RPL > 1u) {
        finish_if(mi, row0 + per, a1);
    }
    if (RPL > 2u) {
        finish_if(mi, row0 + 2u * per, a2);
        finish_if(mi, row0 + 3u * per, a3);
    }
    if (RPL > 4u) {
        finish_if(mi, row0 + 4u * per, a4);
        finish_if(mi, row0 + 5u * per, a5);
        finish_if(mi, row0 + 6u * per, a6);
        finish_if(mi, row0 + 7u * per, a7);
    }
}

// `finish` for a row that may lie past the matrix (then nothing is stored).
fn finish_if(mi: u32, row: u32, r: vec2<f32>) {
    if (row < p.n) {
        finish(mi, row, r);
    }
}

// Stores row `row` of activation row `mi`: d * (scaled dot) - dmin * (scaled sum).
fn finish(mi: u32, row: u32, r: vec2<f32>) {
    let d = row_scales(p.rows_off, row);
    store(p.out_off + mi * p.out_stride + row, d.x * r.x - d.y * r.y);
}
