//! One half of each row (splits Qwen3.5's interleaved query / output-gate projection).

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("take_half");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    half: u32,
    _p: u32,
}

/// Records the copy. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    src: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    dim: usize,
    half: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        rows: rows as u32,
        dim: dim as u32,
        half: half as u32,
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[src, out],
        groups_for(rows * dim, wg),
    )
}
