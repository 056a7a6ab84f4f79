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
    // One task per (token, head): a decode step still spreads its heads over the threads
    // (the CPU backend's spinning pool: a decode step runs this once per layer).
    let d = s.head_dim;
    let n = s.tokens * s.heads;
    let out = &mut out[..n * d];
    let base = crate::cpu::OutPtr(out.as_mut_ptr());
    crate::cpu::pool::for_ranges(n, 1, |i0, i1| {
        let p = base;
        for i in i0..i1 {
            // SAFETY: head i owns out[i·d..(i+1)·d], inside `out` (n·d elements); ranges of
            // different tasks are disjoint.
            let o = unsafe { std::slice::from_raw_parts_mut(p.0.add(i * d), d) };
            attend_head(q, k, v, o, s, i / s.heads, i % s.heads);
        }
    });
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

/// Head `h` of query token `t` into `out` (`[head_dim]`).
fn attend_head(q: &[f32], k: &[f32], v: &[f32], o: &mut [f32], s: AttnShape, t: usize, h: usize) {
    let d = s.head_dim;
    let kvh = h / (s.heads / s.kv_heads);
    let n_keys = if s.causal {
        s.pos0 + t + 1
    } else {
        s.pos0 + s.tokens
    };
    let qr = &q[(t * s.heads + h) * d..][..d];
    let mut scores = Vec::with_capacity(n_keys);
    for j in 0..n_keys {
        let kr = &k[(j * s.kv_heads + kvh) * d..][..d];
        scores.push(crate::cpu::dot(qr, kr) * s.scale);
    }
    let mx = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for sc in scores.iter_mut() {
        *sc = (*sc - mx).exp();
        sum += *sc;
    }
    o.fill(0.0);
    for (j, &p) in scores.iter().enumerate() {
        let vr = &v[(j * s.kv_heads + kvh) * d..][..d];
        for (oi, &vi) in o.iter_mut().zip(vr) {
            *oi += p * vi;
        }
    }
    for oi in o.iter_mut() {
        *oi /= sum;
    }
}
