// Tiled (flash) attention for prefill and encoders on GPUs: one workgroup takes TQ query
// tokens of one KV head with all G query heads of its group, R = TQ * G query rows, and walks
// the keys in tiles of TK. Each tile's key rows, then its value rows, are read once, coalesced,
// into workgroup memory and used there by all R rows, so a key is read from the cache once per
// R rows (the one-pass attention.wgsl reads it once per query head and token). An online
// softmax per row (running max m and sum l, the outputs rescaled by exp(m_old - m_new)) keeps
// the context unbounded by workgroup memory.
//
// Per tile, four steps between barriers: (1) the tile's key rows into kv; (2) the R x TK
// scores, one (row, key) a thread at a time; (3) each row's max, probabilities and sum, one row
// a thread, while the tile's value rows replace the keys in kv; (4) the outputs, one (row, dim)
// a thread at a time, rescaled and summed over the tile. Rows of tokens past the last, and keys
// past a row's causal limit, count as probability 0.
//
// The state lives in workgroup memory (no thread indexes a private array at run time, which
// GPU compilers spill to memory); the key tile's rows are head_dim + 1 apart so the threads of
// step 2, which read one column of several rows, meet different banks.
//
// Preludes: attention_params.wgsl (the uniform parameters, binding 0) and kv_f32.wgsl or
// kv_f16.wgsl (bindings 2 and 3, the caches, read through key() and val()). attention.rs picks
// TQ and TK so that R <= 64, R * head_dim <= 1024, TK * (head_dim + 1) <= 1024 and
// R * TK <= 256 (14,080 bytes of workgroup memory).

override WG: u32 = 64u;  // invocations per workgroup
override G: u32 = 1u;    // query heads per KV head (heads / kv_heads)
override TQ: u32 = 1u;   // query tokens per workgroup
override TK: u32 = 8u;   // keys per tile

@group(0) @binding(1) var<storage, read> q: array<f32>;          // [tokens][heads][head_dim]
// bindings 2, 3: the caches kc, vc, [ctx][kv_heads][head_dim] (the kv prelude)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // [tokens][heads][head_dim]

var<workgroup> qs: array<f32, 1024>;   // [R][head_dim], the rows' queries
var<workgroup> accs: array<f32, 1024>; // [R][head_dim], the rows' unnormalised outputs
var<workgroup> kv: array<f32, 1024>;   // [TK][head_dim + 1], the tile's keys, then its values
var<workgroup> ps: array<f32, 256>;    // [R][TK], the tile's scores, then probabilities
var<workgroup> ms: array<f32, 64>;     // [R], running max
var<workgroup> ls: array<f32, 64>;     // [R], running sum of exp(score - m)
var<workgroup> cs: array<f32, 64>;     // [R], this tile's rescaling of the outputs

const NEG: f32 = -3.0e38;

// The cache rows of keys (or values) k0 .. k0 + tl of KV head kvh into kv, coalesced: thread
// lid loads values lid, lid + WG, ... of the tile.
fn load_rows(lid: u32, kvh: u32, k0: u32, tl: u32, values: bool) {
    let d = p.head_dim;
    for (var e = lid; e < tl * d; e += WG) {
        let j = e / d;
        let at = (k0 + j) * p.kv_heads * d + kvh * d + e % d;
        if (values) {
            kv[j * (d + 1u) + e % d] = val(at);
        } else {
            kv[j * (d + 1u) + e % d] = key(at);
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wid.x;
    let t0 = wid.y * TQ;
    let d = p.head_dim;
    let dp = d + 1u;
    let r_all = TQ * G;
    let t_last = min(t0 + TQ, p.tokens) - 1u;
    // Keys the workgroup's last token sees (every row of an encoder sees them all).
    let k_end = select(p.pos0 + p.tokens, p.pos0 + t_last + 1u, p.causal != 0u);

    // The rows' queries (row r: token t0 + r / G, query head kvh * G + r % G), zero outputs.
    for (var e = lid; e < r_all * d; e += WG) {
        let r = e / d;
        let t = t0 + r / G;
        var x = 0.0;
        if (t < p.tokens) {
            x = q[(t * p.heads + kvh * G + r % G) * d + e % d];
        }
        qs[e] = x;
        accs[e] = 0.0;
    }
    for (var r = lid; r < r_all; r += WG) {
        ms[r] = NEG;
        ls[r] = 0.0;
    }
    workgroupBarrier();

    for (var k0 = 0u; k0 < k_end; k0 += TK) {
        let tl = min(TK, k_end - k0);
        // 1. The tile's key rows, coalesced.
        load_rows(lid, kvh, k0, tl, false);
        workgroupBarrier();
        // 2. Scores of (row, key) pairs; NEG where the key is past the row's limit.
        for (var e = lid; e < r_all * TK; e += WG) {
            let r = e / TK;
            let j = e % TK;
            let t = t0 + r / G;
            let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
            var s = NEG;
            if (j < tl && t < p.tokens && k0 + j < n_keys) {
                var dotv = 0.0;
                for (var i = 0u; i < d; i++) {
                    dotv += qs[r * d + i] * kv[j * dp + i];
                }
                s = dotv * p.scale;
            }
            ps[e] = s;
        }
        workgroupBarrier();
        // 3. Each row's new max, its probabilities and sum; the tile's value rows meanwhile.
        for (var r = lid; r < r_all; r += WG) {
            var mx = ms[r];
            for (var j = 0u; j < TK; j++) {
                mx = max(mx, ps[r * TK + j]);
            }
            let c = exp(ms[r] - mx);
            var sum = 0.0;
            for (var j = 0u; j < TK; j++) {
                let s = ps[r * TK + j];
                var e = 0.0;
                if (s > NEG) {
                    e = exp(s - mx);
                }
                ps[r * TK + j] = e;
                sum += e;
            }
            ls[r] = ls[r] * c + sum;
            ms[r] = mx;
            cs[r] = c;
        }
        load_rows(lid, kvh, k0, tl, true);
        workgroupBarrier();
        // 4. Outputs rescaled and summed over the tile's values.
        for (var e = lid; e < r_all * d; e += WG) {
            let r = e / d;
            let i = e % d;
            var a = accs[e] * cs[r];
            for (var j = 0u; j < tl; j++) {
                a += ps[r * TK + j] * kv[j * dp + i];
            }
            accs[e] = a;
        }
        workgroupBarrier();
    }

    for (var e = lid; e < r_all * d; e += WG) {
        let r = e / d;
        let t = t0 + r / G;
        if (t < p.tokens) {
            out[(t * p.heads + kvh * G + r % G) * d + e % d] = accs[e] / ls[r];
        }
    }
}
