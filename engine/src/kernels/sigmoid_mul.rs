//! Output gate `x * sigmoid(gate)`.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "sigmoid_mul",
    source: include_str!("sigmoid_mul.wgsl"),
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
    x: &wgpu::Buffer,
    gate: &wgpu::Buffer,
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
        &[x, gate, out],
        groups_for(n, wg),
    )
}

/// Plain-Rust reference.
pub fn cpu(x: &[f32], gate: &[f32], out: &mut [f32], n: usize) {
    for i in 0..n {
        out[i] = x[i] / (1.0 + (-gate[i]).exp());
    }
}
