//! Rotary position embedding (rotate-half pairing, partial rotary) from a host-built table.

use super::groups_for;
use crate::backend::RopeShape;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("rope", common);

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    rot_dim: u32,
    pos0: u32,
    _p: [u32; 3],
}

/// Records the rotation. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    table: &wgpu::Buffer,
    s: RopeShape,
) -> Result<()> {
    let p = Params {
        tokens: s.tokens as u32,
        heads: s.heads as u32,
        head_dim: s.head_dim as u32,
        rot_dim: s.rot_dim as u32,
        pos0: s.pos0 as u32,
        _p: [0; 3],
    };
    let wg = ctx.tuning.elem_wg;
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, table],
        groups_for(s.tokens * s.heads * s.rot_dim / 2, wg),
    )
}
