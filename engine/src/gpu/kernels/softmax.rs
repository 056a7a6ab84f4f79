//! Row-wise softmax.

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("softmax");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    _p: [u32; 2],
}

/// Records the softmax. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let p = Params {
        rows: rows as u32,
        cols: cols as u32,
        _p: [0; 2],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&p),
        &[x, out],
        groups_for(rows, 1),
    )
}
