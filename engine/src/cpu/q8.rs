//! 8-bit activation blocks for the CPU's integer dot products (the scheme of llama.cpp's
//! `block_q8_0` / `block_q8_1`, which its q4 × q8 dot products read), and the LQ4 row view
//! ([`Lq4Row`]) they are multiplied with.
//!
//! A row of `k` activations (`k % 32 == 0`) is cut into blocks of 32. Each block keeps
//! - a scale `d = max|x| / 127` (0 for an all-zero block),
//! - 32 signed codes `q = round(x · (1/d))` (f32, ties to even), so `|q| <= 127` and `x ≈ d·q`,
//! - the sum of the rounded block, `d·Σq` (llama.cpp's `block_q8_1.s`), for the min term
//!   `dmin·mn·Σx` of the 4-bit rows. It must be the rounded activations' sum, not the exact one:
//!   then a row's result is exactly `Σ w·x̂` (the exact weights against the rounded activations),
//!   whose error `Σ w·(x̂ − x)` is small because `w` is centered; mixing in the exact sum leaves
//!   `Σ d·sc·q·(x̂ − x)`, whose weights `d·sc·q ≥ 0` all lean one way. Measured on SmolLM2's
//!   decode: logits up to 2.0 off the f32 ones with the exact sum, 0.6 with this one (llama.cpp's
//!   own q8 path: 0.4).
//!
//! # Order of the codes
//! LQ4 packs weight `2j` of a group in the low nibble of byte `j` and weight `2j + 1` in its
//! high nibble. The codes are stored in the order the nibbles come out of one SIMD load, so no
//! kernel shuffles: blocks go in pairs `(2p, 2p + 1)` and a pair's 64 codes are stored as
//! `[even of 2p | even of 2p+1 | odd of 2p | odd of 2p+1]` (16 codes each); an unpaired last
//! block is stored `[even | odd]`. [`Q8Rows::code`] reads element `i` back in natural order.
//!
//! # Scales shared by a super-block
//! [`Q8Rows::quantize_shared`] gives the 8 blocks of each 256 activations (fewer at a row's
//! end) one scale, `max|x| / 127` over the 256: llama.cpp's `block_q8_K`, which its Q4_K dot
//! products read. The blocks keep their own sums `d·Σq`. An `lq4k` row then applies its 6-bit
//! sub-scales to the integer products and converts to float once per 256 weights
//! ([`super::simd`]); every kernel reads such rows correctly, as the scales are still stored
//! per block ([`Q8Row::shared`] only says they are equal).

use crate::quant::{BlockLayout, GROUP};

/// `m` rows of `k` activations as 8-bit blocks (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Q8Rows {
    /// Activations per row (a multiple of 32).
    pub k: usize,
    /// Rows.
    pub m: usize,
    /// Codes, `[m][k]`, in the paired order of the module documentation.
    pub qs: Vec<i8>,
    /// Block scales, `[m][k / 32]`.
    pub d: Vec<f32>,
    /// Sums of the rounded blocks `d·Σq`, `[m][k / 32]`.
    pub sum: Vec<f32>,
    /// Codes in natural order (block `b`'s element `i` at `32b + i`), for the 8-bit weights'
    /// dot products, instead of the paired order the 4-bit ones read.
    pub natural: bool,
    /// The blocks of each super-block of 8 share one scale ([`Self::quantize_shared`]).
    pub shared: bool,
}

/// Rounds `|r| <= 2²²` to the nearest integer, ties to even, without a libm call: adding and
/// subtracting 1.5·2²³ leaves no fraction bits (`f32::round_ties_even` by definition).
#[inline(always)]
fn round_ties_even(r: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (r + MAGIC) - MAGIC
}

/// Where element `i` (`0..32`) of block `b` of a row with `blocks` blocks is stored, relative
/// to the row's first code.
#[inline]
pub fn position(b: usize, blocks: usize, i: usize) -> usize {
    let (half, parity) = (i / 2, i % 2);
    if b + 1 == blocks && blocks % 2 == 1 {
        b * GROUP + parity * 16 + half
    } else {
        (b / 2) * 2 * GROUP + parity * GROUP + (b % 2) * 16 + half
    }
}

