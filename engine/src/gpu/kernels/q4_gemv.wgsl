// 4-bit (LQ4 or lq4h; q8_0 has q8_gemv.wgsl) matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k].
// Layouts and dequantization: engine/src/quant.rs. Per group g of row n:
//   sum_i x_i * (d*sc*q_i - dmin*mn) = d*sc * dot(x, q) - dmin*mn * sum(x)
// so d and dmin factor out of the row sum and each group costs one dot and one sum. For lq4h
// (p.kind = 1) a group's (sc, mn) is its f16 (s, m) pair and d = dmin = 1.
// TPR threads cooperate on one row (strided over words), WG/TPR rows per workgroup.
// CPU rasterisers (lavapipe, SwiftShader) run best at TPR = 1 (one row per lane; see
// `cargo bench --bench gemv`), GPUs want TPR = 32 for coalesced loads.

override WG: u32 = 64u;   // invocations per workgroup, power of two, <= 256
override TPR: u32 = 8u;   // threads per output row, power of two, <= WG

struct Params {
    m: u32,          // activation rows
    n: u32,          // output features (rows of W)
    k: u32,          // input features (cols of W), multiple of 32
    sm_off: u32,     // word offset of the sub-scale/min bytes in `w`
    rows_off: u32,   // word offset of the per-row (d, dmin) f32 pairs in `w`
    out_stride: u32, // elements between consecutive rows of `out`
    out_off: u32,    // element offset of out[0][0]
    kind: u32,       // 0: LQ4; 1: lq4h, 2: q8_0 (one f16 (s, m) word per group at sm_off, no row section)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;        // LQ4 words of W[n][k]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;  // [m][k/4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [m][out_stride]

var<workgroup> part: array<vec2<f32>, 256>;  // per-thread (scaled dot, scaled sum) partials

fn nib(v: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(v, v >> 4u, v >> 8u, v >> 12u) & vec4<u32>(15u));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let rows_per_wg = WG / TPR;
    let wg_linear = wid.x + wid.y * nwg.x;
    let row = wg_linear * rows_per_wg + lid / TPR;
    let lane = lid % TPR;
    let mi = wid.z;
    let groups = p.k / 32u;

    var acc_q = 0.0;  // sum_g sc_g * dot(x_g, q_g)
    var acc_m = 0.0;  // sum_g mn_g * sum(x_g)
    if (row < p.n) {
        let qbase = row * (p.k / 8u);
        let xbase = mi * (p.k / 4u);
        // Lane `lane` takes words lane, lane + TPR, ...: consecutive lanes read consecutive
        // words (coalesced on GPUs, contiguous vector loads on CPU rasterisers).
        for (var wi = lane; wi < p.k / 8u; wi += TPR) {
            let word = w[qbase + wi];
            var sc: vec2<f32>;
            if (p.kind != 0u) {
                sc = unpack2x16float(w[p.sm_off + row * groups + wi / 4u]);
            } else {
                let b = 2u * (row * groups + wi / 4u);
                let smw = w[p.sm_off + b / 4u] >> (8u * (b % 4u));
                sc = vec2<f32>(f32(smw & 0xFFu), f32((smw >> 8u) & 0xFFu));
            }
            let x0 = x[xbase + 2u * wi];
            let x1 = x[xbase + 2u * wi + 1u];
            let s = x0 + x1;
            acc_q += sc.x * (dot(nib(word), x0) + dot(nib(word >> 16u), x1));
            acc_m += sc.y * (s.x + s.y + s.z + s.w);
        }
    }
    part[lid] = vec2<f32>(acc_q, acc_m);
    for (var s = TPR / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lane < s) {
            part[lid] += part[lid + s];
        }
    }
    if (lane == 0u && row < p.n) {
        var d = 1.0;
        var dmin = 1.0;
        if (p.kind == 0u) {
            d = bitcast<f32>(w[p.rows_off + 2u * row]);
            dmin = bitcast<f32>(w[p.rows_off + 2u * row + 1u]);
        }
        let r = part[lid];
        out[p.out_off + mi * p.out_stride + row] = d * r.x - dmin * r.y;
    }
}
