// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (p.kind = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// Prelude: gemv_common.wgsl (tuning constants, parameters, shared bindings, the row reduction).
// TPR threads cooperate on one row (strided over words), WG/TPR rows per workgroup.
// CPU rasterisers (lavapipe, SwiftShader) run best at TPR = 1 (one row per lane; see
// `cargo bench --bench gemv`), GPUs want TPR = 32 for coalesced loads.

@group(0) @binding(1) var<storage, read> w: array<u32>;        // LQ4 words of W[n][k]

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

    var acc_q = 0.0;  // sum_g sc_g * dot(x_g, q_g)
    var acc_m = 0.0;  // sum_g mn_g * sum(x_g)
    if (at.row < p.n) {
        let qbase = at.row * (p.k / 8u);
        let xbase = at.mi * (p.k / 4u);
        // Lane `lane` takes words lane, lane + TPR, ...: consecutive lanes read consecutive
        // words (coalesced on GPUs, contiguous vector loads on CPU rasterisers).
        for (var wi = at.lane; wi < p.k / 8u; wi += TPR) {
            let v = w[qbase + wi];
            let sc = group_scales(at.row * groups + wi / 4u);
            let x0 = x[xbase + 2u * wi];
            let x1 = x[xbase + 2u * wi + 1u];
            let s = x0 + x1;
            acc_q += sc.x * (dot(nib(v), x0) + dot(nib(v >> 16u), x1));
            acc_m += sc.y * (s.x + s.y + s.z + s.w);
        }
    }
    let r = row_sum(lid, at.lane, vec2<f32>(acc_q, acc_m));
    if (at.lane == 0u && at.row < p.n) {
        let d = row_scales(at.row);
        out[p.out_off + at.mi * p.out_stride + at.row] = d.x * r.x - d.y * r.y;
    }
}
