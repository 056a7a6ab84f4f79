//! The 4-bit (and `q8_0`) × 8-bit GEMM of prefill, shared by the instruction sets that have a
//! tile kernel (AVX2 for both, `simd128` for 4-bit rows): the weight rows pass over blocks of
//! activation rows, and each instruction set's kernel multiplies `WR` weight rows (one, or
//! four for the 4-bit rows with AVX-512 VNNI) with a tile of [`TX`] activation rows.
//!
//! Per group a weight row's codes are split into nibbles once for the tile's four activation
//! rows, and the kernel gathers the four integer products into one register whose lanes are
//! the activation rows, so one conversion, one scale multiply and one add (or FMA) serve four
//! (row, activation row) pairs instead of one, and one more their min terms. This driver
//! prepares what the kernels read outside their loops: each weight row's scales and mins as
//! f32, each activation tile's scales and block sums in the kernels' lane order
//! (`[group][TX]`), and blocks of `TILES_PER_BLOCK` tiles whose codes stay in L1 while every
//! weight row passes over them, so each output row is written along its length. A last
//! partial tile repeats its last row, and a last partial set of weight rows its last row;
//! only the real ones are reported.

use super::{f16_to_f32, RowBlock};
use crate::cpu::q8::Q8Row;
use crate::quant::BlockLayout;

/// Activation rows of one tile.
pub const TX: usize = 4;

/// Activation rows from which the instruction sets with a tile kernel take [`tiles`].
pub const TILE_MIN_ROWS: usize = 2;

/// Activation tiles kept in L1 while every weight row passes over them.
const TILES_PER_BLOCK: usize = 4;

/// A weight row's side of a tile: its codes (16·G bytes, 24·G for `q6_k`, 32·G for `q8_0`),
/// its per-group scales and mins as f32 (G each), and its scale bytes as stored.
#[derive(Clone, Copy)]
pub struct WeightRow<'a> {
    /// The row's codes in the LQ4 nibble order (`q8_0`: bytes in natural order; `q6_k`: its
    /// groups of 24 bytes).
    pub codes: &'a [u8],
    /// The row's scale bytes as stored (the layout's group bytes × G): `q6_k`'s half scales.
    pub subs: &'a [u8],
    /// Per-group scales (LQ4's `sc`, `lq4h`'s `s`, `q6_k`'s `d`).
    pub sc: &'a [f32],
    /// Per-group mins (LQ4's `mn`, `lq4h`'s `m`).
    pub mn: &'a [f32],
}

/// An activation tile: its [`TX`] rows (of G groups each) and their scales and block sums in
/// lane order, `dx[TX·g + t]` and `sum[TX·g + t]` for group g of row t.
#[derive(Clone, Copy)]
pub struct ActTile<'a> {
    /// The rows (a partial tile repeats its last row).
    pub rows: &'a [Q8Row<'a>; TX],
    /// Scales `d` in lane order, `TX·G`.
    pub dx: &'a [f32],
    /// Block sums in lane order, `TX·G`.
    pub sum: &'a [f32],
}

