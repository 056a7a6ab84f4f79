//! LayerNorm with weight and bias (BERT-family encoders).

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("layer_norm");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    _p: u32,
}

/// Records the norm. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<()> {
    let p = Params {
        rows: rows as u32,
        dim: dim as u32,
        eps,
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&p),
        &[x, weight, bias, out],
        groups_for(rows, 1),
    )
}
