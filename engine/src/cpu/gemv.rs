//! 4-bit (and `q8_0`) GEMV on the CPU (decode and other few-row matmuls): the activations are
//! rounded to 8-bit blocks once per call ([`super::q8`]), then every weight row takes integer dot products
//! with them ([`super::simd`], the fastest instruction set present), rows spread over the
//! thread pool in a few contiguous ranges per thread.
//!
//! The oracle is the tests crate's f64 evaluation of the same rounded activations
//! (`tests/src/oracle.rs`); the scalar instruction set is the reference of the SIMD ones.

use super::math::{fast_exp, OutPtr};
use super::q8::Q8Rows;
use super::simd::tiles::TILE_MIN_ROWS;
use super::simd::{row_quantizer, rows_dot, Isa, RowBlock};
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
    let xq = &quantized(x, w, m);
    let block = RowBlock::of(w);
    let isa = Isa::best();
    let base = OutPtr(out.as_mut_ptr());
    let run = |r0: usize, r1: usize| {
        let mut scratch = vec![0f32; groups];
        let p = base;
        rows_dot(isa, block, r0..r1, xq, &mut scratch, |r, mi, a, b| {
            // SAFETY: mi·stride + off + r + a.len() <= (m−1)·stride + off + rows <= out.len()
            // (asserted above); tasks own disjoint row ranges, so no element is written twice.
            let o = unsafe { p.slice(mi * stride + off + r, a.len()) };
            finish(w, r, a, b, o, |o, v| *o = v);
        });
    };
    super::pool::for_ranges(rows, MIN_ROWS_PER_TASK, run);
}

/// `acc[mi * rows + r] += Σ_k x[mi][k] · W[r][k]`: [`q4_gemv_q8`] with the residual add in its
/// epilogue (the same sum as the GEMV into a buffer and an add after it, bit for bit, in one
/// pass over `acc` and no temporary). Shapes are checked by the backend first.
pub fn q4_gemv_q8_add(x: &[f32], w: &Q4Matrix, m: usize, acc: &mut [f32]) {
    let (rows, k) = (w.rows, w.cols);
    if m == 0 || rows == 0 {
        return;
    }
    assert!(
        x.len() >= m * k && acc.len() >= m * rows && w.data.len() == w.layout.words(rows, k),
        "q4_gemv_q8_add: shapes were not checked"
    );
    let xq = &quantized(x, w, m);
    let block = RowBlock::of(w);
    let isa = Isa::best();
    let base = OutPtr(acc.as_mut_ptr());
    let run = |r0: usize, r1: usize| {
        let mut scratch = vec![0f32; k / GROUP];
        let p = base;
        rows_dot(isa, block, r0..r1, xq, &mut scratch, |r, mi, a, b| {
            // SAFETY: mi·rows + r + a.len() <= m·rows <= acc.len() (asserted above); tasks own
            // disjoint row ranges.
            let o = unsafe { p.slice(mi * rows + r, a.len()) };
            finish(w, r, a, b, o, |o, v| *o += v);
        });
    };
    super::pool::for_ranges(rows, MIN_ROWS_PER_TASK, run);
}

