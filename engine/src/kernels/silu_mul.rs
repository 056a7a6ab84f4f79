//! SwiGLU gate `silu(gate) * up`.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "silu_mul",
    source: include_str!("silu_mul.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    _p: [u32; 3],
}

/// Records the gate. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    gate: &wgpu::Buffer,
    up: &wgpu::Buffer,
    out: &wgpu::Buffer,
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
        &[gate, up, out],
        groups_for(n, wg),
    )
}

/// Plain-Rust reference.
pub fn cpu(gate: &[f32], up: &[f32], out: &mut [f32], n: usize) {
    for i in 0..n {
        let g = gate[i];
        out[i] = g / (1.0 + (-g).exp()) * up[i];
    }
}
