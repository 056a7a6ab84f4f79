//! AVX2 + FMA + F16C form of the `q5` × Q8 row dot product (GGUF's Q5_0 / Q5_1 blocks as they
//! are; the layout in [`crate::quant`]): [`super::avx2::lq4h_q8`]'s pass with each code's fifth
//! bit put back beside its nibble.
//!
//! A pair of groups is one 32-byte load of nibbles, as for the 4-bit rows: masking gives the
//! register of even weights `[A even | B even]`, a shift the odd ones, and the row's fifth-bit
//! plane holds one 32-bit word for each of those registers, bit `b` for byte `b`. Each word is
//! spread to bytes (one in-lane shuffle of the word broadcast, a test of each byte's bit, a
//! mask to 0x10) and or-ed in, so the codes are 0–31 and `vpmaddubsw` multiplies them by the
//! signed activations as it does 4-bit codes (at most 2·31·128 = 7,936 a pair, twice that
//! after the two registers' sum: no saturation). The sums are exact in integers, so this form
//! differs from the scalar one only in the order of f32 additions.

use std::arch::x86_64::*;

use super::avx2::{group_scales, group_sum, hsum, min_term, pair_scales, pair_sum, PREFETCH_AHEAD};
use crate::cpu::q8::Q8Row;

/// The `q5` row (per group an f16 `(s, m)`, `w = s·q − m`, `q` in 0–31) times a [`Q8Row`] in
/// paired order, in one pass. Returns `(Σ_g s_g·dx_g·Σ_i q_i·qx_i, Σ_g m_g·Σx_g)`, as
/// [`super::q5_q8`].
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` 20·G bytes, `subs` 4·G, `x.qs` 32·G, `x.d` and `x.sum`
/// G (G = `x.d.len()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_row(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    // SAFETY: pair p reads nibbles codes[32p..32p+32], fifth bits codes[16G + 8p..16G + 8p + 8],
    // subs[8p..8p+8], qs[64p..64p+64] and d/sum[2p..2p+2]; the last unpaired group g
    // codes[16g..16g+16] and codes[16G + 4g..16G + 4g + 4], subs[4g..4g+4], qs[32g..32g+32]
    // and d/sum[g]: all inside the lengths above. Prefetches never fault.
    unsafe {
        let (cp, xp, sp) = (codes.as_ptr(), x.qs.as_ptr(), subs.as_ptr());
        let hp = cp.add(16 * groups);
        let (dp, up) = (x.d.as_ptr(), x.sum.as_ptr());
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2);
        let (mut acc0, mut acc1, mut acc_m) =
            (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm_setzero_ps());
        let pairs = groups / 2;
        let mut p = 0;
        while p < pairs {
            let v = pair_scales(sp.add(8 * p), dp.add(2 * p), up.add(2 * p));
            acc_m = _mm_add_ps(acc_m, v);
            let sc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), spread);
            let f = pair_products(cp.add(32 * p), hp.add(8 * p), xp.add(64 * p));
            if p % 2 == 0 {
                // The nibbles PREFETCH_AHEAD further on, a line per two pairs as they are
                // read; the fifth bits and the scales (a quarter as fast) a line per eight.
                _mm_prefetch::<_MM_HINT_T0>(cp.wrapping_add(32 * p + PREFETCH_AHEAD) as *const i8);
                if p % 8 == 0 {
                    let ahead = 8 * p + PREFETCH_AHEAD / 4;
                    _mm_prefetch::<_MM_HINT_T0>(hp.wrapping_add(ahead) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(sp.wrapping_add(ahead) as *const i8);
                }
                acc0 = _mm256_fmadd_ps(f, sc, acc0);
            } else {
                acc1 = _mm256_fmadd_ps(f, sc, acc1);
            }
            p += 1;
        }
        let mut acc_q = hsum(_mm256_add_ps(acc0, acc1));
        if groups % 2 == 1 {
            let g = groups - 1;
            let v = group_scales(sp.add(4 * g), dp.add(g), up.add(g));
            acc_m = _mm_add_ps(acc_m, v);
            let q = group_product(cp.add(16 * g), hp.add(4 * g), xp.add(32 * g));
            acc_q += _mm_cvtss_f32(v) * q as f32;
        }
        (acc_q, min_term(acc_m))
    }
}

/// Bit `b` of `bits` as byte `b` of the result: 0x10 where it is set, 0 where not (the fifth
/// bit of the code in that byte).
///
/// # Safety
/// AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn fifth_bits(bits: u32) -> __m256i {
    // Byte b takes byte b / 8 of the word (the word is in both lanes), then tests its bit b % 8.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let b = _mm256_and_si256(
        _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), spread),
        bit,
    );
    _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10))
}

/// Two groups' integer products as eight floats: lanes 0–3 sum to group A's `Σ q·qx`, lanes
/// 4–7 to group B's (as [`super::avx2`]'s 4-bit pair products).
///
/// # Safety
/// AVX2 present; `codes` readable for 32 bytes, `hb` for 8, `qs` for 64.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_products(codes: *const u8, hb: *const u8, qs: *const i8) -> __m256 {
    // SAFETY: the caller's lengths.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        let v = _mm256_loadu_si256(codes as *const __m256i);
        let even = std::ptr::read_unaligned(hb as *const u32);
        let odd = std::ptr::read_unaligned(hb.add(4) as *const u32);
        let lo = _mm256_or_si256(_mm256_and_si256(v, mask), fifth_bits(even));
        let hi = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask),
            fifth_bits(odd),
        );
        pair_sum(lo, hi, qs)
    }
}

/// One unpaired group's `Σ q·qx` (its fifth-bit word: bits 0–15 the even weights, 16–31 the
/// odd ones).
///
/// # Safety
/// AVX2 present; `codes` readable for 16 bytes, `hb` for 4, `qs` for 32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_product(codes: *const u8, hb: *const u8, qs: *const i8) -> i32 {
    // SAFETY: the caller's lengths.
    unsafe {
        let m4 = _mm_set1_epi8(0x0F);
        let v = _mm_loadu_si128(codes as *const __m128i);
        let fb = fifth_bits(std::ptr::read_unaligned(hb as *const u32));
        let lo = _mm_or_si128(_mm_and_si128(v, m4), _mm256_castsi256_si128(fb));
        let hi = _mm_or_si128(
            _mm_and_si128(_mm_srli_epi16::<4>(v), m4),
            _mm256_extracti128_si256::<1>(fb),
        );
        group_sum(lo, hi, qs)
    }
}
