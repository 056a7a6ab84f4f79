// Flash-decoding attention, pass 2 of 2: merges the key ranges' partial softmax states written
// by attention_decode.wgsl / attention_split.wgsl. For query head row r = t * heads + h with
// ranges s:
//   M = max_s m_s,  L = sum_s l_s exp(m_s - M),  out[r][d] = sum_s acc_s[d] exp(m_s - M) / L.
// One workgroup per row: the range weights exp(m_s - M) / L go to workgroup memory once, then
// each invocation sums its dims over the ranges, four ranges per step (independent loads).
// Prelude: common.wgsl (WG, a power of two, and the reductions).

struct Params {
    rows: u32,      // tokens * heads
    head_dim: u32,
    n_splits: u32,  // <= 1024
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ml: array<vec2<f32>>;     // [rows][n_splits] (m, l)
@group(0) @binding(2) var<storage, read> acc: array<f32>;          // [rows][n_splits][head_dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // [rows][head_dim]

var<workgroup> ws: array<f32, 1024>;  // [n_splits], exp(m_s - M) / L

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = row_index(wid, nwg);
    if (r >= p.rows) {  // uniform per workgroup: the whole group leaves together
        return;
    }
    let n = p.n_splits;
    let base = r * n;
    var mx = -3.0e38;
    for (var s = lid; s < n; s += WG) {
        mx = max(mx, ml[base + s].x);
    }
    mx = reduce_max(lid, mx);
    var total = 0.0;
    for (var s = lid; s < n; s += WG) {
        let e = ml[base + s];
        let w = exp(e.x - mx);
        ws[s] = w;
        total += e.y * w;
    }
    let inv = 1.0 / reduce_sum(lid, total);  // its barriers also publish ws
    let d = p.head_dim;
    for (var dd = lid; dd < d; dd += WG) {
        let a = base * d + dd;
        var sum = 0.0;
        var s = 0u;
        for (; s + 4u <= n; s += 4u) {
            let a0 = acc[a + s * d];
            let a1 = acc[a + (s + 1u) * d];
            let a2 = acc[a + (s + 2u) * d];
            let a3 = acc[a + (s + 3u) * d];
            sum += a0 * ws[s] + a1 * ws[s + 1u] + a2 * ws[s + 2u] + a3 * ws[s + 3u];
        }
        for (; s < n; s++) {
            sum += acc[a + s * d] * ws[s];
        }
        out[r * d + dd] = sum * inv;
    }
}
