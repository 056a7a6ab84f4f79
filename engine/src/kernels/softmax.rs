//! Row-wise softmax.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "softmax",
    source: include_str!("softmax.wgsl"),
    entry: "main",
};

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

/// Plain-Rust reference.
pub fn cpu(x: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        let xr = &x[r * cols..(r + 1) * cols];
        let mx = xr.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = xr.iter().map(|v| (v - mx).exp()).sum();
        for i in 0..cols {
            out[r * cols + i] = (xr[i] - mx).exp() / sum;
        }
    }
}
