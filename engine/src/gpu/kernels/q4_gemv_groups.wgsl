// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (p.kind = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// The variant for CPU rasterisers (lavapipe, SwiftShader; GPUs run q4_gemv.wgsl): TPR threads
// cooperate on one row (TPR = 1 there: one row per lane), one 32-weight group per step, its
// codes one vec4<u32> (a 16-byte load: a rasteriser's per-lane gathers cost per load, not per
// byte, so this reads 4x the bytes per gather of the one-word-per-step kernel), WG/TPR rows
// per workgroup. Prelude: gemv_common.wgsl.

@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;  // LQ4 words of W[n][k], 4 per group

// Word `i` of `w` (the scale sections are not 16-byte aligned).
fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// dot(x[8j .. 8j + 8], codes of word v): word j of a group holds elements 8j .. 8j + 7.
fn dot8(v: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    return dot(nib(v), xa) + dot(nib(v >> 16u), xb);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let at = slot(wid, nwg, lid);
    let groups = p.k / 32u;

    var acc_q = 0.0;  // sum_g sc_g * dot(x_g, q_g)
    var acc_m = 0.0;  // sum_g mn_g * sum(x_g)
    if (at.row < p.n) {
        let gbase = at.row * groups;
        let xbase = at.mi * (p.k / 4u);
        for (var gi = at.lane; gi < groups; gi += TPR) {
            let q = w[gbase + gi];
            let sc = group_scales(p.sm_off, gbase + gi);
            let xb = xbase + 8u * gi;
            let x0 = x[xb];
            let x1 = x[xb + 1u];
            let x2 = x[xb + 2u];
            let x3 = x[xb + 3u];
            let x4 = x[xb + 4u];
            let x5 = x[xb + 5u];
            let x6 = x[xb + 6u];
            let x7 = x[xb + 7u];
            let d = dot8(q.x, x0, x1) + dot8(q.y, x2, x3) + dot8(q.z, x4, x5) + dot8(q.w, x6, x7);
            let s = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
            acc_q += sc.x * d;
            acc_m += sc.y * (s.x + s.y + s.z + s.w);
        }
    }
    let r = row_sum(lid, at.lane, vec2<f32>(acc_q, acc_m));
    if (at.lane == 0u && at.row < p.n) {
        let d = row_scales(p.rows_off, at.row);
        store(p.out_off + at.mi * p.out_stride + at.row, d.x * r.x - d.y * r.y);
    }
}