impl Q8Rows {
    /// Quantizes `x` (`[m][k]`, `k % 32 == 0`) into these buffers in the paired order the
    /// 4-bit dot products read, reusing their capacity.
    pub fn quantize(&mut self, x: &[f32], m: usize, k: usize) {
        self.quantize_with(x, m, k, false, quantize_row);
    }

    /// As [`Self::quantize`], each super-block of 8 blocks (256 activations; fewer at a row's
    /// end) under one scale (see the module documentation; for `lq4k` weights in decode).
    pub fn quantize_shared(&mut self, x: &[f32], m: usize, k: usize) {
        self.quantize_with(x, m, k, false, quantize_row_shared);
        self.shared = true;
    }

    /// As [`Self::quantize`], the codes in natural order (for `q8_0` weights).
    pub fn quantize_natural(&mut self, x: &[f32], m: usize, k: usize) {
        self.quantize_with(x, m, k, true, quantize_row);
    }

    /// As [`Self::quantize`] (`natural`: as [`Self::quantize_natural`]) with another row
    /// quantizer of [`quantize_row`]'s contract (an instruction set's, `cpu::simd`).
    pub fn quantize_with(
        &mut self,
        x: &[f32],
        m: usize,
        k: usize,
        natural: bool,
        row: RowQuantizer,
    ) {
        debug_assert!(k.is_multiple_of(GROUP) && x.len() >= m * k);
        let blocks = k / GROUP;
        self.k = k;
        self.m = m;
        self.natural = natural;
        self.shared = false;
        self.qs.clear();
        self.qs.resize(m * k, 0);
        self.d.clear();
        self.d.resize(m * blocks, 0.0);
        self.sum.clear();
        self.sum.resize(m * blocks, 0.0);
        // Rows on the pool's threads (prefill quantizes hundreds), each into its own slices.
        let (qp, dp, sp) = (
            SendPtr(self.qs.as_mut_ptr()),
            SendPtr(self.d.as_mut_ptr()),
            SendPtr(self.sum.as_mut_ptr()),
        );
        super::pool::for_ranges(m, ROWS_PER_TASK, |r0, r1| {
            let (qp, dp, sp) = (qp, dp, sp);
            for mi in r0..r1 {
                // SAFETY: row mi's codes qs[mi·k..(mi+1)·k] and scales and sums
                // [mi·blocks..(mi+1)·blocks] lie inside the buffers sized above; ranges are
                // disjoint, so no two tasks address the same row.
                let (qs, d, sum) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(qp.0.add(mi * k), k),
                        std::slice::from_raw_parts_mut(dp.0.add(mi * blocks), blocks),
                        std::slice::from_raw_parts_mut(sp.0.add(mi * blocks), blocks),
                    )
                };
                row(&x[mi * k..(mi + 1) * k], natural, qs, d, sum);
            }
        });
    }

    /// Code of element `i` (natural order) of row `mi`.
    pub fn code(&self, mi: usize, i: usize) -> i8 {
        let blocks = self.k / GROUP;
        let p = if self.natural {
            i
        } else {
            position(i / GROUP, blocks, i % GROUP)
        };
        self.qs[mi * self.k + p]
    }

    /// Row `mi`'s codes, scales and sums.
    #[inline]
    pub fn row(&self, mi: usize) -> Q8Row<'_> {
        let blocks = self.k / GROUP;
        Q8Row {
            qs: &self.qs[mi * self.k..(mi + 1) * self.k],
            d: &self.d[mi * blocks..(mi + 1) * blocks],
            sum: &self.sum[mi * blocks..(mi + 1) * blocks],
            shared: self.shared,
        }
    }
}

/// Activation rows per quantizing task at least.
const ROWS_PER_TASK: usize = 8;

/// A buffer's base pointer shared by the quantizing tasks, which write disjoint rows.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: only used by `Q8Rows::fill`, whose tasks write disjoint rows.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// A row quantizer: [`quantize_row`] or an instruction set's equal of it.
pub type RowQuantizer = fn(&[f32], bool, &mut [i8], &mut [f32], &mut [f32]);

