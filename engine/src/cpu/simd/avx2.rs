//! AVX2 + FMA form of the LQ4 × Q8 row dot product.
//!
//! Two groups per step: one 32-byte load holds both groups' codes; masking gives the low
//! nibbles (even weights) and a 4-bit shift the high nibbles (odd weights), which line up with
//! the activation pair's `[even | even]` and `[odd | odd]` halves (see [`crate::cpu::q8`]).
//! `vpmaddubsw` multiplies unsigned codes by signed activations into i16 pairs (at most
//! 2·15·127, no saturation), `vpmaddwd` by ones widens to i32 (lanes 0–3: first group, 4–7:
//! second), and one FMA applies both groups' `sc·dx` scales.

use std::arch::x86_64::*;

use crate::cpu::q8::{Lq4Row, Q8Row};

/// See [`super::lq4_q8`].
///
/// # Safety
/// The CPU must support AVX2 and FMA; `w` and `x` must describe the same number of groups
/// `G = x.d.len()` (`codes`: 16·G bytes, `subs`: 2·G, `x.qs`: 32·G, `x.sum`: G) and
/// `scratch` must hold at least G floats.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn lq4_q8(w: Lq4Row<'_>, x: Q8Row<'_>, scratch: &mut [f32]) -> (f32, f32) {
    let groups = x.d.len();
    // SAFETY: every pointer below addresses an element inside the slices whose lengths the
    // caller guarantees: group g reads codes[16g..16g+16] (pairs: [32p..32p+32]), subs[2g..2g+16]
    // only while g + 8 <= G, qs[64p..64p+64] for pairs and qs[32g..32g+32] for the last
    // unpaired group, d/sum/scratch[g..g+8] only while g + 8 <= G.
    unsafe {
        // 1. Per-group scales sc·dx into `scratch` and the min term Σ mn·Σx, 8 groups a step.
        let deinterleave = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let mut acc_m8 = _mm256_setzero_ps();
        let mut g = 0;
        while g + 8 <= groups {
            let s = _mm_loadu_si128(w.subs.as_ptr().add(2 * g) as *const __m128i);
            let s = _mm_shuffle_epi8(s, deinterleave);
            let sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s));
            let mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(s)));
            let dx = _mm256_loadu_ps(x.d.as_ptr().add(g));
            let sx = _mm256_loadu_ps(x.sum.as_ptr().add(g));
            _mm256_storeu_ps(scratch.as_mut_ptr().add(g), _mm256_mul_ps(sc, dx));
            acc_m8 = _mm256_fmadd_ps(mn, sx, acc_m8);
            g += 8;
        }
        let mut acc_m = hsum(acc_m8);
        while g < groups {
            scratch[g] = w.subs[2 * g] as f32 * x.d[g];
            acc_m += w.subs[2 * g + 1] as f32 * x.sum[g];
            g += 1;
        }

        (codes_dot(w.codes, x, scratch), acc_m)
    }
}

/// Steps 2–3 of [`lq4_q8`]: `Σ_g scratch[g]·Σ_i q_i·qx_i` over the row's groups, with the
/// per-group scales already in `scratch` (LQ4's `sc·dx`, or `lq4h`'s `s·dx`).
///
/// # Safety
/// As [`lq4_q8`]: AVX2 and FMA present, `codes` 16·G bytes, `x.qs` 32·G, `scratch` ≥ G.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn codes_dot(codes: &[u8], x: Q8Row<'_>, scratch: &[f32]) -> f32 {
    let groups = x.d.len();
    // SAFETY: as in `lq4_q8`: pair p reads codes[32p..32p+32], qs[64p..64p+64] and
    // scratch[2p..2p+2]; the last unpaired group codes[16g..16g+16] and qs[32g..32g+32].
    unsafe {
        // 2. Pairs of groups, two pairs per iteration into two accumulators.
        let (cp, xp) = (codes.as_ptr(), x.qs.as_ptr());
        let mask = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let pair = |p: usize, acc: __m256| -> __m256 {
            let v = _mm256_loadu_si256(cp.add(32 * p) as *const __m256i);
            let lo = _mm256_and_si256(v, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
            let xe = _mm256_loadu_si256(xp.add(64 * p) as *const __m256i);
            let xo = _mm256_loadu_si256(xp.add(64 * p + 32) as *const __m256i);
            let s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
            let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
            // [s(2p), s(2p+1), ·, ·] → [s(2p) ×4, s(2p+1) ×4]
            let s2 = _mm_castsi128_ps(_mm_loadl_epi64(
                scratch.as_ptr().add(2 * p) as *const __m128i
            ));
            let sc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s2), spread);
            _mm256_fmadd_ps(f, sc, acc)
        };
        let pairs = groups / 2;
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut p = 0;
        while p + 2 <= pairs {
            acc0 = pair(p, acc0);
            acc1 = pair(p + 1, acc1);
            p += 2;
        }
        if p < pairs {
            acc0 = pair(p, acc0);
        }
        let mut acc_q = hsum(_mm256_add_ps(acc0, acc1));

        // 3. The unpaired last group, 128 bits wide.
        if groups % 2 == 1 {
            let g = groups - 1;
            let m4 = _mm_set1_epi8(0x0F);
            let v = _mm_loadu_si128(cp.add(16 * g) as *const __m128i);
            let lo = _mm_and_si128(v, m4);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), m4);
            let xe = _mm_loadu_si128(xp.add(32 * g) as *const __m128i);
            let xo = _mm_loadu_si128(xp.add(32 * g + 16) as *const __m128i);
            let s16 = _mm_add_epi16(_mm_maddubs_epi16(lo, xe), _mm_maddubs_epi16(hi, xo));
            let s32 = _mm_madd_epi16(s16, _mm_set1_epi16(1));
            let s32 = _mm_add_epi32(s32, _mm_srli_si128::<8>(s32));
            let s32 = _mm_add_epi32(s32, _mm_srli_si128::<4>(s32));
            acc_q += scratch[g] * _mm_cvtsi128_si32(s32) as f32;
        }
        acc_q
    }
}

