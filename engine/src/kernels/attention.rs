//! Grouped-query attention over the KV cache: causal (decode and prefill) or bidirectional
//! (encoders).

use super::Kernel;
use crate::backend::AttnShape;
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "attention",
    source: include_str!("attention.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,
    scale: f32,
    causal: u32,
    _p: u32,
}

/// Records attention. Shapes are checked by the caller (`head_dim <= 4 * WG`).
pub(crate) fn dispatch(
    ctx: &GpuContext,
    q: &wgpu::Buffer,
    k: &wgpu::Buffer,
    v: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: AttnShape,
) -> Result<()> {
    let wg = ctx.tuning.attn_wg;
    if s.head_dim > 4 * wg as usize {
        return Err(crate::error::shape_err(
            "attention",
            format!("head_dim {} exceeds 4 x workgroup size {wg}", s.head_dim),
        ));
    }
    let p = Params {
        tokens: s.tokens as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        head_dim: s.head_dim as u32,
        pos0: s.pos0 as u32,
        scale: s.scale,
        causal: u32::from(s.causal),
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[q, k, v, out],
        [s.heads as u32, s.tokens as u32, 1],
    )
}

/// Query rows per task of the blocked path.
const QBLOCK: usize = 64;

/// Plain-Rust reference: per (query, head) two-pass softmax for a few query rows (decode);
/// from [`crate::cpu::GEMM_MIN_ROWS`] rows (prefill, encoders) per (head, block of query rows)
/// as two packed SGEMMs around a row softmax.
pub fn cpu(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], s: AttnShape) {
    if s.tokens >= crate::cpu::GEMM_MIN_ROWS && s.head_dim > 0 {
        return blocked(q, k, v, out, s);
    }
    // One task per (token, KV head): the query heads that share a KV head (GQA) read its keys
    // and values once, together (decode is bound by reading the cache); a decode step still
    // spreads its KV heads over the threads (the CPU backend's spinning pool).
    let d = s.head_dim;
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let n = s.tokens * s.kv_heads;
    let out = &mut out[..s.tokens * s.heads * d];
    let base = crate::cpu::OutPtr(out.as_mut_ptr());
    crate::cpu::pool::for_ranges(n, 1, |i0, i1| {
        let p = base;
        for i in i0..i1 {
            let (t, kvh) = (i / s.kv_heads, i % s.kv_heads);
            // SAFETY: heads kvh·group .. (kvh+1)·group of token t own
            // out[(t·heads + kvh·group)·d ..][..group·d], inside `out`; ranges of different
            // tasks are disjoint.
            let o = unsafe {
                std::slice::from_raw_parts_mut(p.0.add((t * s.heads + kvh * group) * d), group * d)
            };
            attend_group(q, k, v, o, s, (t, kvh));
        }
    });
}

/// The query heads of token `t` that share KV head `kvh` (`group = heads / kv_heads`), into `o`
/// (`[group, head_dim]`): scores against every visible key (each key row read once for the
/// group), a softmax per head, then `Σ p·v` (each value row read once).
fn attend_group(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    o: &mut [f32],
    s: AttnShape,
    (t, kvh): (usize, usize),
) {
    let d = s.head_dim;
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let n_keys = if s.causal {
        s.pos0 + t + 1
    } else {
        s.pos0 + s.tokens
    };
    let q0 = (t * s.heads + kvh * group) * d;
    let qs = &q[q0..q0 + group * d];
    // scores[g·n_keys + j]
    let mut scores = vec![0f32; group * n_keys];
    for j in 0..n_keys {
        let kr = &k[(j * s.kv_heads + kvh) * d..][..d];
        for (g, qr) in qs.chunks_exact(d).enumerate() {
            scores[g * n_keys + j] = crate::cpu::dot(qr, kr) * s.scale;
        }
    }
    let mut inv = vec![0f32; group];
    for (g, row) in scores.chunks_exact_mut(n_keys).enumerate() {
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        row.iter_mut()
            .for_each(|x| *x = crate::cpu::fast_exp(*x - mx));
        inv[g] = 1.0 / crate::cpu::sum(row);
    }
    o.fill(0.0);
    for j in 0..n_keys {
        let vr = &v[(j * s.kv_heads + kvh) * d..][..d];
        for (g, og) in o.chunks_exact_mut(d).enumerate() {
            let p = scores[g * n_keys + j];
            for (oi, &vi) in og.iter_mut().zip(vr) {
                *oi += p * vi;
            }
        }
    }
    for (g, og) in o.chunks_exact_mut(d).enumerate() {
        og.iter_mut().for_each(|x| *x *= inv[g]);
    }
}

/// Attention by blocks: for head `h` and query rows `t0..t1`,
/// `S = scale · Q[t0..t1, h] K[0..n, kvh]ᵀ` (`[rows, n]`, `n` = keys the last row sees), a
/// softmax over each row's visible keys (the rest zeroed), `O[t0..t1, h] = P V[0..n, kvh]`.
fn blocked(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], s: AttnShape) {
    let d = s.head_dim;
    let (qs, kvs) = (s.heads * d, s.kv_heads * d);
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let blocks = s.tokens.div_ceil(QBLOCK);
    let out = &mut out[..s.tokens * s.heads * d];
    let base = crate::cpu::OutPtr(out.as_mut_ptr());
    let task = |i: usize| {
        let (h, bi) = (i / blocks, i % blocks);
        let (t0, t1) = (bi * QBLOCK, ((bi + 1) * QBLOCK).min(s.tokens));
        let (rows, kvh) = (t1 - t0, h / group);
        let n = s.pos0 + if s.causal { t1 } else { s.tokens };
        let mut p = vec![0f32; rows * n];
        let o = base;
        // SAFETY (both calls): A, B and C address `rows x d` queries (row stride heads·d),
        // `n` keys / values of head kvh (row stride kv_heads·d) — all inside the buffers the
        // shape check admitted — and the `rows x n` scratch. C of the second call is rows
        // t0..t1 of head h of `out`, which no other task writes.
        unsafe {
            crate::cpu::sgemm_nt(
                (rows, d, n),
                s.scale,
                (q.as_ptr().add((t0 * s.heads + h) * d), qs),
                (k.as_ptr().add(kvh * d), kvs),
                (p.as_mut_ptr(), n),
            );
        }
        for (r, row) in p.chunks_mut(n).enumerate() {
            let seen = if s.causal { s.pos0 + t0 + r + 1 } else { n };
            let (live, dead) = row.split_at_mut(seen);
            let mx = live.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            // (exponentials in their own loop and an eight-lane sum: both vectorize)
            live.iter_mut()
                .for_each(|x| *x = crate::cpu::fast_exp(*x - mx));
            let inv = 1.0 / crate::cpu::sum(live);
            live.iter_mut().for_each(|x| *x *= inv);
            dead.fill(0.0);
        }
        unsafe {
            matrixmultiply::sgemm(
                rows,
                n,
                d,
                1.0,
                p.as_ptr(),
                n as isize,
                1,
                v.as_ptr().add(kvh * d),
                kvs as isize,
                1,
                0.0,
                o.0.add((t0 * s.heads + h) * d),
                qs as isize,
                1,
            );
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        (0..s.heads * blocks).into_par_iter().for_each(task);
    }
    #[cfg(target_arch = "wasm32")]
    (0..s.heads * blocks).for_each(task);
}
