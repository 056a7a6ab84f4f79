// Flash-decoding attention, pass 1 of 2 (pass 2: attention_merge.wgsl), for head_dim a
// multiple of 4 (every published model; attention_split.wgsl serves the rest). The keys are
// split into ranges of p.split keys; one workgroup takes one (KV head, range, query token) and
// serves the G query heads of that KV head's group, so each key and value row is read once per
// group. It writes the range's partial softmax state per query head: the running max m, the
// sum l of exp(score - m) and the unnormalised output acc = sum_j exp(score_j - m) v_j.
//
// Built for memory-level parallelism: the keys are visited in tiles of WG, where
//   1. invocation i scores key i of the tile against the G query rows, reading its key row
//      as D4 independent loads of 4 values (the loop has a constant trip count, so the compiler
//      issues them together);
//   2. the tile's max per head comes from a tree in workgroup memory; each invocation keeps
//      the running max, its rescaling and its own accumulators in registers;
//   3. for P V, invocation (r, l) = (lid / D4, lid % D4) owns dims 4l..4l+3 of the value rows
//      r, r + R, ... (R = WG / D4 rows at once, consecutive lanes on consecutive 16 bytes of a
//      row), four rows per step;
// and the R partial outputs are summed once at the end.
// Preludes: attention_params.wgsl (the uniform parameters, binding 0) and kv4_f32.wgsl or
// kv4_f16.wgsl (bindings 2 and 3, the caches, read 4 values at a time through key4() and
// val4(): 16 bytes a load from an f32 cache, 8 from an f16 one).

override WG: u32 = 128u;  // invocations = keys per tile; power of two, 8 <= WG <= 256, G * WG <= 1024
override G: u32 = 4u;     // query heads per KV head (heads / kv_heads), <= 8
override D4: u32 = 32u;   // head_dim / 4; G * D4 <= 256, D4 <= WG

@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;          // [tokens][heads][D4]
// bindings 2, 3: the caches kc, vc, [ctx][kv_heads][D4] (the kv4 prelude)
@group(0) @binding(4) var<storage, read_write> ml: array<vec2<f32>>;    // [tokens][heads][n_splits] (m, l)
@group(0) @binding(5) var<storage, read_write> acc_out: array<vec4<f32>>; // [tokens][heads][n_splits][D4]

