//! 4-bit (and `q8_0`) GEMV on the CPU (decode and other few-row matmuls): the activations are
//! rounded to 8-bit blocks once per call ([`super::q8`]), then every weight row takes integer dot products
//! with them ([`super::simd`], the fastest instruction set present), rows spread over the
//! thread pool in a few contiguous ranges per thread.
//!
//! The oracle is the tests crate's f64 evaluation of the same rounded activations
//! (`tests/src/oracle.rs`); the scalar instruction set is the reference of the SIMD ones.

use super::math::OutPtr;
use super::q8::{Lq4Row, Q8Rows};
use super::simd::{lq4_q8, q8_q8, Isa};
use crate::quant::{BlockLayout, Q4Matrix, GROUP};

/// Rows per task at least (a task's fixed cost is a few hundred nanoseconds).
const MIN_ROWS_PER_TASK: usize = 16;

/// `out[mi * stride + off + r] = Σ_k x[mi][k] · W[r][k]` for `mi < m`, every row `r` of `w`,
/// with the activations rounded to 8-bit blocks. `out` must hold `(m − 1)·stride + off + rows`
/// elements (`off + rows <= stride`), `x` `m·cols`; shapes are checked by the backend first.
pub fn q4_gemv_q8(x: &[f32], w: &Q4Matrix, m: usize, out: &mut [f32], stride: usize, off: usize) {
    let (rows, k) = (w.rows, w.cols);
    if m == 0 || rows == 0 {
        return;
    }
    assert!(
        x.len() >= m * k
            && off + rows <= stride
            && out.len() >= (m - 1) * stride + off + rows
            && w.data.len() == w.layout.words(rows, k),
        "q4_gemv_q8: shapes were not checked"
    );
    let groups = k / GROUP;
    let mut xq = Q8Rows::default();
    if w.layout == BlockLayout::Q8 {
        xq.quantize_natural(x, m, k);
    } else {
        xq.quantize(x, m, k);
    }
    let xq = &xq;
    let bytes: &[u8] = bytemuck::cast_slice(&w.data);
    let sm = 4 * w.sm_offset();
    let sb = w.layout.group_bytes() * groups;
    let isa = Isa::best();
    let base = OutPtr(out.as_mut_ptr());
    if w.layout == BlockLayout::Q8 {
        let codes: &[i8] = bytemuck::cast_slice(&bytes[..4 * w.sm_offset()]);
        let run = |r0: usize, r1: usize| {
            let mut scratch = vec![0f32; groups];
            let p = base;
            for r in r0..r1 {
                let (c, s) = (
                    &codes[r * k..(r + 1) * k],
                    &bytes[sm + sb * r..sm + sb * (r + 1)],
                );
                for mi in 0..m {
                    let v = q8_q8(isa, c, s, xq.row(mi), &mut scratch);
                    // SAFETY: as below.
                    unsafe { *p.0.add(mi * stride + off + r) = v };
                }
            }
        };
        return super::pool::for_ranges(rows, MIN_ROWS_PER_TASK, run);
    }
    let run = |r0: usize, r1: usize| {
        let mut scratch = vec![0f32; groups];
        let p = base;
        for r in r0..r1 {
            let row = Lq4Row {
                codes: &bytes[r * k / 2..(r + 1) * k / 2],
                subs: &bytes[sm + sb * r..sm + sb * (r + 1)],
                layout: w.layout,
            };
            let (d, dmin) = w.row_scales(r);
            for mi in 0..m {
                let (a, b) = lq4_q8(isa, row, xq.row(mi), &mut scratch);
                // SAFETY: mi·stride + off + r < (m−1)·stride + off + rows <= out.len() (asserted
                // above); tasks own disjoint row ranges, so no element is written twice.
                unsafe { *p.0.add(mi * stride + off + r) = d * a - dmin * b };
            }
        }
    };
    super::pool::for_ranges(rows, MIN_ROWS_PER_TASK, run);
}
