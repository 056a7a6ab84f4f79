//! LQ4's quantizer (see [`super`]): each group's scale and min fitted for least (weighted)
//! squared error, then the codes re-fitted to the 8-bit-rounded scales, and the builder that
//! packs the rows.

use super::*;

/// One quantized row: codes, sub-scales and row scales.
pub(super) struct RowCodes {
    pub(super) codes: Vec<u8>,
    pub(super) subs: Vec<(u8, u8)>,
    pub(super) d: f32,
    pub(super) dmin: f32,
}

/// Checks a calibration's column importances and turns them into fit weights: each divided by
/// their mean, plus a floor of 1e-3 so that a column no activation reached still counts.
pub(super) fn column_weights(imp: &[f32], cols: usize) -> std::result::Result<Vec<f32>, String> {
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
pub(super) fn quantize_row(row: &[f32], weights: Option<&[f32]>) -> RowCodes {
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