/// SwiGLU's gated product in one job: `gate[i] = x·W_gate[r]`, then
/// `out[i] = silu(gate[i]) · (x·W_up[r])` for `i = mi * rows + r`, each task computing both
/// matrices' rows of its range (one pass over the pool instead of two GEMVs and an
/// element-wise op; the same values, bit for bit, as [`super::elementwise::silu_mul`] over the
/// two GEMVs). `w_up` has `w_gate`'s shape; shapes are checked by the backend first.
pub fn q4_gemv_q8_glu(
    x: &[f32],
    (w_gate, w_up): (&Q4Matrix, &Q4Matrix),
    m: usize,
    gate: &mut [f32],
    out: &mut [f32],
) {
    let (rows, k) = (w_gate.rows, w_gate.cols);
    if m == 0 || rows == 0 {
        return;
    }
    assert!(
        (w_up.rows, w_up.cols) == (rows, k)
            && x.len() >= m * k
            && gate.len() >= m * rows
            && out.len() >= m * rows
            && w_gate.data.len() == w_gate.layout.words(rows, k)
            && w_up.data.len() == w_up.layout.words(rows, k),
        "q4_gemv_q8_glu: shapes were not checked"
    );
    let xg = quantized(x, w_gate, m);
    // The activations' form depends only on the layouts' (`activation_form`).
    let xu_own =
        (activation_form(w_up, m) != activation_form(w_gate, m)).then(|| quantized(x, w_up, m));
    let (xg, xu) = (&xg, xu_own.as_ref().unwrap_or(&xg));
    let (bg, bu) = (RowBlock::of(w_gate), RowBlock::of(w_up));
    let isa = Isa::best();
    let (gp, op) = (OutPtr(gate.as_mut_ptr()), OutPtr(out.as_mut_ptr()));
    let run = |r0: usize, r1: usize| {
        let mut scratch = vec![0f32; k / GROUP];
        let (gp, op) = (gp, op);
        rows_dot(isa, bg, r0..r1, xg, &mut scratch, |r, mi, a, b| {
            // SAFETY: mi·rows + r + a.len() <= m·rows <= gate.len() (asserted above); tasks
            // own disjoint row ranges.
            let o = unsafe { gp.slice(mi * rows + r, a.len()) };
            finish(w_gate, r, a, b, o, |o, v| *o = v);
        });
        rows_dot(isa, bu, r0..r1, xu, &mut scratch, |r, mi, a, b| {
            let i = mi * rows + r;
            // SAFETY: i + a.len() <= m·rows <= gate.len(), out.len(); gate[i..] was written
            // by this task just above, and `out` is another buffer.
            let (g, o) = unsafe { (gp.slice(i, a.len()), op.slice(i, a.len())) };
            finish(w_up, r, a, b, o, |o, v| *o = v);
            // SiLU with `fast_exp` (no libm call per element, so the loop vectorizes).
            for (o, &g) in o.iter_mut().zip(g.iter()) {
                *o *= g / (1.0 + fast_exp(-g));
            }
        });
    };
    super::pool::for_ranges(rows, MIN_ROWS_PER_TASK, run);
}

/// `outs[j][mi * rows_j + r] = Σ_k x[mi][k] · W_j[r][k]` for several matrices of one width over
/// the same activations (a layer's q, k and v projections) in one job: the rows of every
/// matrix, end to end, spread over the pool as one range, and the activations rounded once per
/// form a matrix needs (`activation_form`: natural order for `q8_0` and `q6_k`, paired for
/// 4-bit rows, scales shared per 256 for `lq4k` in decode) instead of once per matrix. The
/// same values, bit for bit, as one [`q4_gemv_q8`] each. Shapes are checked by the backend
/// first.
pub fn q4_gemv_q8_many(x: &[f32], parts: &mut [(&Q4Matrix, &mut [f32])], m: usize) {
    let Some(k) = parts.first().map(|(w, _)| w.cols) else {
        return;
    };
    if m == 0 {
        return;
    }
    assert!(
        x.len() >= m * k
            && parts.iter().all(|(w, out)| w.cols == k
                && out.len() >= m * w.rows
                && w.data.len() == w.layout.words(w.rows, k)),
        "q4_gemv_q8_many: shapes were not checked"
    );
    // The activations in each form a matrix needs, rounded once.
    let mut forms: Vec<((bool, bool), Q8Rows)> = Vec::new();
    for (w, _) in parts.iter() {
        let form = activation_form(w, m);
        if !forms.iter().any(|(f, _)| *f == form) {
            forms.push((form, quantized(x, w, m)));
        }
    }
    // Each matrix's first row in the rows end to end, its output and its activations.
    let mut first = 0;
    let jobs: Vec<(usize, &Q4Matrix, OutPtr, &Q8Rows)> = parts
        .iter_mut()
        .filter_map(|(w, out)| {
            let form = activation_form(w, m);
            let xq = forms.iter().find(|(f, _)| *f == form).map(|(_, xq)| xq)?;
            let job = (first, &**w, OutPtr(out.as_mut_ptr()), xq);
            first += w.rows;
            Some(job)
        })
        .collect();
    let total = first;
    let isa = Isa::best();
    let run = |r0: usize, r1: usize| {
        let mut scratch = vec![0f32; k / GROUP];
        for &(at, w, p, xq) in &jobs {
            // This task's rows of matrix w, in its own numbering.
            let (a, b) = (r0.max(at), r1.min(at + w.rows));
            if a >= b {
                continue;
            }
            let rows = w.rows;
            rows_dot(
                isa,
                RowBlock::of(w),
                a - at..b - at,
                xq,
                &mut scratch,
                |r, mi, s, t| {
                    // SAFETY: mi·rows + r + s.len() <= m·rows <= this output's length (asserted
                    // above); tasks own disjoint row ranges of every matrix, and the outputs
                    // are distinct buffers (checked by the backend).
                    let o = unsafe { p.slice(mi * rows + r, s.len()) };
                    finish(w, r, s, t, o, |o, v| *o = v);
                },
            );
        }
    };
    super::pool::for_ranges(total, MIN_ROWS_PER_TASK, run);
}

