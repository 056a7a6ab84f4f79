// Flash-decoding attention, pass 1 of 2 (pass 2: attention_merge.wgsl), for a few query tokens
// over a long cache. The keys are split into ranges of p.split keys; one workgroup takes one
// (KV head, range, query token) and serves every query head of that KV head's group, so each
// key and value row is read once per group, not once per query head, and a long context
// spreads over many workgroups instead of one per head. It writes the range's partial softmax
// state per query head: the running max m, the sum l of exp(score - m), and the unnormalised
// output acc = sum_j exp(score_j - m) v_j; the merge rescales the ranges to a common max.
//
// Keys are visited in tiles of WG: the tile's key rows are read coalesced into workgroup memory
// in sub-tiles and scored there against the group's G query rows, the tile's max and sum per
// head come from G threads, and the value rows are read coalesced (thread lid owns output dims
// lid, lid + WG, ...).
// Preludes: attention_params.wgsl (the uniform parameters, binding 0) and kv_f32.wgsl or
// kv_f16.wgsl (bindings 2 and 3, the caches, read through key() and val()).

override WG: u32 = 64u;  // invocations per workgroup; G * WG <= 512, G * (head_dim + 1) <= 1032,
                         // head_dim <= 4 * WG
override G: u32 = 1u;    // query heads per KV head (heads / kv_heads), <= 8

@group(0) @binding(1) var<storage, read> q: array<f32>;             // [tokens][heads][head_dim]
// bindings 2, 3: the caches kc, vc, [ctx][kv_heads][head_dim] (the kv prelude)
@group(0) @binding(4) var<storage, read_write> ml: array<vec2<f32>>; // [tokens][heads][n_splits] (m, l)
@group(0) @binding(5) var<storage, read_write> acc_out: array<f32>;  // [tokens][heads][n_splits][head_dim]

// Workgroup memory (16,000 bytes): the state lives here, not in per-thread arrays, so no
// thread indexes a private array at run time (which GPU compilers spill to memory).
var<workgroup> qs: array<f32, 1032>;   // [G][head_dim + 1], the group's query rows
var<workgroup> kt: array<f32, 1400>;   // [head_dim][tk + 1], a sub-tile of keys, transposed
var<workgroup> ps: array<f32, 512>;    // [G][WG], the tile's scores, then probabilities
var<workgroup> accs: array<f32, 1032>; // [G][head_dim], the running unnormalised outputs
var<workgroup> wm: array<f32, 8>;      // [G], the running max
var<workgroup> wl: array<f32, 8>;      // [G], the running sum of probabilities
var<workgroup> wcorr: array<f32, 8>;   // [G], this tile's rescaling of the running state

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wid.x;
    let sp = wid.y;
    let t = wid.z;
    let d = p.head_dim;
    let gd = G * d;
    let kv_stride = p.kv_heads * d;
    let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
    let j0 = sp * p.split;
    let j1 = min(j0 + p.split, n_keys);
    let h0 = kvh * G;  // first query head of the group
    for (var i = lid; i < gd; i += WG) {
        let g = i / d;
        qs[i + g] = q[(t * p.heads + h0) * d + i];
        accs[i] = 0.0;
    }
    if (lid < G) {
        wm[lid] = -3.0e38;
        wl[lid] = 0.0;
    }
    // Keys per sub-tile: as many rows as kt holds, padded by one against bank conflicts.
    let tk = min(WG, 1400u / d - 1u);
    workgroupBarrier();
    // j1 and j0 are uniform over the workgroup, so every barrier below is reached by all.
    for (var c0 = j0; c0 < j1; c0 += WG) {
        let n_tile = min(WG, j1 - c0);
        // 1. Scores of the tile's keys against the G query rows, in sub-tiles of tk keys:
        //    each sub-tile is read coalesced (consecutive lanes, consecutive dims of a key
        //    row) into kt transposed, then item (key jj, head g) is one dot product there.
        for (var s0 = 0u; s0 < n_tile; s0 += tk) {
            let n_sub = min(tk, n_tile - s0);
            for (var idx = lid; idx < n_sub * d; idx += WG) {
                let jj = idx / d;
                let i = idx - jj * d;
                kt[i * (tk + 1u) + jj] = key((c0 + s0 + jj) * kv_stride + kvh * d + i);
            }
            workgroupBarrier();
            for (var it = lid; it < tk * G; it += WG) {
                let jj = it % tk;
                let g = it / tk;
                if (jj < n_sub) {
                    var dotv = 0.0;
                    for (var i = 0u; i < d; i++) {
                        dotv += qs[g * (d + 1u) + i] * kt[i * (tk + 1u) + jj];
                    }
                    ps[g * WG + s0 + jj] = dotv * p.scale;
                }
            }
            workgroupBarrier();
        }
        // 2. Thread g: the tile's max of head g, the new running max and the rescaling.
        if (lid < G) {
            var mx = wm[lid];
            for (var jj = 0u; jj < n_tile; jj++) {
                mx = max(mx, ps[lid * WG + jj]);
            }
            wcorr[lid] = exp(wm[lid] - mx);
            wm[lid] = mx;
        }
        workgroupBarrier();
        // 3. Probabilities against the new max (zero past the tile's keys).
        for (var g = 0u; g < G; g++) {
            let e = exp(ps[g * WG + lid] - wm[g]);
            ps[g * WG + lid] = select(0.0, e, lid < n_tile);
        }
        workgroupBarrier();
        // 4. Thread g: the running sum; every thread: its outputs o = (g, dim) rescaled plus
        //    the tile's P V, value rows read coalesced (consecutive lanes, consecutive dims).
        if (lid < G) {
            var sum = 0.0;
            for (var jj = 0u; jj < n_tile; jj++) {
                sum += ps[lid * WG + jj];
            }
            wl[lid] = wl[lid] * wcorr[lid] + sum;
        }
        for (var o = lid; o < gd; o += WG) {
            let g = o / d;
            let vb = c0 * kv_stride + kvh * d + o - g * d;
            var sum = 0.0;
            for (var jj = 0u; jj < n_tile; jj++) {
                sum += ps[g * WG + jj] * val(vb + jj * kv_stride);
            }
            accs[o] = accs[o] * wcorr[g] + sum;
        }
        workgroupBarrier();
    }
    // 5. The range's partial state per query head (an empty range: m = -3e38, l = 0, acc = 0).
    if (lid < G) {
        ml[(t * p.heads + h0 + lid) * p.n_splits + sp] = vec2<f32>(wm[lid], wl[lid]);
    }
    for (var o = lid; o < gd; o += WG) {
        let g = o / d;
        let slot = (t * p.heads + h0 + g) * p.n_splits + sp;
        acc_out[slot * d + o - g * d] = accs[o];
    }
}
