//! Grouped-query attention over the KV cache: causal (decode and prefill) or bidirectional
//! (encoders).

use crate::backend::AttnShape;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("attention", common);

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
