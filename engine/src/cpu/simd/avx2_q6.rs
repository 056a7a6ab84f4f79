//! AVX2 + FMA + F16C form of the `q6_k` × Q8 row dot product (GGUF's Q6_K blocks as they are,
//! see [`crate::quant`]), and the two steps [`super::avx2`]'s tile kernel shares with it.
//!
//! Per pair of groups: one 32-byte load gives A's nibbles (masked) and B's (shifted), one
//! 16-byte load in both lanes, shifted per 64-bit lane and masked, both groups' high bit pairs
//! (the layout stores them so); their sum minus 32 is the signed codes in weight order
//! (llama.cpp's Q6_K unpacking, in our group order).
//! `vpsignb` moves the codes' signs onto the activations (as for `q8_0`), `vpmaddubsw` gives
//! i16 pairs (at most 2·32·127), and `vpmaddwd` against the half scales (`[sc_lo × 8 | sc_hi
//! × 8]`) applies them in integers while widening (at most 2·4064·128 per lane), so one
//! conversion and one FMA by `d·dx` finish the group.

use std::arch::x86_64::*;

use crate::cpu::q8::Q8Row;

/// The signed codes `q − 32` of a pair of groups whose 48 code bytes start at `p` (see
/// [`crate::quant`]), in weight order: `(A, B)`. The nibbles of A are the low ones of the 32
/// bytes and of B the high ones; the bit pairs, one 16-byte load in both lanes, are moved to
/// bits 4–5 by a shift per 64-bit lane (A: 4 in the low lane, 2 in the high; B: 0 and 2 right)
/// and one mask.
///
/// # Safety
/// AVX2 present; `p` readable for 48 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn unpack_pair(p: *const u8) -> (__m256i, __m256i) {
    // SAFETY: the caller's length.
    unsafe {
        let v = _mm256_loadu_si256(p as *const __m256i);
        let h = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(32) as *const __m128i));
        let (m4, m30, off) = (
            _mm256_set1_epi8(0x0F),
            _mm256_set1_epi8(0x30),
            _mm256_set1_epi8(32),
        );
        let a = _mm256_or_si256(
            _mm256_and_si256(v, m4),
            _mm256_and_si256(_mm256_sllv_epi64(h, _mm256_setr_epi64x(4, 4, 2, 2)), m30),
        );
        let b = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4),
            _mm256_and_si256(_mm256_srlv_epi64(h, _mm256_setr_epi64x(0, 0, 2, 2)), m30),
        );
        (_mm256_sub_epi8(a, off), _mm256_sub_epi8(b, off))
    }
}

/// The 32 signed codes `q − 32` of a last unpaired group whose 24 code bytes start at `p`, in
/// weight order.
///
/// # Safety
/// AVX2 present; `p` readable for 24 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn unpack_lone(p: *const u8) -> __m256i {
    // SAFETY: the caller's length (16 bytes of nibbles, then 8 of bit pairs).
    unsafe {
        let nib = _mm_loadu_si128(p as *const __m128i);
        let m4 = _mm256_set1_epi8(0x0F);
        let lo = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(nib), nib), m4);
        let bits = _mm256_set1_epi64x(std::ptr::read_unaligned(p.add(16) as *const i64));
        let hi = _mm256_and_si256(
            _mm256_srlv_epi64(bits, _mm256_setr_epi64x(0, 2, 4, 6)),
            _mm256_set1_epi8(3),
        );
        // hi ≤ 3 per byte, so the 16-bit shift keeps every byte's bits inside it.
        let q = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi));
        _mm256_sub_epi8(q, _mm256_set1_epi8(32))
    }
}

/// The signed codes of group `g` of a row of `groups` groups whose code bytes start at `row`
/// (the tiles' per-group step: a paired group unpacks its half of the pair).
///
/// # Safety
/// AVX2 present; `row` readable for 24·`groups` bytes, `g < groups`.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn unpack(row: *const u8, groups: usize, g: usize) -> __m256i {
    // SAFETY: the caller's length; a pair's 48 bytes and a lone group's 24 lie inside it.
    unsafe {
        if g / 2 * 2 + 1 < groups {
            let (a, b) = unpack_pair(row.add(48 * (g / 2)));
            if g.is_multiple_of(2) {
                a
            } else {
                b
            }
        } else {
            unpack_lone(row.add(24 * g))
        }
    }
}

