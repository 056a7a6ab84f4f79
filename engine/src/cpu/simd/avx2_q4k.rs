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
//! bits a weight instead of 5.0. Decode's rows go two a step (`rows`: each activation load
//! serves both) and prefetch their code bytes `PREFETCH_AHEAD` (`avx2.rs`) ahead as they
//! read them.
//!
//! Activations with a scale per block of 32 (prefill's, the tests') take a pre-pass per
//! super-block into per-group float scales and LQ4's `codes_dot` (`avx2.rs`).

use std::arch::x86_64::*;

use super::avx2::{codes_dot, hsum, prefetch_ahead, PREFETCH_AHEAD};
use super::{each_row, RowBlock};
use crate::cpu::q8::{Q8Row, SUPER_BLOCKS};

/// See [`super::lq4_q8`] for `lq4k` rows: `(Σ_g d·sc_g·dx_g·Σ_i q_i·qx_i, Σ_g dmin·mn_g·Σx_g)`.
/// Whole super-blocks of activations with shared scales ([`Q8Row::shared`]) run
/// `shared_superblocks`; the rest (a last partial super-block, or activations with a scale
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
    // SAFETY: the caller's lengths, as `shared_rows` needs them for one row.
    unsafe { shared_rows::<1>([codes.as_ptr()], [subs.as_ptr()], x, supers)[0] }
}

/// [`shared_superblocks`] for `R` weight rows at once (their codes from `codes[r]`, scale
/// records from `subs[r]`): each activation load and the super-block's activation scale and
/// sums serve all `R` rows.
///
/// # Safety
/// AVX2, FMA and F16C present; each `codes[r]` readable for 128·supers bytes, `subs[r]` for
/// 20·supers; `x.qs` 256·supers, `x.d` and `x.sum` 8·supers.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn shared_rows<const R: usize>(
    codes: [*const u8; R],
    subs: [*const u8; R],
    x: Q8Row<'_>,
    supers: usize,
) -> [(f32, f32); R] {
    // SAFETY: super-block s reads codes[r][128s..128s+128], subs[r][20s..20s+20],
    // qs[256s..256s+256], d[8s] and sum[8s..8s+8]: inside the lengths above.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        // A record's 16 (sc, mn) bytes as [sc_0..sc_7 | mn_0..mn_7].
        let deinterleave = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        // Pair p's scales from the eight widened ones: i16 2p in the low lane, 2p + 1 in the
        // high lane.
        let pick = |p: i8| {
            let (a, b) = (4 * p, 4 * p + 2);
            let lane = |c: i8| {
                _mm_setr_epi8(
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                    c,
                    c + 1,
                )
            };
            _mm256_set_m128i(lane(b), lane(a))
        };
        let picks = [pick(0), pick(1), pick(2), pick(3)];
        let xp = x.qs.as_ptr();
        let mut acc = [_mm256_setzero_ps(); R];
        let mut acc_m = [_mm256_setzero_ps(); R];
        for s in 0..supers {
            let mut ddm = [_mm_setzero_ps(); R];
            let mut mns = [_mm_setzero_si128(); R];
            let mut sc = [_mm256_setzero_si256(); R];
            for c in codes {
                // The code bytes PREFETCH_AHEAD further on (see `prefetch_ahead`), two lines a
                // super-block as they are read.
                let ahead = c.wrapping_add(128 * s + PREFETCH_AHEAD);
                _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64) as *const i8);
            }
            for r in 0..R {
                let rec = subs[r].add(20 * s);
                ddm[r] = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(
                    rec as *const i32,
                )));
                let b =
                    _mm_shuffle_epi8(_mm_loadu_si128(rec.add(4) as *const __m128i), deinterleave);
                sc[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(b));
                mns[r] = _mm_srli_si128::<8>(b);
            }
            let mut isum = [_mm256_setzero_si256(); R];
            for (p, pick) in picks.iter().enumerate() {
                let xq = xp.add(256 * s + 64 * p);
                let xe = _mm256_loadu_si256(xq as *const __m256i);
                let xo = _mm256_loadu_si256(xq.add(32) as *const __m256i);
                for r in 0..R {
                    let v = _mm256_loadu_si256(codes[r].add(128 * s + 32 * p) as *const __m256i);
                    let lo = _mm256_and_si256(v, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
                    let s16 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(lo, xe),
                        _mm256_maddubs_epi16(hi, xo),
                    );
                    isum[r] = _mm256_add_epi32(
                        isum[r],
                        _mm256_madd_epi16(s16, _mm256_shuffle_epi8(sc[r], *pick)),
                    );
                }
            }
            // The super-block's one activation scale and its blocks' sums.
            let dx = _mm_load_ss(x.d.as_ptr().add(8 * s));
            let sums = _mm256_loadu_ps(x.sum.as_ptr().add(8 * s));
            for r in 0..R {
                // d·dx and dmin.
                let d = _mm256_broadcastss_ps(_mm_mul_ss(ddm[r], dx));
                let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(ddm[r]));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), d, acc[r]);
                let mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mns[r]));
                acc_m[r] = _mm256_fmadd_ps(_mm256_mul_ps(mn, sums), dmin, acc_m[r]);
            }
        }
        std::array::from_fn(|r| (hsum(acc[r]), hsum(acc_m[r])))
    }
}

/// Rows `rows` of an `lq4k` matrix against activation rows `xs` for [`super::avx2::rows`]:
/// one activation row with shared scales and whole super-blocks (decode) takes two weight rows
/// a step ([`shared_rows`]); anything else [`lq4k_q8`] per row.
///
/// # Safety
/// As [`super::avx2::rows`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    scratch: &mut [f32],
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    let groups = xs.first().map_or(0, |x| x.d.len());
    let (cb, sb) = (16 * groups, w.layout.scale_bytes(groups));
    match xs {
        [x] if x.shared && groups > 0 && groups.is_multiple_of(SUPER_BLOCKS) => {
            let supers = groups / SUPER_BLOCKS;
            let (cp, sp) = (w.codes.as_ptr(), w.subs.as_ptr());
            let mut r = rows.start;
            // SAFETY: `rows_dot` checked that rows.end·cb code bytes and rows.end·sb scale
            // bytes lie in the matrix; a row's are 128·supers and 20·supers of them.
            unsafe {
                while r + 2 <= rows.end {
                    let [a, b] = shared_rows::<2>(
                        [cp.add(r * cb), cp.add((r + 1) * cb)],
                        [sp.add(r * sb), sp.add((r + 1) * sb)],
                        *x,
                        supers,
                    );
                    out(r, 0, &[a.0], &[a.1]);
                    out(r + 1, 0, &[b.0], &[b.1]);
                    r += 2;
                }
                if r < rows.end {
                    prefetch_ahead(
                        &w.codes[r * cb..(r + 1) * cb],
                        &w.subs[r * sb..(r + 1) * sb],
                    );
                    let [a] = shared_rows::<1>([cp.add(r * cb)], [sp.add(r * sb)], *x, supers);
                    out(r, 0, &[a.0], &[a.1]);
                }
            }
        }
        // SAFETY (the closure): each_row passes a row's 16·G code bytes and its scale bytes.
        _ => each_row(w, rows, xs, out, |c, s, x| unsafe {
            lq4k_q8(c, s, x, scratch)
        }),
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
