//! In-place row-broadcast bias add.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "add_bias",
    source: include_str!("add_bias.wgsl"),
    entry: "main",
};

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

/// Plain-Rust reference.
pub fn cpu(x: &mut [f32], bias: &[f32], rows: usize, cols: usize) {
    for r in 0..rows {
        for (v, b) in x[r * cols..(r + 1) * cols].iter_mut().zip(bias) {
            *v += b;
        }
    }
}