/// Horizontal sum of eight floats.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// `Σ_g scales[g]·Σ_i w_i·x_i` for a `q8_0` row (signed codes, natural order; see
/// [`super::q8_q8`]), as llama.cpp's Q8_0 × Q8_0: `vpsignb` moves the weights' signs onto the
/// activations so `vpmaddubsw` can take `|w|` as its unsigned operand (pairs at most
/// 2·128·127 < 2¹⁵), `vpmaddwd` widens to i32, and one FMA per group applies its scale.
///
/// # Safety
/// AVX2 and FMA present; `codes` and `x.qs` 32·G bytes, `scales` at least G floats.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn q8_dot(codes: &[i8], x: Q8Row<'_>, scales: &[f32]) -> f32 {
    let groups = x.d.len();
    // SAFETY: group g reads codes[32g..32g+32] and qs[32g..32g+32], g < G.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let block = |g: usize| -> __m256 {
            let w = _mm256_loadu_si256(codes.as_ptr().add(32 * g) as *const __m256i);
            let v = _mm256_loadu_si256(x.qs.as_ptr().add(32 * g) as *const __m256i);
            let aw = _mm256_sign_epi8(w, w);
            let sv = _mm256_sign_epi8(v, w);
            _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, sv), ones))
        };
        let mut g = 0;
        while g + 2 <= groups {
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scales[g]), block(g), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scales[g + 1]), block(g + 1), acc1);
            g += 2;
        }
        if g < groups {
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scales[g]), block(g), acc0);
        }
        hsum(_mm256_add_ps(acc0, acc1))
    }
}

/// The per-group pre-pass of `lq4h` and `q8_0` rows (see `half_scales` in the dispatch module), eight groups
/// a step: `scratch[g] = s_g·dx_g`, returns `Σ_g m_g·Σx_g`. The f16 → f32 conversion is the
/// scalar form's ([`super::f16_to_f32`]), lane-wise, so both give the same bits.
///
/// # Safety
/// AVX2 and FMA present; `subs` 4·G bytes, `scratch` at least G floats (G = `x.d.len()`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn half_scales(subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    let groups = x.d.len();
    // SAFETY: step g reads subs[4g..4g+32], d/sum[g..g+8] and writes scratch[g..g+8] only
    // while g + 8 <= G.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        let low = _mm256_set1_epi32(0xFFFF);
        let mut g = 0;
        while g + 8 <= groups {
            let v = _mm256_loadu_si256(subs.as_ptr().add(4 * g) as *const __m256i);
            let s = f16x8(_mm256_and_si256(v, low));
            let m = f16x8(_mm256_srli_epi32::<16>(v));
            let dx = _mm256_loadu_ps(x.d.as_ptr().add(g));
            let sx = _mm256_loadu_ps(x.sum.as_ptr().add(g));
            _mm256_storeu_ps(scratch.as_mut_ptr().add(g), _mm256_mul_ps(s, dx));
            acc = _mm256_fmadd_ps(m, sx, acc);
            g += 8;
        }
        let acc_m = hsum(acc);
        acc_m + super::half_scales_tail(subs, x, scratch, g)
    }
}

/// Eight halves (the low 16 bits of each lane) as floats, as [`super::f16_to_f32`].
#[inline]
#[target_feature(enable = "avx2,fma")]
fn f16x8(h: __m256i) -> __m256 {
    let em = _mm256_and_si256(h, _mm256_set1_epi32(0x7FFF));
    let sign = _mm256_slli_epi32::<16>(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)));
    let scaled = _mm256_mul_ps(
        _mm256_castsi256_ps(_mm256_slli_epi32::<13>(em)),
        _mm256_castsi256_ps(_mm256_set1_epi32(0x7780_0000)),
    );
    let special = _mm256_or_si256(
        _mm256_set1_epi32(0x7F80_0000),
        _mm256_slli_epi32::<13>(_mm256_and_si256(em, _mm256_set1_epi32(0x03FF))),
    );
    let is_special = _mm256_cmpgt_epi32(em, _mm256_set1_epi32(0x7BFF));
    let bits = _mm256_blendv_epi8(_mm256_castps_si256(scaled), special, is_special);
    _mm256_castsi256_ps(_mm256_or_si256(bits, sign))
}
