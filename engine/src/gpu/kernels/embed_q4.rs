//! Embedding-row gather from a 4-bit (LQ4 or lq4h) table.

use super::groups_for;
use crate::error::Result;
use crate::gpu::buffer::GpuQ4;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("embed_q4", common);

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    rows: u32,
    cols: u32,
    sm_off: u32,
    rows_off: u32,
    row0: u32,
    kind: u32,
    _p: u32,
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
        kind: w.kind,
        _p: 0,
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[&w.buf, ids, out],
        groups_for(tokens * w.cols, wg),
    )
}
