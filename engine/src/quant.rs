//! The block formats the matmul and embedding kernels read ([`BlockLayout`]): Lorekeeper's own
//! 4-bit **LQ4**, which the index-builder quantizes to, and two layouts that carry a GGUF's
//! blocks with their exact values (`lq4h`, `q8_0`, below).
//!
//! # Layout
//! A matrix `W[N rows][K cols]` (row `n` is output feature `n`; `K % 32 == 0`) is cut into
//! groups of 32 consecutive weights along a row, `G = K / 32` groups per row. It is stored as
//! one little-endian `u32` array with three sections:
//!
//! | section | words | content |
//! |---|---|---|
//! | `qs` | `N * K / 8` | 4-bit codes, 8 per word: weight `k` of row `n` is in word `n*K/8 + k/8`, bits `4*(k%8)..` |
//! | `sm` | `ceil(N*G*2 / 4)` | per group two bytes: byte `2*(n*G+g)` = sub-scale `sc`, byte `+1` = sub-min `mn` (u8 each) |
//! | `rows` | `2 * N` | per row two f32: `d` (scale of sub-scales), `dmin` (scale of sub-mins) |
//!
//! Dequantization: `w[n][32g+i] = d_n * sc[n][g] * q - dmin_n * mn[n][g]` with `q` in `0..=15`.
//!
//! Bits per weight: `4 + 16/32 + 64/K` = **4.5 + 64/K** (4.53 at K = 2048, 4.61 at K = 576).
//!
//! # Half-scale variant (`lq4h`): GGUF's Q4_0 and Q4_1 blocks, exactly
//! [`BlockLayout::Lq4h`] keeps the `qs` section and replaces `sm` + `rows` by one word per group:
//! an f16 scale `s` (low half) and an f16 min `m` (high half), `w[n][32g+i] = s·q − m`. A GGUF
//! Q4_1 block (`d·q + m`, f16 `d`, `m`) is `s = d`, `m = −m`; a Q4_0 block (`d·(q − 8)`) is
//! `s = d`, `m = 8·d`; both exact (a sign flip and a power-of-two multiple of an f16). Only the
//! nibble order changes (GGUF puts weights `j` and `j + 16` in byte `j`). 5.0 bits per weight,
//! which is Q4_1's own size; the kernels differ from LQ4's only in where a group's `(s, m)`
//! comes from, so the same integer dot products serve both (the user's file runs as it is,
//! with no second rounding).
//!
//! # 8-bit variant (`q8_0`): GGUF's Q8_0, Q5_0 and Q5_1 blocks, exactly
//! [`BlockLayout::Q8`]: signed 8-bit codes, 4 per word (weight `k` of row `n` in byte `n*K + k`,
//! `N * K / 4` words), then the same one word per group of f16 `(s, m)`, `w = s·q − m`. A Q8_0
//! block is `(d, 0)` with its codes as they are; Q5_0 (`d·(q − 16)`) stores `q − 16` with
//! `(d, 0)`, Q5_1 (`d·q + m`) stores `q` with `(d, −m)`. 9 bits per weight.
//!
//! # 5-bit variant (`q5`): GGUF's Q5_0 and Q5_1 blocks, exactly
//! [`BlockLayout::Q5`]: per row `20·G` code bytes, then the same one word per group of f16
//! `(s, m)` as `lq4h`, `w = s·q − m` with `q` in `0..=31`. A row's first `16·G` bytes are its low
//! nibbles in the 4-bit layouts' order (byte `j` of group `g` holds weights `2j` and `2j + 1`);
//! its last `4·G` hold the fifth bits, a bit per byte of the 4-bit kernels' registers: per pair
//! of groups A = 2p, B = 2p + 1 (while `2p + 1 < G`) two words from byte `16·G + 8p`, the first
//! with bit `j` = A's weight `2j` and bit `16 + j` = B's weight `2j` (the even weights, as the
//! nibble register `[A even | B even]` holds them), the second the same for the odd weights;
//! a last unpaired group `g` one word from `16·G + 4g`, bit `j` = weight `2j`, bit `16 + j` =
//! weight `2j + 1` ([`q5_code`]). A Q5_0 block (`d·(q − 16)`) is `(d, 16·d)`, a Q5_1 block
//! (`d·q + m`) `(d, −m)`. 6 bits per weight where the file spends 5.5 or 6 and `q8_0` 9. The
//! CPU's AVX2 kernels run it; every other backend and instruction set, and the bundles, receive
//! it as `q8_0` ([`Q4Matrix::to_portable`]).
//!
//! # Super-block variant (`lq4k`): GGUF's Q4_K blocks, exactly
//! [`BlockLayout::Lq4k`] keeps the `qs` section and, per row, per super-block of 8 groups (the
//! last may hold fewer), a 20-byte record: the f16 `d` and `dmin`, then each group's 6-bit
//! `(sc, mn)` as two bytes ([`lq4k_scales`]); the rows' records follow each other (`N` times
//! `2·G + 4·⌈G/8⌉` bytes, padded to a word). `w = d·sc·q − dmin·mn`: Q4_K's own values (its
//! 12-byte scale packing unpacked to bytes). 4.625 bits per weight where the file spends 4.5
//! and `lq4h` 5.0. The CPU's AVX2 kernels run it; every other backend and instruction set, and
//! the bundles, receive it as `lq4h` ([`Q4Matrix::to_portable`]).
//!
//! # 6-bit variant (`q6_k`): GGUF's Q6_K blocks, exactly
//! [`BlockLayout::Q6`]: 24 code bytes per group of 32 (`N * K * 6 / 32` words), stored by pairs
//! of groups (A = 2p, B = 2p + 1; 48 bytes from `48p` in the row): 32 bytes whose byte `j` holds
//! weight `j` of A in its low and of B in its high nibble, then 16 bytes whose byte `j` holds the
//! bits 4–5 of A's weights `j` and `j + 16` and B's `j` and `j + 16` in bits 0–1, 2–3, 4–5 and
//! 6–7 (so AVX2 unpacks a pair with two masks and two shifts, [`q6_code`]); a last unpaired
//! group holds weight `j` and `j + 16` in the nibbles of byte `j` and weight `j + 8i`'s bits
//! 4–5 in bits `2i..2i+2` of byte `16 + j`. Then one word per group: the signed 8-bit scales of its two halves of 16 (bytes 0 and 1) and
//! the super-block's f16 `d` (high half). `w = d·sc_h·(q − 32)` with `q` in `0..=63` and
//! `sc_h` the scale of the weight's half: Q6_K's own values (the file holds `d` once per 256
//! weights; here each group repeats it). 7 bits per weight where the file spends 6.56 and
//! `q8_0` 9. The CPU's AVX2 kernels run it; every other backend and instruction set, and the
//! bundles, receive it as `q8_0` ([`Q4Matrix::to_portable`]).
//!
//! # Why this format
//! - MLC's q4f16_1 is symmetric (`(q - 7) * scale`, one f16 scale per 32): 4.5 bpw, but it cannot
//!   shift the grid to a group's asymmetric range, and f16 storage needs unpacking everywhere.
//! - llama.cpp's Q4_0 is the same idea as q4f16_1 (4.5 bpw, symmetric) and measurably worse than
//!   Q4_1 / Q4_K; Q4_1 is asymmetric but spends two f16 per group (5.0 bpw).
//! - llama.cpp's Q4_K is asymmetric at 4.5 bpw by quantizing each group's scale and min to 6 bits
//!   against a per-256 super-block f16 pair; its 12-byte scale packing costs bit surgery per group.
//! - LQ4 keeps Q4_K's idea (asymmetric groups of 32, scales and mins quantized against a coarser
//!   scale) with byte-aligned 8-bit sub-scales (4× finer than Q4_K's 6 bits) and per-row f32 super
//!   scales, so the kernel reads one byte pair per group and factors `d`, `dmin` out of the row sum.
//!   It is 4.5 bpw plus 64 bits per row. Rows are independent, so a matrix too large for one
//!   128 MiB storage binding splits into row blocks that are themselves LQ4 matrices.
//! - The quantizer searches each group's scale and min for least squared error
//!   (as llama.cpp's `make_qkx2_quants`), then re-fits the codes to the 8-bit-rounded scales.

