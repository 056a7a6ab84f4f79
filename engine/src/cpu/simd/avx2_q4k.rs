//! AVX2 + FMA + F16C forms of the `lq4k` × Q8 row dot product (GGUF's Q4_K blocks as they are,
//! see [`crate::quant`]).
//!
//! In decode the activations share one scale per super-block of 256
//! ([`crate::cpu::q8::Q8Rows::quantize_shared`], llama.cpp's `block_q8_K`), so the row's 6-bit
//! sub-scales are applied in integers: per pair of groups one 32-byte load of codes (the low
//! nibbles the groups' even weights, the high ones their odd), two `vpmaddubsw` against the
//! even and odd activations and their sum (i16 lanes 0–7 the first group, 8–15 the second; at
//! most 2·2·15·127), then `vpmaddwd` against `[sc_a × 8 | sc_b × 8]` (one `vpshufb` of the
//! super-block's eight scales widened once) into i32 (at most 4·2·7620·63 over a super-block).
//! One conversion and one FMA by `d·dx` finish 256 weights of a row; the min term
//! `dmin·Σ mn_g·Σx_g` is one multiply and one FMA of eight lanes per super-block. Per 256
//! weights about 65 instructions, where `lq4h` (per group f16 scales) takes about 80, and 4.625
//! bits a weight instead of 5.0.
//!
//! Activations with a scale per block of 32 (prefill's, the tests') take a pre-pass per
//! super-block into per-group float scales and LQ4's [`super::avx2::codes_dot`].

use std::arch::x86_64::*;

use super::avx2::{codes_dot, hsum};
use crate::cpu::q8::{Q8Row, SUPER_BLOCKS};

