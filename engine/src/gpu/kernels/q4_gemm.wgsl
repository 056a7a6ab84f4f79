// 4-bit (LQ4, lq4h) and 8-bit (q8_0) matrix-matrix product for prefill: out[m][n] = sum_k x[m][k] * W[n][k].
// Tiled: each workgroup computes a BM x BN output tile, stepping through K one LQ4 group
// (32 weights) at a time; the X tile and the dequantized W tile are staged in workgroup
// memory and every thread accumulates a TM x TN register tile.
// The workgroup shape (BN/TN, BM/TM) is fixed by the register tile, so it is a `const`
// here; the host takes the tile from `q4_gemm.rs::TILE`, which a test checks against this file.

const BM: u32 = 32u;  // activation rows per tile
const BN: u32 = 32u;  // output features per tile
const TM: u32 = 4u;   // rows per thread
const TN: u32 = 4u;   // features per thread

struct Params {
    m: u32,          // activation rows
    n: u32,          // output features
    k: u32,          // input features, multiple of 32
    sm_off: u32,     // word offset of the sub-scale/min bytes (or (s, m) words) in `w`
    rows_off: u32,   // word offset of the per-row (d, dmin) pairs in `w`
    out_stride: u32, // elements between rows of `out`
    out_off: u32,    // element offset of out[0][0]
    kind: u32,       // 0: LQ4; 1: lq4h, 2: q8_0 (one f16 (s, m) word per group at sm_off, no row section)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;        // LQ4 words of W[n][k]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;  // [m][k/4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [m][out_stride]

var<workgroup> xs: array<vec4<f32>, 256>;  // [32 k][BM/4]: rows 4r..4r+3 at k
var<workgroup> ws: array<vec4<f32>, 256>;  // [32 k][BN/4]: features 4c..4c+3 at k

@compute @workgroup_size(8, 8)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n0 = wid.x * BN;
    let m0 = wid.y * BM;
    let groups = p.k / 32u;
    let k4 = p.k / 4u;
    var acc: array<vec4<f32>, 4>;  // acc[i][j]: row m0 + lid.y*TM + i, feature n0 + lid.x*TN + j
    for (var i = 0u; i < TM; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    // Loader roles: 64 threads, 2 per tile row, each loading 16 consecutive k.
    let r = li / 2u;
    let h = li % 2u;
    for (var g = 0u; g < groups; g++) {
        // 1. X tile: row m0 + r, k in [32g + 16h, +16).
        let mrow = m0 + r;
        for (var v = 0u; v < 4u; v++) {
            var val = vec4<f32>(0.0);
            if (mrow < p.m) {
                val = x[mrow * k4 + 8u * g + 4u * h + v];
            }
            let kk = 16u * h + 4u * v;
            let slot = r / 4u;
            let lane = r % 4u;
            xs[(kk + 0u) * 8u + slot][lane] = val.x;
            xs[(kk + 1u) * 8u + slot][lane] = val.y;
            xs[(kk + 2u) * 8u + slot][lane] = val.z;
            xs[(kk + 3u) * 8u + slot][lane] = val.w;
        }
        // 2. W tile: feature n0 + r, words 2h and 2h+1 of group g, dequantized.
        let nrow = n0 + r;
        var s = 0.0;
        var mm = 0.0;
        if (nrow < p.n && p.kind != 0u) {
            let sm = unpack2x16float(w[p.sm_off + nrow * groups + g]);
            s = sm.x;
            mm = sm.y;
        } else if (nrow < p.n) {
            let b = 2u * (nrow * groups + g);
            let smw = w[p.sm_off + b / 4u] >> (8u * (b % 4u));
            s = bitcast<f32>(w[p.rows_off + 2u * nrow]) * f32(smw & 0xFFu);
            mm = bitcast<f32>(w[p.rows_off + 2u * nrow + 1u]) * f32((smw >> 8u) & 0xFFu);
        }
        if (p.kind == 2u) {
            // q8_0: 8 words per group, this thread's 4 (16 signed codes).
            for (var j = 4u * h; j < 4u * h + 4u; j++) {
                var word = 0u;
                if (nrow < p.n) {
                    word = w[nrow * (p.k / 4u) + 8u * g + j];
                }
                for (var c = 0u; c < 4u; c++) {
                    let q = f32(bitcast<i32>(word << (24u - 8u * c)) >> 24u);
                    ws[(4u * j + c) * 8u + r / 4u][r % 4u] = s * q - mm;
                }
            }
        } else {
            for (var j = 2u * h; j < 2u * h + 2u; j++) {
                var word = 0u;
                if (nrow < p.n) {
                    word = w[nrow * (p.k / 8u) + 4u * g + j];
                }
                for (var c = 0u; c < 8u; c++) {
                    let q = f32((word >> (4u * c)) & 15u);
                    ws[(8u * j + c) * 8u + r / 4u][r % 4u] = s * q - mm;
                }
            }
        }
        workgroupBarrier();
        // 3. Register-tile multiply over the 32 k of this group.
        for (var kk = 0u; kk < 32u; kk++) {
            let a = xs[kk * 8u + lid.y];
            let bv = ws[kk * 8u + lid.x];
            acc[0] += a.x * bv;
            acc[1] += a.y * bv;
            acc[2] += a.z * bv;
            acc[3] += a.w * bv;
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < TM; i++) {
        let row = m0 + lid.y * TM + i;
        if (row < p.m) {
            for (var j = 0u; j < TN; j++) {
                let f = n0 + lid.x * TN + j;
                if (f < p.n) {
                    out[p.out_off + row * p.out_stride + f] = acc[i][j];
                }
            }
        }
    }
}
