//! Causal depthwise conv1d + SiLU with a rolling state (Qwen3.5's linear attention).

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "conv1d_silu",
    source: include_str!("conv1d.wgsl"),
    entry: "main",
};

/// Longest kernel the WGSL window holds (`MAX_K` there).
pub const MAX_KERNEL: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    channels: u32,
    kernel: u32,
    _p: u32,
}

/// Records the convolution. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    w: &wgpu::Buffer,
    state: &wgpu::Buffer,
    out: &wgpu::Buffer,
    tokens: usize,
    channels: usize,
    kernel: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        tokens: tokens as u32,
        channels: channels as u32,
        kernel: kernel as u32,
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, w, state, out],
        groups_for(channels, wg),
    )
}

/// Plain-Rust reference: `x[tokens][channels]`, `w[channels][kernel]`,
/// `state[kernel-1][channels]` (updated), `out[tokens][channels]`.
pub fn cpu(
    x: &[f32],
    w: &[f32],
    state: &mut [f32],
    out: &mut [f32],
    tokens: usize,
    channels: usize,
    kernel: usize,
) {
    let mut win = vec![0f32; kernel];
    for c in 0..channels {
        for j in 0..kernel - 1 {
            win[j] = state[j * channels + c];
        }
        for t in 0..tokens {
            win[kernel - 1] = x[t * channels + c];
            let mut acc = 0f32;
            for j in 0..kernel {
                acc += w[c * kernel + j] * win[j];
            }
            out[t * channels + c] = acc / (1.0 + (-acc).exp());
            win.copy_within(1.., 0);
        }
        for j in 0..kernel - 1 {
            state[j * channels + c] = win[j];
        }
    }
}
