// Softmax normaliser in one pass, for top-p sampling without reading the logits back:
// each workgroup writes its chunk's (max m_w, sum exp((v - m_w) * inv_temp)); the host
// combines the partials as sum_w s_w * exp((m_w - M) * inv_temp).

override WG: u32 = 256u;  // power of two, <= 256
const E: u32 = 16u;       // elements per thread (same chunking as topk)

struct Params {
    n: u32,
    inv_temp: f32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;            // [n]
@group(0) @binding(2) var<storage, read_write> part: array<f32>;   // [workgroups][2]

const LOWEST: f32 = -0x1.fffffep+127f;  // -f32::MAX, exact

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = wid.x + wid.y * nwg.x;
    let base = wg * WG * E;
    var mx = LOWEST;
    for (var e = 0u; e < E; e++) {
        let j = base + e * WG + lid;
        if (j < p.n && x[j] > mx) {
            mx = x[j];
        }
    }
    red[lid] = mx;
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
    }
    workgroupBarrier();
    mx = red[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var e = 0u; e < E; e++) {
        let j = base + e * WG + lid;
        // LOWEST is a token the sampling filter removed (`logit_filter.wgsl`).
        if (j < p.n && x[j] > LOWEST) {
            sum += exp((x[j] - mx) * p.inv_temp);
        }
    }
    red[lid] = sum;
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] += red[lid + s];
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        part[2u * wg] = mx;
        part[2u * wg + 1u] = red[0];
    }
}
