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
    row0: u32,
    _p: [u32; 2],
}

/// Records the gather from a table holding vocabulary rows `row0..row0 + w.rows`. `ids` is a
/// device buffer of `tokens` u32 ids, checked by the caller; ids outside the table are skipped.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    w: &GpuQ4,
    ids: &wgpu::Buffer,
    out: &wgpu::Buffer,
    tokens: usize,
    row0: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        tokens: tokens as u32,
        rows: w.rows as u32,
        cols: w.cols as u32,
        sm_off: w.sm_off as u32,
        rows_off: w.rows_off as u32,
        row0: row0 as u32,
        _p: [0; 2],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[&w.buf, ids, out],
        groups_for(tokens * w.cols, wg),
    )
}

/// Plain-Rust reference for a table holding vocabulary rows `row0..row0 + w.rows`; rows of
/// `out` whose id lies elsewhere are left untouched.
pub fn cpu(ids: &[u32], w: &Q4Matrix, row0: usize, out: &mut [f32]) {
    for (t, &id) in ids.iter().enumerate() {
        let Some(r) = (id as usize).checked_sub(row0).filter(|&r| r < w.rows) else {
            continue;
        };
        w.dequantize_row(r, &mut out[t * w.cols..(t + 1) * w.cols]);
    }
}
