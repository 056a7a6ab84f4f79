//! AVX2 + FMA form of the LQ4 × Q8 row dot product.
//!
//! Two groups per step: one 32-byte load holds both groups' codes; masking gives the low
//! nibbles (even weights) and a 4-bit shift the high nibbles (odd weights), which line up with
//! the activation pair's `[even | even]` and `[odd | odd]` halves (see [`crate::cpu::q8`]).
//! `vpmaddubsw` multiplies unsigned codes by signed activations into i16 pairs (at most
//! 2·15·127, no saturation), `vpmaddwd` by ones widens to i32 (lanes 0–3: first group, 4–7:
//! second), and one FMA applies both groups' `sc·dx` scales. GGUF's blocks kept as they are
//! (`lq4h`, and `q8_0` rows) convert their f16 scales with F16C inside the same loop.

use std::arch::x86_64::*;

use super::{each_row, RowBlock};
use crate::cpu::q8::{Lq4Row, Q8Row};
use crate::quant::BlockLayout;

/// [`super::rows_dot`]'s loop with this file's row forms.
///
/// # Safety
/// AVX2, FMA and F16C present; every `xs` row has the same group count G (`each_row` slices
/// the weight rows to it) and `scratch` holds at least G floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn rows(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    scratch: &mut [f32],
    out: &mut impl FnMut(usize, usize, f32, f32),
) {
    // SAFETY (each closure): each_row passes a row's codes (16·G or 32·G bytes) and scales
    // (the layout's group bytes × G) and an activation row of G groups.
    match w.layout {
        BlockLayout::Q8 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            (q8_row(bytemuck::cast_slice(c), s, x), 0.0)
        }),
        BlockLayout::Lq4 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            lq4_q8(
                Lq4Row {
                    codes: c,
                    subs: s,
                    layout: BlockLayout::Lq4,
                },
                x,
                scratch,
            )
        }),
        BlockLayout::Lq4h => each_row(w, rows, xs, out, |c, s, x| unsafe { lq4h_q8(c, s, x) }),
    }
}

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
/// per-group scales `sc·dx` already in `scratch`.
///
/// # Safety
/// As [`lq4_q8`]: AVX2 and FMA present, `codes` 16·G bytes, `x.qs` 32·G, `scratch` ≥ G.
#[target_feature(enable = "avx2,fma")]
unsafe fn codes_dot(codes: &[u8], x: Q8Row<'_>, scratch: &[f32]) -> f32 {
    let groups = x.d.len();
    // SAFETY: as in `lq4_q8`: pair p reads codes[32p..32p+32], qs[64p..64p+64] and
    // scratch[2p..2p+2]; the last unpaired group codes[16g..16g+16] and qs[32g..32g+32].
    unsafe {
        // 2. Pairs of groups, two pairs per iteration into two accumulators.
        let (cp, xp) = (codes.as_ptr(), x.qs.as_ptr());
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let pair = |p: usize, acc: __m256| -> __m256 {
            let f = pair_products(cp.add(32 * p), xp.add(64 * p));
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
            acc_q += scratch[g] * group_product(cp.add(16 * g), xp.add(32 * g)) as f32;
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

/// `[s_g·dx_g, m_g·Σx_g, s_{g+1}·dx_{g+1}, m_{g+1}·Σx_{g+1}]` for the groups `g, g+1` whose
/// f16 `(s, m)` pairs start at `subs` and whose activation scales and sums start at `d` and
/// `sum`: one `vcvtph2ps` (exact, the same bits as [`super::f16_to_f32`]) and one multiply.
///
/// # Safety
/// F16C present; `subs` readable for 8 bytes, `d` and `sum` for 2 floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pair_scales(subs: *const u8, d: *const f32, sum: *const f32) -> __m128 {
    // SAFETY: the caller's lengths.
    unsafe {
        let sm = _mm_cvtph_ps(_mm_loadl_epi64(subs as *const __m128i));
        let dx = _mm_castsi128_ps(_mm_loadl_epi64(d as *const __m128i));
        let sx = _mm_castsi128_ps(_mm_loadl_epi64(sum as *const __m128i));
        _mm_mul_ps(sm, _mm_unpacklo_ps(dx, sx))
    }
}

/// `[s_g·dx_g, m_g·Σx_g, 0, 0]` for one group (see [`pair_scales`]).
///
/// # Safety
/// F16C present; `subs` readable for 4 bytes, `d` and `sum` for 1 float.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_scales(subs: *const u8, d: *const f32, sum: *const f32) -> __m128 {
    // SAFETY: the caller's lengths.
    unsafe {
        let h = _mm_cvtsi32_si128(std::ptr::read_unaligned(subs as *const i32));
        _mm_mul_ps(
            _mm_cvtph_ps(h),
            _mm_unpacklo_ps(_mm_load_ss(d), _mm_load_ss(sum)),
        )
    }
}

/// Lanes 1 + 3 of an accumulator of [`pair_scales`] / [`group_scales`] results: the rows'
/// `Σ_g m_g·Σx_g` (lanes 0 and 2 hold scales already applied and are ignored).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn min_term(acc: __m128) -> f32 {
    let odd = _mm_movehdup_ps(acc);
    _mm_cvtss_f32(_mm_add_ss(odd, _mm_movehl_ps(odd, odd)))
}

