//! The portable form of the LQ4 × Q8 row dot product: the reference every SIMD form is tested
//! against, and what runs where no SIMD form exists.

use crate::cpu::q8::{Lq4Row, Q8Row};

/// See [`super::lq4_q8`].
pub fn lq4_q8(w: Lq4Row<'_>, x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    let (mut acc_q, mut acc_m) = (0f32, 0f32);
    for g in 0..groups {
        let (lo_x, hi_x) = q8_halves(x.qs, g, groups);
        let codes = &w.codes[16 * g..16 * g + 16];
        let mut isum = 0i32;
        for j in 0..16 {
            let c = codes[j];
            isum += (c & 0xF) as i32 * lo_x[j] as i32 + (c >> 4) as i32 * hi_x[j] as i32;
        }
        let (sc, mn) = (w.subs[2 * g] as f32, w.subs[2 * g + 1] as f32);
        acc_q += sc * x.d[g] * isum as f32;
        acc_m += mn * x.sum[g];
    }
    (acc_q, acc_m)
}

/// `Σ_g scales[g]·Σ_i q_i·qx_i`: the integer half of [`lq4_q8`] with the per-group scales
/// given (the `lq4h` path).
pub fn codes_dot(codes: &[u8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let groups = x.d.len();
    let mut acc_q = 0f32;
    for (g, &scale) in scales[..groups].iter().enumerate() {
        let (lo_x, hi_x) = q8_halves(x.qs, g, groups);
        let mut isum = 0i32;
        for (j, &c) in codes[16 * g..16 * g + 16].iter().enumerate() {
            isum += (c & 0xF) as i32 * lo_x[j] as i32 + (c >> 4) as i32 * hi_x[j] as i32;
        }
        acc_q += scale * isum as f32;
    }
    acc_q
}

/// The 16 even-element and 16 odd-element codes of block `g` (see [`crate::cpu::q8`]).
#[inline]
pub(crate) fn q8_halves(qs: &[i8], g: usize, groups: usize) -> (&[i8], &[i8]) {
    if g + 1 == groups && groups % 2 == 1 {
        (&qs[32 * g..32 * g + 16], &qs[32 * g + 16..32 * g + 32])
    } else {
        let base = 64 * (g / 2) + 16 * (g % 2);
        (&qs[base..base + 16], &qs[base + 32..base + 48])
    }
}

/// `Σ_g scales[g]·Σ_i w_i·x_i` for a `q8_0` row: signed weight codes and activation codes, both
/// in natural order (see [`super::q8_q8`]).
pub fn q8_dot(codes: &[i8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let mut acc = 0f32;
    for ((w, xq), &scale) in codes
        .chunks_exact(32)
        .zip(x.qs.chunks_exact(32))
        .zip(scales)
    {
        let isum: i32 = w.iter().zip(xq).map(|(&a, &b)| a as i32 * b as i32).sum();
        acc += scale * isum as f32;
    }
    acc
}

/// `Σ_g d_g·dx_g·(sc_lo·Σ_{i<16} c_i·qx_i + sc_hi·Σ_{i≥16} c_i·qx_i)` for a `q6_k` row (see
/// [`crate::quant`]; `c = q − 32`) and an activation row in natural order: the reference of
/// [`super::q6_q8`].
pub fn q6_dot(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> f32 {
    let groups = x.d.len();
    let mut acc = 0f32;
    for (g, xq) in x.qs.chunks_exact(32).enumerate() {
        let (mut lo, mut hi) = (0i32, 0i32);
        for (i, &xv) in xq.iter().enumerate() {
            let q = crate::quant::q6_code(codes, groups, g, i);
            let p = (q as i32 - 32) * xv as i32;
            if i < 16 {
                lo += p;
            } else {
                hi += p;
            }
        }
        let s = &subs[4 * g..4 * g + 4];
        let d = super::f16_to_f32(u16::from_le_bytes([s[2], s[3]]));
        acc += d * x.d[g] * (s[0] as i8 as i32 * lo + s[1] as i8 as i32 * hi) as f32;
    }
    acc
}

/// `(Σ_g s_g·dx_g·Σ_i q_i·qx_i, Σ_g m_g·Σx_g)` for a `q5` row (20·G code bytes, an f16 `(s, m)`
/// per group; see [`crate::quant`]) and an activation row in paired order: the reference of
/// [`super::q5_q8`].
pub fn q5_dot(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    let (mut acc_q, mut acc_m) = (0f32, 0f32);
    for g in 0..groups {
        let (even_x, odd_x) = q8_halves(x.qs, g, groups);
        let mut isum = 0i32;
        for j in 0..16 {
            let (e, o) = (
                crate::quant::q5_code(codes, groups, g, 2 * j),
                crate::quant::q5_code(codes, groups, g, 2 * j + 1),
            );
            isum += e as i32 * even_x[j] as i32 + o as i32 * odd_x[j] as i32;
        }
        let s = &subs[4 * g..4 * g + 4];
        let (sc, mn) = (
            super::f16_to_f32(u16::from_le_bytes([s[0], s[1]])),
            super::f16_to_f32(u16::from_le_bytes([s[2], s[3]])),
        );
        acc_q += sc * x.d[g] * isum as f32;
        acc_m += mn * x.sum[g];
    }
    (acc_q, acc_m)
}
