//! Plain copy kernel: the bandwidth yardstick the benchmarks compare the GEMV against.

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("copy");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n4: u32,
    _p: [u32; 3],
}

/// Records a copy of `n` f32 (`n % 4 == 0`) from `x` to `out`.
pub fn dispatch(ctx: &GpuContext, x: &wgpu::Buffer, out: &wgpu::Buffer, n: usize) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        n4: (n / 4) as u32,
        _p: [0; 3],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, out],
        groups_for(n / 4, wg),
    )
}