/// See [`super::lq4_q8`] for `lq4k` rows: `(Σ_g d·sc_g·dx_g·Σ_i q_i·qx_i, Σ_g dmin·mn_g·Σx_g)`.
/// Whole super-blocks of activations with shared scales ([`Q8Row::shared`]) run
/// [`shared_superblocks`]; the rest (a last partial super-block, or activations with a scale
/// per block) the pre-pass form.
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` 16·G bytes, `subs` the row's `lq4k` scale bytes
/// (2·G + 4·⌈G/8⌉), `x.qs` 32·G, `x.d` and `x.sum` G, `scratch` at least G floats
/// (G = `x.d.len()`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn lq4k_q8(codes: &[u8], subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> (f32, f32) {
    let groups = x.d.len();
    let done = if x.shared {
        groups / SUPER_BLOCKS * SUPER_BLOCKS
    } else {
        0
    };
    // SAFETY: the caller's lengths; `shared_superblocks` reads the first `done` groups.
    let (q, m) = if done > 0 {
        unsafe { shared_superblocks(codes, subs, x, done / SUPER_BLOCKS) }
    } else {
        (0.0, 0.0)
    };
    if done == groups {
        return (q, m);
    }
    // The rest from group `done` (a multiple of 8, so on a pair boundary of the codes' order
    // and on a super-block record).
    let rest = Q8Row {
        qs: &x.qs[32 * done..],
        d: &x.d[done..],
        sum: &x.sum[done..],
        shared: false,
    };
    // SAFETY: the slices keep the lengths' relations for G − done groups.
    let (q2, m2) = unsafe {
        prepass(
            &codes[16 * done..],
            &subs[20 * (done / SUPER_BLOCKS)..],
            rest,
            &mut scratch[done..],
        )
    };
    (q + q2, m + m2)
}

/// The first `supers` super-blocks of an `lq4k` row against activations whose scales are
/// shared per super-block (see the module documentation).
///
/// # Safety
/// AVX2, FMA and F16C present; `codes` 128·supers bytes, `subs` 20·supers, `x.qs` 256·supers,
/// `x.d` and `x.sum` 8·supers.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn shared_superblocks(codes: &[u8], subs: &[u8], x: Q8Row<'_>, supers: usize) -> (f32, f32) {
    // SAFETY: super-block s reads codes[128s..128s+128], subs[20s..20s+20], qs[256s..256s+256],
    // d[8s] and sum[8s..8s+8]: inside the lengths above.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        // A record's 16 (sc, mn) bytes as [sc_0..sc_7 | mn_0..mn_7].
        let deinterleave = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        // Pair p's scales from the eight widened ones: i16 2p in the low lane, 2p + 1 in the
        // high lane.
        let pick = |p: i8| {
            let (a, b) = (4 * p, 4 * p + 2);
            _mm256_setr_epi8(
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
            )
        };
        let picks = [pick(0), pick(1), pick(2), pick(3)];
        let (cp, sp, xp) = (codes.as_ptr(), subs.as_ptr(), x.qs.as_ptr());
        let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for s in 0..supers {
            let rec = sp.add(20 * s);
            let ddm = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(
                rec as *const i32,
            )));
            let b = _mm_shuffle_epi8(_mm_loadu_si128(rec.add(4) as *const __m128i), deinterleave);
            let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(b));
            let mut isum = _mm256_setzero_si256();
            for (p, pick) in picks.iter().enumerate() {
                let v = _mm256_loadu_si256(cp.add(128 * s + 32 * p) as *const __m256i);
                let lo = _mm256_and_si256(v, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
                let xq = xp.add(256 * s + 64 * p);
                let xe = _mm256_loadu_si256(xq as *const __m256i);
                let xo = _mm256_loadu_si256(xq.add(32) as *const __m256i);
                let s16 =
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
                isum =
                    _mm256_add_epi32(isum, _mm256_madd_epi16(s16, _mm256_shuffle_epi8(sc, *pick)));
            }
            // d·dx (the super-block's one activation scale) and dmin.
            let d = _mm256_broadcastss_ps(_mm_mul_ss(ddm, _mm_load_ss(x.d.as_ptr().add(8 * s))));
            let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(ddm));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
            let mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(b)));
            let sums = _mm256_loadu_ps(x.sum.as_ptr().add(8 * s));
            acc_m = _mm256_fmadd_ps(_mm256_mul_ps(mn, sums), dmin, acc_m);
        }
        (hsum(acc), hsum(acc_m))
    }
}

/// The `lq4k` row against activations with a scale per block: a pre-pass takes a whole
/// super-block a step (its 16 bytes split into `sc` and `mn` by one shuffle, widened, scaled by
/// the record's `d` and `dmin`) into `scratch[g] = d·sc_g·dx_g` and the min term, then
/// [`codes_dot`] (LQ4's) does the integer products.
///
/// # Safety
/// As [`lq4k_q8`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn prepass(codes: &[u8], subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> (f32, f32) {
    let groups = x.d.len();
    // SAFETY: a whole super-block s (8 groups from g = 8s) reads subs[20s..20s+20],
    // d/sum/scratch[g..g+8]; the groups of a last partial one go one by one.
    unsafe {
        let deinterleave = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let mut acc_m8 = _mm256_setzero_ps();
        let mut g = 0;
        while g + 8 <= groups {
            let rec = subs.as_ptr().add(20 * (g / 8));
            let ddm = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(
                rec as *const i32,
            )));
            let (d, dmin) = (
                _mm256_broadcastss_ps(ddm),
                _mm256_broadcastss_ps(_mm_movehdup_ps(ddm)),
            );
            let b = _mm_shuffle_epi8(_mm_loadu_si128(rec.add(4) as *const __m128i), deinterleave);
            let sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
            let mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(b)));
            let dx = _mm256_loadu_ps(x.d.as_ptr().add(g));
            let sx = _mm256_loadu_ps(x.sum.as_ptr().add(g));
            _mm256_storeu_ps(
                scratch.as_mut_ptr().add(g),
                _mm256_mul_ps(_mm256_mul_ps(sc, d), dx),
            );
            acc_m8 = _mm256_fmadd_ps(_mm256_mul_ps(mn, dmin), sx, acc_m8);
            g += 8;
        }
        let mut acc_m = hsum(acc_m8);
        while g < groups {
            let (d, dmin, sc, mn) = crate::quant::lq4k_scales(subs, g);
            scratch[g] = d * sc as f32 * x.d[g];
            acc_m += dmin * mn as f32 * x.sum[g];
            g += 1;
        }
        (codes_dot(codes, x, scratch), acc_m)
    }
}
