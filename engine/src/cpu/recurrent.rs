//! The recurrent ops of the Qwen3.5 hybrid: the causal depthwise conv1d + SiLU and the gated
//! delta rule (step by step, and chunked as the reference for long prompts).

use crate::backend::DeltaShape;

/// Plain-Rust reference: `x[tokens][channels]`, `w[channels][kernel]`,
/// `state[kernel-1][channels]` (updated), `out[tokens][channels]`.
pub fn conv1d_silu(
    x: &[f32],
    w: &[f32],
    state: &mut [f32],
    out: &mut [f32],
    tokens: usize,
    channels: usize,
    kernel: usize,
) {
    let mut win = vec![0f32; kernel];
    for c in 0..channels {
        for j in 0..kernel - 1 {
            win[j] = state[j * channels + c];
        }
        for t in 0..tokens {
            win[kernel - 1] = x[t * channels + c];
            let mut acc = 0f32;
            for j in 0..kernel {
                acc += w[c * kernel + j] * win[j];
            }
            out[t * channels + c] = acc / (1.0 + (-acc).exp());
            win.copy_within(1.., 0);
        }
        for j in 0..kernel - 1 {
            state[j * channels + c] = win[j];
        }
    }
}

/// torch's softplus (beta 1, threshold 20).
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// Per-step inputs of head `h` at token `t`: normalized key and (scaled) query, value, decay
/// and beta, exactly as both references use them.
struct Step {
    k: Vec<f32>,
    q: Vec<f32>,
    decay: f32,
    beta: f32,
}

#[allow(clippy::too_many_arguments)]
fn step_inputs(
    qkv: &[f32],
    a: &[f32],
    b: &[f32],
    a_log: &[f32],
    dt_bias: &[f32],
    s: DeltaShape,
    t: usize,
    h: usize,
) -> Step {
    let (dk, key_dim) = (s.k_dim, s.k_heads * s.k_dim);
    let kh = h / (s.v_heads / s.k_heads);
    let row = t * s.qkv_stride();
    let q = &qkv[row + kh * dk..row + kh * dk + dk];
    let k = &qkv[row + key_dim + kh * dk..row + key_dim + kh * dk + dk];
    let norm = |v: &[f32]| 1.0 / (v.iter().map(|x| x * x).sum::<f32>() + 1e-6).sqrt();
    let (rk, rq) = (norm(k), norm(q) / (dk as f32).sqrt());
    Step {
        k: k.iter().map(|x| x * rk).collect(),
        q: q.iter().map(|x| x * rq).collect(),
        decay: (-a_log[h].exp() * softplus(a[t * s.v_heads + h] + dt_bias[h])).exp(),
        beta: 1.0 / (1.0 + (-b[t * s.v_heads + h]).exp()),
    }
}

/// Plain-Rust reference of the recurrent kernel: `qkv[tokens][2*k_heads*k_dim +
/// v_heads*v_dim]`, `a, b[tokens][v_heads]`, `a_log, dt_bias[v_heads]`,
/// `state[v_heads][k_dim][v_dim]` (updated), `out[tokens][v_heads*v_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_rule(
    qkv: &[f32],
    a: &[f32],
    b: &[f32],
    a_log: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    out: &mut [f32],
    s: DeltaShape,
) {
    let (dk, dv) = (s.k_dim, s.v_dim);
    let vrow = 2 * s.k_heads * dk;
    for h in 0..s.v_heads {
        let st = &mut state[h * dk * dv..(h + 1) * dk * dv];
        for t in 0..s.tokens {
            let x = step_inputs(qkv, a, b, a_log, dt_bias, s, t, h);
            let v = &qkv[t * s.qkv_stride() + vrow + h * dv..][..dv];
            for j in 0..dv {
                let mut kv = 0f32;
                for i in 0..dk {
                    st[i * dv + j] *= x.decay;
                    kv += st[i * dv + j] * x.k[i];
                }
                let delta = (v[j] - kv) * x.beta;
                let mut o = 0f32;
                for i in 0..dk {
                    st[i * dv + j] += x.k[i] * delta;
                    o += st[i * dv + j] * x.q[i];
                }
                out[t * s.v_heads * dv + h * dv + j] = o;
            }
        }
    }
}

