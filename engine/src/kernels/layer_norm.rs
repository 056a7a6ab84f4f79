//! LayerNorm with weight and bias (BERT-family encoders).

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "layer_norm",
    source: include_str!("layer_norm.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    _p: u32,
}

/// Records the norm. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    out: &wgpu::Buffer,
    rows: usize,
    dim: usize,
    eps: f32,
) -> Result<()> {
    let p = Params {
        rows: rows as u32,
        dim: dim as u32,
        eps,
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&p),
        &[x, weight, bias, out],
        groups_for(rows, 1),
    )
}

/// Plain-Rust reference (same two-pass order as the kernel).
#[allow(clippy::too_many_arguments)]
pub fn cpu(
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    out: &mut [f32],
    rows: usize,
    dim: usize,
    eps: f32,
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let mean = xr.iter().sum::<f32>() / dim as f32;
        let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for i in 0..dim {
            out[r * dim + i] = (xr[i] - mean) * inv * weight[i] + bias[i];
        }
    }
}
