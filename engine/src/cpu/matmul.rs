//! Matmuls `out = x Wᵀ`: f32 weights (row-split dot products or the packed SGEMM) and LQ4
//! weights (the integer products of [`super::gemv`] for decode, and for prefill where the
//! instruction set tiles them; elsewhere the SGEMM over dequantized rows for prefill).

use super::gemv;
use super::math::{dot, par_gemm, par_rows, GemmWeights, GEMM_MIN_ROWS};
use crate::quant::Q4Matrix;

/// CPU path: for a few activation rows each weight row is read once and dotted with every
/// activation row while it is in cache; from `GEMM_MIN_ROWS` rows on, a packed SGEMM per block
/// of weight rows. Row blocks are split across the CPU's threads (natively).
pub fn f32_matmul(x: &[f32], w: &[f32], rows: usize, cols: usize, out: &mut [f32], m: usize) {
    if m >= GEMM_MIN_ROWS {
        let w = GemmWeights::F32(&w[..rows * cols]);
        return par_gemm(x, w, rows, cols, m, out);
    }
    par_rows(rows, m, out, |r0, r1, part| {
        for r in r0..r1 {
            let wr = &w[r * cols..(r + 1) * cols];
            for mi in 0..m {
                let xr = &x[mi * cols..(mi + 1) * cols];
                part[(r - r0) * m + mi] = dot(xr, wr);
            }
        }
    });
}

/// True where a 4-bit matmul of `m` activation rows takes the integer products of
/// [`super::gemv`] (8-bit activations) rather than the SGEMM over dequantized rows: always
/// where the instruction set multiplies 4-bit rows in tiles (AVX2: prefill's integer GEMM),
/// else for fewer than [`GEMM_MIN_ROWS`] rows (decode).
pub(crate) fn integer_products(m: usize) -> bool {
    m < GEMM_MIN_ROWS || super::simd::Isa::best().tiles_4bit()
}

/// `out[mi * stride + off + r] = (x Wᵀ)[mi][r]`: the integer products where [`integer_products`],
/// the packed SGEMM (dequantized weights) otherwise.
pub(crate) fn q4_matmul_into(
    x: &[f32],
    w: &Q4Matrix,
    out: &mut [f32],
    m: usize,
    (stride, off): (usize, usize),
) {
    if integer_products(m) {
        return gemv::q4_gemv_q8(x, w, m, out, stride, off);
    }
    if (stride, off) == (w.rows, 0) {
        return par_gemm(x, GemmWeights::Q4(w), w.rows, w.cols, m, out);
    }
    let mut block = vec![0f32; m * w.rows];
    par_gemm(x, GemmWeights::Q4(w), w.rows, w.cols, m, &mut block);
    for (mi, row) in block.chunks(w.rows).enumerate() {
        let at = mi * stride + off;
        out[at..at + w.rows].copy_from_slice(row);
    }
}
