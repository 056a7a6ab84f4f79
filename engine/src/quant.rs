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

mod kquant;
mod q8;
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

/// One quantized row: codes, sub-scales and row scales.
struct RowCodes {
    codes: Vec<u8>,
    subs: Vec<(u8, u8)>,
    d: f32,
    dmin: f32,
}

/// Checks a calibration's column importances and turns them into fit weights: each divided by
/// their mean, plus a floor of 1e-3 so that a column no activation reached still counts.
fn column_weights(imp: &[f32], cols: usize) -> std::result::Result<Vec<f32>, String> {
    if imp.len() != cols {
        return Err(format!(
            "{} importance values for {cols} columns",
            imp.len()
        ));
    }
    if let Some(i) = imp.iter().position(|v| !v.is_finite() || *v < 0.0) {
        return Err(format!(
            "importance {} of column {i} is not a finite, non-negative number",
            imp[i]
        ));
    }
    let mean = imp.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
    if mean <= 0.0 {
        return Ok(vec![1.0; cols]);
    }
    Ok(imp
        .iter()
        .map(|&v| (v as f64 / mean) as f32 + 1e-3)
        .collect())
}

/// Quantizes one row: fits each group (weighing column `k`'s squared error by `weights[k]`
/// when given), quantizes the group scales and mins to 8 bits against the row's largest, then
/// refits the codes to the rounded values.
fn quantize_row(row: &[f32], weights: Option<&[f32]>) -> RowCodes {
    let groups = row.len() / GROUP;
    let fits: Vec<(f32, f32)> = row
        .chunks(GROUP)
        .enumerate()
        .map(|(g, x)| fit_group(x, weights.map(|w| &w[g * GROUP..(g + 1) * GROUP])))
        .collect();
    let max_s = fits.iter().map(|f| f.0).fold(0f32, f32::max);
    let max_m = fits.iter().map(|f| f.1).fold(0f32, f32::max);
    let d = if max_s > 0.0 { max_s / 255.0 } else { 0.0 };
    let dmin = if max_m > 0.0 { max_m / 255.0 } else { 0.0 };
    let mut codes = vec![0u8; row.len()];
    let mut subs = Vec::with_capacity(groups);
    for (g, &(scale, min)) in fits.iter().enumerate() {
        let sc = if d > 0.0 {
            (scale / d).round().clamp(0.0, 255.0)
        } else {
            0.0
        };
        let mn = if dmin > 0.0 {
            (min / dmin).round().clamp(0.0, 255.0)
        } else {
            0.0
        };
        subs.push((sc as u8, mn as u8));
        let (s, m) = (d * sc, dmin * mn);
        for i in 0..GROUP {
            let k = g * GROUP + i;
            let q = if s > 0.0 {
                ((row[k] + m) / s).round().clamp(0.0, 15.0)
            } else {
                0.0
            };
            codes[k] = q as u8;
        }
    }
    RowCodes {
        codes,
        subs,
        d,
        dmin,
    }
}

/// Least-squares fit of `x ≈ s*q - m` with `q` in 0..=15, `s >= 0`, `m >= 0`, each element's
/// squared error weighted by `wt` (uniform when `None`). Grid search over the range endpoints,
/// each candidate refined by a closed-form weighted least-squares solve for `(s, m)` given the
/// codes (llama.cpp `make_qkx2_quants` style).
fn fit_group(x: &[f32], wt: Option<&[f32]>) -> (f32, f32) {
    let ones = [1f32; GROUP];
    let wt = wt.unwrap_or(&ones[..x.len()]);
    let mut lo = x.iter().cloned().fold(f32::INFINITY, f32::min);
    let hi = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    if lo > 0.0 {
        lo = 0.0;
    }
    if hi <= lo {
        return (0.0, -lo);
    }
    let err_of = |s: f32, m: f32| -> f32 {
        x.iter()
            .zip(wt)
            .map(|(&v, &c)| {
                let q = ((v + m) / s).round().clamp(0.0, 15.0);
                let e = s * q - m - v;
                c * e * e
            })
            .sum()
    };
    let mut best = ((hi - lo) / 15.0, -lo);
    let mut best_err = err_of(best.0, best.1);
    let mut q = [0f32; GROUP];
    for step in -9..=9 {
        let iscale = (15.0 + 0.1 * step as f32) / (hi - lo);
        // Codes for this candidate grid.
        for (qi, &v) in q.iter_mut().zip(x) {
            *qi = ((v - lo) * iscale).round().clamp(0.0, 15.0);
        }
        // Weighted least squares for v ≈ s*q + c (c = -m).
        let (n, sq, sqq, sv, sqv) =
            q.iter()
                .zip(x)
                .zip(wt)
                .fold((0.0, 0.0, 0.0, 0.0, 0.0), |acc, ((&qi, &v), &c)| {
                    (
                        acc.0 + c,
                        acc.1 + c * qi,
                        acc.2 + c * qi * qi,
                        acc.3 + c * v,
                        acc.4 + c * qi * v,
                    )
                });
        let det = n * sqq - sq * sq;
        if det <= 0.0 {
            continue;
        }
        let s = (n * sqv - sq * sv) / det;
        let mut c = (sqq * sv - sq * sqv) / det;
        if c > 0.0 {
            c = 0.0;
        }
        if s <= 0.0 {
            continue;
        }
        let e = err_of(s, -c);
        if e < best_err {
            best_err = e;
            best = (s, -c);
        }
    }
    best
}