// Workgroup memory (14,368 bytes at most).
var<workgroup> qs: array<vec4<f32>, 256>;  // [G][D4], the group's query rows, scaled
var<workgroup> ps: array<f32, 1024>;       // [G][WG], the tile's probabilities
var<workgroup> red: array<f32, 512>;       // [G][WG / 2], the max tree
var<workgroup> accs: array<vec4<f32>, 256>; // [G][D4], the partial outputs summed over r
var<workgroup> ls: array<f32, 8>;          // [G], the probability sums summed over r

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wid.x;
    let sp = wid.y;
    let t = wid.z;
    let stride = p.kv_heads * D4;  // vec4s between consecutive key rows
    let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
    let j0 = sp * p.split;
    let j1 = min(j0 + p.split, n_keys);
    let h0 = kvh * G;  // first query head of the group
    let half = WG / 2u;
    let rr = WG / D4;  // value rows at once
    let r = lid / D4;
    let l = lid % D4;
    for (var i = lid; i < G * D4; i += WG) {
        qs[i] = q[(t * p.heads + h0) * D4 + i] * p.scale;
    }
    if (lid < G) {
        ls[lid] = 0.0;
    }
    // Per invocation, in registers: the running max per head (the same in every invocation),
    // and (r, l)'s share of the outputs and of the probability sums.
    var m: array<f32, 8>;
    var acc: array<vec4<f32>, 8>;
    var lsum: array<f32, 8>;
    for (var g = 0u; g < G; g++) {
        m[g] = -3.0e38;
        acc[g] = vec4<f32>(0.0);
        lsum[g] = 0.0;
    }
    workgroupBarrier();
    // j0, j1 are uniform over the workgroup, so every barrier below is reached by all.
    for (var c0 = j0; c0 < j1; c0 += WG) {
        let n_tile = min(WG, j1 - c0);
        // 1. Scores of key c0 + lid (the last valid key stands in past the tile, masked below).
        let kb = (c0 + min(lid, n_tile - 1u)) * stride + kvh * D4;
        var s: array<f32, 8>;
        for (var g = 0u; g < G; g++) {
            s[g] = 0.0;
        }
        for (var i = 0u; i < D4; i++) {
            let kv = key4(kb + i);
            for (var g = 0u; g < G; g++) {
                s[g] += dot(qs[g * D4 + i], kv);
            }
        }
        for (var g = 0u; g < G; g++) {
            s[g] = select(-3.0e38, s[g], lid < n_tile);
        }
        // 2. The tile's max per head: a tree over [G][WG / 2].
        if (lid < half) {
            for (var g = 0u; g < G; g++) {
                red[g * half + lid] = s[g];
            }
        }
        workgroupBarrier();
        if (lid >= half) {
            for (var g = 0u; g < G; g++) {
                red[g * half + lid - half] = max(red[g * half + lid - half], s[g]);
            }
        }
        for (var w = half / 2u; w > 0u; w = w / 2u) {
            workgroupBarrier();
            for (var it = lid; it < G * w; it += WG) {
                let g = it / w;
                let i = g * half + it % w;
                red[i] = max(red[i], red[i + w]);
            }
        }
        workgroupBarrier();
        // 3. New running max, rescaling of the state, this key's probabilities.
        var corr: array<f32, 8>;
        for (var g = 0u; g < G; g++) {
            let mx = max(m[g], red[g * half]);
            corr[g] = exp(m[g] - mx);
            m[g] = mx;
            ps[g * WG + lid] = exp(s[g] - mx);  // 0 past the tile
            acc[g] = acc[g] * corr[g];
            lsum[g] = lsum[g] * corr[g];
        }
        workgroupBarrier();
        // 4. P V: (r, l) takes value rows r, r + R, ... of the tile, four per step (a row past
        //    the tile reads the tile's last row with probability 0).
        if (r < rr) {
            let last = n_tile - 1u;
            for (var jj = r; jj < n_tile; jj += 4u * rr) {
                let ja = jj;
                let jb = min(jj + rr, last);
                let jc = min(jj + 2u * rr, last);
                let jd = min(jj + 3u * rr, last);
                let base = c0 * stride + kvh * D4 + l;
                let va = val4(base + ja * stride);
                let vb = val4(base + jb * stride);
                let vcc = val4(base + jc * stride);
                let vd = val4(base + jd * stride);
                let fb = f32(jj + rr <= last);
                let fc = f32(jj + 2u * rr <= last);
                let fd = f32(jj + 3u * rr <= last);
                for (var g = 0u; g < G; g++) {
                    let pa = ps[g * WG + ja];
                    let pb = ps[g * WG + jb] * fb;
                    let pc = ps[g * WG + jc] * fc;
                    let pd = ps[g * WG + jd] * fd;
                    acc[g] += pa * va + pb * vb + pc * vcc + pd * vd;
                    lsum[g] += pa + pb + pc + pd;
                }
            }
        }
        workgroupBarrier();
    }
    // 5. The R partial outputs summed in workgroup memory, one r at a time.
    for (var rs = 0u; rs < rr; rs++) {
        if (r == rs) {
            for (var g = 0u; g < G; g++) {
                let i = g * D4 + l;
                accs[i] = select(accs[i] + acc[g], acc[g], rs == 0u);
                if (l == 0u) {
                    ls[g] += lsum[g];
                }
            }
        }
        workgroupBarrier();
    }
    // 6. The range's partial state per query head (an empty range: m = -3e38, l = 0, acc = 0).
    for (var g = 0u; g < G; g++) {
        if (lid == g) {  // m[g] with g constant: no private array indexed at run time
            ml[(t * p.heads + h0 + g) * p.n_splits + sp] = vec2<f32>(m[g], ls[g]);
        }
    }
    for (var i = lid; i < G * D4; i += WG) {
        let g = i / D4;
        let slot = (t * p.heads + h0 + g) * p.n_splits + sp;
        acc_out[slot * D4 + i - g * D4] = accs[i];
    }
}
