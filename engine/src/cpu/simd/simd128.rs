//! WebAssembly `simd128` form of the LQ4 × Q8 row dot product (the page's build enables
//! `+simd128`, which every current browser runs).
//!
//! One group per step: low and high nibbles of the 16 code bytes and the matching activation
//! halves are widened to i16 and multiplied pairwise into i32 lanes by `i32x4.dot_i16x8_s`;
//! each group's i32 lanes are scaled by `sc·dx` into an f32x4 accumulator.

use core::arch::wasm32::*;

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
    let mask = u8x16_splat(0x0F);
    let mut acc = f32x4_splat(0.0);
    for (g, &scale) in scales[..groups].iter().enumerate() {
        let (xe, xo) = super::scalar::q8_halves(x.qs, g, groups);
        let codes = &codes[16 * g..16 * g + 16];
        // SAFETY: each load reads 16 bytes from a slice of exactly 16 bytes (no alignment
        // is required of v128.load).
        let (v, xe, xo) = unsafe {
            (
                v128_load(codes.as_ptr() as *const v128),
                v128_load(xe.as_ptr() as *const v128),
                v128_load(xo.as_ptr() as *const v128),
            )
        };
        let lo = v128_and(v, mask);
        let hi = u8x16_shr(v, 4);
        let s = i32x4_add(
            i32x4_add(
                i32x4_dot_i16x8(u16x8_extend_low_u8x16(lo), i16x8_extend_low_i8x16(xe)),
                i32x4_dot_i16x8(u16x8_extend_high_u8x16(lo), i16x8_extend_high_i8x16(xe)),
            ),
            i32x4_add(
                i32x4_dot_i16x8(u16x8_extend_low_u8x16(hi), i16x8_extend_low_i8x16(xo)),
                i32x4_dot_i16x8(u16x8_extend_high_u8x16(hi), i16x8_extend_high_i8x16(xo)),
            ),
        );
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(s), f32x4_splat(scale)));
    }
    f32x4_extract_lane::<0>(acc)
        + f32x4_extract_lane::<1>(acc)
        + f32x4_extract_lane::<2>(acc)
        + f32x4_extract_lane::<3>(acc)
}

/// `Σ_g scales[g]·Σ_i w_i·x_i` for a `q8_0` row (signed codes, natural order; see
/// [`super::q8_q8`]): codes widened to i16 and multiplied pairwise into i32 lanes by
/// `i32x4.dot_i16x8_s`, each group's lanes scaled into an f32x4 accumulator.
pub fn q8_dot(codes: &[i8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let mut acc = f32x4_splat(0.0);
    for ((w, v), &scale) in codes
        .chunks_exact(32)
        .zip(x.qs.chunks_exact(32))
        .zip(scales)
    {
        // SAFETY: each load reads 16 bytes from a slice of exactly 32.
        let (w0, w1, v0, v1) = unsafe {
            (
                v128_load(w.as_ptr() as *const v128),
                v128_load(w.as_ptr().add(16) as *const v128),
                v128_load(v.as_ptr() as *const v128),
                v128_load(v.as_ptr().add(16) as *const v128),
            )
        };
        let dot = |a: v128, b: v128| {
            i32x4_add(
                i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b)),
                i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b)),
            )
        };
        let s = i32x4_add(dot(w0, v0), dot(w1, v1));
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(s), f32x4_splat(scale)));
    }
    f32x4_extract_lane::<0>(acc)
        + f32x4_extract_lane::<1>(acc)
        + f32x4_extract_lane::<2>(acc)
        + f32x4_extract_lane::<3>(acc)
}
