//! aarch64 NEON form of the LQ4 × Q8 row dot product (NEON is part of the aarch64 baseline).
//!
//! One group per step: the 16 code bytes split into low nibbles (even weights) and high
//! nibbles (odd weights), widened products `vmull_s8`/`vmlal_s8` into i16 (at most 4·15·127
//! per lane) and one widening horizontal add per group.

use std::arch::aarch64::*;

use crate::cpu::q8::{Lq4Row, Q8Row};

/// See [`super::lq4_q8`]. Lengths as in [`super::avx2::lq4_q8`]; checked by the dispatch.
pub fn lq4_q8(w: Lq4Row<'_>, x: Q8Row<'_>, scratch: &mut [f32]) -> (f32, f32) {
    let groups = x.d.len();
    let mut acc_m = 0f32;
    for (g, s) in scratch[..groups].iter_mut().enumerate() {
        *s = w.subs[2 * g] as f32 * x.d[g];
        acc_m += w.subs[2 * g + 1] as f32 * x.sum[g];
    }
    (codes_dot(w.codes, x, scratch), acc_m)
}

/// `Σ_g scales[g]·Σ_i q_i·qx_i` (the integer half of [`lq4_q8`], the scales given).
pub fn codes_dot(codes: &[u8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let groups = x.d.len();
    let mut acc_q = 0f32;
    for (g, &scale) in scales[..groups].iter().enumerate() {
        let (xe, xo) = super::scalar::q8_halves(x.qs, g, groups);
        let codes = &codes[16 * g..16 * g + 16];
        // SAFETY: each load reads 16 bytes from a slice of exactly 16 bytes.
        let isum = unsafe {
            let v = vld1q_u8(codes.as_ptr());
            let lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
            let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(v));
            let xe = vld1q_s8(xe.as_ptr());
            let xo = vld1q_s8(xo.as_ptr());
            let mut p = vmull_s8(vget_low_s8(lo), vget_low_s8(xe));
            p = vmlal_s8(p, vget_high_s8(lo), vget_high_s8(xe));
            p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(xo));
            p = vmlal_s8(p, vget_high_s8(hi), vget_high_s8(xo));
            vaddlvq_s16(p)
        };
        acc_q += scale * isum as f32;
    }
    acc_q
}

/// `Σ_g scales[g]·Σ_i w_i·x_i` for a `q8_0` row (signed codes, natural order; see
/// [`super::q8_q8`]): widening products into i16 (two per lane at most, 2·128·127 < 2¹⁵), then
/// pairwise widening adds to i32.
pub fn q8_dot(codes: &[i8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let mut acc = 0f32;
    for ((w, v), &scale) in codes
        .chunks_exact(32)
        .zip(x.qs.chunks_exact(32))
        .zip(scales)
    {
        // SAFETY: each load reads 16 bytes from a slice of exactly 32.
        let isum = unsafe {
            let (w0, w1) = (vld1q_s8(w.as_ptr()), vld1q_s8(w.as_ptr().add(16)));
            let (v0, v1) = (vld1q_s8(v.as_ptr()), vld1q_s8(v.as_ptr().add(16)));
            let p0 = vmlal_s8(
                vmull_s8(vget_low_s8(w0), vget_low_s8(v0)),
                vget_high_s8(w0),
                vget_high_s8(v0),
            );
            let p1 = vmlal_s8(
                vmull_s8(vget_low_s8(w1), vget_low_s8(v1)),
                vget_high_s8(w1),
                vget_high_s8(v1),
            );
            vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)))
        };
        acc += scale * isum as f32;
    }
    acc
}