/// The chunked form of the same recurrence (transformers' `torch_chunk_gated_delta_rule`,
/// in f64): within a chunk of `chunk` tokens the delta-rule updates are condensed by a
/// unit-lower-triangular (UT) solve, and the state is carried from chunk to chunk. Used to
/// prove that the recurrent kernel and the chunked prefill agree.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_rule_chunked(
    qkv: &[f32],
    a: &[f32],
    b: &[f32],
    a_log: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    out: &mut [f32],
    s: DeltaShape,
    chunk: usize,
) {
    let (dk, dv) = (s.k_dim, s.v_dim);
    let vrow = 2 * s.k_heads * dk;
    for h in 0..s.v_heads {
        let mut st: Vec<f64> = state[h * dk * dv..(h + 1) * dk * dv]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let mut t0 = 0;
        while t0 < s.tokens {
            let c = chunk.min(s.tokens - t0);
            let steps: Vec<Step> = (t0..t0 + c)
                .map(|t| step_inputs(qkv, a, b, a_log, dt_bias, s, t, h))
                .collect();
            let k = |r: usize, i: usize| steps[r].k[i] as f64;
            let q = |r: usize, i: usize| steps[r].q[i] as f64;
            let v = |r: usize, j: usize| qkv[(t0 + r) * s.qkv_stride() + vrow + h * dv + j] as f64;
            // 1. cumulative log decay g[r] and the decay between positions.
            let mut g = vec![0f64; c];
            let mut acc = 0f64;
            for (r, st) in steps.iter().enumerate() {
                acc += (st.decay as f64).ln();
                g[r] = acc;
            }
            let gam = |r: usize, m: usize| (g[r] - g[m]).exp();
            let dot = |f: &dyn Fn(usize, usize) -> f64, r: usize, m: usize| -> f64 {
                (0..dk).map(|i| f(r, i) * k(m, i)).sum()
            };
            // 2. UT system A[r][m] = beta_r (k_r . k_m) gam(r, m) for m < r; solve (I + A) U = B.
            let beta = |r: usize| steps[r].beta as f64;
            let mut u = vec![0f64; c * dv]; // new values
            let mut w = vec![0f64; c * dk]; // decayed keys reading the old state
            for r in 0..c {
                for j in 0..dv {
                    let mut x = beta(r) * v(r, j);
                    for m in 0..r {
                        x -= beta(r) * dot(&k, r, m) * gam(r, m) * u[m * dv + j];
                    }
                    u[r * dv + j] = x;
                }
                for i in 0..dk {
                    let mut x = beta(r) * k(r, i) * g[r].exp();
                    for m in 0..r {
                        x -= beta(r) * dot(&k, r, m) * gam(r, m) * w[m * dk + i];
                    }
                    w[r * dk + i] = x;
                }
            }
            // 3. v_new = u - w S; out = (q e^g) S + sum_{m<=r} (q_r . k_m) gam(r, m) v_new[m].
            let mut vn = vec![0f64; c * dv];
            for r in 0..c {
                for j in 0..dv {
                    let ws: f64 = (0..dk).map(|i| w[r * dk + i] * st[i * dv + j]).sum();
                    vn[r * dv + j] = u[r * dv + j] - ws;
                }
            }
            for r in 0..c {
                for j in 0..dv {
                    let inter: f64 =
                        (0..dk).map(|i| q(r, i) * st[i * dv + j]).sum::<f64>() * g[r].exp();
                    let intra: f64 = (0..=r)
                        .map(|m| dot(&q, r, m) * gam(r, m) * vn[m * dv + j])
                        .sum();
                    out[(t0 + r) * s.v_heads * dv + h * dv + j] = (inter + intra) as f32;
                }
            }
            // 4. S = S e^{g_last} + sum_m k_m e^{g_last - g_m} v_new[m]^T.
            let last = g[c - 1];
            for i in 0..dk {
                for j in 0..dv {
                    let mut x = st[i * dv + j] * last.exp();
                    for m in 0..c {
                        x += k(m, i) * (last - g[m]).exp() * vn[m * dv + j];
                    }
                    st[i * dv + j] = x;
                }
            }
            t0 += c;
        }
        for (d, x) in state[h * dk * dv..(h + 1) * dk * dv].iter_mut().zip(st) {
            *d = x as f32;
        }
    }
}
