//! The legacy 8-bit bundle format ([`Q8Matrix`]), beside the block layouts of [`super`].

use super::GROUP;
use crate::error::{EngineError, Result};

/// 8-bit weights with an f32 scale per group: symmetric int8 codes in groups of 32 along each
/// row (the last group of a row may be shorter), 9 bits per weight. What `--quant q8` wrote
/// before its matrices became `q8_0` (`Q4Matrix::quantize_q8_0`), and still writes for a
/// matrix whose columns are not a multiple of 32 (`q4` too). The engine dequantizes them to
/// f32 at load.
#[derive(Clone, Debug, PartialEq)]
pub struct Q8Matrix {
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// `rows * cols` codes, row-major.
    pub codes: Vec<i8>,
    /// `rows * ceil(cols / 32)` scales.
    pub scales: Vec<f32>,
}

impl Q8Matrix {
    /// Bytes of the on-disk form for a shape.
    pub fn bytes_for(rows: usize, cols: usize) -> usize {
        rows * cols + 4 * rows * cols.div_ceil(GROUP)
    }

    /// Quantizes `[rows, cols]` row-major data (finite values, checked by the caller).
    pub fn quantize(rows: usize, cols: usize, w: &[f32]) -> Q8Matrix {
        let mut codes = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows * cols.div_ceil(GROUP));
        for row in w.chunks(cols.max(1)).take(rows) {
            for g in row.chunks(GROUP) {
                let amax = g.iter().fold(0f32, |a, v| a.max(v.abs()));
                let s = amax / 127.0;
                scales.push(s);
                codes.extend(g.iter().map(|v| {
                    if s > 0.0 {
                        (v / s).round().clamp(-127.0, 127.0) as i8
                    } else {
                        0
                    }
                }));
            }
        }
        Q8Matrix {
            rows,
            cols,
            codes,
            scales,
        }
    }

    /// Stacks row blocks of the same width.
    pub fn concat_rows(blocks: &[Q8Matrix]) -> Q8Matrix {
        Q8Matrix {
            rows: blocks.iter().map(|b| b.rows).sum(),
            cols: blocks.first().map(|b| b.cols).unwrap_or(0),
            codes: blocks
                .iter()
                .flat_map(|b| b.codes.iter().copied())
                .collect(),
            scales: blocks
                .iter()
                .flat_map(|b| b.scales.iter().copied())
                .collect(),
        }
    }

    /// Codes then scales, little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::bytes_for(self.rows, self.cols));
        out.extend(self.codes.iter().map(|&c| c as u8));
        for s in &self.scales {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Dequantizes the on-disk form of a `[rows, cols]` block.
    pub fn dequantize_bytes(name: &str, rows: usize, cols: usize, b: &[u8]) -> Result<Vec<f32>> {
        if b.len() != Self::bytes_for(rows, cols) {
            return Err(EngineError::Quantize {
                tensor: name.into(),
                detail: format!(
                    "q8 data has {} bytes, shape [{rows}, {cols}] needs {}",
                    b.len(),
                    Self::bytes_for(rows, cols)
                ),
            });
        }
        let (codes, scales) = b.split_at(rows * cols);
        let gpr = cols.div_ceil(GROUP);
        let mut out = Vec::with_capacity(rows * cols);
        for (n, row) in codes.chunks(cols.max(1)).take(rows).enumerate() {
            for (g, grp) in row.chunks(GROUP).enumerate() {
                let o = 4 * (n * gpr + g);
                let s =
                    f32::from_le_bytes([scales[o], scales[o + 1], scales[o + 2], scales[o + 3]]);
                out.extend(grp.iter().map(|&c| c as i8 as f32 * s));
            }
        }
        Ok(out)
    }
}
