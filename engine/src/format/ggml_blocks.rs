//! GGUF's quantized blocks as the engine's block matrices with the same values (issue 21):
//! Q4_0 / Q4_1 as `lq4h`, Q5_0 / Q5_1 as `q5`, Q8_0 as `q8_0` ([`BlockLayout`]), exactly; the k-quants
//! Q4_K as `lq4h`, Q5_K as `q8_0`, with their codes and with each group's scale `d·sc` (a
//! product of an f16 and a 6-bit integer) rounded to f16 (see [`Q4Matrix::from_ggml_q4_k`] for
//! the error bound), and Q6_K as `q6_k`, exactly (as `q8_0` where a backend needs it,
//! [`Q4Matrix::q6_to_q8_0`]). The layouts are documented in
//! [`crate::quant`]; this file only reads GGUF's bytes into them, so the format module depends
//! on `quant` and never the other way.

use super::gguf::{kquant_scale_min, q5k_codes, q6k_codes};
use crate::error::{EngineError, Result};
use crate::quant::{q5_code, q5_put, q6_put, BlockLayout, Q4Matrix, GROUP};

/// `16·d` as an f16, where it is exactly that (a Q5_0 block's min `m` in `w = d·q − m`): `None`
/// where it overflows or `d` is not finite.
fn sixteen_times(d: u16) -> Option<u16> {
    let d = half::f16::from_bits(d).to_f32();
    let m = half::f16::from_f32(16.0 * d);
    (d.is_finite() && m.to_f32() == 16.0 * d).then_some(m.to_bits())
}

