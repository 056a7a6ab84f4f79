// 8-bit (q8_0) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layout (engine/src/quant.rs, q8_0): row n's K signed codes in words n*K/4.., four per word,
// weight k in bits 8*(k%4); then one word per group g of 32: f16 s (low half), f16 m (high),
// w = s*q - m (m = 0 for GGUF's Q8_0). Per group: s * dot(x, q) - m * sum(x).
// TPR threads cooperate on one row (strided over words), WG/TPR rows per workgroup, as in
// q4_gemv.wgsl; for GPUs (CPU rasterisers take q4_gemv_groups.wgsl with Q8). Prelude:
// gemv_common.wgsl (parameters, shared bindings, the row reduction, `codes`).

@group(0) @binding(1) var<storage, read> w: array<u32>;        // q8_0 words of W[n][k]

// Word `i` of `w`.
fn word(i: u32) -> u32 {
    return w[i];
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let at = slot(wid, nwg, lid);
    let groups = p.k / 32u;

    var acc_q = 0.0;  // sum_g s_g * dot(x_g, q_g)
    var acc_m = 0.0;  // sum_g m_g * sum(x_g)
    if (at.row < p.n) {
        let qbase = at.row * (p.k / 4u);
        let xbase = at.mi * (p.k / 4u);
        for (var wi = at.lane; wi < p.k / 4u; wi += TPR) {
            let sc = unpack2x16float(word(p.sm_off + at.row * groups + wi / 8u));
            let xv = x[xbase + wi];
            acc_q += sc.x * dot(codes(word(qbase + wi)), xv);
            acc_m += sc.y * (xv.x + xv.y + xv.z + xv.w);
        }
    }
    let r = row_sum(lid, at.lane, vec2<f32>(acc_q, acc_m));
    if (at.lane == 0u && at.row < p.n) {
        store(p.out_off + at.mi * p.out_stride + at.row, r.x - r.y);
    }
}