use crate::error::{EngineError, Result};

mod fit;
mod kquant;
mod q8;
pub use fit::Q4Builder;
use fit::{column_weights, quantize_row, RowCodes};
pub use kquant::{lq4k_scales, q5_code, q5_put, q6_code, q6_put};
pub use q8::Q8Matrix;

/// Weights per group.
pub const GROUP: usize = 32;

/// How a block-quantized matrix is laid out (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlockLayout {
    /// LQ4: 4-bit codes, 8-bit `(sc, mn)` per group against per-row f32 `(d, dmin)`.
    #[default]
    Lq4,
    /// `lq4h`: 4-bit codes, an f16 `(s, m)` pair per group (GGUF Q4_0 / Q4_1 blocks, exactly).
    Lq4h,
    /// `q8_0`: signed 8-bit codes, an f16 scale per group (GGUF Q8_0 blocks, exactly).
    Q8,
    /// `q6_k`: 6-bit codes, signed 8-bit scales per half group, an f16 `d` per group (GGUF
    /// Q6_K blocks, exactly).
    Q6,
    /// `lq4k`: 4-bit codes, 6-bit `(sc, mn)` per group in bytes against an f16 `(d, dmin)` per
    /// 8 groups (GGUF Q4_K blocks, exactly).
    Lq4k,
    /// `q5`: 5-bit codes (4-bit nibbles and a plane of fifth bits), an f16 `(s, m)` pair per
    /// group (GGUF Q5_0 / Q5_1 blocks, exactly).
    Q5,
}

