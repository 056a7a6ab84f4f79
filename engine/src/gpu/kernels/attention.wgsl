// Grouped-query attention over a preallocated KV cache, causal (decoders: decode with
// tokens = 1 and prefill alike) or bidirectional (encoders). One workgroup per (head, query token). Keys are visited in chunks of WG with
// an online softmax (running max m and sum l, rescaling the accumulator), so the context
// length is unbounded by workgroup memory.

// Preludes: common.wgsl (WG: a power of two, <= 256; head_dim <= 4*WG; the reductions) and
// kv_f32.wgsl or kv_f16.wgsl (bindings 2 and 3, the caches, read through key() and val()).

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,     // position of query 0; query t sees keys 0..=pos0+t
    scale: f32,    // score scale, usually head_dim^-0.5
    causal: u32,   // 1: query t sees keys 0..=pos0+t; 0: every query sees 0..pos0+tokens
    split: u32,    // unused here (attention_split.wgsl's key range)
    n_splits: u32, // unused here
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;          // [tokens][heads][head_dim]
// bindings 2, 3: the caches kc, vc, [ctx][kv_heads][head_dim] (the kv prelude)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // [tokens][heads][head_dim]

var<workgroup> qs: array<f32, 256>;  // the query row
var<workgroup> ps: array<f32, 256>;  // this chunk's scores, then probabilities

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let kvh = h / (p.heads / p.kv_heads);
    let d = p.head_dim;
    let qbase = (t * p.heads + h) * d;
    for (var i = lid; i < d; i += WG) {
        qs[i] = q[qbase + i];
    }
    workgroupBarrier();
    let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
    let kv_stride = p.kv_heads * d;
    var acc: array<f32, 4>;  // output dims lid, lid + WG, lid + 2WG, lid + 3WG
    for (var a = 0u; a < 4u; a++) {
        acc[a] = 0.0;
    }
    var m = -3.0e38;
    var l = 0.0;
    for (var c0 = 0u; c0 < n_keys; c0 += WG) {
        // 1. Score of key c0 + lid.
        let j = c0 + lid;
        var s = -3.0e38;
        if (j < n_keys) {
            let kb = j * kv_stride + kvh * d;
            var dotv = 0.0;
            for (var i = 0u; i < d; i++) {
                dotv += qs[i] * key(kb + i);
            }
            s = dotv * p.scale;
        }
        let cmax = reduce_max(lid, s);
        // 2. Rescale the running state to the new max.
        let m_new = max(m, cmax);
        let corr = exp(m - m_new);
        var e = 0.0;
        if (j < n_keys) {
            e = exp(s - m_new);
        }
        ps[lid] = e;
        let csum = reduce_sum(lid, e);
        l = l * corr + csum;
        m = m_new;
        // 3. Accumulate probabilities times values for this thread's output dims.
        let n_chunk = min(WG, n_keys - c0);
        for (var a = 0u; a < 4u; a++) {
            let dd = lid + a * WG;
            if (dd < d) {
                var sum = acc[a] * corr;
                for (var jj = 0u; jj < n_chunk; jj++) {
                    sum += ps[jj] * val((c0 + jj) * kv_stride + kvh * d + dd);
                }
                acc[a] = sum;
            }
        }
        workgroupBarrier();
    }
    let obase = (t * p.heads + h) * d;
    for (var a = 0u; a < 4u; a++) {
        let dd = lid + a * WG;
        if (dd < d) {
            out[obase + dd] = acc[a] / l;
        }
    }
}
