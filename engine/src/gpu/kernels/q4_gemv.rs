//! 4-bit GEMV (decode): `out[m][n] = sum_k x[m][k] * W[n][k]` for a few activation rows.

use super::groups_for;
use crate::error::Result;
use crate::gpu::buffer::GpuQ4;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("q4_gemv");

/// Uniform parameters (layout of `Params` in the WGSL).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Params {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub sm_off: u32,
    pub rows_off: u32,
    pub out_stride: u32,
    pub out_off: u32,
    pub _pad: u32,
}

impl Params {
    /// Parameters for `out[mi * stride + off + n] = (x W^T)[mi][n]`; `(w.rows, 0)` is a
    /// whole matrix.
    pub(crate) fn for_matrix(w: &GpuQ4, m: usize, (stride, off): (usize, usize)) -> Params {
        Params {
            m: m as u32,
            n: w.rows as u32,
            k: w.cols as u32,
            sm_off: w.sm_off as u32,
            rows_off: w.rows_off as u32,
            out_stride: stride as u32,
            out_off: off as u32,
            _pad: 0,
        }
    }
}

/// Records the GEMV into the output window `(row stride, offset)`. Shapes are checked by the
/// caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    m: usize,
    window: (usize, usize),
) -> Result<()> {
    let t = ctx.tuning;
    let params = Params::for_matrix(w, m, window);
    let mut g = groups_for(w.rows, t.gemv_wg / t.gemv_tpr);
    g[2] = m as u32;
    ctx.dispatch(
        &KERNEL,
        &[("WG", t.gemv_wg), ("TPR", t.gemv_tpr)],
        bytemuck::bytes_of(&params),
        &[&w.buf, x, out],
        g,
    )
}
