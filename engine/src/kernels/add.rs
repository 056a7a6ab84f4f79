//! Residual add `acc += x`.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "add",
    source: include_str!("add.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    _p: [u32; 3],
}

/// Records the add. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    acc: &wgpu::Buffer,
    x: &wgpu::Buffer,
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
        &[acc, x],
        groups_for(n, wg),
    )
}

/// Plain-Rust reference.
pub fn cpu(acc: &mut [f32], x: &[f32], n: usize) {
    for i in 0..n {
        acc[i] += x[i];
    }
}