/// The half scales of the scale word in bytes `4j..4j + 4` of `words` as sixteen i16 lanes,
/// `[sc_lo × 8 | sc_hi × 8]`: the `vpmaddwd` operand that scales `vpmaddubsw`'s pairs (lanes
/// 0–7 hold weights 0–15). One byte shuffle and one sign extension.
///
/// # Safety
/// AVX2 present; `j` is 0 or 1 (bytes 0–7 of `words` hold up to two groups' words).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn half_scales(words: __m128i, j: usize) -> __m256i {
    let b = 4 * j as i8;
    let pick = _mm_setr_epi8(
        b,
        b,
        b,
        b,
        b,
        b,
        b,
        b,
        b + 1,
        b + 1,
        b + 1,
        b + 1,
        b + 1,
        b + 1,
        b + 1,
        b + 1,
    );
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(words, pick))
}

/// Group `g`'s scale word from a row's scale bytes.
///
/// # Safety
/// `subs` readable for `4·g + 4` bytes.
#[inline(always)]
pub(super) unsafe fn word(subs: *const u8, g: usize) -> u32 {
    // SAFETY: the caller's length.
    unsafe { std::ptr::read_unaligned(subs.add(4 * g) as *const u32) }
}

/// See [`super::q6_q8`].
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` 24·G bytes, `subs` 4·G, `x.qs` 32·G, `x.d` G
/// (G = `x.d.len()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q6_row(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> f32 {
    let groups = x.d.len();
    // SAFETY: pair p reads codes[48p..48p+48], subs[8p..8p+8], qs[64p..64p+64] and
    // d[2p..2p+2]; the last unpaired group g codes[24g..24g+24], subs[4g..4g+4],
    // qs[32g..32g+32] and d[g].
    unsafe {
        let (cp, sp, xp, dp) = (codes.as_ptr(), subs.as_ptr(), x.qs.as_ptr(), x.d.as_ptr());
        // Σ over a group's products, its half scales applied in integers, as eight floats.
        let products = |c: __m256i, g: usize, scales: __m256i| -> __m256 {
            let v = _mm256_loadu_si256(xp.add(32 * g) as *const __m256i);
            _mm256_cvtepi32_ps(_mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(v, c)),
                scales,
            ))
        };
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for p in 0..groups / 2 {
            let g = 2 * p;
            let (a, b) = unpack_pair(cp.add(48 * p));
            // Both groups' words; [·, d_A·dx_A, ·, d_B·dx_B]: their f16 `d` converted at once.
            let words = _mm_loadl_epi64(sp.add(4 * g) as *const __m128i);
            let dd = _mm_cvtph_ps(words);
            let dx = _mm_castsi128_ps(_mm_loadl_epi64(dp.add(g) as *const __m128i));
            let s = _mm256_castps128_ps256(_mm_mul_ps(dd, _mm_unpacklo_ps(dx, dx)));
            let (sa, sb) = (
                _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(1)),
                _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(3)),
            );
            acc0 = _mm256_fmadd_ps(products(a, g, half_scales(words, 0)), sa, acc0);
            acc1 = _mm256_fmadd_ps(products(b, g + 1, half_scales(words, 1)), sb, acc1);
        }
        if groups % 2 == 1 {
            let g = groups - 1;
            let w = word(sp, g);
            let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128((w >> 16) as i32)));
            let c = unpack_lone(cp.add(24 * g));
            let scales = half_scales(_mm_cvtsi32_si128(w as i32), 0);
            acc0 = _mm256_fmadd_ps(products(c, g, scales), _mm256_set1_ps(d * x.d[g]), acc0);
        }
        super::avx2::hsum(_mm256_add_ps(acc0, acc1))
    }
}
