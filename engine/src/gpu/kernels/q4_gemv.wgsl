// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (KIND = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// Prelude: gemv_common.wgsl (tuning constants, parameters, shared bindings, the row reduction).
// TPR threads cooperate on one row (strided over words), WG/TPR rows per workgroup.
// CPU rasterisers (lavapipe, SwiftShader) run best at TPR = 1 (one row per lane; see
// `cargo bench --bench gemv`), GPUs want 16 or 32 for coalesced loads (16: measured on an H200).

// With GLU, one dispatch computes SwiGLU's silu(x Wg^T) * (x Wu^T): the row slots of a
// workgroup pair up, the even slot on row r of `w` (the gate), the odd one on row r of `w2`
// (the up projection, same shape and layout), and the even slot's lane 0 writes the product.
//
// With PARTS = 2 or 3, one dispatch multiplies the activations by two or three matrices of one
// width and layout (a layer's q, k and v): `w`, `w2`, `w3` into `out`, `out2`, `out3`, the
// workgroups before p.start1 on `w`'s rows, those before p.start2 on `w2`'s, the rest on `w3`'s.
//
// With NORM the activations are RMSNorm(x) (a layer's input norm): x[i] / rms(x) * (g[i] +
// offset). Each workgroup first sums its activation row's squares; 1/rms factors out of the
// row's sums, and g scales the activations as they are read, so no normalized copy is written.

@group(0) @binding(1) var<storage, read> w: array<u32>;        // 4-bit words of W[n][k] (GLU: the gate)
@group(0) @binding(4) var<storage, read> w2: array<u32>;       // GLU: the up projection; PARTS > 1: the second matrix
@group(0) @binding(5) var<storage, read> g: array<vec4<f32>>;  // NORM: the norm's weight [k/4]
@group(0) @binding(6) var<storage, read> w3: array<u32>;       // PARTS = 3: the third matrix
@group(0) @binding(7) var<storage, read_write> out2: array<f32>;  // PARTS > 1: [m][p.n1]
@group(0) @binding(8) var<storage, read_write> out3: array<f32>;  // PARTS = 3: [m][p.n2]

override U: u32 = 4u;         // steps whose loads are issued before their arithmetic: 1 or 4
override GLU: bool = false;   // SwiGLU of two matrices (WG / TPR even)
override PARTS: u32 = 1u;     // matrices in the dispatch: 1, 2 or 3 (not with GLU or ACC)
override NORM: bool = false;  // the activations pass through RMSNorm first
override NORM_EPS: u32 = 0u;     // NORM: the variance epsilon, as f32 bits
override NORM_OFFSET: u32 = 0u;  // NORM: added to the weight (1.0 for (1 + w) norms), f32 bits

var<private> sel: u32;  // the matrix this slot reads: 0 `w`, 1 `w2`, 2 `w3`
var<workgroup> glu: array<f32, 256>;  // GLU: each slot's row value

// Word `i` of this slot's matrix.
fn word(i: u32) -> u32 {
    if ((GLU || PARTS > 1u) && sel == 1u) {
        return w2[i];
    }
    if (PARTS > 2u && sel == 2u) {
        return w3[i];
    }
    return w[i];
}

// Activations 4j..4j+3 of the row starting at vec4 `xbase`, times the norm's weight with NORM.
fn xin(xbase: u32, j: u32) -> vec4<f32> {
    if (NORM) {
        return x[xbase + j] * (g[j] + vec4<f32>(bitcast<f32>(NORM_OFFSET)));
    }
    return x[xbase + j];
}

