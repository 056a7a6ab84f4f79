// Flash-decoding attention, pass 1 of 2 (pass 2: attention_merge.wgsl), for CPU rasterisers
// (lavapipe, SwiftShader), head_dim a multiple of 4. It writes the same partial states as
// attention_decode.wgsl: per (query token, query head, key range) the running max m, the sum
// l of exp(score - m) and acc = sum_j exp(score_j - m) v_j.
//
// A rasteriser runs a workgroup's invocations as the lanes of SIMD vectors: each lane's load
// is a scalar load of its own, a barrier switches between the workgroup's vectors, and a
// private array indexed in a loop lives in memory. attention_decode.wgsl spreads a tile's keys
// over the lanes and reduces the tile's max through workgroup memory (barriers). Here a lane
// is one (query head of a KV head's group, key range): lane = r * G + g, R ranges of G heads
// (G * R lanes, one SIMD vector). A lane walks its range's keys in order and keeps its state
// in registers: no workgroup memory, no barrier. The query row and the accumulators are
// head_dim / 4 named vec4s, not arrays: attention_lanes.rs writes the lines marked `//@ i`
// once per vec4 i of a row, the lines marked `//@ w` once per cache word w of a row, with
// {i}, {w}, {h} (i's half of its word) and the consts filled in.
//
// Preludes: attention_params.wgsl (binding 0, the uniform parameters) and attention_words.wgsl
// (D4, W, bindings 1 q [tokens][heads][D4] vec4s, 2 and 3 the caches kc, vc [ctx][kv_heads][W]
// words, and x4). Bindings here: 4 ml and 5 acc_out as in attention_decode.wgsl.

override G: u32 = 4u;  // query heads per KV head (heads / kv_heads), <= 8
override R: u32 = 1u;  // key ranges per workgroup

@group(0) @binding(4) var<storage, read_write> ml: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> acc_out: array<vec4<f32>>;

@compute @workgroup_size(G * R)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wid.x;
    let sp = wid.y * R + lid / G;  // this lane's key range
    let h = kvh * G + lid % G;     // this lane's query head
    let t = wid.z;
    if (sp >= p.n_splits) {
        return;
    }
    let n_keys = select(p.pos0 + p.tokens, p.pos0 + t + 1u, p.causal != 0u);
    let j0 = sp * p.split;
    let j1 = min(j0 + p.split, n_keys);
    // 1. The query row, scaled, and the state.
    let qb = (t * p.heads + h) * D4;
    let q{i} = q[qb + {i}u] * p.scale;  //@ i
    var a{i} = vec4<f32>(0.0);  //@ i
    var m = -3.0e38;
    var l = 0.0;
    // 2. The range's keys in order: score, online softmax, value.
    for (var j = j0; j < j1; j++) {
        let row = (j * p.kv_heads + kvh) * W;
        let k{w} = kc[row + {w}u];  //@ w
        var d = vec4<f32>(0.0);
        d += q{i} * x4(k{w}, {h}u);  //@ i
        let s = d.x + d.y + d.z + d.w;
        let mx = max(m, s);
        let corr = exp(m - mx);
        let pj = exp(s - mx);
        m = mx;
        l = l * corr + pj;
        let v{w} = vc[row + {w}u];  //@ w
        a{i} = a{i} * corr + pj * x4(v{w}, {h}u);  //@ i
    }
    // 3. The range's partial state (an empty range: m = -3e38, l = 0, acc = 0).
    let slot = (t * p.heads + h) * p.n_splits + sp;
    ml[slot] = vec2<f32>(m, l);
    acc_out[slot * D4 + {i}u] = a{i};  //@ i
}
