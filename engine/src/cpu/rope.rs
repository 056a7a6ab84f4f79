//! Rotary position embedding from a precomputed `(cos, sin)` table.

use crate::backend::RopeShape;

/// Plain-Rust reference.
pub fn rope(x: &mut [f32], table: &[f32], s: RopeShape) {
    let half = s.rot_dim / 2;
    for t in 0..s.tokens {
        for h in 0..s.heads {
            let base = (t * s.heads + h) * s.head_dim;
            for i in 0..half {
                let c = table[((s.pos0 + t) * half + i) * 2];
                let sn = table[((s.pos0 + t) * half + i) * 2 + 1];
                let a = x[base + i];
                let b = x[base + i + half];
                x[base + i] = a * c - b * sn;
                x[base + i + half] = b * c + a * sn;
            }
        }
    }
}
