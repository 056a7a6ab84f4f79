//! Independent f64 oracles: straightforward formulas, no shared code with the kernels beyond
//! LQ4 dequantization of single weights (the format's definition).

use lorekeeper_engine::quant::{BlockLayout, Q4Matrix};

/// Dequantizes one LQ4 weight in f64 from the format's definition.
pub fn q4_weight(w: &Q4Matrix, n: usize, k: usize) -> f64 {
    let (s, m) = weight_scales(w, n, k);
    s * w.code(n, k) as f64 - m
}

/// `(s, m)` of weight `k` of row `n` in f64 (`w = s·q − m`): LQ4's `d·sc`, `dmin·mn`, the
/// f16 pair of an `lq4h`, `q5` or `q8_0` group, `lq4k`'s `(d·sc, dmin·mn)`, or `q6_k`'s `d·sc` of
/// the weight's half.
fn weight_scales(w: &Q4Matrix, n: usize, k: usize) -> (f64, f64) {
    match w.layout {
        BlockLayout::Lq4 => {
            let (d, dmin) = w.row_scales(n);
            let (sc, mn) = w.sub(n, k / 32);
            (d as f64 * sc as f64, dmin as f64 * mn as f64)
        }
        BlockLayout::Lq4h
        | BlockLayout::Q8
        | BlockLayout::Q6
        | BlockLayout::Lq4k
        | BlockLayout::Q5 => {
            let (s, m) = w.weight_scales(n, k);
            (s as f64, m as f64)
        }
    }
}

/// `out[m][n] = sum_k x[m][k] W[n][k]`.
pub fn q4_matmul(x: &[f32], w: &Q4Matrix, m: usize) -> Vec<f64> {
    let mut out = vec![0f64; m * w.rows];
    for mi in 0..m {
        for n in 0..w.rows {
            out[mi * w.rows + n] = (0..w.cols)
                .map(|k| x[mi * w.cols + k] as f64 * q4_weight(w, n, k))
                .sum();
        }
    }
    out
}

/// `x` (rows of `cols`) as the CPU's 8-bit activation blocks round it: per `span` blocks of 32
/// of a row (fewer at its end), `d = max|x| / 127` and `q = round(x · (1/d))` in f32, ties to
/// even (the definition in `lorekeeper_engine::cpu::q8`), value `d·q`.
pub fn q8_round(x: &[f32], cols: usize, span: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for block in x.chunks(cols).flat_map(|row| row.chunks(32 * span)) {
        let amax = block.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend(
            block
                .iter()
                .map(|&v| (v * id).round_ties_even() as f64 * d as f64),
        );
    }
    out
}

/// `out[m][n] = sum_k W[n][k] x[m][k]` as a backend with 8-bit activation blocks computes it:
/// the exact weights against the rounded activations ([`q8_round`]).
pub fn q4_matmul_q8(x: &[f32], w: &Q4Matrix, m: usize, span: usize) -> Vec<f64> {
    let xr = q8_round(&x[..m * w.cols], w.cols, span);
    let mut out = vec![0f64; m * w.rows];
    for mi in 0..m {
        for n in 0..w.rows {
            out[mi * w.rows + n] = (0..w.cols)
                .map(|k| {
                    let (s, m) = weight_scales(w, n, k);
                    let i = mi * w.cols + k;
                    (s * w.code(n, k) as f64 - m) * xr[i]
                })
                .sum();
        }
    }
    out
}

/// RMSNorm.
pub fn rms_norm(
    x: &[f32],
    weight: &[f32],
    rows: usize,
    dim: usize,
    eps: f32,
    offset: f32,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let ms = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / dim as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for i in 0..dim {
            out.push(xr[i] as f64 * inv * (weight[i] as f64 + offset as f64));
        }
    }
    out
}

/// RoPE from a `[pos][rot/2][cos, sin]` table, rotate-half pairing.
#[allow(clippy::too_many_arguments)]
pub fn rope(
    x: &[f32],
    table: &[f32],
    tokens: usize,
    heads: usize,
    head_dim: usize,
    rot: usize,
    pos0: usize,
) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let half = rot / 2;
    for t in 0..tokens {
        for h in 0..heads {
            let b = (t * heads + h) * head_dim;
            for i in 0..half {
                let c = table[((pos0 + t) * half + i) * 2] as f64;
                let s = table[((pos0 + t) * half + i) * 2 + 1] as f64;
                let (a, bb) = (x[b + i] as f64, x[b + i + half] as f64);
                out[b + i] = a * c - bb * s;
                out[b + i + half] = bb * c + a * s;
            }
        }
    }
    out
}

/// Causal GQA attention, caches `[ctx][kv_heads][d]`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    d: usize,
    pos0: usize,
    scale: f32,
    causal: bool,
) -> Vec<f64> {
    let mut out = vec![0f64; tokens * heads * d];
    for t in 0..tokens {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let n = if causal { pos0 + t + 1 } else { pos0 + tokens };
            let s: Vec<f64> = (0..n)
                .map(|j| {
                    (0..d)
                        .map(|i| {
                            q[(t * heads + h) * d + i] as f64
                                * k[(j * kv_heads + kvh) * d + i] as f64
                        })
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
            let z: f64 = e.iter().sum();
            for i in 0..d {
                out[(t * heads + h) * d + i] = (0..n)
                    .map(|j| e[j] * v[(j * kv_heads + kvh) * d + i] as f64)
                    .sum::<f64>()
                    / z;
            }
        }
    }
    out
}

/// `silu(g) * u`.
pub fn silu_mul(g: &[f32], u: &[f32]) -> Vec<f64> {
    g.iter()
        .zip(u)
        .map(|(&g, &u)| {
            let g = g as f64;
            g / (1.0 + (-g).exp()) * u as f64
        })
        .collect()
}

/// Row softmax.
pub fn softmax(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let xr = &x[r * cols..(r + 1) * cols];
        let mx = xr
            .iter()
            .map(|&v| v as f64)
            .fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = xr.iter().map(|&v| (v as f64 - mx).exp()).sum();
        out.extend(xr.iter().map(|&v| (v as f64 - mx).exp() / z));
    }
    out
}

