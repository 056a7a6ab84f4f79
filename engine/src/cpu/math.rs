//! The CPU's shared math: vectorizable `dot`, `sum` and `fast_exp`, the packed SGEMM
//! (`matrixmultiply`) for prefill-sized matmuls and the row split across the pool's threads.

use crate::quant::Q4Matrix;

/// Dot product with eight independent accumulators, so the compiler can vectorise it
/// (a plain `sum()` over f32 must keep its sequential order and cannot).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Sum with eight independent accumulators (vectorizes, unlike a sequential f32 `sum()`).
#[inline(always)]
pub fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let c = a.chunks_exact(8);
    let r = c.remainder();
    for x in c {
        for i in 0..8 {
            acc[i] += x[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for x in r {
        s += x;
    }
    s
}

/// `e^x` without a libm call, so loops over it vectorize: `e^x = 2^n · e^r` with
/// `n = round(x · log2 e)` (by the 1.5·2²³ rounding trick), `r = x − n·ln 2` in two parts
/// (Cody–Waite) and `e^r` by its degree-7 Taylor polynomial on |r| ≤ ln2/2 (relative error
/// below 3e-7 over the clamped range [−87, 88]; the `exp` tests compare it with f64).
#[inline(always)]
pub fn fast_exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    let e = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    p * f32::from_bits(((e + 127) << 23) as u32)
}

/// Activation rows from which the CPU matmuls switch from per-row dot products to a packed GEMM.
pub(crate) const GEMM_MIN_ROWS: usize = 4;

/// Weights of a CPU GEMM: f32 rows, or LQ4 rows dequantized block by block.
pub(crate) enum GemmWeights<'a> {
    /// `[rows][k]`, row-major.
    F32(&'a [f32]),
    /// 4-bit rows.
    Q4(&'a Q4Matrix),
}

/// Output base pointer shared by the threads of `par_gemm` and the blocked attention; each
/// thread writes a disjoint set of elements.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub(crate) *mut f32);
// SAFETY: only used by `par_gemm` and the blocked attention, whose threads write disjoint
// elements.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The `len` elements from `at` as a slice.
    ///
    /// # Safety
    /// `at + len` elements lie inside the allocation, and no other reference to them is alive
    /// while the slice is (callers' threads write disjoint elements).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, at: usize, len: usize) -> &mut [f32] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

/// `C = alpha · A Bᵀ` with `matrixmultiply`'s SGEMM: `(m, k, n)` the shape, `A` `[m][k]`,
/// `B` `[n][k]` and `C` `[m][n]`, each row-major with the given row stride (elements).
///
/// # Safety
/// Every addressed element — `a + i·lda + p`, `b + j·ldb + p`, `c + i·ldc + j` for `i < m`,
/// `j < n`, `p < k` — must be inside its allocation, and no other thread may write the
/// addressed elements of `C` meanwhile.
pub(crate) unsafe fn sgemm_nt(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, lda): (*const f32, usize),
    (b, ldb): (*const f32, usize),
    (c, ldc): (*mut f32, usize),
) {
    // SAFETY: the caller's contract; Bᵀ is B read with row stride 1 and column stride ldb.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a,
            lda as isize,
            1,
            b,
            1,
            ldb as isize,
            0.0,
            c,
            ldc as isize,
            1,
        );
    }
}

