//! Block-quantized matmuls `out[m][n] = sum_k x[m][k] * W[n][k]` (LQ4, lq4h, q8_0): the GEMV for a few
//! activation rows (decode; `TPR` threads per output row) and the tiled GEMM (prefill). Both
//! read the same parameters and write into an output window `(row stride, offset)`.

use super::groups_for;
use crate::backend::MatmulKernel;
use crate::error::Result;
use crate::gpu::buffer::GpuQ4;
use crate::gpu::context::{GpuContext, Shader};

/// The decode kernel (LQ4, lq4h): one 4-byte word per lane and step, for GPUs.
pub const GEMV: Shader = crate::shader!("q4_gemv", gemv_common);
/// The decode kernel for CPU rasterisers: one 32-weight group (16 bytes) per lane and step.
pub const GEMV_GROUPS: Shader = crate::shader!("q4_gemv_groups", gemv_common);
/// The decode kernel for `q8_0` weights.
pub const Q8_GEMV: Shader = crate::shader!("q8_gemv", gemv_common);
/// The prefill kernel.
pub const GEMM: Shader = crate::shader!("q4_gemm");

/// GEMM output tile edge (`BM` = `BN` in the WGSL; a test checks they agree).
pub const TILE: usize = 32;

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
    pub kind: u32,
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
            kind: w.kind,
        }
    }
}

/// Records the matmul into the output window `(row stride, offset)`; `(w.rows, 0)` is a
/// whole output. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    kernel: MatmulKernel,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    (m, window): (usize, (usize, usize)),
) -> Result<()> {
    let params = Params::for_matrix(w, m, window);
    let p = bytemuck::bytes_of(&params);
    let buffers = [&w.buf, x, out];
    let gemv = if w.kind == GpuQ4::Q8 {
        &Q8_GEMV
    } else if ctx.tuning.gemv_groups {
        &GEMV_GROUPS
    } else {
        &GEMV
    };
    let label = match kernel {
        MatmulKernel::Gemv => gemv.label,
        MatmulKernel::Gemm => GEMM.label,
    };
    ctx.note_weight_bytes(label, w.buf.size());
    match kernel {
        MatmulKernel::Gemv => {
            let t = ctx.tuning;
            let mut g = groups_for(w.rows, t.gemv_wg / t.gemv_tpr);
            g[2] = m as u32;
            let consts = [("WG", t.gemv_wg), ("TPR", t.gemv_tpr)];
            ctx.dispatch(gemv, &consts, p, &buffers, g)
        }
        MatmulKernel::Gemm => {
            let g = [w.rows.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1];
            ctx.dispatch(&GEMM, &[], p, &buffers, g)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tile_matches_wgsl() {
        let src = super::GEMM.source;
        assert!(src.contains(&format!("const BM: u32 = {}u;", super::TILE)));
        assert!(src.contains(&format!("const BN: u32 = {}u;", super::TILE)));
    }
}