/// LayerNorm in f64.
pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], rows: usize, dim: usize, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        let xr: Vec<f64> = x[r * dim..(r + 1) * dim]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mean = xr.iter().sum::<f64>() / dim as f64;
        let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / dim as f64;
        let inv = 1.0 / (var + eps).sqrt();
        out.extend(
            xr.iter()
                .enumerate()
                .map(|(i, v)| (v - mean) * inv * w[i] as f64 + b[i] as f64),
        );
    }
    out
}

/// erf in f64: Maclaurin series for |z| < 3 (terms to 1e-17), 1 - erfc by its continued
/// fraction beyond.
pub fn erf(z: f64) -> f64 {
    let a = z.abs();
    let r = if a < 3.0 {
        let (mut term, mut sum, mut n) = (a, a, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -a * a / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + 2/(a + ...)))))
        let mut f = a;
        for k in (1..60).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    };
    if z < 0.0 {
        -r
    } else {
        r
    }
}

/// Exact GELU in f64.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// `x * sigmoid(gate)` in f64.
pub fn sigmoid_mul(x: &[f32], g: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(g)
        .map(|(&x, &g)| x as f64 / (1.0 + (-(g as f64)).exp()))
        .collect()
}

/// Causal depthwise conv1d + SiLU in f64: `(out[tokens][channels], new state[k-1][channels])`.
pub fn conv1d_silu(
    x: &[f32],
    w: &[f32],
    state: &[f32],
    tokens: usize,
    channels: usize,
    k: usize,
) -> (Vec<f64>, Vec<f64>) {
    // The full input: k-1 previous inputs, then x.
    let input = |s: usize, c: usize| -> f64 {
        if s < k - 1 {
            state[s * channels + c] as f64
        } else {
            x[(s - (k - 1)) * channels + c] as f64
        }
    };
    let mut out = vec![0f64; tokens * channels];
    for t in 0..tokens {
        for c in 0..channels {
            let acc: f64 = (0..k).map(|j| w[c * k + j] as f64 * input(t + j, c)).sum();
            out[t * channels + c] = acc / (1.0 + (-acc).exp());
        }
    }
    let mut st = vec![0f64; (k - 1) * channels];
    for j in 0..k - 1 {
        for c in 0..channels {
            st[j * channels + c] = input(tokens + j, c);
        }
    }
    (out, st)
}

/// Shape of [`gated_delta_rule`]: tokens, key heads, value heads, key dim, value dim.
pub type DeltaDims = (usize, usize, usize, usize, usize);

/// The gated delta rule in f64, written from transformers' `torch_recurrent_gated_delta_rule`
/// (with `use_qk_l2norm_in_kernel`): `(out[tokens][nv*dv], new state[nv][dk][dv])`.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_rule(
    qkv: &[f32],
    a: &[f32],
    b: &[f32],
    a_log: &[f32],
    dt_bias: &[f32],
    state: &[f32],
    (tokens, nk, nv, dk, dv): DeltaDims,
) -> (Vec<f64>, Vec<f64>) {
    let stride = 2 * nk * dk + nv * dv;
    let mut st: Vec<f64> = state.iter().map(|&v| v as f64).collect();
    let mut out = vec![0f64; tokens * nv * dv];
    let l2 = |v: &[f32]| -> Vec<f64> {
        let n = (v.iter().map(|&x| x as f64 * x as f64).sum::<f64>() + 1e-6).sqrt();
        v.iter().map(|&x| x as f64 / n).collect()
    };
    for t in 0..tokens {
        let row = &qkv[t * stride..(t + 1) * stride];
        for h in 0..nv {
            let kh = h / (nv / nk);
            let q: Vec<f64> = l2(&row[kh * dk..(kh + 1) * dk])
                .iter()
                .map(|x| x / (dk as f64).sqrt())
                .collect();
            let k = l2(&row[nk * dk + kh * dk..nk * dk + (kh + 1) * dk]);
            let v = &row[2 * nk * dk + h * dv..2 * nk * dk + (h + 1) * dv];
            let x = a[t * nv + h] as f64 + dt_bias[h] as f64;
            let softplus = if x > 20.0 { x } else { x.exp().ln_1p() };
            let decay = (-(a_log[h] as f64).exp() * softplus).exp();
            let beta = 1.0 / (1.0 + (-(b[t * nv + h] as f64)).exp());
            let s = &mut st[h * dk * dv..(h + 1) * dk * dv];
            s.iter_mut().for_each(|x| *x *= decay);
            for j in 0..dv {
                let kv: f64 = (0..dk).map(|i| s[i * dv + j] * k[i]).sum();
                let delta = (v[j] as f64 - kv) * beta;
                for i in 0..dk {
                    s[i * dv + j] += k[i] * delta;
                }
                out[t * nv * dv + h * dv + j] = (0..dk).map(|i| s[i * dv + j] * q[i]).sum();
            }
        }
    }
    (out, st)
}
