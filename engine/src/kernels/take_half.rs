//! One half of each row (splits Qwen3.5's interleaved query / output-gate projection).

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "take_half",
    source: include_str!("take_half.wgsl"),
    entry: "main",
};

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

/// Plain-Rust reference.
pub fn cpu(src: &[f32], out: &mut [f32], rows: usize, dim: usize, half: usize) {
    for r in 0..rows {
        out[r * dim..(r + 1) * dim]
            .copy_from_slice(&src[r * 2 * dim + half * dim..r * 2 * dim + (half + 1) * dim]);
    }
}
