//! RMSNorm with an optional `(offset + weight)` form (Qwen3.5 uses offset 1).

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("rms_norm");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    weight_offset: f32,
}

/// Records the norm. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    dim: usize,
    eps: f32,
    weight_offset: f32,
) -> Result<()> {
    let p = Params {
        rows: rows as u32,
        dim: dim as u32,
        eps,
        weight_offset,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&p),
        &[x, weight, out],
        groups_for(rows, 1),
    )
}
