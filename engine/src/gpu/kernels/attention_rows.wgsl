// Prefill attention for CPU rasterisers (lavapipe, SwiftShader), head_dim a multiple of 4:
// causal (a decoder's prompt) or bidirectional (an encoder's text), over the KV cache.
//
// attention.wgsl, the GPUs' one-pass kernel, gives each (query head, query token) a workgroup
// whose lanes share one key each and reduce every tile's max and sum through workgroup memory:
// on a rasteriser every barrier switches between the workgroup's SIMD vectors, and every
// lane's load is a scalar load of its own. Here a lane owns RG query heads of one query token
// (all of a KV head's group where its rows fit) and walks the keys in order, keeping its
// query rows, running maxima, sums and accumulators in registers: no workgroup memory, no
// barrier, and each key and value it loads serves RG query rows. A workgroup is TB query
// tokens of one KV head (lane = token * GR + head group, GR = G / RG); its lanes walk the same
// keys, so their loads meet in the cache. The rows are RG * head_dim / 4 named vec4s, not
// arrays (a rasteriser keeps an indexed private array in memory): attention_lanes.rs writes
// the lines marked `//@ r i` once per (row r, vec4 i), `//@ r` once per row and `//@ w` once
// per cache word w of a key's row, with {r}, {i}, {w}, {h} (i's half of its word) and the
// consts filled in.
//
// Preludes: attention_params.wgsl (binding 0, the uniform parameters) and attention_words.wgsl
// (D4, W, bindings 1 q [tokens][heads][D4] vec4s, 2 and 3 the caches kc, vc [ctx][kv_heads][W]
// words, and x4). Bindings here: 4 out [tokens][heads][D4] vec4s.

override G: u32 = 4u;   // query heads per KV head (heads / kv_heads)
override TB: u32 = 8u;  // query tokens per workgroup
const RG: u32 = {RG}u;  // query heads per lane (divides G)

@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(TB * (G / RG))
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let gr = G / RG;
    let kvh = wid.x;
    let t = wid.y * TB + lid / gr;
    if (t >= p.tokens) {
        return;
    }
    let h0 = kvh * G + (lid % gr) * RG;  // this lane's first query head
    let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
    // 1. The query rows, scaled, and their states.
    let qb = (t * p.heads + h0) * D4;
    let q{r}_{i} = q[qb + {r}u * D4 + {i}u] * p.scale;  //@ r i
    var a{r}_{i} = vec4<f32>(0.0);  //@ r i
    var m{r} = -3.0e38;  //@ r
    var l{r} = 0.0;  //@ r
    // 2. The keys in order: each row's score, online softmax and value.
    for (var j = 0u; j < n_keys; j++) {
        let row = (j * p.kv_heads + kvh) * W;
        let k{w} = kc[row + {w}u];  //@ w
        var d{r} = vec4<f32>(0.0);  //@ r
        d{r} += q{r}_{i} * x4(k{w}, {h}u);  //@ r i
        let s{r} = d{r}.x + d{r}.y + d{r}.z + d{r}.w;  //@ r
        let mx{r} = max(m{r}, s{r});  //@ r
        let c{r} = exp(m{r} - mx{r});  //@ r
        let e{r} = exp(s{r} - mx{r});  //@ r
        m{r} = mx{r};  //@ r
        l{r} = l{r} * c{r} + e{r};  //@ r
        let v{w} = vc[row + {w}u];  //@ w
        a{r}_{i} = a{r}_{i} * c{r} + e{r} * x4(v{w}, {h}u);  //@ r i
    }
    // 3. The rows' outputs (key 0 is every query's: l >= 1).
    out[qb + {r}u * D4 + {i}u] = a{r}_{i} / l{r};  //@ r i
}
