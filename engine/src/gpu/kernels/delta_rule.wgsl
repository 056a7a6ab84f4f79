// Gated delta rule (Qwen3.5 / Gated DeltaNet linear attention), recurrent form over a chunk of
// tokens. Per value head h with key head kh = h / (v_heads / k_heads) and state S[k_dim][v_dim]:
//   k = l2norm(k_t[kh]),  q = l2norm(q_t[kh]) / sqrt(k_dim)
//   beta = sigmoid(b_t[h]),  decay = exp(-exp(a_log[h]) * softplus(a_t[h] + dt_bias[h]))
//   S *= decay;  delta = (v_t[h] - S^T k) * beta;  S += k delta^T;  o_t[h] = S^T q
// A workgroup owns one head and WG columns of S; each invocation keeps its column in
// registers for the whole chunk, so the state is read and written once per dispatch (once per
// decode step, once per prefill chunk). Keys and queries of each step are shared through
// workgroup memory.

override WG: u32 = 64u;
// Largest key head dimension held in registers (Qwen3.5 uses 128); the host refuses more.
const MAX_DK: u32 = 128u;

struct Params {
    tokens: u32,
    k_heads: u32,
    v_heads: u32,
    k_dim: u32,
    v_dim: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;          // [tokens, 2*k_heads*k_dim + v_heads*v_dim]: q | k | v
@group(0) @binding(2) var<storage, read> a: array<f32>;            // [tokens, v_heads] (in_proj_a output)
@group(0) @binding(3) var<storage, read> b: array<f32>;            // [tokens, v_heads] (in_proj_b output)
@group(0) @binding(4) var<storage, read> a_log: array<f32>;        // [v_heads]
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;      // [v_heads]
@group(0) @binding(6) var<storage, read_write> state: array<f32>;  // [v_heads, k_dim, v_dim]
@group(0) @binding(7) var<storage, read_write> out: array<f32>;    // [tokens, v_heads*v_dim]

var<workgroup> sk: array<f32, MAX_DK>;
var<workgroup> sq: array<f32, MAX_DK>;

fn softplus(x: f32) -> f32 {
    // torch.nn.functional.softplus with beta 1, threshold 20.
    if (x > 20.0) {
        return x;
    }
    return log(1.0 + exp(x));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.y;
    let j = wid.x * WG + lid;
    let dk = p.k_dim;
    let dv = p.v_dim;
    let kh = h / (p.v_heads / p.k_heads);
    let key_dim = p.k_heads * dk;
    let stride = 2u * key_dim + p.v_heads * dv;
    let live = j < dv;
    var s: array<f32, MAX_DK>;
    if (live) {
        for (var i = 0u; i < dk; i++) {
            s[i] = state[(h * dk + i) * dv + j];
        }
    }
    let inv_sqrt_dk = inverseSqrt(f32(dk));
    let neg_a = -exp(a_log[h]);
    for (var t = 0u; t < p.tokens; t++) {
        let row = t * stride;
        for (var i = lid; i < dk; i += WG) {
            sq[i] = qkv[row + kh * dk + i];
            sk[i] = qkv[row + key_dim + kh * dk + i];
        }
        workgroupBarrier();
        var nk = 0.0;
        var nq = 0.0;
        for (var i = 0u; i < dk; i++) {
            nk += sk[i] * sk[i];
            nq += sq[i] * sq[i];
        }
        let rk = inverseSqrt(nk + 1e-6);
        let rq = inverseSqrt(nq + 1e-6) * inv_sqrt_dk;
        let beta = 1.0 / (1.0 + exp(-b[t * p.v_heads + h]));
        let decay = exp(neg_a * softplus(a[t * p.v_heads + h] + dt_bias[h]));
        if (live) {
            let v = qkv[row + 2u * key_dim + h * dv + j];
            var kv = 0.0;
            for (var i = 0u; i < dk; i++) {
                s[i] *= decay;
                kv += s[i] * (sk[i] * rk);
            }
            let delta = (v - kv) * beta;
            var o = 0.0;
            for (var i = 0u; i < dk; i++) {
                s[i] += (sk[i] * rk) * delta;
                o += s[i] * (sq[i] * rq);
            }
            out[t * p.v_heads * dv + h * dv + j] = o;
        }
        workgroupBarrier();
    }
    if (live) {
        for (var i = 0u; i < dk; i++) {
            state[(h * dk + i) * dv + j] = s[i];
        }
    }
}
