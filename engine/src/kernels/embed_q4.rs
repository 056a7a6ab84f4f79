//! Embedding-row gather from an LQ4 table.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::{GpuContext, GpuQ4};
use crate::quant::Q4Matrix;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "embed_q4",
    source: include_str!("embed_q4.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    rows: u32,
    cols: u32,
    sm_off: u32,
    rows_off: u32,
    _p: [u32; 3],
}

/// Records the gather. `ids` is a device buffer of `tokens` u32 ids, checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    w: &GpuQ4,
    ids: &wgpu::Buffer,
    out: &wgpu::Buffer,
    tokens: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        tokens: tokens as u32,
        rows: w.rows as u32,
        cols: w.cols as u32,
        sm_off: w.sm_off as u32,
        rows_off: w.rows_off as u32,
        _p: [0; 3],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[&w.buf, ids, out],
        groups_for(tokens * w.cols, wg),
    )
}

/// Plain-Rust reference.
pub fn cpu(ids: &[u32], w: &Q4Matrix, out: &mut [f32]) {
    for (t, &id) in ids.iter().enumerate() {
        w.dequantize_row(id as usize, &mut out[t * w.cols..(t + 1) * w.cols]);
    }
}
