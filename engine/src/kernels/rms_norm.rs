//! RMSNorm with an optional `(offset + weight)` form (Qwen3.5 uses offset 1).

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "rms_norm",
    source: include_str!("rms_norm.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    weight_offset: f32,
}

/// Records the norm. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    dim: usize,
    eps: f32,
    weight_offset: f32,
) -> Result<()> {
    let p = Params {
        rows: rows as u32,
        dim: dim as u32,
        eps,
        weight_offset,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&p),
        &[x, weight, out],
        groups_for(rows, 1),
    )
}

/// Plain-Rust reference.
pub fn cpu(
    x: &[f32],
    weight: &[f32],
    out: &mut [f32],
    rows: usize,
    dim: usize,
    eps: f32,
    weight_offset: f32,
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let ss: f32 = xr.iter().map(|v| v * v).sum();
        let inv = 1.0 / (ss / dim as f32 + eps).sqrt();
        for i in 0..dim {
            out[r * dim + i] = xr[i] * inv * (weight[i] + weight_offset);
        }
    }
}