/// `out[mi][r] = x[mi] . w[r]` for `m` activation rows (`x`: `[m][k]`) and `rows` weight rows:
/// `matrixmultiply`'s packed, cache-blocked SGEMM (AVX2/FMA or AVX-512 chosen at run time
/// natively) on one column range of `out` per thread, so the activations are packed once per
/// thread, not once per small block. LQ4 weights are dequantized 256 rows at a time.
pub(crate) fn par_gemm(
    x: &[f32],
    w: GemmWeights<'_>,
    rows: usize,
    k: usize,
    m: usize,
    out: &mut [f32],
) {
    if m == 0 || rows == 0 {
        return;
    }
    if k == 0 {
        out[..m * rows].fill(0.0);
        return;
    }
    let (x, out_len) = (&x[..m * k], m * rows);
    let base = OutPtr(out[..out_len].as_mut_ptr());
    #[cfg(not(target_arch = "wasm32"))]
    if let GemmWeights::F32(w) = &w {
        // More activation rows than weight rows (encoders over packed passages): split the
        // activations instead, so each thread packs only its own rows of them.
        let threads = rayon::current_num_threads().max(1);
        if threads > 1 && m >= rows && m >= 16 * threads {
            use rayon::prelude::*;
            let chunk = m.div_ceil(threads);
            let w = &w[..rows * k];
            (0..m.div_ceil(chunk)).into_par_iter().for_each(|c| {
                let (m0, m1) = (c * chunk, ((c + 1) * chunk).min(m));
                let p = base;
                // SAFETY: x rows m0..m1 ([m1-m0][k]), all `rows` weight rows ([rows][k]) and
                // out rows m0..m1 (row stride `rows`) are in bounds; threads own disjoint row
                // ranges of `out`.
                unsafe {
                    sgemm_nt(
                        (m1 - m0, k, rows),
                        1.0,
                        (x.as_ptr().add(m0 * k), k),
                        (w.as_ptr(), k),
                        (p.0.add(m0 * rows), rows),
                    );
                }
            });
            return;
        }
    }
    // Columns [r0, r1) of `out`: C has row stride `rows`, column stride 1.
    let run = |r0: usize, r1: usize| {
        let mut scratch = Vec::new();
        const SUB: usize = 256;
        for s0 in (r0..r1).step_by(SUB) {
            let s1 = (s0 + SUB).min(r1);
            let wb: &[f32] = match &w {
                GemmWeights::F32(w) => &w[s0 * k..s1 * k],
                GemmWeights::Q4(q) => {
                    scratch.resize((s1 - s0) * k, 0.0);
                    for (r, row) in (s0..s1).zip(scratch.chunks_mut(k)) {
                        q.dequantize_row(r, row);
                    }
                    &scratch
                }
            };
            let p = base;
            // SAFETY: x is [m][k] (m*k elements), wb is [s1-s0][k], C = out[.., s0..s1] with
            // row stride `rows`: the largest index is (m-1)*rows + s1-1 < m*rows = out_len.
            // Threads own disjoint column ranges, so no element is written twice.
            unsafe {
                sgemm_nt(
                    (m, k, s1 - s0),
                    1.0,
                    (x.as_ptr(), k),
                    (wb.as_ptr(), k),
                    (p.0.add(s0), rows),
                );
            }
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads().max(1);
        let chunk = rows.div_ceil(threads).next_multiple_of(16);
        (0..rows.div_ceil(chunk))
            .into_par_iter()
            .for_each(|c| run(c * chunk, ((c + 1) * chunk).min(rows)));
    }
    // In wasm: the pool's threads (one without wasm threads), blocks of 16 columns.
    #[cfg(target_arch = "wasm32")]
    super::pool::for_ranges(rows.div_ceil(16), 1, |b0, b1| {
        run(b0 * 16, (b1 * 16).min(rows))
    });
}

/// Computes `out[m][rows]` (row-major, `m` activation rows) by weight-row blocks: `f(r0, r1, part)`
/// fills `part[(r - r0) * m + mi]` for rows `r0..r1`. Natively the blocks run on rayon's thread
/// pool; in wasm on the pool's threads (one without wasm threads).
pub(crate) fn par_rows<F>(rows: usize, m: usize, out: &mut [f32], f: F)
where
    F: Fn(usize, usize, &mut [f32]) + Sync + Send,
{
    let mut parts = vec![0f32; rows * m];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        const BLOCK: usize = 64;
        parts
            .par_chunks_mut(BLOCK * m.max(1))
            .enumerate()
            .for_each(|(bi, part)| {
                let r0 = bi * BLOCK;
                f(r0, (r0 + BLOCK).min(rows), part)
            });
    }
    #[cfg(target_arch = "wasm32")]
    {
        let m = m.max(1);
        let base = OutPtr(parts.as_mut_ptr());
        super::pool::for_ranges(rows, 16, |r0, r1| {
            let p = base;
            // SAFETY: rows r0..r1 own parts[r0·m..r1·m], inside `parts` ([rows][m]); ranges
            // of different calls are disjoint.
            let part = unsafe { std::slice::from_raw_parts_mut(p.0.add(r0 * m), (r1 - r0) * m) };
            f(r0, r1, part)
        });
    }
    for r in 0..rows {
        for mi in 0..m {
            out[mi * rows + r] = parts[r * m + mi];
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fast_exp_matches_f64() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let got = super::fast_exp(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert!(super::fast_exp(-1e9) >= 0.0 && super::fast_exp(-1e9) < 1e-37);
        assert!(super::fast_exp(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn par_rows_scatters_every_range() {
        // Large enough to take the multi-threaded path on a multi-core machine.
        let (rows, m) = (5001, 3);
        let mut out = vec![f32::NAN; rows * m];
        super::par_rows(rows, m, &mut out, |r0, r1, part| {
            for r in r0..r1 {
                for mi in 0..m {
                    part[(r - r0) * m + mi] = (mi * 100_000 + r) as f32;
                }
            }
        });
        for mi in 0..m {
            for r in 0..rows {
                assert_eq!(out[mi * rows + r], (mi * 100_000 + r) as f32);
            }
        }
    }
}
