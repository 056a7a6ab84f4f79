//! In-place row-broadcast bias add.

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("add_bias");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    _p: [u32; 2],
}

/// Records the add. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        rows: rows as u32,
        cols: cols as u32,
        _p: [0; 2],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, bias],
        groups_for(rows * cols, wg),
    )
}