impl BlockLayout {
    /// Bits per code: 4, 5, 6 or 8.
    pub fn code_bits(self) -> usize {
        match self {
            BlockLayout::Lq4 | BlockLayout::Lq4h | BlockLayout::Lq4k => 4,
            BlockLayout::Q5 => 5,
            BlockLayout::Q6 => 6,
            BlockLayout::Q8 => 8,
        }
    }

    /// True where the codes are read in weight order and so the CPU's 8-bit activations are
    /// too (`q8_0`, `q6_k`); the 4-bit layouts pair even and odd weights.
    pub fn natural_order(self) -> bool {
        matches!(self, BlockLayout::Q8 | BlockLayout::Q6)
    }

    /// Word offset of the `sm` section (the end of the codes).
    pub fn sm_offset(self, rows: usize, cols: usize) -> usize {
        rows * cols * self.code_bits() / 32
    }

    /// Word offset of the per-row section (for the per-group layouts, the end: they have none).
    pub fn rows_offset(self, rows: usize, cols: usize) -> usize {
        match self {
            BlockLayout::Lq4 => Q4Matrix::rows_offset_for(rows, cols),
            _ => self.sm_offset(rows, cols) + (rows * self.scale_bytes(cols / GROUP)).div_ceil(4),
        }
    }

    /// Total words of a `[rows, cols]` matrix.
    pub fn words(self, rows: usize, cols: usize) -> usize {
        match self {
            BlockLayout::Lq4 => Q4Matrix::words_for(rows, cols),
            _ => self.rows_offset(rows, cols),
        }
    }

    /// Bytes of scale data of a row of `groups` groups in the `sm` section: 2 per group (LQ4's
    /// `sc`, `mn`), 4 (two f16, or `q6_k`'s two scales and f16 `d`), or `lq4k`'s 2 per group and 4
    /// per 8 groups (its super-blocks' `(d, dmin)`).
    pub fn scale_bytes(self, groups: usize) -> usize {
        match self {
            BlockLayout::Lq4 => 2 * groups,
            BlockLayout::Lq4k => 2 * groups + 4 * groups.div_ceil(8),
            BlockLayout::Lq4h | BlockLayout::Q8 | BlockLayout::Q6 | BlockLayout::Q5 => 4 * groups,
        }
    }