/// The `lq4h` row (GGUF's Q4_0 / Q4_1 / Q4_K blocks kept as they are: per group f16 `(s, m)`,
/// `w = s·q − m`) times a [`Q8Row`] in one pass: each pair of groups converts its four halves
/// with F16C beside its integer products, so no scale pre-pass or scratch row is needed.
/// Returns `(Σ_g s_g·dx_g·Σ_i q_i·qx_i, Σ_g m_g·Σx_g)`, as [`super::lq4_q8`].
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` 16·G bytes, `subs` 4·G, `x.qs` 32·G, `x.d` and
/// `x.sum` G (G = `x.d.len()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn lq4h_q8(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    // SAFETY: pair p reads codes[32p..32p+32], subs[8p..8p+8], qs[64p..64p+64] and
    // d/sum[2p..2p+2]; the last unpaired group g codes[16g..16g+16], subs[4g..4g+4],
    // qs[32g..32g+32] and d/sum[g]: all inside the lengths above.
    unsafe {
        let (cp, xp, sp) = (codes.as_ptr(), x.qs.as_ptr(), subs.as_ptr());
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
            let f = pair_products(cp.add(32 * p), xp.add(64 * p));
            if p % 2 == 0 {
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
            acc_q += _mm_cvtss_f32(v) * group_product(cp.add(16 * g), xp.add(32 * g)) as f32;
        }
        (acc_q, min_term(acc_m))
    }
}

/// The two groups' integer products of a pair (see the module documentation) as floats:
/// lanes 0–3 sum to the first group's `Σ q·qx`, lanes 4–7 to the second's.
///
/// # Safety
/// AVX2 present; `codes` readable for 32 bytes, `qs` for 64.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_products(codes: *const u8, qs: *const i8) -> __m256 {
    // SAFETY: the caller's lengths.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        let v = _mm256_loadu_si256(codes as *const __m256i);
        let lo = _mm256_and_si256(v, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
        let xe = _mm256_loadu_si256(qs as *const __m256i);
        let xo = _mm256_loadu_si256(qs.add(32) as *const __m256i);
        let s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
        _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)))
    }
}

/// One unpaired group's `Σ q·qx` (its 16 code bytes, then 16 even and 16 odd activations).
///
/// # Safety
/// AVX2 present; `codes` readable for 16 bytes, `qs` for 32.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_product(codes: *const u8, qs: *const i8) -> i32 {
    // SAFETY: the caller's lengths.
    unsafe {
        let m4 = _mm_set1_epi8(0x0F);
        let v = _mm_loadu_si128(codes as *const __m128i);
        let lo = _mm_and_si128(v, m4);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), m4);
        let xe = _mm_loadu_si128(qs as *const __m128i);
        let xo = _mm_loadu_si128(qs.add(16) as *const __m128i);
        let s16 = _mm_add_epi16(_mm_maddubs_epi16(lo, xe), _mm_maddubs_epi16(hi, xo));
        let s32 = _mm_madd_epi16(s16, _mm_set1_epi16(1));
        let s32 = _mm_add_epi32(s32, _mm_srli_si128::<8>(s32));
        let s32 = _mm_add_epi32(s32, _mm_srli_si128::<4>(s32));
        _mm_cvtsi128_si32(s32)
    }
}

/// A `q8_0` row (signed codes in natural order, f16 `(s, m)` per group) times a [`Q8Row`]
/// quantized in natural order, in one pass: `Σ_g (s_g·dx_g·Σ w·qx − m_g·Σx_g)`, as
/// [`super::q8_q8`]; the scales converted with F16C two groups at a time beside the products
/// (llama.cpp's Q8_0 × Q8_0 with its scales in the same loop).
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` and `x.qs` 32·G bytes, `subs` 4·G, `x.d` and `x.sum` G.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_row(codes: &[i8], subs: &[u8], x: Q8Row<'_>) -> f32 {
    let groups = x.d.len();
    // SAFETY: group g reads codes/qs[32g..32g+32], subs[4g..4g+4] (a pair [4g..4g+8]) and
    // d/sum[g] (a pair [g..g+2]), g < G.
    unsafe {
        let (sp, dp, up) = (subs.as_ptr(), x.d.as_ptr(), x.sum.as_ptr());
        let block = |g: usize| q8_block(codes.as_ptr().add(32 * g), x.qs.as_ptr().add(32 * g));
        let (mut acc0, mut acc1, mut acc_m) =
            (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm_setzero_ps());
        let mut g = 0;
        while g + 2 <= groups {
            let v = pair_scales(sp.add(4 * g), dp.add(g), up.add(g));
            acc_m = _mm_add_ps(acc_m, v);
            acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(v), block(g), acc0);
            acc1 = _mm256_fmadd_ps(
                _mm256_broadcastss_ps(_mm_movehl_ps(v, v)),
                block(g + 1),
                acc1,
            );
            g += 2;
        }
        if g < groups {
            let v = group_scales(sp.add(4 * g), dp.add(g), up.add(g));
            acc_m = _mm_add_ps(acc_m, v);
            acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(v), block(g), acc0);
        }
        hsum(_mm256_add_ps(acc0, acc1)) - min_term(acc_m)
    }
}

/// One `q8_0` group's products `w·qx` as eight floats summing to `Σ w·qx`: `vpsignb` moves the
/// weights' signs onto the activations so `vpmaddubsw` can take `|w|` as its unsigned operand
/// (pairs at most 2·128·127 < 2¹⁵), `vpmaddwd` widens to i32.
///
/// # Safety
/// AVX2 present; `codes` and `qs` readable for 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q8_block(codes: *const i8, qs: *const i8) -> __m256 {
    // SAFETY: the caller's lengths.
    unsafe {
        let w = _mm256_loadu_si256(codes as *const __m256i);
        let v = _mm256_loadu_si256(qs as *const __m256i);
        let aw = _mm256_sign_epi8(w, w);
        let sv = _mm256_sign_epi8(v, w);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(
            _mm256_maddubs_epi16(aw, sv),
            _mm256_set1_epi16(1),
        ))
    }
}
