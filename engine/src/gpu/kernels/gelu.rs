//! Exact (erf) GELU.

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("gelu");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    _p: [u32; 3],
}

/// Records the activation. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    out: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        n: n as u32,
        _p: [0; 3],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, out],
        groups_for(n, wg),
    )
}
