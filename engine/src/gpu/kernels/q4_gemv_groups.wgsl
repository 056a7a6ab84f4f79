// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (p.kind = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// The variant for CPU rasterisers (lavapipe, SwiftShader; GPUs run q4_gemv.wgsl): TPR threads
// cooperate on one row (TPR = 1 there: one row per lane), one 32-weight group per step, its
// codes one vec4<u32> (a 16-byte load: a rasteriser's per-lane gathers cost per load, not per
// byte, so this reads 4x the bytes per gather of the one-word-per-step kernel). With TPR = 1 a
// lane takes RPL rows (WG/TPR rows apart): the 32 activations of a group, eight loads of a
// lane's own on a rasteriser, are loaded once for RPL rows. (WG/TPR)·RPL rows per workgroup.
// Prelude: gemv_common.wgsl.

override RPL: u32 = 1u;  // rows per lane: 1, 2 or 4 (more than 1 only with TPR = 1)

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;  // LQ4 words of W[n][k], 4 per group

// Word `i` of `w` (the scale sections are not 16-byte aligned).
fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// dot(x[8j .. 8j + 8], codes of word v): word j of a group holds elements 8j .. 8j + 7.
fn dot8(v: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    return dot(nib(v), xa) + dot(nib(v >> 16u), xb);
}

// Group `gi` of row `row` against the group's activations: (sc * dot(x, q), mn * sum(x)).
fn group_terms(row: u32, gi: u32, groups: u32, xs: array<vec4<f32>, 8>, sum: f32) -> vec2<f32> {
    let g = row * groups + gi;
    let q = w[g];
    let sc = group_scales(p.sm_off, g);
    let d = dot8(q.x, xs[0], xs[1]) + dot8(q.y, xs[2], xs[3]) + dot8(q.z, xs[4], xs[5])
        + dot8(q.w, xs[6], xs[7]);
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

    // (sum_g sc_g * dot(x_g, q_g), sum_g mn_g * sum(x_g)) per row, in registers.
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    var a2 = vec2<f32>(0.0);
    var a3 = vec2<f32>(0.0);
    if (row0 < p.n) {
        let xbase = mi * (p.k / 4u);
        for (var gi = lane; gi < groups; gi += TPR) {
            let xb = xbase + 8u * gi;
            let xs = array<vec4<f32>, 8>(
                x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u],
                x[xb + 4u], x[xb + 5u], x[xb + 6u], x[xb + 7u],
            );
            let s4 = (xs[0] + xs[1]) + (xs[2] + xs[3]) + (xs[4] + xs[5]) + (xs[6] + xs[7]);
            let sum = s4.x + s4.y + s4.z + s4.w;
            a0 += group_terms(row0, gi, groups, xs, sum);
            if (RPL > 1u) {
                a1 += group_terms(r1, gi, groups, xs, sum);
            }
            if (RPL > 2u) {
                a2 += group_terms(r2, gi, groups, xs, sum);
                a3 += group_terms(r3, gi, groups, xs, sum);
            }
        }
    }
    let r = row_sum(lid, lane, a0);
    if (lane == 0u && row0 < p.n) {
        finish(mi, row0, r);
    }
    // RPL > 1 runs with TPR = 1 only: a lane's sums are its rows' (no reduction, no barrier).
    if (RPL > 1u && row0 + per < p.n) {
        finish(mi, row0 + per, a1);
    }
    if (RPL > 2u && row0 + 2u * per < p.n) {
        finish(mi, row0 + 2u * per, a2);
    }
    if (RPL > 2u && row0 + 3u * per < p.n) {
        finish(mi, row0 + 3u * per, a3);
    }
}

// Stores row `row` of activation row `mi`: d * (scaled dot) - dmin * (scaled sum).
fn finish(mi: u32, row: u32, r: vec2<f32>) {
    let d = row_scales(p.rows_off, row);
    store(p.out_off + mi * p.out_stride + row, d.x * r.x - d.y * r.y);
}
