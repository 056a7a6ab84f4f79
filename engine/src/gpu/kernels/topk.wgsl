// Top-k selection, one stage: each workgroup takes a chunk of WG*E candidates and writes its
// k best (value, index) pairs, best first, ties to the lower index. The host chains stages
// (each shrinking the candidates by WG*E/k) until one workgroup remains; sampling then reads
// back only k pairs. NaN counts as the lowest value.

override WG: u32 = 256u;  // invocations per workgroup, power of two, <= 256
const E: u32 = 16u;       // candidates held per thread

struct Params {
    n: u32,         // candidates in
    k: u32,         // pairs out per workgroup, <= 64
    indirect: u32,  // 0: the index of vals_in[j] is j; 1: it is idx_in[j] (later stages)
    _p0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> vals_in: array<f32>;         // [n]
@group(0) @binding(2) var<storage, read> idx_in: array<u32>;          // [n] when indirect
@group(0) @binding(3) var<storage, read_write> vals_out: array<f32>;  // [workgroups][k]
@group(0) @binding(4) var<storage, read_write> idx_out: array<u32>;   // [workgroups][k]

const LOWEST: f32 = -0x1.fffffep+127f;  // -f32::MAX, exact (a decimal literal may round past it)
const NONE: u32 = 0xFFFFFFFFu;

var<workgroup> rv: array<f32, 256>;
var<workgroup> ri: array<u32, 256>;

fn better(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    return va > vb || (va == vb && ia < ib);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = wid.x + wid.y * nwg.x;
    let base = wg * WG * E;
    var vals: array<f32, 16>;
    var ids: array<u32, 16>;
    for (var e = 0u; e < E; e++) {
        let j = base + e * WG + lid;
        vals[e] = LOWEST;
        ids[e] = NONE;
        if (j < p.n) {
            var v = vals_in[j];
            if (!(v >= LOWEST)) {  // NaN and -inf
                v = LOWEST;
            }
            vals[e] = v;
            if (p.indirect == 1u) {
                ids[e] = idx_in[j];
            } else {
                ids[e] = j;
            }
        }
    }
    for (var r = 0u; r < p.k; r++) {
        var bv = LOWEST;
        var bi = NONE;
        var be = 0u;
        for (var e = 0u; e < E; e++) {
            if (better(vals[e], ids[e], bv, bi)) {
                bv = vals[e];
                bi = ids[e];
                be = e;
            }
        }
        rv[lid] = bv;
        ri[lid] = bi;
        for (var s = WG / 2u; s > 0u; s = s / 2u) {
            workgroupBarrier();
            if (lid < s && better(rv[lid + s], ri[lid + s], rv[lid], ri[lid])) {
                rv[lid] = rv[lid + s];
                ri[lid] = ri[lid + s];
            }
        }
        workgroupBarrier();
        let win = ri[0];
        if (lid == 0u) {
            vals_out[wg * p.k + r] = rv[0];
            idx_out[wg * p.k + r] = win;
        }
        if (win != NONE && win == bi) {
            vals[be] = LOWEST;
            ids[be] = NONE;
        }
        workgroupBarrier();
    }
}
