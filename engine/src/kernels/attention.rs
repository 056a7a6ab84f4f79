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

/// Plain-Rust reference (two-pass softmax per query and head).
pub fn cpu(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], s: AttnShape) {
    // One task per (token, head): a decode step still spreads its heads over the threads.
    let d = s.head_dim;
    let head = |i: usize, o: &mut [f32]| attend_head(q, k, v, o, s, i / s.heads, i % s.heads);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        out[..s.tokens * s.heads * d]
            .par_chunks_mut(d.max(1))
            .enumerate()
            .for_each(|(i, o)| head(i, o));
    }
    #[cfg(target_arch = "wasm32")]
    for (i, o) in out[..s.tokens * s.heads * d]
        .chunks_mut(d.max(1))
        .enumerate()
    {
        head(i, o);
    }
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
