//! Causal depthwise conv1d + SiLU with a rolling state (Qwen3.5's linear attention).

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = Shader {
    label: "conv1d_silu",
    source: concat!(
        include_str!("common.wgsl"),
        "\n",
        include_str!("conv1d.wgsl")
    ),
    entry: "main",
};

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