/// Rows `rows` of `w` (LQ4, `lq4h`, `q8_0` or `q6_k`) times every row of `xs`: `out(r, mi, first,
/// second)` receives [`super::lq4_q8`]'s pair (with the f32 sums in another order than the
/// row forms'; for `q8_0` the products and the min term, whose difference is
/// [`super::q8_q8`]). `kernel(w, x, G)` takes `WR` weight rows and returns, for each, `(Σ_g
/// sc[g]·dx_t[g]·Σ_i q·qx_t, Σ_g mn[g]·Σx_t[g])` for `t < TX`, given the lengths above: with
/// `WR` > 1 each activation load feeds `WR` rows (on the VNNI 4-bit rows four rows against one
/// took a 1B-parameter model's prefill from 87 to 117 tok/s, 458 to 520 on SmolLM2-135M,
/// medians of alternated runs). Every `xs` row must have G groups and the rows lie inside `w`
/// (internal invariants of [`super::rows_dot`], checked there). Inlined into each instruction
/// set's caller, so the driver and `out` compile for its target features.
#[inline(always)]
pub fn tiles<const WR: usize>(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
    kernel: impl Fn(&[WeightRow<'_>; WR], ActTile<'_>, usize) -> [([f32; TX], [f32; TX]); WR],
) {
    let Some(last) = xs.len().checked_sub(1) else {
        return;
    };
    let groups = xs[0].d.len();
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.scale_bytes(groups),
    );
    let xtiles = xs.len().div_ceil(TX);
    let tiles_x: Vec<[Q8Row<'_>; TX]> = (0..xtiles)
        .map(|i| std::array::from_fn(|t| xs[(i * TX + t).min(last)]))
        .collect();
    let (mut dxt, mut sumt) = (
        vec![0f32; xtiles * groups * TX],
        vec![0f32; xtiles * groups * TX],
    );
    for (i, x) in tiles_x.iter().enumerate() {
        for g in 0..groups {
            for (t, x) in x.iter().enumerate() {
                let o = (i * groups + g) * TX + t;
                (dxt[o], sumt[o]) = (x.d[g], x.sum[g]);
            }
        }
    }
    // Every row's scales and mins as f32 ([rows][G]), converted once.
    let n = rows.len();
    let (mut sc, mut mn) = (vec![0f32; n * groups], vec![0f32; n * groups]);
    for (j, r) in rows.clone().enumerate() {
        let span = j * groups..(j + 1) * groups;
        row_scales(
            w.layout,
            &w.subs[r * sb..(r + 1) * sb],
            &mut sc[span.clone()],
            &mut mn[span],
        );
    }
    for i0 in (0..xtiles).step_by(TILES_PER_BLOCK) {
        let i1 = (i0 + TILES_PER_BLOCK).min(xtiles);
        for j0 in (0..n).step_by(WR) {
            // WR weight rows; a last partial set repeats its last row and reports the real ones.
            let real = WR.min(n - j0);
            let wr: [WeightRow<'_>; WR] = std::array::from_fn(|k| {
                let j = j0 + k.min(real - 1);
                let (r, span) = (rows.start + j, j * groups..(j + 1) * groups);
                WeightRow {
                    codes: &w.codes[r * cb..(r + 1) * cb],
                    subs: &w.subs[r * sb..(r + 1) * sb],
                    sc: &sc[span.clone()],
                    mn: &mn[span],
                }
            });
            for (i, x) in tiles_x.iter().enumerate().take(i1).skip(i0) {
                let span = i * groups * TX..(i + 1) * groups * TX;
                let tile = ActTile {
                    rows: x,
                    dx: &dxt[span.clone()],
                    sum: &sumt[span],
                };
                let res = kernel(&wr, tile, groups);
                for (k, (acc, min)) in res.iter().enumerate().take(real) {
                    for t in 0..TX.min(xs.len() - i * TX) {
                        out(rows.start + j0 + k, i * TX + t, &[acc[t]], &[min[t]]);
                    }
                }
            }
        }
    }
}

/// A row's per-group scales and mins as f32: LQ4's `(sc, mn)` bytes, `lq4h`'s and `q8_0`'s f16
/// `(s, m)` pairs, `q6_k`'s `(d, 0)`, `lq4k`'s `(d·sc, dmin·mn)` (`subs`: the row's scale
/// bytes; `sc`, `mn`: G floats).
pub(super) fn row_scales(layout: BlockLayout, subs: &[u8], sc: &mut [f32], mn: &mut [f32]) {
    let half = |i: usize| f16_to_f32(u16::from_le_bytes([subs[i], subs[i + 1]]));
    if layout == BlockLayout::Lq4k {
        // Per super-block record (see `crate::quant::lq4k_scales`): `(d, dmin)` converted once
        // for its (up to) eight groups.
        for (s, (sc, mn)) in sc.chunks_mut(8).zip(mn.chunks_mut(8)).enumerate() {
            let (d, dmin) = (half(20 * s), half(20 * s + 2));
            let pairs = &subs[20 * s + 4..];
            for (j, (sc, mn)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
                (*sc, *mn) = (d * pairs[2 * j] as f32, dmin * pairs[2 * j + 1] as f32);
            }
        }
        return;
    }
    for (g, (s, m)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
        (*s, *m) = match layout {
            BlockLayout::Lq4 => (subs[2 * g] as f32, subs[2 * g + 1] as f32),
            BlockLayout::Q6 => (half(4 * g + 2), 0.0),
            _ => (half(4 * g), half(4 * g + 2)),
        };
    }
}