/// `put(o[j], d·a[j] − dmin·b[j])` for a run of weight rows from `r0`, `(d, dmin)` each row's
/// [`Q4Matrix::row_scales`]: LQ4's per row, 1 for every other layout, whose values are then
/// the plain differences (the same bits) in a loop the compiler vectorizes.
#[inline(always)]
fn finish(
    w: &Q4Matrix,
    r0: usize,
    a: &[f32],
    b: &[f32],
    o: &mut [f32],
    mut put: impl FnMut(&mut f32, f32),
) {
    if w.layout == BlockLayout::Lq4 {
        for (j, ((o, &a), &b)) in o.iter_mut().zip(a).zip(b).enumerate() {
            let (d, dmin) = w.row_scales(r0 + j);
            put(o, d * a - dmin * b);
        }
    } else {
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            put(o, a - b);
        }
    }
}

/// True where `m` activation rows for rows of `layout` are rounded with one scale per
/// super-block of 256 ([`Q8Rows::quantize_shared`]): `lq4k` in decode (fewer rows than the
/// tiles take), whose kernel then applies the sub-scales in integers. Prefill's tiles convert
/// per group anyway and keep a scale per 32.
pub fn shares_activation_scales(layout: BlockLayout, m: usize) -> bool {
    layout == BlockLayout::Lq4k && m < TILE_MIN_ROWS
}

/// How `x` is rounded for `w` at `m` rows: `(natural order, scales shared per super-block)`.
fn activation_form(w: &Q4Matrix, m: usize) -> (bool, bool) {
    (
        w.layout.natural_order(),
        shares_activation_scales(w.layout, m),
    )
}