/// One row of `k` activations into its codes (`k`, paired order, or natural where
/// `natural`), block scales and block sums (`k / 32` each); see the module documentation.
/// The portable form, the reference of the SIMD ones, which give the same bits.
pub fn quantize_row(row: &[f32], natural: bool, qs: &mut [i8], d: &mut [f32], sum: &mut [f32]) {
    quantize_row_span(row, natural, 1, qs, d, sum);
}

/// As [`quantize_row`] (paired order where `!natural`), the blocks of each super-block of 8
/// (fewer at the row's end) under one scale: [`Q8Rows::quantize_shared`]'s row form.
pub fn quantize_row_shared(
    row: &[f32],
    natural: bool,
    qs: &mut [i8],
    d: &mut [f32],
    sum: &mut [f32],
) {
    quantize_row_span(row, natural, SUPER_BLOCKS, qs, d, sum);
}

/// Blocks per super-block of [`Q8Rows::quantize_shared`] (256 activations).
pub const SUPER_BLOCKS: usize = 8;

/// [`quantize_row`] with each `span` consecutive blocks (fewer at the row's end) under the
/// scale of their largest magnitude.
fn quantize_row_span(
    row: &[f32],
    natural: bool,
    span: usize,
    qs: &mut [i8],
    d: &mut [f32],
    sum: &mut [f32],
) {
    let blocks = row.len() / GROUP;
    for (s, xs) in row.chunks(span * GROUP).enumerate() {
        let mut lanes = [0f32; 8];
        for c in xs.chunks_exact(8) {
            for (l, &v) in lanes.iter_mut().zip(c) {
                let a = v.abs();
                *l = if a > *l { a } else { *l };
            }
        }
        let amax = lanes.iter().fold(0f32, |a, &v| if v > a { v } else { a });
        let db = amax / 127.0;
        let id = if db > 0.0 { 1.0 / db } else { 0.0 };
        for (j, xb) in xs.chunks_exact(GROUP).enumerate() {
            let b = s * span + j;
            let mut q = [0i8; GROUP];
            for (q, &v) in q.iter_mut().zip(xb) {
                *q = round_ties_even(v * id) as i32 as i8;
            }
            if natural {
                qs[b * GROUP..(b + 1) * GROUP].copy_from_slice(&q);
            } else {
                // Where the block's even and odd elements go (see `position`).
                let (even, odd) = (position(b, blocks, 0), position(b, blocks, 1));
                for h in 0..GROUP / 2 {
                    qs[even + h] = q[2 * h];
                    qs[odd + h] = q[2 * h + 1];
                }
            }
            let qsum: i32 = q.iter().map(|&c| c as i32).sum();
            d[b] = db;
            // Exact integer sum, one rounding (see the module documentation).
            sum[b] = db * qsum as f32;
        }
    }
}

/// One row of [`Q8Rows`].
#[derive(Clone, Copy, Debug)]
pub struct Q8Row<'a> {
    /// `k` codes in paired order.
    pub qs: &'a [i8],
    /// `k / 32` scales.
    pub d: &'a [f32],
    /// `k / 32` sums of the rounded blocks, `d·Σq`.
    pub sum: &'a [f32],
    /// The scales are equal over each super-block of 8 blocks from the row's first
    /// ([`Q8Rows::quantize_shared`]), so `d[8s]` serves super-block `s`.
    pub shared: bool,
}