// 1/rms of the activation row starting at vec4 `xbase` (NORM), summed over the workgroup;
// every invocation must call it (it holds barriers).
fn inv_rms(lid: u32, xbase: u32) -> f32 {
    var ss = 0.0;
    for (var j = lid; j < p.k / 4u; j += WG) {
        let v = x[xbase + j];
        ss += dot(v, v);
    }
    part[lid] = vec2<f32>(ss, 0.0);
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            part[lid] += part[lid + s];
        }
    }
    workgroupBarrier();
    let inv = inverseSqrt(part[0].x / f32(p.k) + bitcast<f32>(NORM_EPS));
    workgroupBarrier();  // every lane has read part[0] before row_sum writes it
    return inv;
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
    // The matrix this slot works on: its rows and sections.
    var n = p.n;
    var sm_off = p.sm_off;
    var rows_off = p.rows_off;
    if (GLU) {
        sel = s % 2u;
        at.row = (wid.x + wid.y * nwg.x) * (WG / TPR / 2u) + s / 2u;
    }
    if (PARTS > 1u) {
        let wg = wid.x + wid.y * nwg.x;
        if (wg >= p.start2 && PARTS > 2u) {
            sel = 2u;
            at.row = (wg - p.start2) * (WG / TPR) + s;
            n = p.n2;
            sm_off = p.sm_off2;
            rows_off = p.rows_off2;
        } else if (wg >= p.start1) {
            sel = 1u;
            at.row = (wg - p.start1) * (WG / TPR) + s;
            n = p.n1;
            sm_off = p.sm_off1;
            rows_off = p.rows_off1;
        }
    }
    let groups = p.k / 32u;
    let nw = p.k / 8u;  // words per row
    let xbase = at.mi * (p.k / 4u);
    var inv = 1.0;
    if (NORM) {
        inv = inv_rms(lid, xbase);
    }

    var acc = vec2<f32>(0.0);  // (sum_g sc_g * dot(x_g, q_g), sum_g mn_g * sum(x_g))
    if (at.row < n) {
        let qbase = at.row * nw;
        let gbase = at.row * groups;
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
                let c0 = group_scales(sm_off, gbase + wi / 4u);
                let c1 = group_scales(sm_off, gbase + (wi + TPR) / 4u);
                let c2 = group_scales(sm_off, gbase + (wi + 2u * TPR) / 4u);
                let c3 = group_scales(sm_off, gbase + (wi + 3u * TPR) / 4u);
                let ja = 2u * wi;
                let jb = ja + 2u * TPR;
                let jc = jb + 2u * TPR;
                let jd = jc + 2u * TPR;
                acc += word_dot(v0, c0, xin(xbase, ja), xin(xbase, ja + 1u))
                    + word_dot(v1, c1, xin(xbase, jb), xin(xbase, jb + 1u))
                    + word_dot(v2, c2, xin(xbase, jc), xin(xbase, jc + 1u))
                    + word_dot(v3, c3, xin(xbase, jd), xin(xbase, jd + 1u));
            }
        }
        for (; wi < nw; wi += TPR) {
            let j = 2u * wi;
            let c = group_scales(sm_off, gbase + wi / 4u);
            acc += word_dot(word(qbase + wi), c, xin(xbase, j), xin(xbase, j + 1u));
        }
    }
    let r = row_sum(lid, at.lane, acc);
    var v = 0.0;
    if (at.lane == 0u && at.row < n) {
        let d = row_scales(rows_off, at.row);
        v = inv * (d.x * r.x - d.y * r.y);
    }
    let o = p.out_off + at.mi * p.out_stride + at.row;
    if (GLU) {
        if (at.lane == 0u) {
            glu[s] = v;
        }
        workgroupBarrier();
        if (at.lane == 0u && sel == 0u && at.row < n) {
            store(o, v / (1.0 + exp(-v)) * glu[s + 1u]);
        }
    } else if (at.lane == 0u && at.row < n) {
        if (PARTS > 1u && sel == 1u) {
            out2[at.mi * p.n1 + at.row] = v;
        } else if (PARTS > 2u && sel == 2u) {
            out3[at.mi * p.n2 + at.row] = v;
        } else {
            store(o, v);
        }
    }
}
