//! 4-bit GEMV (decode): `out[m][n] = sum_k x[m][k] * W[n][k]` for a few activation rows.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::{GpuContext, GpuQ4};
use crate::quant::{Q4Matrix, GROUP};

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "q4_gemv",
    source: include_str!("q4_gemv.wgsl"),
    entry: "main",
};

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

/// Plain-Rust reference, same factorisation as the kernel:
/// per group `d*sc*dot(x, q) - dmin*mn*sum(x)`.
pub fn cpu(x: &[f32], w: &Q4Matrix, out: &mut [f32], m: usize) {
    let k = w.cols;
    crate::cpu::par_rows(w.rows, m, out, |r0, r1, part| {
        for row in r0..r1 {
            let (d, dmin) = w.row_scales(row);
            for mi in 0..m {
                let xr = &x[mi * k..(mi + 1) * k];
                let (mut acc_q, mut acc_m) = (0f32, 0f32);
                for g in 0..k / GROUP {
                    let (sc, mn) = w.sub(row, g);
                    let mut dq = 0f32;
                    let mut sx = 0f32;
                    for i in 0..GROUP {
                        let kk = g * GROUP + i;
                        dq += xr[kk] * w.code(row, kk) as f32;
                        sx += xr[kk];
                    }
                    acc_q += sc as f32 * dq;
                    acc_m += mn as f32 * sx;
                }
                part[(row - r0) * m + mi] = d * acc_q - dmin * acc_m;
            }
        }
    });
}
