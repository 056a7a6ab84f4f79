// Flash-decoding attention, pass 2 of 2: merges the key ranges' partial softmax states written
// by attention_split.wgsl. For query head row r = t * heads + h with ranges s:
//   M = max_s m_s,  L = sum_s l_s exp(m_s - M),  out[r][d] = sum_s acc_s[d] exp(m_s - M) / L.
// One workgroup per row, threads over the head's dims.

override WG: u32 = 64u;  // invocations per workgroup

struct Params {
    rows: u32,      // tokens * heads
    head_dim: u32,
    n_splits: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ml: array<vec2<f32>>;     // [rows][n_splits] (m, l)
@group(0) @binding(2) var<storage, read> acc: array<f32>;          // [rows][n_splits][head_dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // [rows][head_dim]

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) {
        return;
    }
    let base = r * p.n_splits;
    var mx = -3.0e38;
    for (var s = 0u; s < p.n_splits; s++) {
        mx = max(mx, ml[base + s].x);
    }
    var total = 0.0;
    for (var s = 0u; s < p.n_splits; s++) {
        let e = ml[base + s];
        total += e.y * exp(e.x - mx);
    }
    let inv = 1.0 / total;
    for (var dd = lid; dd < p.head_dim; dd += WG) {
        var sum = 0.0;
        for (var s = 0u; s < p.n_splits; s++) {
            sum += acc[(base + s) * p.head_dim + dd] * exp(ml[base + s].x - mx);
        }
        out[r * p.head_dim + dd] = sum * inv;
    }
}