impl Q4Matrix {
    /// A GGUF `Q8_0` tensor `[rows, cols]` (blocks of 34 bytes: f16 `d`, 32 signed codes;
    /// `w = d·q`) as a `q8_0` matrix with the same values: the codes in the same order, the
    /// scale as an `(s, m) = (d, 0)` word.
    pub fn from_ggml_q8_0(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (GROUP, 34))?;
        let layout = BlockLayout::Q8;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        for (i, b) in data.chunks_exact(34).enumerate().take(blocks) {
            out[sm + i] = u16::from_le_bytes([b[0], b[1]]) as u32;
            for (w, c) in b[2..].chunks_exact(4).enumerate() {
                out[8 * i + w] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// Quantizes a row-major `[rows, cols]` f32 matrix to `q8_0` as llama.cpp's `Q8_0` does
    /// (`quantize_row_q8_0_ref`): per group of 32, `d = amax / 127`, codes `round(w · (1 / d))`, `d`
    /// stored as f16 (`(s, m) = (d, 0)`), so the codes and scales are those a GGUF `Q8_0` file of
    /// the same weights holds. `--quant q8` bundles; the kernels are the ones that run a
    /// GGUF's `Q8_0` blocks. Fails on NaN/Inf or a bad shape, naming `name` and the element.
    pub fn quantize_q8_0(name: &str, rows: usize, cols: usize, w: &[f32]) -> Result<Q4Matrix> {
        Self::check_input(name, rows, cols, w)?;
        let layout = BlockLayout::Q8;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        for (i, g) in w.chunks_exact(GROUP).enumerate() {
            let amax = g.iter().fold(0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            out[sm + i] = half::f16::from_f32(d).to_bits() as u32;
            let q = |v: f32| (v * id).round().clamp(-127.0, 127.0) as i8 as u8;
            for (k, c) in g.chunks_exact(4).enumerate() {
                out[8 * i + k] = u32::from_le_bytes([q(c[0]), q(c[1]), q(c[2]), q(c[3])]);
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// A GGUF `Q5_0` (blocks of 22 bytes: f16 `d`, 4 bytes of fifth bits, 16 of nibbles;
    /// `w = d·(q − 16)`) or `Q5_1` tensor (24 bytes: f16 `d`, f16 `m`, then the same;
    /// `w = d·q + m`) as a `q5` matrix with the same values: the five-bit codes `q` as they are,
    /// `(s, m) = (d, 16·d)` (Q5_0) or `(d, −m)` (Q5_1). 6 bits per weight where the file spends
    /// 5.5 or 6. A Q5_0 tensor with a scale whose `16·d` overflows f16 (from 4094 on) is read
    /// as `q8_0` ([`Q4Matrix::from_ggml_q5_as_q8_0`]), with the same values.
    pub fn from_ggml_q5(
        name: &str,
        rows: usize,
        cols: usize,
        data: &[u8],
        with_min: bool,
    ) -> Result<Q4Matrix> {
        let bb = if with_min { 24 } else { 22 };
        Self::ggml_block_count(name, rows, cols, data.len(), (GROUP, bb))?;
        let layout = BlockLayout::Q5;
        let groups = cols / GROUP;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        let mut row = vec![0u8; 20 * groups];
        let mut q = [0u8; 32];
        for (n, blocks) in data.chunks_exact(bb * groups).enumerate() {
            row.fill(0);
            for (g, b) in blocks.chunks_exact(bb).enumerate() {
                let d = u16::from_le_bytes([b[0], b[1]]);
                let m = if with_min {
                    u16::from_le_bytes([b[2], b[3]]) ^ 0x8000
                } else {
                    match sixteen_times(d) {
                        Some(m) => m,
                        None => return Self::from_ggml_q5_as_q8_0(name, rows, cols, data, false),
                    }
                };
                out[sm + n * groups + g] = d as u32 | (m as u32) << 16;
                super::gguf::q5_codes(&b[bb - 20..], &mut q);
                for (i, &c) in q.iter().enumerate() {
                    q5_put(&mut row, groups, g, i, c);
                }
            }
            for (w, c) in row.chunks_exact(4).enumerate() {
                out[5 * groups * n + w] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// A GGUF `Q5_0` or `Q5_1` tensor (see [`Q4Matrix::from_ggml_q5`]) as a `q8_0` matrix with
    /// the same values: codes `q − 16` (Q5_0) or `q` (Q5_1) in 8 bits, `(s, m) = (d, 0)` or
    /// `(d, −m)`. 9 bits per weight; what a Q5_0 scale that `q5` cannot carry falls back to.
    pub fn from_ggml_q5_as_q8_0(
        name: &str,
        rows: usize,
        cols: usize,
        data: &[u8],
        with_min: bool,
    ) -> Result<Q4Matrix> {
        let bb = if with_min { 24 } else { 22 };
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (GROUP, bb))?;
        let layout = BlockLayout::Q8;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        let mut q = [0u8; 32];
        for (i, b) in data.chunks_exact(bb).enumerate().take(blocks) {
            let d = u16::from_le_bytes([b[0], b[1]]) as u32;
            let m = if with_min {
                (u16::from_le_bytes([b[2], b[3]]) ^ 0x8000) as u32
            } else {
                0
            };
            out[sm + i] = d | m << 16;
            super::gguf::q5_codes(&b[bb - 20..], &mut q);
            for (w, c) in q.chunks_exact(4).enumerate() {
                let code = |j: usize| {
                    (if with_min {
                        c[j] as i8
                    } else {
                        c[j] as i8 - 16
                    }) as u8
                };
                out[8 * i + w] = u32::from_le_bytes([code(0), code(1), code(2), code(3)]);
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// A GGUF `Q4_K` tensor `[rows, cols]` (super-blocks of 256 weights in 144 bytes: f16 `d`,
    /// f16 `dmin`, 12 bytes holding eight 6-bit `(sc, m)` pairs, 128 bytes of codes; group `j`
    /// of 32 is `w = d·sc_j·q − dmin·m_j`) as an `lq4k` matrix with the same values: the codes
    /// in the 4-bit layouts' order, each super-block's `(d, dmin)` and its eight `(sc, m)`
    /// unpacked to bytes. 4.625 bits per weight where the file spends 4.5.
    pub fn from_ggml_q4_k(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (256, 144))?;
        let layout = BlockLayout::Lq4k;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; sm];
        let mut scales = Vec::with_capacity(20 * blocks);
        for (i, b) in data.chunks_exact(144).enumerate().take(blocks) {
            scales.extend_from_slice(&b[..4]);
            for j in 0..8 {
                let (sc, m) = kquant_scale_min(&b[4..16], j);
                scales.extend_from_slice(&[sc, m]);
                // Group 2c holds the low nibbles of qs[32c..32c + 32], group 2c + 1 the high.
                let q = &b[16 + 32 * (j / 2)..16 + 32 * (j / 2) + 32];
                let g = 8 * i + j;
                for (w, c) in q.chunks_exact(8).enumerate() {
                    out[4 * g + w] = c.iter().enumerate().fold(0, |acc, (t, &q)| {
                        acc | (((q >> (4 * (j % 2))) & 0xF) as u32) << (4 * t)
                    });
                }
            }
        }
        scales.resize(scales.len().div_ceil(4) * 4, 0);
        out.extend(
            scales
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// A GGUF `Q5_K` tensor `[rows, cols]` (super-blocks of 256 weights in 176 bytes: f16 `d`,
    /// f16 `dmin`, eight packed 6-bit `(sc, m)` pairs as in Q4_K, 32 bytes of fifth bits, 128 of
    /// nibbles; group `j` is `w = d·sc_j·q − dmin·m_j` with `q` in 0..=31) as a `q8_0` matrix:
    /// the 5-bit codes as they are, `(s, m) = (d·sc_j, dmin·m_j)` rounded to f16 (at most
    /// `2⁻¹¹` relative, as for Q4_K). 9 bits per weight where the file spends 5.5.
    pub fn from_ggml_q5_k(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        Self::from_ggml_kquant(name, rows, cols, data, 176, |b, words, codes| {
            let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
            for j in 0..8 {
                words[j] = kquant_group_word(d, dmin, kquant_scale_min(&b[4..16], j))?;
                q5k_codes(b, j, &mut codes[j]);
            }
            Ok(())
        })
    }

    /// A GGUF `Q6_K` tensor `[rows, cols]` (super-blocks of 256 weights in 210 bytes: 128 bytes
    /// of low nibbles, 64 of high bit pairs, sixteen signed 8-bit scales, f16 `d`; sub-block
    /// `i` of 16 is `w = d·sc_i·q` with `q` in −32..=31) as a `q6_k` matrix with the same
    /// values: the codes repacked per group of 32, each group's two scales and the
    /// super-block's `d` beside them. 7 bits per weight where the file spends 6.56.
    pub fn from_ggml_q6_k(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (256, 210))?;
        let layout = BlockLayout::Q6;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        let mut codes = vec![0u8; 24 * (blocks * 8)];
        let groups = cols / GROUP;
        for (i, b) in data.chunks_exact(210).enumerate().take(blocks) {
            let (sc, d) = (&b[192..208], u16::from_le_bytes([b[208], b[209]]));
            let q = q6k_codes(b);
            for t in 0..8 {
                let g = 8 * i + t;
                out[sm + g] = sc[2 * t] as u32 | (sc[2 * t + 1] as u32) << 8 | (d as u32) << 16;
                let (n, gr) = (g / groups, g % groups);
                let row = &mut codes[24 * groups * n..24 * groups * (n + 1)];
                for (k, &q) in q[32 * t..32 * t + 32].iter().enumerate() {
                    q6_put(row, groups, gr, k, (q + 32) as u8);
                }
            }
        }
        for (w, c) in out[..sm].iter_mut().zip(codes.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// The matrix in a layout every backend, instruction set and bundle runs: a `q6_k` or `q5`
    /// matrix as `q8_0` ([`Q4Matrix::q6_to_q8_0`], [`Q4Matrix::q5_to_q8_0`]), an `lq4k` one as
    /// `lq4h`, every other one as it is.
    pub fn to_portable(&self, name: &str) -> Result<std::borrow::Cow<'_, Q4Matrix>> {
        Ok(match self.layout {
            BlockLayout::Q5 => std::borrow::Cow::Owned(self.q5_to_q8_0()),
            BlockLayout::Q6 => std::borrow::Cow::Owned(self.q6_to_q8_0(name)?),
            BlockLayout::Lq4k => std::borrow::Cow::Owned(self.lq4k_to_lq4h(name)?),
            _ => std::borrow::Cow::Borrowed(self),
        })
    }

    /// A `q5` matrix as `q8_0` with the same values, exactly: each group's codes `q` in 8 bits
    /// and its `(s, m)` as they are, or where `m = 16·s` (a GGUF Q5_0 block) the codes `q − 16`
    /// with `(s, 0)`, as [`Q4Matrix::from_ggml_q5_as_q8_0`] reads the file. 9 bits per weight;
    /// what the GPU, the instruction sets without a `q5` kernel and the bundles receive.
    pub fn q5_to_q8_0(&self) -> Q4Matrix {
        let layout = BlockLayout::Q8;
        let groups = self.cols / GROUP;
        let (sm, out_sm) = (self.sm_offset(), layout.sm_offset(self.rows, self.cols));
        let mut out = vec![0u32; layout.words(self.rows, self.cols)];
        let codes: &[u8] = bytemuck::cast_slice(&self.data[..sm]);
        for (n, row) in codes.chunks_exact(20 * groups).enumerate() {
            for g in 0..groups {
                let w = self.data[sm + n * groups + g];
                let zero = sixteen_times(w as u16) == Some((w >> 16) as u16);
                out[out_sm + n * groups + g] = if zero { w & 0xFFFF } else { w };
                let code = |i: usize| {
                    let q = q5_code(row, groups, g, i) as i8;
                    (if zero { q - 16 } else { q }) as u8
                };
                let at = (n * self.cols + GROUP * g) / 4;
                for k in 0..8 {
                    out[at + k] = u32::from_le_bytes([
                        code(4 * k),
                        code(4 * k + 1),
                        code(4 * k + 2),
                        code(4 * k + 3),
                    ]);
                }
            }
        }
        Q4Matrix {
            rows: self.rows,
            cols: self.cols,
            data: out,
            layout,
        }
    }

    /// An `lq4k` matrix as `lq4h`: the codes as they are, each group's `(s, m) = (d·sc,
    /// dmin·mn)` rounded to f16. The products need up to 17 significant bits and f16 holds 11,
    /// so a weight moves by at most `2⁻¹¹·|w|` (the 4-bit step itself is `d·sc`, about 16
    /// times the weight's size). 5.0 bits per weight; what the GPU, the instruction sets
    /// without an `lq4k` kernel and the bundles receive. Errors name `name`, the row and group.
    pub fn lq4k_to_lq4h(&self, name: &str) -> Result<Q4Matrix> {
        let layout = BlockLayout::Lq4h;
        let groups = self.cols / GROUP;
        let (sm, out_sm) = (self.sm_offset(), layout.sm_offset(self.rows, self.cols));
        let mut out = vec![0u32; layout.words(self.rows, self.cols)];
        out[..out_sm].copy_from_slice(&self.data[..sm]);
        let scales: &[u8] = bytemuck::cast_slice(&self.data[sm..]);
        let sb = self.layout.scale_bytes(groups);
        for n in 0..self.rows {
            for g in 0..groups {
                let (d, dmin, sc, mn) = crate::quant::lq4k_scales(&scales[n * sb..], g);
                out[out_sm + n * groups + g] =
                    kquant_group_word(d, dmin, (sc, mn)).map_err(|e| EngineError::Quantize {
                        tensor: name.into(),
                        detail: format!("row {n}, group {g}: {e}"),
                    })?;
            }
        }
        Ok(Q4Matrix {
            rows: self.rows,
            cols: self.cols,
            data: out,
            layout,
        })
    }

    /// A `q6_k` matrix as `q8_0`, group by group of 32 (two halves with scales `a` and `b`):
    /// - when `|a| / gcd` and `|b| / gcd` are at most 4 (equal scales among them), the codes are
    ///   `q·sc / gcd` and the scale `d·gcd`: the same values up to the scale's f16 rounding
    ///   (`2⁻¹¹` relative);
    /// - otherwise the scale is `d·max(|a|, |b|) / 4` and the codes `q·sc·4 / max`, exact for
    ///   the half with the larger scale and rounded for the other (at most an eighth of
    ///   the larger half's 6-bit step; the 6-bit rounding the file already holds is half a
    ///   step);
    /// - and where even that overflows 8 bits (scales of equal size and opposite sign with a
    ///   code of −32), `d·max / (127/32)`, every code rounded (at most 0.13 of that step).
    ///
    /// 9 bits per weight; what the GPU, the instruction sets without a `q6_k` kernel and the
    /// bundles receive. Errors name `name`, the row and the group.
    pub fn q6_to_q8_0(&self, name: &str) -> Result<Q4Matrix> {
        let layout = BlockLayout::Q8;
        let (groups, sm) = (self.cols / GROUP, self.sm_offset());
        let out_sm = layout.sm_offset(self.rows, self.cols);
        let mut out = vec![0u32; layout.words(self.rows, self.cols)];
        for i in 0..self.rows * groups {
            let (n, g) = (i / groups, i % groups);
            let word = self.data[sm + i];
            let (a, bb) = (word as u8 as i8 as i32, (word >> 8) as u8 as i8 as i32);
            let d = half::f16::from_bits((word >> 16) as u16).to_f32();
            let q: [i32; 32] = std::array::from_fn(|k| self.code(n, GROUP * g + k));
            let (big, sign) = match a.abs().max(bb.abs()) {
                0 => (1, 1),
                m => (m, if a == m || bb == m { 1 } else { -1 }),
            };
            let gd = gcd(a.unsigned_abs(), bb.unsigned_abs()).max(1) as i32;
            // code = q·sc·sign·num / den, group scale d·sign·den / num: the first choice
            // whose codes fit 8 bits (the last always does).
            let fit = |num: i32, den: i32| -> Option<[u8; 32]> {
                let mut c = [0u8; 32];
                for (k, c) in c.iter_mut().enumerate() {
                    let s = if k < 16 { a } else { bb };
                    let r = ((q[k] * s * sign * num) as f64 / den as f64).round();
                    if !(-128.0..=127.0).contains(&r) {
                        return None;
                    }
                    *c = r as i8 as u8;
                }
                Some(c)
            };
            let bad = |detail: String| EngineError::Quantize {
                tensor: name.into(),
                detail: format!("row {n}, group {g}: {detail}"),
            };
            let (num, den, c) = [(1, gd), (4, big), (127, 32 * big)]
                .into_iter()
                .find_map(|(nn, dd)| fit(nn, dd).map(|c| (nn, dd, c)))
                .ok_or_else(|| bad("codes do not fit 8 bits".into()))?;
            let scale = half::f16::from_f32(d * (sign * den) as f32 / num as f32);
            if !scale.is_finite() {
                return Err(bad(format!(
                    "group scale of {d}·{den}/{num} is not a finite f16"
                )));
            }
            out[out_sm + i] = scale.to_bits() as u32;
            for (w, c) in c.chunks_exact(4).enumerate() {
                out[8 * i + w] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        Ok(Q4Matrix {
            rows: self.rows,
            cols: self.cols,
            data: out,
            layout,
        })
    }

    /// Shared body of the 8-bit k-quant importers (Q5_K): checks the length, then
    /// `superblock(bytes, words, codes)` gives each super-block's eight groups as their `(s, m)`
    /// words and their 32 codes (a signed byte per weight), packed here as `q8_0`. Its errors
    /// are named with the row and super-block.
    fn from_ggml_kquant(
        name: &str,
        rows: usize,
        cols: usize,
        data: &[u8],
        block_bytes: usize,
        superblock: impl Fn(&[u8], &mut [u32; 8], &mut [[u8; 32]; 8]) -> std::result::Result<(), String>,
    ) -> Result<Q4Matrix> {
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (256, block_bytes))?;
        let layout = BlockLayout::Q8;
        let sm = layout.sm_offset(rows, cols);
        let mut out = vec![0u32; layout.words(rows, cols)];
        let per_row = cols / 256;
        let (mut words, mut codes) = ([0u32; 8], [[0u8; 32]; 8]);
        for (i, b) in data.chunks_exact(block_bytes).enumerate().take(blocks) {
            superblock(b, &mut words, &mut codes).map_err(|e| EngineError::Quantize {
                tensor: name.into(),
                detail: format!("row {}, super-block {}: {e}", i / per_row, i % per_row),
            })?;
            for (j, (&word, c)) in words.iter().zip(&codes).enumerate() {
                let g = 8 * i + j;
                out[sm + g] = word;
                for (w, c) in c.chunks_exact(4).enumerate() {
                    out[8 * g + w] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout,
        })
    }

    /// Checks a GGUF tensor's byte length against `[rows, cols]` in blocks of `per_block`
    /// weights (32, or a k-quant's 256) of `block_bytes` each; the number of blocks.
    fn ggml_block_count(
        name: &str,
        rows: usize,
        cols: usize,
        len: usize,
        (per_block, block_bytes): (usize, usize),
    ) -> Result<usize> {
        let bad = |detail: String| EngineError::Quantize {
            tensor: name.into(),
            detail,
        };
        if cols == 0 || !cols.is_multiple_of(per_block) {
            return Err(bad(format!(
                "columns {cols} are not a positive multiple of {per_block} (the block width)"
            )));
        }
        rows.checked_mul(cols / per_block)
            .filter(|b| b.checked_mul(block_bytes) == Some(len))
            .ok_or_else(|| {
                bad(format!(
                    "{len} bytes of {block_bytes}-byte blocks for shape [{rows}, {cols}]"
                ))
            })
    }

    /// A GGUF `Q4_1` tensor `[rows, cols]` (row-major blocks of 20 bytes: f16 `d`, f16 `m`,
    /// 16 bytes of codes, weight `j` in the low and `j + 16` in the high nibble of byte `j`)
    /// as an `lq4h` matrix with the same values.
    pub fn from_ggml_q4_1(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        Self::from_ggml_blocks(name, rows, cols, data, 20, |b| {
            // s = d, m = −m (w = d·q + m = s·q − (−m)): a sign flip, exact.
            Ok((
                u16::from_le_bytes([b[0], b[1]]),
                u16::from_le_bytes([b[2], b[3]]) ^ 0x8000,
            ))
        })
    }

    /// A GGUF `Q4_0` tensor (blocks of 18 bytes: f16 `d`, 16 bytes of codes; `w = d·(q − 8)`)
    /// as an `lq4h` matrix with the same values (`s = d`, `m = 8·d`, exact in f16 unless
    /// `8·d` overflows, which is refused).
    pub fn from_ggml_q4_0(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        Self::from_ggml_blocks(name, rows, cols, data, 18, |b| {
            let d = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]]));
            let m = half::f16::from_f32(8.0 * d.to_f32());
            if d.is_finite() && !m.is_finite() {
                return Err(format!("block scale {d} is too large for 8·d in f16"));
            }
            Ok((d.to_bits(), m.to_bits()))
        })
    }

    /// Shared body of the GGUF importers: `scales(block)` gives a block's `(s, m)` f16 bits;
    /// the codes follow the first `block_bytes − 16` bytes.
    fn from_ggml_blocks(
        name: &str,
        rows: usize,
        cols: usize,
        data: &[u8],
        block_bytes: usize,
        scales: impl Fn(&[u8]) -> std::result::Result<(u16, u16), String>,
    ) -> Result<Q4Matrix> {
        let bad = |detail: String| EngineError::Quantize {
            tensor: name.into(),
            detail,
        };
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), (GROUP, block_bytes))?;
        let sm = Q4Matrix::sm_offset_for(rows, cols);
        let mut out = vec![0u32; BlockLayout::Lq4h.words(rows, cols)];
        let c0 = block_bytes - 16;
        for (i, b) in data.chunks_exact(block_bytes).enumerate().take(blocks) {
            let (s, m) = scales(b).map_err(|e| {
                let g = cols / GROUP;
                bad(format!("row {}, block {}: {e}", i / g, i % g))
            })?;
            out[sm + i] = s as u32 | (m as u32) << 16;
            let q = &b[c0..];
            // Weight 2j (low nibble) and 2j + 1 (high) of the group in byte j; word w holds
            // weights 8w..8w + 8.
            for w in 0..4 {
                let mut word = 0u32;
                for j in 0..8 {
                    let k = 8 * w + j;
                    let code = if k < 16 { q[k] & 0xF } else { q[k - 16] >> 4 };
                    word |= (code as u32) << (4 * j);
                }
                out[4 * i + w] = word;
            }
        }
        Ok(Q4Matrix {
            rows,
            cols,
            data: out,
            layout: BlockLayout::Lq4h,
        })
    }
}

/// The f16 at byte `at` of a block, as f32.
fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// A Q4_K / Q5_K group's `(s, m) = (d·sc, dmin·m)` as the f16 pair word of `lq4h` / `q8_0`;
/// an error when either is not a finite f16.
fn kquant_group_word(d: f32, dmin: f32, (sc, m): (u8, u8)) -> std::result::Result<u32, String> {
    let (s16, m16) = (
        half::f16::from_f32(d * sc as f32),
        half::f16::from_f32(dmin * m as f32),
    );
    if !s16.is_finite() || !m16.is_finite() {
        return Err(format!(
            "group scale {d}·{sc} or min {dmin}·{m} is not a finite f16"
        ));
    }
    Ok(s16.to_bits() as u32 | (m16.to_bits() as u32) << 16)
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::super::gguf::{dequantize_into, kquant_scale_min, GgmlType};
    use crate::quant::{BlockLayout, Q4Builder, Q4Matrix};
    use crate::rng::Pcg32;

    /// Random GGUF blocks with finite f16 scales around `scale`: `head` bytes of scales, then
    /// 16 random code bytes.
    fn ggml_blocks(rng: &mut Pcg32, blocks: usize, head: usize, scale: f32) -> Vec<u8> {
        let mut out = Vec::with_capacity(blocks * (head + 16));
        for _ in 0..blocks {
            for _ in 0..head / 2 {
                let v = half::f16::from_f32(rng.normal_vec(1, scale)[0]);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            out.extend((0..16).map(|_| (rng.next_u32() & 0xFF) as u8));
        }
        out
    }

    /// GGUF Q4_1 and Q4_0 tensors become `lq4h` matrices whose every value equals the GGUF
    /// dequantization exactly, on 5 rows of 3 groups (neither a multiple of 2 nor of 8);
    /// row blocks, bytes and stacking keep them exact.
    #[test]
    fn ggml_q4_blocks_are_kept_exactly() {
        let mut rng = Pcg32::new(11);
        let (n, k) = (5, 96);
        for (ty, head) in [(GgmlType::Q4_1, 4), (GgmlType::Q4_0, 2)] {
            let raw = ggml_blocks(&mut rng, n * k / 32, head, 0.02);
            let m = if ty == GgmlType::Q4_1 {
                Q4Matrix::from_ggml_q4_1("blk.0.w", n, k, &raw)
            } else {
                Q4Matrix::from_ggml_q4_0("blk.0.w", n, k, &raw)
            }
            .expect("convert");
            m.validate("blk.0.w").expect("valid");
            assert_eq!(m.bits_per_weight(), 5.0);
            let mut want = vec![0f32; n * k];
            dequantize_into(ty, &raw, &mut want);
            let got = m.dequantize();
            // Equal values (d·q − 8d and d·(q − 8) are both exact in f32; only the sign of a
            // zero may differ).
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(a == b, "{ty:?} element {i}: {a} vs {b}");
            }
            let back =
                Q4Matrix::from_bytes("t", BlockLayout::Lq4h, n, k, &m.to_bytes()).expect("bytes");
            assert_eq!(back, m);
            assert!(Q4Matrix::from_bytes("t", BlockLayout::Lq4, n, k, &m.to_bytes()).is_err());
            let blocks = [m.row_block(0, 2), m.row_block(2, 3), m.row_block(3, 5)];
            assert_eq!(&blocks[1].dequantize()[..], &want[2 * k..3 * k]);
            assert_eq!(Q4Matrix::concat_rows("t", &blocks).expect("concat"), m);
            assert!(
                Q4Matrix::concat_rows("t", &[m.clone(), Q4Builder::new(1, k).finish()]).is_err()
            );
        }
        // Q8_0: every code (−128..=127) and the scale kept.
        let raw = ggml_blocks(&mut rng, n * k / 32, 2, 0.01);
        let raw: Vec<u8> = raw
            .chunks_exact(18)
            .flat_map(|b| {
                let mut v = b[..2].to_vec();
                v.extend_from_slice(&b[2..]);
                v.extend_from_slice(&b[2..]);
                v
            })
            .collect();
        let m = Q4Matrix::from_ggml_q8_0("blk.3.w", n, k, &raw).expect("convert");
        m.validate("blk.3.w").expect("valid");
        assert_eq!(m.bits_per_weight(), 9.0);
        let mut want = vec![0f32; n * k];
        dequantize_into(GgmlType::Q8_0, &raw, &mut want);
        assert!(m.dequantize() == want, "q8_0 values differ from the GGUF's");
        let back = Q4Matrix::from_bytes("t", BlockLayout::Q8, n, k, &m.to_bytes()).expect("bytes");
        assert_eq!(back, m);
        let blocks = [m.row_block(0, 1), m.row_block(1, 5)];
        assert_eq!(&blocks[1].dequantize()[..], &want[k..]);
        assert_eq!(Q4Matrix::concat_rows("t", &blocks).expect("concat"), m);
        // Q5_0 and Q5_1: every five-bit code, the scale (and min) kept.
        for (ty, head) in [(GgmlType::Q5_0, 2), (GgmlType::Q5_1, 4)] {
            let raw: Vec<u8> = ggml_blocks(&mut rng, n * k / 32, head, 0.01)
                .chunks_exact(head + 16)
                .flat_map(|b| {
                    let mut v = b[..head].to_vec();
                    v.extend((0..4).map(|_| (rng.next_u32() & 0xFF) as u8));
                    v.extend_from_slice(&b[head..]);
                    v
                })
                .collect();
            let with_min = ty == GgmlType::Q5_1;
            let m = Q4Matrix::from_ggml_q5("blk.4.w", n, k, &raw, with_min).expect("convert");
            m.validate("blk.4.w").expect("valid");
            assert_eq!((m.layout, m.bits_per_weight()), (BlockLayout::Q5, 6.0));
            let mut want = vec![0f32; n * k];
            dequantize_into(ty, &raw, &mut want);
            assert!(
                m.dequantize() == want,
                "{ty:?} values differ from the GGUF's"
            );
            // As `q8_0` (what the other backends get): the same words as reading the file
            // into `q8_0` directly, so the same values.
            let q8 = Q4Matrix::from_ggml_q5_as_q8_0("blk.4.w", n, k, &raw, with_min).expect("q8");
            assert_eq!(m.to_portable("blk.4.w").expect("portable").into_owned(), q8);
            assert!(q8.dequantize() == want);
            let back = Q4Matrix::from_bytes("t", BlockLayout::Q5, n, k, &m.to_bytes()).expect("b");
            assert_eq!(back, m);
            let blocks = [m.row_block(0, 2), m.row_block(2, 5)];
            assert_eq!(&blocks[1].dequantize()[..], &want[2 * k..]);
            assert_eq!(Q4Matrix::concat_rows("t", &blocks).expect("concat"), m);
            assert!(Q4Matrix::from_ggml_q5("blk.4.w", n, k, &raw[1..], true).is_err());
        }
        // A Q5_0 scale whose 16·d overflows f16 reads the tensor as `q8_0`, the values kept.
        let mut raw: Vec<u8> = (0..2 * 22).map(|_| (rng.next_u32() & 0xFF) as u8).collect();
        raw[..2].copy_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
        raw[22..24].copy_from_slice(&half::f16::from_f32(5000.0).to_bits().to_le_bytes());
        let m = Q4Matrix::from_ggml_q5("blk.5.w", 1, 64, &raw, false).expect("convert");
        assert_eq!(m.layout, BlockLayout::Q8);
        let mut want = vec![0f32; 64];
        dequantize_into(GgmlType::Q5_0, &raw, &mut want);
        assert!(m.dequantize() == want);
        // A length that is not the shape's, and an 8·d that overflows f16, are named.
        let raw = ggml_blocks(&mut rng, 3, 4, 0.02);
        let e = Q4Matrix::from_ggml_q4_1("blk.1.w", 2, 64, &raw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("blk.1.w") && e.contains("[2, 64]"), "{e}");
        let mut raw = ggml_blocks(&mut rng, 2, 2, 0.02);
        raw[18..20].copy_from_slice(&half::f16::from_f32(60000.0).to_bits().to_le_bytes());
        let e = Q4Matrix::from_ggml_q4_0("blk.2.w", 1, 64, &raw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("blk.2.w") && e.contains("row 0, block 1"), "{e}");
    }

    /// Random k-quant super-blocks: f16 scales around `scale` at `f16s` byte offsets, every
    /// other byte random.
    fn kquant_blocks(
        rng: &mut Pcg32,
        blocks: usize,
        bytes: usize,
        f16s: &[usize],
        scale: f32,
    ) -> Vec<u8> {
        let mut out: Vec<u8> = (0..blocks * bytes)
            .map(|_| (rng.next_u32() & 0xFF) as u8)
            .collect();
        for b in out.chunks_exact_mut(bytes) {
            for &at in f16s {
                let v = half::f16::from_f32(rng.normal_vec(1, scale)[0].abs() + scale / 8.0);
                b[at..at + 2].copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        out
    }

    /// GGUF Q4_K, Q5_K and Q6_K tensors: every value within the documented bound of the GGUF
    /// dequantization (llama.cpp's, followed by `q4k_and_q6k_follow_ggml`), on 3 rows of 2
    /// super-blocks; exactly equal where the group scales are exact in f16; bad lengths and
    /// widths named.
    #[test]
    fn ggml_kquant_blocks_keep_their_values() {
        let mut rng = Pcg32::new(21);
        let (n, k) = (3, 512);
        // Q4_K (lq4h) and Q5_K (q8_0): |Δw| ≤ 2⁻¹¹·(|d·sc·q| + |dmin·m|) (the f16 rounding of
        // s and m); scales that are powers of two times an f16 are exact, so the values (the
        // codes and their order) are equal.
        type Import = fn(&str, usize, usize, &[u8]) -> crate::error::Result<Q4Matrix>;
        // Q4_K as the GPU and the bundles receive it (`lq4k` → `lq4h`); as `lq4k`, exact below.
        let q4k_as_lq4h: Import =
            |name, r, c, raw| Q4Matrix::from_ggml_q4_k(name, r, c, raw)?.lq4k_to_lq4h(name);
        let kinds: [(GgmlType, usize, f32, BlockLayout, Import); 2] = [
            (GgmlType::Q4K, 144, 15.0, BlockLayout::Lq4h, q4k_as_lq4h),
            (
                GgmlType::Q5K,
                176,
                31.0,
                BlockLayout::Q8,
                Q4Matrix::from_ggml_q5_k,
            ),
        ];
        let mut want = vec![0f32; n * k];
        for (ty, bytes, qmax, layout, import) in kinds {
            let mut raw = kquant_blocks(&mut rng, n * k / 256, bytes, &[0, 2], 0.002);
            let m = import("blk.5.ffn_down", n, k, &raw).expect("import");
            m.validate("blk.5.ffn_down").expect("valid");
            assert_eq!(m.layout, layout);
            dequantize_into(ty, &raw, &mut want);
            for (i, (a, b)) in m.dequantize().iter().zip(&want).enumerate() {
                let blk = &raw[bytes * (i / 256)..];
                let (d, dmin) = (super::f16_at(blk, 0), super::f16_at(blk, 2));
                let (sc, mn) = kquant_scale_min(&blk[4..16], (i % 256) / 32);
                let bound = (d * sc as f32 * qmax + dmin * mn as f32) / 2048.0 + 1e-7;
                assert!(
                    (a - b).abs() <= bound,
                    "{ty:?} element {i}: {a} vs {b} (bound {bound})"
                );
            }
            for b in raw.chunks_exact_mut(bytes) {
                b[4..16].copy_from_slice(&[1, 2, 4, 8, 16, 32, 1, 2, 0x11, 0x22, 0x44, 0x08]);
            }
            let m = import("t", n, k, &raw).expect("import");
            dequantize_into(ty, &raw, &mut want);
            assert!(m.dequantize() == want, "{ty:?} with exact scales differs");
        }

        // Q4_K as `lq4k`: the GGUF's values exactly, 4.625 bits per weight; row blocks too.
        let raw = kquant_blocks(&mut rng, n * k / 256, 144, &[0, 2], 0.002);
        let m = Q4Matrix::from_ggml_q4_k("blk.5.ffn_up", n, k, &raw).expect("q4_k");
        m.validate("blk.5.ffn_up").expect("valid");
        assert_eq!(m.layout, BlockLayout::Lq4k);
        assert!((m.bits_per_weight() - 4.625).abs() < 1e-9);
        dequantize_into(GgmlType::Q4K, &raw, &mut want);
        assert!(m.dequantize() == want, "lq4k differs from the GGUF values");
        assert_eq!(m.row_block(1, 3).dequantize(), want[k..].to_vec());

        // Q6_K: as `q6_k` exactly. As `q8_0` (the GPU's and the bundles'), groups whose two
        // scales share a divisor they are at most 4 times are exact up to f16; every other
        // value within 16/127 of the larger 6-bit step (+ f16).
        let mut raw = kquant_blocks(&mut rng, n * k / 256, 210, &[208], 0.001);
        // Super-block 0: scales (8, 8), (8, −8), (12, 4), (−6, 9): the exact choices.
        raw[192..200].copy_from_slice(&[8, 8, 8, (-8i8) as u8, 12, 4, (-6i8) as u8, 9]);
        let m = Q4Matrix::from_ggml_q6_k("blk.7.attn_v", n, k, &raw).expect("q6_k");
        m.validate("blk.7.attn_v").expect("valid");
        assert_eq!(m.layout, BlockLayout::Q6);
        assert!((m.bits_per_weight() - 7.0).abs() < 1e-9);
        dequantize_into(GgmlType::Q6K, &raw, &mut want);
        assert!(m.dequantize() == want, "q6_k differs from the GGUF values");
        let q8 = m.to_portable("blk.7.attn_v").expect("q8_0").into_owned();
        assert_eq!(q8.layout, BlockLayout::Q8);
        q8.validate("blk.7.attn_v").expect("valid");
        // Row blocks of a q6_k matrix keep their values.
        let tail = m.row_block(1, 3);
        assert_eq!(tail.dequantize(), want[k..].to_vec());
        let got = q8.dequantize();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            let blk = &raw[210 * (i / 256)..];
            let d = super::f16_at(blk, 208);
            let t = (i % 256) / 32;
            let sc = |j: usize| (blk[192 + 8 * (t / 4) + 2 * (t % 4) + j] as i8 as f32).abs();
            let big = sc(0).max(sc(1));
            let f16_part = (d * big * 32.0) / 2048.0;
            let bound = if i < 128 {
                f16_part
            } else {
                d * big * 16.0 / 127.0 + f16_part
            } + 1e-7;
            assert!(
                (a - b).abs() <= bound,
                "Q6_K element {i}: {a} vs {b} (bound {bound})"
            );
        }
        // Lengths and widths are checked before anything is read.
        let e = Q4Matrix::from_ggml_q6_k("blk.7.attn_v", n, k, &raw[1..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("blk.7.attn_v") && e.contains("[3, 512]"), "{e}");
        let e = Q4Matrix::from_ggml_q4_k("t", 2, 96, &[0; 144])
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiple of 256"), "{e}");
    }

    /// `--quant q8`'s quantizer gives the blocks llama.cpp's `Q8_0` reference does: its matrix
    /// equals the one read from GGUF `Q8_0` bytes made by that reference's formula (f16 `d =
    /// amax / 127`, codes `round(w · (1 / d))`), on 5 rows of 3 groups with a zero group and
    /// a group of one large value; every value is within half a step (plus the f16 rounding of
    /// `d`) of the weight; a bad shape and a NaN are refused by name.
    #[test]
    fn q8_0_quantizer_matches_the_ggml_reference() {
        let mut rng = Pcg32::new(21);
        let (n, k) = (5, 96);
        let mut w = rng.normal_vec(n * k, 0.05);
        w[32..64].iter_mut().for_each(|v| *v = 0.0);
        w[100] = -3.0;
        let mut raw = Vec::new();
        for g in w.chunks_exact(32) {
            let amax = g.iter().fold(0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            raw.extend_from_slice(&half::f16::from_f32(d).to_bits().to_le_bytes());
            for v in g {
                let q = if amax > 0.0 {
                    (v * (1.0 / d)).round()
                } else {
                    0.0
                };
                raw.push(q as i8 as u8);
            }
        }
        let want = Q4Matrix::from_ggml_q8_0("t", n, k, &raw).expect("reference");
        let got = Q4Matrix::quantize_q8_0("t", n, k, &w).expect("quantize");
        assert_eq!(got.layout, BlockLayout::Q8);
        let differ = got
            .data
            .iter()
            .zip(&want.data)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differ, 0, "{differ} words differ from the reference blocks");
        for (i, (a, b)) in got.dequantize().iter().zip(&w).enumerate() {
            let g = &w[32 * (i / 32)..32 * (i / 32 + 1)];
            let d = g.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
            assert!(
                (a - b).abs() <= d * (0.5 + 127.0 / 2048.0) + 1e-9,
                "element {i}: {a} vs {b} (step {d})"
            );
        }
        let e = Q4Matrix::quantize_q8_0("blk.1.w", 2, 33, &[0.0; 66])
            .unwrap_err()
            .to_string();
        assert!(e.contains("blk.1.w") && e.contains("33"), "{e}");
        w[7] = f32::NAN;
        let e = Q4Matrix::quantize_q8_0("blk.2.w", n, k, &w)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("blk.2.w") && e.contains("row 0, column 7"),
            "{e}"
        );
    }
}