    /// The name in messages and manifests: `LQ4`, `lq4h`, `q8_0`, `q6_k`, `lq4k`, `q5`.
    pub fn name(self) -> &'static str {
        match self {
            BlockLayout::Lq4 => "LQ4",
            BlockLayout::Lq4h => "lq4h",
            BlockLayout::Q8 => "q8_0",
            BlockLayout::Q6 => "q6_k",
            BlockLayout::Lq4k => "lq4k",
            BlockLayout::Q5 => "q5",
        }
    }
}

/// A block-quantized matrix `[rows, cols]` in one of the layouts documented at module level:
/// LQ4, its half-scale variant `lq4h`, or 8-bit `q8_0` (the name is the 4-bit formats').
#[derive(Clone, Debug, PartialEq)]
pub struct Q4Matrix {
    /// N: output features.
    pub rows: usize,
    /// K: input features, a multiple of 32.
    pub cols: usize,
    /// The packed words: `qs`, then `sm`, then `rows` sections.
    pub data: Vec<u32>,
    /// The layout of `data`.
    pub layout: BlockLayout,
}

impl Q4Matrix {
    /// Word offset of the `sm` section.
    pub fn sm_offset(&self) -> usize {
        self.layout.sm_offset(self.rows, self.cols)
    }

    /// Word offset of the per-row `(d, dmin)` section (for [`BlockLayout::Lq4h`], the end).
    pub fn rows_offset(&self) -> usize {
        self.layout.rows_offset(self.rows, self.cols)
    }

    /// `sm` offset for an LQ4 shape.
    pub fn sm_offset_for(rows: usize, cols: usize) -> usize {
        rows * cols / 8
    }

    /// `rows` section offset for an LQ4 shape.
    pub fn rows_offset_for(rows: usize, cols: usize) -> usize {
        let groups = rows * (cols / GROUP);
        Self::sm_offset_for(rows, cols) + (groups * 2).div_ceil(4)
    }

    /// Total words for an LQ4 shape ([`BlockLayout::words`] for either kind).
    pub fn words_for(rows: usize, cols: usize) -> usize {
        Self::rows_offset_for(rows, cols) + 2 * rows
    }

    /// Bits per weight of this matrix, all sections included.
    pub fn bits_per_weight(&self) -> f64 {
        (self.data.len() * 32) as f64 / (self.rows * self.cols) as f64
    }

