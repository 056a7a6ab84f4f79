// f32 matrix-vector product for decode: out[m][n] = sum_k x[m][k] * W[n][k], W row-major f32.
// TPR threads cooperate on one row, strided over vec4 columns (consecutive lanes on
// consecutive vec4s); WG/TPR rows per workgroup; activation rows along z.

override WG: u32 = 64u;   // invocations per workgroup, power of two, <= 256
override TPR: u32 = 8u;   // threads per output row, power of two, <= WG

struct Params {
    m: u32,          // activation rows
    n: u32,          // output features (rows of W)
    k: u32,          // input features, multiple of 4
    out_stride: u32, // elements between rows of `out`
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;  // [n][k/4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;  // [m][k/4]
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // [m][out_stride]

var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = (wid.x + wid.y * nwg.x) * (WG / TPR) + lid / TPR;
    let lane = lid % TPR;
    let mi = wid.z;
    let k4 = p.k / 4u;
    var acc = 0.0;
    if (row < p.n) {
        for (var i = lane; i < k4; i += TPR) {
            acc += dot(w[row * k4 + i], x[mi * k4 + i]);
        }
    }
    part[lid] = acc;
    for (var s = TPR / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lane < s) {
            part[lid] += part[lid + s];
        }
    }
    if (lane == 0u && row < p.n) {
        out[mi * p.out_stride + row] = part[lid];
    }
}