/// Assembles an LQ4 matrix row by row from codes and sub-scales (used by the quantizer,
/// row-block splitting, and importers that map other 4-bit formats).
pub struct Q4Builder {
    rows: usize,
    cols: usize,
    data: Vec<u32>,
}

impl Q4Builder {
    /// An all-zero matrix of the given shape (`cols % 32 == 0`).
    pub fn new(rows: usize, cols: usize) -> Self {
        Q4Builder {
            rows,
            cols,
            data: vec![0; Q4Matrix::words_for(rows, cols)],
        }
    }

    /// Writes row `n`: `cols` codes (0..=15), `cols/32` (sc, mn) pairs, and the row scales.
    pub fn put_row(&mut self, n: usize, codes: &[u8], subs: &[(u8, u8)], d: f32, dmin: f32) {
        let cols = self.cols;
        let q0 = n * cols / 8;
        for w in 0..cols / 8 {
            let mut word = 0u32;
            for j in 0..8 {
                word |= ((codes[8 * w + j] & 0xF) as u32) << (4 * j);
            }
            self.data[q0 + w] = word;
        }
        let sm = Q4Matrix::sm_offset_for(self.rows, cols);
        let groups = cols / GROUP;
        for (g, &(sc, mn)) in subs.iter().enumerate() {
            let b = 2 * (n * groups + g);
            let sh = 8 * (b % 4);
            let word = &mut self.data[sm + b / 4];
            *word &= !(0xFFFF << sh);
            *word |= ((sc as u32) | ((mn as u32) << 8)) << sh;
        }
        let ro = Q4Matrix::rows_offset_for(self.rows, cols) + 2 * n;
        self.data[ro] = d.to_bits();
        self.data[ro + 1] = dmin.to_bits();
    }