    /// Checks that `data` has exactly the length the shape requires.
    pub fn validate(&self, name: &str) -> Result<()> {
        if self.cols == 0 || !self.cols.is_multiple_of(GROUP) {
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!(
                    "columns {} are not a positive multiple of {GROUP}",
                    self.cols
                ),
            });
        }
        let want = self
            .rows
            .checked_mul(self.cols)
            .map(|_| self.layout.words(self.rows, self.cols));
        if want != Some(self.data.len()) {
            let want = want.map_or("more than memory holds".into(), |w| w.to_string());
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!(
                    "{} data has {} words, shape [{}, {}] needs {want}",
                    self.layout_name(),
                    self.data.len(),
                    self.rows,
                    self.cols
                ),
            });
        }
        Ok(())
    }

    /// Code `q` of weight `(n, k)`: 0..=15 for the 4-bit layouts, 0..=31 for `q5`,
    /// −128..=127 for `q8_0`, −32..=31 (the stored code − 32) for `q6_k`.
    #[inline]
    pub fn code(&self, n: usize, k: usize) -> i32 {
        if self.layout == BlockLayout::Q8 {
            let w = self.data[(n * self.cols + k) / 4];
            return (w >> (8 * (k % 4))) as u8 as i8 as i32;
        }
        if self.layout == BlockLayout::Q6 {
            let groups = self.cols / GROUP;
            let row: &[u8] = bytemuck::cast_slice(&self.data[..self.sm_offset()]);
            let row = &row[24 * groups * n..24 * groups * (n + 1)];
            return q6_code(row, groups, k / GROUP, k % GROUP) as i32 - 32;
        }
        if self.layout == BlockLayout::Q5 {
            let groups = self.cols / GROUP;
            let row: &[u8] = bytemuck::cast_slice(&self.data[..self.sm_offset()]);
            let row = &row[20 * groups * n..20 * groups * (n + 1)];
            return q5_code(row, groups, k / GROUP, k % GROUP) as i32;
        }
        let w = self.data[n * self.cols / 8 + k / 8];
        ((w >> (4 * (k % 8))) & 0xF) as i32
    }

    /// The format's name in messages: `LQ4`, `lq4h` or `q8_0`.
    pub fn layout_name(&self) -> &'static str {
        self.layout.name()
    }

    /// `(s, m)` of weight `(n, k)`: the weight is `s·q − m` with `q` its [`Q4Matrix::code`]
    /// ([`Q4Matrix::group_scales`] of its group, or for `q6_k` `(d·sc_h, 0)` of its half).
    #[inline]
    pub fn weight_scales(&self, n: usize, k: usize) -> (f32, f32) {
        if self.layout != BlockLayout::Q6 {
            return self.group_scales(n, k / GROUP);
        }
        let w = self.data[self.sm_offset() + n * (self.cols / GROUP) + k / GROUP];
        let sc = (w >> (8 * ((k % GROUP) / 16))) as u8 as i8;
        (
            half::f16::from_bits((w >> 16) as u16).to_f32() * sc as f32,
            0.0,
        )
    }

    /// `(s, m)` of group `g` of row `n`: the group's weights are `s·q − m` (for `q6_k`, whose
    /// halves have their own scales, `(d, 0)`; see [`Q4Matrix::weight_scales`]).
    #[inline]
    pub fn group_scales(&self, n: usize, g: usize) -> (f32, f32) {
        match self.layout {
            BlockLayout::Q6 => {
                let w = self.data[self.sm_offset() + n * (self.cols / GROUP) + g];
                (half::f16::from_bits((w >> 16) as u16).to_f32(), 0.0)
            }
            BlockLayout::Lq4k => {
                let groups = self.cols / GROUP;
                let sm: &[u8] = bytemuck::cast_slice(&self.data[self.sm_offset()..]);
                let row = &sm[n * self.layout.scale_bytes(groups)..];
                let (d, dmin, sc, mn) = lq4k_scales(row, g);
                (d * sc as f32, dmin * mn as f32)
            }
            BlockLayout::Lq4 => {
                let (d, dmin) = self.row_scales(n);
                let (sc, mn) = self.sub(n, g);
                (d * sc as f32, dmin * mn as f32)
            }
            BlockLayout::Lq4h | BlockLayout::Q8 | BlockLayout::Q5 => {
                let w = self.data[self.sm_offset() + n * (self.cols / GROUP) + g];
                (
                    half::f16::from_bits(w as u16).to_f32(),
                    half::f16::from_bits((w >> 16) as u16).to_f32(),
                )
            }
        }
    }

    /// Sub-scale and sub-min bytes of group `g` of row `n` (LQ4 only).
    #[inline]
    pub fn sub(&self, n: usize, g: usize) -> (u32, u32) {
        debug_assert_eq!(self.layout, BlockLayout::Lq4);
        let b = 2 * (n * (self.cols / GROUP) + g);
        let w = self.data[self.sm_offset() + b / 4];
        let sh = 8 * (b % 4) as u32;
        ((w >> sh) & 0xFF, (w >> (sh + 8)) & 0xFF)
    }

    /// `(d, dmin)` of row `n`; `(1, 1)` for the per-group layouts, whose groups carry their own.
    #[inline]
    pub fn row_scales(&self, n: usize) -> (f32, f32) {
        if self.layout != BlockLayout::Lq4 {
            return (1.0, 1.0);
        }
        let o = self.rows_offset() + 2 * n;
        (
            f32::from_bits(self.data[o]),
            f32::from_bits(self.data[o + 1]),
        )
    }

    /// Dequantizes row `n` into `out` (length `cols`).
    pub fn dequantize_row(&self, n: usize, out: &mut [f32]) {
        for g in 0..self.cols / GROUP {
            let (s, m) = self.group_scales(n, g);
            for i in 0..GROUP {
                let k = g * GROUP + i;
                let (s, m) = if self.layout == BlockLayout::Q6 {
                    self.weight_scales(n, k)
                } else {
                    (s, m)
                };
                out[k] = s * self.code(n, k) as f32 - m;
            }
        }
    }

    /// Dequantizes the whole matrix, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        for n in 0..self.rows {
            self.dequantize_row(n, &mut out[n * self.cols..(n + 1) * self.cols]);
        }
        out
    }

    /// Rows `r0..r1` as their own matrix of the same kind (row blocks for binding-size
    /// limits).
    pub fn row_block(&self, r0: usize, r1: usize) -> Q4Matrix {
        if self.layout != BlockLayout::Lq4 {
            let qw = self.cols * self.layout.code_bits() / 32;
            let sb = self.layout.scale_bytes(self.cols / GROUP);
            let sm = self.sm_offset();
            let mut data = self.data[r0 * qw..r1 * qw].to_vec();
            let scales: &[u8] = bytemuck::cast_slice(&self.data[sm..]);
            let mut bytes = scales[r0 * sb..r1 * sb].to_vec();
            bytes.resize(bytes.len().div_ceil(4) * 4, 0);
            data.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            return Q4Matrix {
                rows: r1 - r0,
                cols: self.cols,
                data,
                layout: self.layout,
            };
        }
        let mut out = Q4Builder::new(r1 - r0, self.cols);
        for n in r0..r1 {
            // Copy codes and sub-scales verbatim (no requantization).
            let (d, dmin) = self.row_scales(n);
            let codes: Vec<u8> = (0..self.cols).map(|k| self.code(n, k) as u8).collect();
            let subs: Vec<(u8, u8)> = (0..self.cols / GROUP)
                .map(|g| {
                    let (a, b) = self.sub(n, g);
                    (a as u8, b as u8)
                })
                .collect();
            out.put_row(n - r0, &codes, &subs, d, dmin);
        }
        out.finish()
    }

    /// Checks a row-major `[rows, cols]` f32 matrix before it is quantized: `cols` a positive
    /// multiple of [`GROUP`], `rows * cols` values, all finite; the error names `name` and the
    /// first bad element.
    pub(crate) fn check_input(name: &str, rows: usize, cols: usize, w: &[f32]) -> Result<()> {
        let bad = |detail: String| EngineError::Quantize {
            tensor: name.into(),
            detail,
        };
        if cols == 0 || !cols.is_multiple_of(GROUP) {
            return Err(bad(format!(
                "columns {cols} are not a positive multiple of {GROUP}"
            )));
        }
        if Some(w.len()) != rows.checked_mul(cols) {
            return Err(bad(format!(
                "{} values for shape [{rows}, {cols}]",
                w.len()
            )));
        }
        if let Some(i) = w.iter().position(|x| !x.is_finite()) {
            return Err(bad(format!(
                "non-finite value {} at row {}, column {}",
                w[i],
                i / cols,
                i % cols
            )));
        }
        Ok(())
    }

    /// Quantizes a row-major `[rows, cols]` f32 matrix. Fails on NaN/Inf or a bad shape,
    /// naming `name` and the first bad element.
    pub fn quantize(name: &str, rows: usize, cols: usize, w: &[f32]) -> Result<Q4Matrix> {
        Self::quantize_weighted(name, rows, cols, w, None)
    }

    /// [`Q4Matrix::quantize`] with each column's squared error weighted by `importance[col]`
    /// (the mean square of the activations that column multiplies, measured on a calibration
    /// text by the CPU backend's importance recorder), so the fit spends its precision where the
    /// output feels it. The quantizer knows nothing of the backend: the caller brings the numbers.
    pub fn quantize_weighted(
        name: &str,
        rows: usize,
        cols: usize,
        w: &[f32],
        importance: Option<&[f32]>,
    ) -> Result<Q4Matrix> {
        let bad = |detail: String| EngineError::Quantize {
            tensor: name.into(),
            detail,
        };
        Self::check_input(name, rows, cols, w)?;
        let weights = match importance {
            Some(imp) => Some(column_weights(imp, cols).map_err(bad)?),
            None => None,
        };
        let weights = weights.as_deref();
        let quantized: Vec<RowCodes> = {
            #[cfg(not(target_arch = "wasm32"))]
            {
                use rayon::prelude::*;
                w.par_chunks(cols)
                    .map(|r| quantize_row(r, weights))
                    .collect()
            }
            #[cfg(target_arch = "wasm32")]
            {
                w.chunks(cols).map(|r| quantize_row(r, weights)).collect()
            }
        };
        let mut b = Q4Builder::new(rows, cols);
        for (n, r) in quantized.iter().enumerate() {
            b.put_row(n, &r.codes, &r.subs, r.d, r.dmin);
        }
        Ok(b.finish())
    }
}

