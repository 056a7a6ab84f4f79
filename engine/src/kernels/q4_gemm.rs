//! 4-bit GEMM (prefill): tiled `out[m][n] = sum_k x[m][k] * W[n][k]`.

use super::Kernel;
use crate::error::Result;
use crate::gpu::{GpuContext, GpuQ4};
use crate::quant::Q4Matrix;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "q4_gemm",
    source: include_str!("q4_gemm.wgsl"),
    entry: "main",
};

/// Output tile edge (`BM` = `BN` in the WGSL; a test checks they agree).
pub const TILE: usize = 32;

pub(crate) use super::q4_gemv::Params;

/// Records the GEMM into the output window `(row stride, offset)`. Shapes are checked by the
/// caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    m: usize,
    window: (usize, usize),
) -> Result<()> {
    let params = Params::for_matrix(w, m, window);
    let g = [w.rows.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1];
    ctx.dispatch(
        &KERNEL,
        &[],
        bytemuck::bytes_of(&params),
        &[&w.buf, x, out],
        g,
    )
}

/// CPU path: dequantize each weight row, then multiply (a packed SGEMM per 256 dequantized rows
/// from `GEMM_MIN_ROWS` activation rows on).
pub fn cpu(x: &[f32], w: &Q4Matrix, out: &mut [f32], m: usize) {
    let k = w.cols;
    if m >= crate::cpu::GEMM_MIN_ROWS {
        return crate::cpu::par_gemm(x, crate::cpu::GemmWeights::Q4(w), w.rows, k, m, out);
    }
    crate::cpu::par_rows(w.rows, m, out, |r0, r1, part| {
        let mut row = vec![0f32; k];
        for r in r0..r1 {
            w.dequantize_row(r, &mut row);
            for mi in 0..m {
                let xr = &x[mi * k..(mi + 1) * k];
                part[(r - r0) * m + mi] = crate::cpu::dot(xr, &row);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn tile_matches_wgsl() {
        let src = super::KERNEL.source;
        assert!(src.contains(&format!("const BM: u32 = {}u;", super::TILE)));
        assert!(src.contains(&format!("const BN: u32 = {}u;", super::TILE)));
    }
}
