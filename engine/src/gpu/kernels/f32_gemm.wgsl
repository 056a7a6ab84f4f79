// f32 matrix-matrix product for prefill: out[m][n] = sum_k x[m][k] * W[n][k], W row-major.
// Same tiling as q4_gemm.wgsl (32 x 32 output tile, 4 x 4 register tile, K in steps of 32),
// with the W tile loaded as plain f32. The workgroup shape is fixed by the register tile.

const BM: u32 = 32u;
const BN: u32 = 32u;
const TM: u32 = 4u;
const TN: u32 = 4u;

struct Params {
    m: u32,          // activation rows
    n: u32,          // output features
    k: u32,          // input features, multiple of 4
    out_stride: u32, // elements between rows of `out`
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;  // [n][k/4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;  // [m][k/4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [m][out_stride]

var<workgroup> xs: array<vec4<f32>, 256>;  // [32 k][BM/4]
var<workgroup> ws: array<vec4<f32>, 256>;  // [32 k][BN/4]

@compute @workgroup_size(8, 8)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let n0 = wid.x * BN;
    let m0 = wid.y * BM;
    let k4 = p.k / 4u;
    var acc: array<vec4<f32>, 4>;
    for (var i = 0u; i < TM; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    let r = li / 2u;   // tile row this thread loads
    let h = li % 2u;   // which 16 of the 32 k
    for (var k0 = 0u; k0 < k4; k0 += 8u) {
        let mrow = m0 + r;
        let nrow = n0 + r;
        for (var v = 0u; v < 4u; v++) {
            let kv = k0 + 4u * h + v;  // vec4 index along k
            var xv = vec4<f32>(0.0);
            var wv = vec4<f32>(0.0);
            if (kv < k4) {
                if (mrow < p.m) {
                    xv = x[mrow * k4 + kv];
                }
                if (nrow < p.n) {
                    wv = w[nrow * k4 + kv];
                }
            }
            let kk = 16u * h + 4u * v;
            for (var c = 0u; c < 4u; c++) {
                xs[(kk + c) * 8u + r / 4u][r % 4u] = xv[c];
                ws[(kk + c) * 8u + r / 4u][r % 4u] = wv[c];
            }
        }
        workgroupBarrier();
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
                    out[row * p.out_stride + f] = acc[i][j];
                }
            }
        }
    }
}
