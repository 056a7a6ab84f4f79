// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (p.kind = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// Prelude: gemv_common.wgsl (tuning constants, parameters, shared bindings, the row reduction).
// TPR threads cooperate on one row (strided over words), WG/TPR rows per workgroup.
// CPU rasterisers (lavapipe, SwiftShader) run best at TPR = 1 (one row per lane; see
// `cargo bench --bench gemv`), GPUs want TPR = 32 for coalesced loads.

// With GLU, one dispatch computes SwiGLU's silu(x Wg^T) * (x Wu^T): the row slots of a
// workgroup pair up, the even slot on row r of `w` (the gate), the odd one on row r of `w2`
// (the up projection, same shape and layout), and the even slot's lane 0 writes the product.

@group(0) @binding(1) var<storage, read> w: array<u32>;        // LQ4 words of W[n][k] (GLU: the gate)
@group(0) @binding(4) var<storage, read> w2: array<u32>;       // GLU: the up projection; else unused

override U: u32 = 4u;         // steps whose loads are issued before their arithmetic: 1 or 4
override GLU: bool = false;   // SwiGLU of two matrices (WG / TPR even)

var<private> sel: u32;  // GLU: 1 where this slot reads `w2`
var<workgroup> glu: array<f32, 256>;  // GLU: each slot's row value

// Word `i` of this slot's matrix.
fn word(i: u32) -> u32 {
    if (GLU && sel == 1u) {
        return w2[i];
    }
    return w[i];
}

// One word against its 8 activations: (sc * dot, mn * sum).
fn word_dot(v: u32, sc: vec2<f32>, x0: vec4<f32>, x1: vec4<f32>) -> vec2<f32> {
    let s = x0 + x1;
    return vec2<f32>(sc.x * (dot(nib(v), x0) + dot(nib(v >> 16u), x1)), sc.y * (s.x + s.y + s.z + s.w));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    var at = slot(wid, nwg, lid);
    let s = lid / TPR;  // this lane's slot in the workgroup
    if (GLU) {
        sel = s % 2u;
        at.row = (wid.x + wid.y * nwg.x) * (WG / TPR / 2u) + s / 2u;
    }
    let groups = p.k / 32u;
    let nw = p.k / 8u;  // words per row

    var acc = vec2<f32>(0.0);  // (sum_g sc_g * dot(x_g, q_g), sum_g mn_g * sum(x_g))
    if (at.row < p.n) {
        let qbase = at.row * nw;
        let gbase = at.row * groups;
        let xbase = at.mi * (p.k / 4u);
        // Lane `lane` takes words lane, lane + TPR, ...: consecutive lanes read consecutive
        // words (coalesced on GPUs, contiguous vector loads on CPU rasterisers). With U = 4,
        // four steps' loads go out before their arithmetic, so a lane has four weight words in
        // flight instead of one (a GPU's GEMV waits on memory latency, not arithmetic).
        var wi = at.lane;
        if (U == 4u) {
            for (; wi + 3u * TPR < nw; wi += 4u * TPR) {
                let v0 = word(qbase + wi);
                let v1 = word(qbase + wi + TPR);
                let v2 = word(qbase + wi + 2u * TPR);
                let v3 = word(qbase + wi + 3u * TPR);
                let c0 = group_scales(gbase + wi / 4u);
                let c1 = group_scales(gbase + (wi + TPR) / 4u);
                let c2 = group_scales(gbase + (wi + 2u * TPR) / 4u);
                let c3 = group_scales(gbase + (wi + 3u * TPR) / 4u);
                let xa = xbase + 2u * wi;
                let xb = xa + 2u * TPR;
                let xc = xb + 2u * TPR;
                let xd = xc + 2u * TPR;
                acc += word_dot(v0, c0, x[xa], x[xa + 1u]) + word_dot(v1, c1, x[xb], x[xb + 1u])
                    + word_dot(v2, c2, x[xc], x[xc + 1u]) + word_dot(v3, c3, x[xd], x[xd + 1u]);
            }
        }
        for (; wi < nw; wi += TPR) {
            let xa = xbase + 2u * wi;
            acc += word_dot(word(qbase + wi), group_scales(gbase + wi / 4u), x[xa], x[xa + 1u]);
        }
    }
    let r = row_sum(lid, at.lane, acc);
    var v = 0.0;
    if (at.lane == 0u && at.row < p.n) {
        let d = row_scales(at.row);
        v = d.x * r.x - d.y * r.y;
    }
    let o = p.out_off + at.mi * p.out_stride + at.row;
    if (GLU) {
        if (at.lane == 0u) {
            glu[s] = v;
        }
        workgroupBarrier();
        if (at.lane == 0u && sel == 0u && at.row < p.n) {
            store(o, v / (1.0 + exp(-v)) * glu[s + 1u]);
        }
    } else if (at.lane == 0u && at.row < p.n) {
        store(o, v);
    }
}