    /// The finished matrix.
    pub fn finish(self) -> Q4Matrix {
        Q4Matrix {
            rows: self.rows,
            cols: self.cols,
            data: self.data,
            layout: BlockLayout::Lq4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Pcg32;

    #[test]
    fn roundtrip_error_is_small_and_layout_consistent() {
        let mut rng = Pcg32::new(1);
        let (n, k) = (7, 96);
        let w = rng.normal_vec(n * k, 0.05);
        let q = Q4Matrix::quantize("t", n, k, &w).expect("quantize");
        q.validate("t").expect("valid");
        let dq = q.dequantize();
        let rms_w = (w.iter().map(|x| x * x).sum::<f32>() / w.len() as f32).sqrt();
        let rms_e = (w
            .iter()
            .zip(&dq)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f32>()
            / w.len() as f32)
            .sqrt();
        // 4-bit asymmetric on Gaussian data: ~10% relative RMS error; fail well above that.
        assert!(rms_e / rms_w < 0.12, "relative rms error {}", rms_e / rms_w);
        assert!((q.bits_per_weight() - (4.5 + 64.0 / k as f64)).abs() < 0.1);
        let blk = q.row_block(2, 5);
        assert_eq!(&blk.dequantize()[..], &dq[2 * k..5 * k]);
    }

    /// `Σ_k imp_k (w - ŵ)²` over the matrix: the output error a calibration predicts.
    fn weighted_error(w: &[f32], q: &Q4Matrix, imp: &[f32]) -> f64 {
        let k = imp.len();
        w.iter()
            .zip(q.dequantize())
            .enumerate()
            .map(|(i, (a, b))| imp[i % k] as f64 * ((a - b) as f64).powi(2))
            .sum()
    }

    #[test]
    fn importance_weighting_lowers_the_error_the_activations_feel() {
        let mut rng = Pcg32::new(9);
        // 3 groups per row plus rows of different scales; a few columns carry most activation
        // energy (as the hidden states of real models do).
        let (n, k) = (13, 96);
        let w = rng.normal_vec(n * k, 0.05);
        let imp: Vec<f32> = (0..k)
            .map(|c| {
                if c % 17 == 3 {
                    50.0
                } else {
                    0.2 + (c % 5) as f32 * 0.1
                }
            })
            .collect();
        let plain = Q4Matrix::quantize("t", n, k, &w).expect("plain");
        let weighted = Q4Matrix::quantize_weighted("t", n, k, &w, Some(&imp)).expect("weighted");
        weighted.validate("t").expect("valid");
        let (e0, e1) = (
            weighted_error(&w, &plain, &imp),
            weighted_error(&w, &weighted, &imp),
        );
        // Measured 0.22 (the heavy columns' error falls several-fold, the others' rises).
        assert!(e1 < 0.5 * e0, "weighted error {e1} vs unweighted {e0}");
        // Uniform importance is no importance.
        let uniform = Q4Matrix::quantize_weighted("t", n, k, &w, Some(&vec![2.5; k])).expect("u");
        let ones = vec![1.0; k];
        let (eu, ep) = (
            weighted_error(&w, &uniform, &ones),
            weighted_error(&w, &plain, &ones),
        );
        assert!((eu - ep).abs() <= 1e-6 * ep, "uniform {eu} vs plain {ep}");
    }

    #[test]
    fn bad_importance_is_refused_by_tensor_and_column() {
        let w = vec![0.1; 2 * 64];
        let e =
            Q4Matrix::quantize_weighted("blk.3.w", 2, 64, &w, Some(&[1.0; 63])).expect_err("short");
        assert!(
            e.to_string().contains("blk.3.w") && e.to_string().contains("63"),
            "{e}"
        );
        let mut imp = vec![1.0; 64];
        imp[40] = f32::NAN;
        let e = Q4Matrix::quantize_weighted("blk.3.w", 2, 64, &w, Some(&imp)).expect_err("nan");
        assert!(e.to_string().contains("column 40"), "{e}");
        imp[40] = -1.0;
        assert!(Q4Matrix::quantize_weighted("t", 2, 64, &w, Some(&imp)).is_err());
        // All-zero importance (a matrix no calibration token reached) falls back to uniform.
        let z = Q4Matrix::quantize_weighted("t", 2, 64, &w, Some(&[0.0; 64])).expect("zeros");
        assert_eq!(z, Q4Matrix::quantize("t", 2, 64, &w).expect("plain"));
    }

    #[test]
    fn bytes_roundtrip_and_concat_rows_match_one_quantization() {
        let mut rng = Pcg32::new(3);
        // Odd row counts make the sub-scale section end mid-word.
        let (n, k) = (11, 64);
        let w = rng.normal_vec(n * k, 0.1);
        let whole = Q4Matrix::quantize("t", n, k, &w).expect("quantize");
        let back = Q4Matrix::from_bytes("t", BlockLayout::Lq4, n, k, &whole.to_bytes())
            .expect("from_bytes");
        assert_eq!(back, whole);
        assert!(Q4Matrix::from_bytes("t", BlockLayout::Lq4, n + 1, k, &whole.to_bytes()).is_err());
        let blocks: Vec<Q4Matrix> = [(0, 3), (3, 4), (4, 11)]
            .iter()
            .map(|&(a, b)| Q4Matrix::quantize("t", b - a, k, &w[a * k..b * k]).expect("q"))
            .collect();
        let joined = Q4Matrix::concat_rows("t", &blocks).expect("concat");
        assert_eq!(joined, whole);
    }

    #[test]
    fn q8_roundtrip_is_within_half_a_step() {
        let mut rng = Pcg32::new(4);
        let (n, k) = (5, 45); // a ragged last group per row
        let w = rng.normal_vec(n * k, 1.0);
        let q = Q8Matrix::quantize(n, k, &w);
        let b = q.to_bytes();
        assert_eq!(b.len(), Q8Matrix::bytes_for(n, k));
        let d = Q8Matrix::dequantize_bytes("t", n, k, &b).expect("deq");
        for (i, (a, b)) in w.iter().zip(&d).enumerate() {
            let s = q.scales[(i / k) * 2 + (i % k) / GROUP];
            assert!((a - b).abs() <= 0.5 * s + 1e-7, "element {i}: {a} vs {b}");
        }
        assert!(Q8Matrix::dequantize_bytes("t", n, k, &b[1..]).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        assert!(Q4Matrix::quantize("t", 1, 33, &[0.0; 33]).is_err());
        let mut w = vec![0.0; 64];
        w[40] = f32::NAN;
        let e = Q4Matrix::quantize("blk.0.w", 2, 32, &w)
            .unwrap_err()
            .to_string();
        assert!(e.contains("blk.0.w") && e.contains("row 1"), "{e}");
    }
}