/// One LQ4 row as bytes.
#[derive(Clone, Copy, Debug)]
pub struct Lq4Row<'a> {
    /// `K / 2` bytes: byte `j` of group `g` holds weight `32g + 2j` in its low nibble and
    /// `32g + 2j + 1` in its high nibble.
    pub codes: &'a [u8],
    /// Per group `(sub-scale, sub-min)` bytes (LQ4: `2·K / 32` bytes) or an f16 `(s, m)` pair
    /// (`lq4h`: `4·K / 32` bytes), as `layout` says.
    pub subs: &'a [u8],
    /// Which of the two `subs` holds ([`BlockLayout::Lq4`] or [`BlockLayout::Lq4h`]).
    pub layout: BlockLayout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_a_permutation_and_codes_round_trip() {
        for blocks in [1usize, 2, 3, 5, 18] {
            let mut seen = vec![false; blocks * GROUP];
            for b in 0..blocks {
                for i in 0..GROUP {
                    let p = position(b, blocks, i);
                    assert!(!seen[p], "blocks {blocks}: position {p} used twice");
                    seen[p] = true;
                }
            }
            let k = blocks * GROUP;
            let x: Vec<f32> = (0..2 * k)
                .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 97.0)
                .collect();
            let mut q = Q8Rows::default();
            q.quantize(&x, 2, k);
            for mi in 0..2 {
                for b in 0..blocks {
                    let xb = &x[mi * k + b * GROUP..mi * k + (b + 1) * GROUP];
                    let d = q.d[mi * blocks + b];
                    let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
                    assert_eq!(d, amax / 127.0);
                    let qsum: i32 = (0..GROUP).map(|i| q.code(mi, b * GROUP + i) as i32).sum();
                    assert_eq!(q.sum[mi * blocks + b], d * qsum as f32);
                    for (i, &v) in xb.iter().enumerate() {
                        let c = q.code(mi, b * GROUP + i) as f32;
                        // Round to nearest: within half a step (and a little f32 slack).
                        assert!(
                            (c * d - v).abs() <= 0.5 * d * (1.0 + 1e-5),
                            "{v} -> {c}·{d}"
                        );
                        assert!(c.abs() <= 127.0);
                    }
                }
            }
        }
    }

    /// Shared scales: one `max|x| / 127` per 256 activations of a row (fewer at its end), the
    /// codes within half a step of it, each block's own sum, and the row flagged.
    #[test]
    fn shared_scales_span_super_blocks() {
        for blocks in [1usize, 7, 8, 9, 19] {
            let k = blocks * GROUP;
            let x: Vec<f32> = (0..2 * k)
                .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / (97.0 + (i / 256) as f32))
                .collect();
            let mut q = Q8Rows::default();
            q.quantize_shared(&x, 2, k);
            for mi in 0..2 {
                assert!(q.row(mi).shared);
                let row = &x[mi * k..(mi + 1) * k];
                for (s, xs) in row.chunks(SUPER_BLOCKS * GROUP).enumerate() {
                    let amax = xs.iter().fold(0f32, |a, v| a.max(v.abs()));
                    for j in 0..xs.len() / GROUP {
                        let b = s * SUPER_BLOCKS + j;
                        let d = q.d[mi * blocks + b];
                        assert_eq!(d, amax / 127.0, "blocks {blocks} row {mi} block {b}");
                        let qsum: i32 = (0..GROUP).map(|i| q.code(mi, b * GROUP + i) as i32).sum();
                        assert_eq!(q.sum[mi * blocks + b], d * qsum as f32);
                        for i in 0..GROUP {
                            let (c, v) = (q.code(mi, b * GROUP + i) as f32, row[b * GROUP + i]);
                            assert!(
                                (c * d - v).abs() <= 0.5 * d * (1.0 + 1e-5),
                                "{v} -> {c}·{d}"
                            );
                        }
                    }
                }
            }
            // A later plain quantization clears the flag.
            q.quantize(&x, 2, k);
            assert!(!q.row(0).shared);
        }
    }

    #[test]
    fn rounding_is_ties_to_even() {
        for r in [
            -127.5f32, -2.5, -0.5, 0.49999997, 0.5, 1.5, 2.5, 126.5, 127.0, -3.7, 64.25,
        ] {
            assert_eq!(round_ties_even(r), r.round_ties_even(), "{r}");
        }
    }

    #[test]
    fn zero_block_has_zero_scale_and_codes() {
        let mut q = Q8Rows::default();
        q.quantize(&[0.0; 64], 1, 64);
        assert!(q.d.iter().all(|&d| d == 0.0) && q.qs.iter().all(|&c| c == 0));
    }
}