/// `x`'s `m` rows rounded to 8-bit blocks in the order `w`'s rows are stored in (natural for
/// `q8_0` and `q6_k`, paired for the 4-bit layouts), with scales shared per super-block where
/// [`shares_activation_scales`].
fn quantized(x: &[f32], w: &Q4Matrix, m: usize) -> Q8Rows {
    let mut xq = Q8Rows::default();
    if shares_activation_scales(w.layout, m) {
        xq.quantize_shared(x, m, w.cols);
        return xq;
    }
    let natural = w.layout.natural_order();
    xq.quantize_with(x, m, w.cols, natural, row_quantizer(Isa::best()));
    xq
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::simd::tests::{random_lq4k, random_q4_1, random_q6, random_q8_0};
    use crate::rng::Pcg32;

    /// The fused epilogues give the plain ops' values bit for bit (the GEMV into a buffer,
    /// then the add, or the two GEMVs, then `silu_mul`), on every layout, one and three
    /// activation rows, a row count that is not a multiple of the task size.
    #[test]
    fn fused_epilogues_equal_the_plain_ops() {
        let mut rng = Pcg32::new(17);
        let (rows, k) = (37, 32 * 7);
        let lq4 = |rng: &mut Pcg32| {
            Q4Matrix::quantize("w", rows, k, &rng.normal_vec(rows * k, 0.05)).expect("lq4")
        };
        let pairs = [
            (lq4(&mut rng), lq4(&mut rng)),
            (random_q4_1(&mut rng, rows, k), lq4(&mut rng)),
            (
                random_q8_0(&mut rng, rows, k),
                random_q4_1(&mut rng, rows, k),
            ),
            (random_q4_1(&mut rng, rows, k), random_q6(&mut rng, rows, k)),
            (
                random_lq4k(&mut rng, rows, k),
                random_q8_0(&mut rng, rows, k),
            ),
        ];
        for (wg, wu) in &pairs {
            for m in [1usize, 3] {
                let x = rng.normal_vec(m * k, 1.0);
                let acc0 = rng.normal_vec(m * rows, 1.0);
                let (mut g, mut u, mut want) = (
                    vec![0f32; m * rows],
                    vec![0f32; m * rows],
                    vec![0f32; m * rows],
                );
                q4_gemv_q8(&x, wg, m, &mut g, rows, 0);
                q4_gemv_q8(&x, wu, m, &mut u, rows, 0);
                super::super::elementwise::silu_mul(&g, &u, &mut want, m * rows);
                let (mut gate, mut out) = (vec![0f32; m * rows], vec![0f32; m * rows]);
                q4_gemv_q8_glu(&x, (wg, wu), m, &mut gate, &mut out);
                assert_eq!(gate, g, "{} gate m={m}", wg.layout.name());
                assert_eq!(
                    out,
                    want,
                    "{} × {} glu m={m}",
                    wg.layout.name(),
                    wu.layout.name()
                );
                let mut acc = acc0.clone();
                q4_gemv_q8_add(&x, wg, m, &mut acc);
                let plain: Vec<f32> = acc0.iter().zip(&g).map(|(a, b)| a + b).collect();
                assert_eq!(acc, plain, "{} add m={m}", wg.layout.name());
            }
        }
    }

    /// Several matrices in one job give one GEMV each, bit for bit: mixed layouts (so both
    /// activation orders), row counts that are not multiples of the task size, one activation
    /// row (decode) and five (prefill's tiles and a partial tile).
    #[test]
    fn many_matrices_equal_one_gemv_each() {
        let mut rng = Pcg32::new(23);
        let k = 32 * 5;
        let ws = [
            Q4Matrix::quantize("q", 45, k, &rng.normal_vec(45 * k, 0.05)).expect("lq4"),
            random_q8_0(&mut rng, 13, k),
            random_q4_1(&mut rng, 29, k),
            random_q8_0(&mut rng, 1, k),
            random_q6(&mut rng, 11, k),
            random_lq4k(&mut rng, 7, k),
        ];
        for m in [1usize, 5] {
            let x = rng.normal_vec(m * k, 1.0);
            let want: Vec<Vec<f32>> = ws
                .iter()
                .map(|w| {
                    let mut o = vec![0f32; m * w.rows];
                    q4_gemv_q8(&x, w, m, &mut o, w.rows, 0);
                    o
                })
                .collect();
            let mut outs: Vec<Vec<f32>> = ws.iter().map(|w| vec![f32::NAN; m * w.rows]).collect();
            let mut parts: Vec<(&Q4Matrix, &mut [f32])> = ws
                .iter()
                .zip(outs.iter_mut())
                .map(|(w, o)| (w, &mut o[..]))
                .collect();
            q4_gemv_q8_many(&x, &mut parts, m);
            for ((w, got), want) in ws.iter().zip(&outs).zip(&want) {
                assert_eq!(got, want, "{} [{}, {k}] m={m}", w.layout.name(), w.rows);
            }
        }
    }
}
