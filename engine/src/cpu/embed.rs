//! Token embedding from an LQ4 table.

use crate::quant::Q4Matrix;

/// Plain-Rust reference for a table holding vocabulary rows `row0..row0 + w.rows`; rows of
/// `out` whose id lies elsewhere are left untouched.
pub fn embed_q4(ids: &[u32], w: &Q4Matrix, row0: usize, out: &mut [f32]) {
    for (t, &id) in ids.iter().enumerate() {
        let Some(r) = (id as usize).checked_sub(row0).filter(|&r| r < w.rows) else {
            continue;
        };
        w.dequantize_row(r, &mut out[t * w.cols..(t + 1) * w.cols]);
    }
}