impl Q4Matrix {
    /// The packed words as little-endian bytes (the bundle's on-disk form).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.data.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Reads the bundle form back, checking the length against the shape.
    pub fn from_bytes(
        name: &str,
        layout: BlockLayout,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Q4Matrix> {
        if !bytes.len().is_multiple_of(4) {
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!("{} bytes is not a whole number of 4-bit words", bytes.len()),
            });
        }
        let data = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let m = Q4Matrix {
            rows,
            cols,
            data,
            layout,
        };
        m.validate(name)?;
        Ok(m)
    }

    /// Stacks row blocks (same `cols`) into one matrix, copying codes and scales verbatim.
    /// The builder quantizes a large part in small blocks and joins them here.
    pub fn concat_rows(name: &str, blocks: &[Q4Matrix]) -> Result<Q4Matrix> {
        let cols = blocks.first().map(|b| b.cols).unwrap_or(GROUP);
        if let Some(b) = blocks.iter().find(|b| b.cols != cols) {
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!("row blocks of {} and {} columns", cols, b.cols),
            });
        }
        let layout = blocks.first().map(|b| b.layout).unwrap_or_default();
        if let Some(b) = blocks.iter().find(|b| b.layout != layout) {
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!("row blocks in {} and {}", layout.name(), b.layout.name()),
            });
        }
        let rows: usize = blocks.iter().map(|b| b.rows).sum();
        if layout != BlockLayout::Lq4 {
            let mut data: Vec<u32> = blocks
                .iter()
                .flat_map(|b| b.data[..b.sm_offset()].iter().copied())
                .collect();
            data.extend(
                blocks
                    .iter()
                    .flat_map(|b| b.data[b.sm_offset()..].iter().copied()),
            );
            return Ok(Q4Matrix {
                rows,
                cols,
                data,
                layout,
            });
        }
        let (sm0, ro0) = (
            Q4Matrix::sm_offset_for(rows, cols),
            Q4Matrix::rows_offset_for(rows, cols),
        );
        let mut data = vec![0u32; Q4Matrix::words_for(rows, cols)];
        let mut sm_bytes = Vec::with_capacity(rows * cols / GROUP * 2);
        let (mut q_at, mut r_at) = (0, ro0);
        for b in blocks {
            let qs = &b.data[..b.sm_offset()];
            data[q_at..q_at + qs.len()].copy_from_slice(qs);
            q_at += qs.len();
            let sm = b.data[b.sm_offset()..b.rows_offset()]
                .iter()
                .flat_map(|w| w.to_le_bytes());
            sm_bytes.extend(sm.take(b.rows * b.cols / GROUP * 2));
            let rs = &b.data[b.rows_offset()..];
            data[r_at..r_at + rs.len()].copy_from_slice(rs);
            r_at += rs.len();
        }
        sm_bytes.resize((ro0 - sm0) * 4, 0);
        for (w, c) in data[sm0..ro0].iter_mut().zip(sm_bytes.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data,
            layout,
        })
    }
}

#[cfg(test)]
mod tests;
