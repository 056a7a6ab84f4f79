//! GGUF's quantized blocks as the engine's block matrices with the same values (issue 21):
//! Q4_0 / Q4_1 as `lq4h`, Q5_0 / Q5_1 / Q8_0 as `q8_0` ([`BlockLayout`]). The layouts are
//! documented in [`crate::quant`]; this file only reads GGUF's bytes into them, so the format
//! module depends on `quant` and never the other way.

use crate::error::{EngineError, Result};
use crate::quant::{BlockLayout, Q4Matrix, GROUP};

impl Q4Matrix {
    /// A GGUF `Q8_0` tensor `[rows, cols]` (blocks of 34 bytes: f16 `d`, 32 signed codes;
    /// `w = d·q`) as a `q8_0` matrix with the same values: the codes in the same order, the
    /// scale as an `(s, m) = (d, 0)` word.
    pub fn from_ggml_q8_0(name: &str, rows: usize, cols: usize, data: &[u8]) -> Result<Q4Matrix> {
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), 34)?;
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

    /// A GGUF `Q5_0` (blocks of 22 bytes: f16 `d`, 4 bytes of fifth bits, 16 of nibbles;
    /// `w = d·(q − 16)`) or `Q5_1` tensor (24 bytes: f16 `d`, f16 `m`, then the same;
    /// `w = d·q + m`) as a `q8_0` matrix with the same values: codes `q − 16` (Q5_0) or `q`
    /// (Q5_1) in 8 bits, `(s, m) = (d, 0)` or `(d, −m)`. 9 bits per weight where the file
    /// spends 5.5 or 6, but no second rounding and the same kernels.
    pub fn from_ggml_q5(
        name: &str,
        rows: usize,
        cols: usize,
        data: &[u8],
        with_min: bool,
    ) -> Result<Q4Matrix> {
        let bb = if with_min { 24 } else { 22 };
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), bb)?;
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

    /// Checks a GGUF tensor's byte length against `[rows, cols]` in blocks of 32 weights of
    /// `block_bytes` each; the number of blocks.
    fn ggml_block_count(
        name: &str,
        rows: usize,
        cols: usize,
        len: usize,
        block_bytes: usize,
    ) -> Result<usize> {
        let bad = |detail: String| EngineError::Quantize {
            tensor: name.into(),
            detail,
        };
        if cols == 0 || !cols.is_multiple_of(GROUP) {
            return Err(bad(format!(
                "columns {cols} are not a positive multiple of {GROUP}"
            )));
        }
        rows.checked_mul(cols / GROUP)
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
        let blocks = Self::ggml_block_count(name, rows, cols, data.len(), block_bytes)?;
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

#[cfg(test)]
mod tests {
    use super::super::gguf::{dequantize_into, GgmlType};
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
            let m = Q4Matrix::from_ggml_q5("blk.4.w", n, k, &raw, ty == GgmlType::Q5_1)
                .expect("convert");
            m.validate("blk.4.w").expect("valid");
            let mut want = vec![0f32; n * k];
            dequantize_into(ty, &raw, &mut want);
            assert!(
                m.dequantize() == want,
                "{ty:?} values differ from the GGUF's"
            );
            assert!(Q4Matrix::from_ggml_q5("blk.4.w", n, k, &raw[1..], true).is_err());
        }
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
}
