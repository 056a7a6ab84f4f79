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

use super::avx2_il;
use super::tiles::{tiles, ActTile, WeightRow, TILE_MIN_ROWS, TX};
use super::{each_row, RowBlock};
use crate::cpu::q8::{Lq4Row, Q8Row};
use crate::quant::BlockLayout;

/// Weight rows per call of the VNNI 4-bit tile kernel ([`super::tiles`]): each activation
/// pair loaded feeds this many rows (AVX-512 VL gives 32 256-bit registers to hold them).
pub(super) const WR_4BIT: usize = 4;

/// Weight rows per call of the AVX2-only 4-bit tile kernel: with 16 registers four rows spill
/// (prefill of a 0.9B Q4_1 model, medians of four alternated runs: one row 97.3 tok/s, two
/// 102.1, four 89.0), and two are within the noise of one.
pub(super) const WR_4BIT_AVX2: usize = 1;

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
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    // Several activation rows (prefill): tiles that load each weight row's group once for
    // four activation rows (4-bit rows unpacked once, 8-bit rows' signs taken once).
    if xs.len() >= TILE_MIN_ROWS {
        let vnni = vnni_present();
        // From twelve activation rows the 4-bit and `q6_k` rows with VNNI: eight weight rows
        // interleaved, no horizontal adds (`avx2_il`).
        let il_from = match w.layout {
            BlockLayout::Q5 => avx2_il::IL_MIN_ROWS_Q5,
            _ => avx2_il::IL_MIN_ROWS,
        };
        if vnni && xs.len() >= il_from && w.layout != BlockLayout::Q8 {
            // SAFETY: AVX2, FMA, F16C (this function's contract) and VNNI detected.
            return unsafe { avx2_il::gemm(w, rows, xs, out) };
        }
        // Without VNNI the 4-bit, `q5` and `q6_k` rows the same way, eight to a 256-bit
        // register (4-bit rows from more activation rows: their tiles repack nothing; `q5`
        // rows, which have no tiles, from the VNNI GEMM's count, measured for both).
        let from = match w.layout {
            BlockLayout::Q6 => avx2_il::IL_MIN_ROWS,
            BlockLayout::Q5 => avx2_il::IL_MIN_ROWS_Q5,
            _ => avx2_il::IL_MIN_ROWS_AVX2,
        };
        if !vnni && xs.len() >= from && w.layout != BlockLayout::Q8 {
            // SAFETY: AVX2, FMA and F16C (this function's contract); not `q8_0`.
            return unsafe { avx2_il::gemm_avx2(w, rows, xs, 0, out) };
        }
        // And `q8_0` rows whose codes span at most 32 values (GGUF's Q5_0 and Q5_1 blocks).
        if !vnni && xs.len() >= avx2_il::IL_MIN_ROWS_Q8 && w.layout == BlockLayout::Q8 {
            let cb = 32 * xs[0].d.len();
            // SAFETY: AVX2 (this function's contract); `rows` lie inside `w` (`rows_dot`).
            if let Some(offset) =
                unsafe { avx2_il::q8_offset(&w.codes[rows.start * cb..rows.end * cb]) }
            {
                // SAFETY: AVX2, FMA and F16C; the codes of `rows` in `offset`'s range.
                return unsafe { avx2_il::gemm_avx2(w, rows, xs, offset, out) };
            }
        }
        // `q5` rows have no tiles: below the GEMM's row counts each weight row meets every
        // activation row while its bytes are in L1.
        if w.layout == BlockLayout::Q5 {
            // SAFETY: as the decode arm below.
            return each_row(w, rows, xs, out, |c, s, x| unsafe {
                super::avx2_q5::q5_row(c, s, x)
            });
        }
        // SAFETY: AVX2 and FMA present (this function's contract), VNNI where `vnni`; `tiles`
        // passes the lengths the kernels need.
        return match (w.layout, vnni) {
            (BlockLayout::Q8, true) => tiles(w, rows, xs, out, |wr: &[_; 1], x, g| unsafe {
                [tile_row_q8_vnni(wr[0], x, g)]
            }),
            (BlockLayout::Q8, false) => tiles(w, rows, xs, out, |wr: &[_; 1], x, g| unsafe {
                [tile_row_q8(wr[0], x, g)]
            }),
            (BlockLayout::Q6, _) => tiles(w, rows, xs, out, |wr: &[_; 1], x, g| unsafe {
                [tile_row_q6(wr[0], x, g)]
            }),
            (_, true) => tiles(w, rows, xs, out, |wr: &[_; WR_4BIT], x, g| unsafe {
                tile_row_vnni(wr, x, g)
            }),
            (_, false) => tiles(w, rows, xs, out, |wr: &[_; WR_4BIT_AVX2], x, g| unsafe {
                tile_row(wr, x, g)
            }),
        };
    }
    // One activation row (decode): each row first prefetches the bytes `PREFETCH_AHEAD`
    // further on. SAFETY (each closure): each_row passes a row's codes (16·G, 24·G or 32·G
    // bytes) and scales (the layout's bytes for G groups) and an activation row of G groups.
    match w.layout {
        BlockLayout::Q8 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            prefetch_ahead(c, s);
            (q8_row(bytemuck::cast_slice(c), s, x), 0.0)
        }),
        BlockLayout::Lq4 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            prefetch_ahead(c, s);
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
        BlockLayout::Q5 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            super::avx2_q5::q5_row(c, s, x)
        }),
        // SAFETY: this function's contract is `avx2_q4k::rows`'.
        BlockLayout::Lq4k => unsafe { super::avx2_q4k::rows(w, rows, xs, scratch, out) },
        BlockLayout::Q6 => each_row(w, rows, xs, out, |c, s, x| unsafe {
            prefetch_ahead(c, s);
            (super::avx2_q6::q6_row(c, s, x), 0.0)
        }),
    }
}

/// Bytes ahead in a matrix's code stream that decode's rows prefetch. The rows of a task lie
/// end to end, so this is the rows after the current one. This VM's hardware prefetchers
/// leave a GEMV at about two thirds of the read bandwidth; measured on twelve `[5632, 2048]`
/// `lq4k` GEMVs in turn (66 MB, two threads, medians of nine): none 0.53–0.61 ms, 256 bytes
/// 0.45–0.53, 1 KB 0.37–0.40, 2 KB 0.37–0.41, 4 KB 0.32–0.48, 8 KB 0.43–0.44, 16 KB
/// 0.45–0.50.
pub(super) const PREFETCH_AHEAD: usize = 4096;

/// Prefetches the cache lines `PREFETCH_AHEAD` bytes past a row's `codes` (as many as it
/// has) and its `subs` at the same rate (the scales run `subs.len() / codes.len()` as fast).
/// The addresses may lie past the matrix: a prefetch is a hint that never faults, and the
/// pointers are only formed with `wrapping_add`, never read.
#[inline(always)]
pub(super) fn prefetch_ahead(codes: &[u8], subs: &[u8]) {
    let ahead = |p: *const u8, len: usize, by: usize| {
        let start = p.wrapping_add(by);
        for i in (0..len + 63).step_by(64) {
            // SAFETY: a prefetch reads nothing into the program and never faults (SSE, present
            // on every x86_64).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(i) as *const i8) };
        }
    };
    ahead(codes.as_ptr(), codes.len(), PREFETCH_AHEAD);
    let by = PREFETCH_AHEAD * subs.len() / codes.len().max(1);
    ahead(subs.as_ptr(), subs.len(), by);
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
pub(super) unsafe fn codes_dot(codes: &[u8], x: Q8Row<'_>, scratch: &[f32]) -> f32 {
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

/// Two consecutive floats at `p` (a pair of groups' scales or mins) spread to the tiles' lane
/// order: `[p[0] × 4 | p[1] × 4]`.
///
/// # Safety
/// AVX2 present; `p` readable for two floats.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_lanes(p: *const f32) -> __m256 {
    // SAFETY: the caller's length.
    let v = unsafe { _mm_castsi128_ps(_mm_loadl_epi64(p as *const __m128i)) };
    _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(v),
        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
    )
}

/// The tiles' two groups of four lanes added: `[v0 + v4, v1 + v5, v2 + v6, v3 + v7]`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn fold_pairs(v: __m256) -> __m128 {
    _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v))
}

/// Horizontal sum of eight floats.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = fold_pairs(v);
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
pub(super) unsafe fn pair_scales(subs: *const u8, d: *const f32, sum: *const f32) -> __m128 {
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
pub(super) unsafe fn group_scales(subs: *const u8, d: *const f32, sum: *const f32) -> __m128 {
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
pub(super) fn min_term(acc: __m128) -> f32 {
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
                // The codes PREFETCH_AHEAD further on, a line per two pairs as they are read
                // (see `prefetch_ahead`); the scales a line per eight pairs.
                _mm_prefetch::<_MM_HINT_T0>(cp.wrapping_add(32 * p + PREFETCH_AHEAD) as *const i8);
                if p % 8 == 0 {
                    _mm_prefetch::<_MM_HINT_T0>(
                        sp.wrapping_add(8 * p + PREFETCH_AHEAD / 4) as *const i8
                    );
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
        pair_sum(lo, hi, qs)
    }
}

/// A pair's unpacked codes (`lo`: `[A even | B even]`, `hi`: the odd ones, unsigned, at most 31)
/// times its activations (`qs`: 32 even, then 32 odd) as [`pair_products`]' eight floats (i16
/// pairs of at most 2·31·128, two of them summed: no saturation).
///
/// # Safety
/// AVX2 present; `qs` readable for 64 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pair_sum(lo: __m256i, hi: __m256i, qs: *const i8) -> __m256 {
    // SAFETY: the caller's length.
    unsafe {
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
        group_sum(lo, hi, qs)
    }
}

/// One group's unpacked codes (`lo`: the even weights, `hi`: the odd ones, unsigned, at most
/// 31) times its activations (`qs`: 16 even, then 16 odd): `Σ q·qx`.
///
/// # Safety
/// AVX2 present; `qs` readable for 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn group_sum(lo: __m128i, hi: __m128i, qs: *const i8) -> i32 {
    // SAFETY: the caller's length.
    unsafe {
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

/// `WR` weight rows of a tile ([`super::tiles`]): for each, `(acc, min)` with
/// `acc[t] = Σ_g sc[g]·dx_t[g]·Σ_i q·qx_t` and `min[t] = Σ_g mn[g]·Σx_t[g]` for the tile's
/// [`TX`] activation rows. Per pair of groups each activation row's bytes are loaded once for
/// the `WR` weight rows; per weight row the four activation rows' integer products are
/// gathered by three horizontal adds into one register (lanes 0–3: group 2p for rows 0–3,
/// lanes 4–7: group 2p + 1), the tile's lane order, so one conversion, one scale multiply and
/// one FMA serve four products. Two forms, which differ only in how a pair of groups' bytes
/// are multiplied: AVX2's `vpmaddubsw` + `vpmaddwd`, and AVX-512 VNNI's `vpdpbusd` on 256-bit
/// registers where the CPU has it (the same exact integers).
macro_rules! tile_row {
    ($(#[$doc:meta])* $name:ident, $features:literal, |$lo:ident, $hi:ident, $xe:ident, $xo:ident| $products:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The target features present; the lengths of [`super::tiles`]'s kernels.
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const WR: usize>(
            w: &[WeightRow<'_>; WR],
            x: ActTile<'_>,
            groups: usize,
        ) -> [([f32; TX], [f32; TX]); WR] {
            let (dxt, sumt) = (x.dx, x.sum);
            // SAFETY: pair p reads each weight row's codes[32p..32p+32] and sc/mn[2p..2p+2],
            // dxt/sumt[8p..8p+8] and qs[64p..64p+64] of each activation row; the last unpaired
            // group g codes[16g..+16], qs[32g..32g+32] and dxt/sumt[4g..4g+4]: all inside the
            // lengths `tiles` passes (codes 16·G, sc/mn G, dxt/sumt 4·G, qs 32·G).
            unsafe {
                let xq: [*const i8; TX] = std::array::from_fn(|t| x.rows[t].qs.as_ptr());
                let mask = _mm256_set1_epi8(0x0F);
                let mut acc = [_mm256_setzero_ps(); WR];
                let mut acc_m = [_mm256_setzero_ps(); WR];
                for p in 0..groups / 2 {
                    let nib: [(__m256i, __m256i); WR] = std::array::from_fn(|r| {
                        let v = _mm256_loadu_si256(w[r].codes.as_ptr().add(32 * p) as *const __m256i);
                        (
                            _mm256_and_si256(v, mask),
                            _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask),
                        )
                    });
                    // Per weight row and activation row: i32 lanes 0–3 sum to group 2p's
                    // Σ q·qx, 4–7 to group 2p+1's; each activation pair loaded once for the
                    // WR weight rows.
                    let mut m = [[_mm256_setzero_si256(); TX]; WR];
                    for t in 0..TX {
                        let $xe = _mm256_loadu_si256(xq[t].add(64 * p) as *const __m256i);
                        let $xo = _mm256_loadu_si256(xq[t].add(64 * p + 32) as *const __m256i);
                        for r in 0..WR {
                            let ($lo, $hi) = nib[r];
                            m[r][t] = $products;
                        }
                    }
                    let dx = _mm256_loadu_ps(dxt.as_ptr().add(8 * p));
                    let sm = _mm256_loadu_ps(sumt.as_ptr().add(8 * p));
                    for r in 0..WR {
                        // [Σ of group 2p for rows 0–3 | Σ of group 2p+1 for rows 0–3].
                        let h = _mm256_hadd_epi32(
                            _mm256_hadd_epi32(m[r][0], m[r][1]),
                            _mm256_hadd_epi32(m[r][2], m[r][3]),
                        );
                        let s = _mm256_mul_ps(pair_lanes(w[r].sc.as_ptr().add(2 * p)), dx);
                        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), s, acc[r]);
                        acc_m[r] = _mm256_fmadd_ps(pair_lanes(w[r].mn.as_ptr().add(2 * p)), sm, acc_m[r]);
                    }
                }
                let fold = |v: __m256| {
                    let mut r = [0f32; TX];
                    _mm_storeu_ps(r.as_mut_ptr(), fold_pairs(v));
                    r
                };
                std::array::from_fn(|r| {
                    let (mut res, mut min) = (fold(acc[r]), fold(acc_m[r]));
                    if groups % 2 == 1 {
                        let g = groups - 1;
                        let (codes, sc, mn) = (w[r].codes, w[r].sc, w[r].mn);
                        for t in 0..TX {
                            let q = group_product(codes.as_ptr().add(16 * g), xq[t].add(32 * g));
                            res[t] += sc[g] * dxt[TX * g + t] * q as f32;
                            min[t] += mn[g] * sumt[TX * g + t];
                        }
                    }
                    (res, min)
                })
            }
        }
    };
}

tile_row!(
    /// [`tile_row!`] with AVX2: `vpmaddubsw` of each half into i16 pairs, added, widened by
    /// `vpmaddwd` (at most 4·15·127 per i16, no saturation).
    tile_row,
    "avx2,fma",
    |lo, hi, xe, xo| _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo)),
        _mm256_set1_epi16(1)
    )
);

tile_row!(
    /// [`tile_row!`] with AVX-512 VNNI on 256-bit registers: two `vpdpbusd`.
    tile_row_vnni,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    |lo, hi, xe, xo| _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, xe), hi, xo)
);

/// One `q8_0` (or `q6_k`) weight row of a tile ([`super::tiles`]): the same `(acc, min)` as
/// [`tile_row!`]'s kernels, for signed codes in natural order. `$load` gives a group's codes
/// as signed bytes (loaded, or unpacked) and the operand `$products` widens with (ones, zero,
/// or `q6_k`'s half scales). Per group the weights are loaded once and their
/// magnitudes taken once (`vpsignb`, as [`q8_block`]); each activation row gets the weights'
/// signs and its products. Per pair of groups six horizontal adds, two lane permutes and one
/// add gather the four rows' sums into one register in the tile's lane order (lanes 0–3:
/// group 2p for rows 0–3, lanes 4–7: group 2p + 1), so one conversion, one scale multiply and
/// one FMA serve eight products.
macro_rules! tile_row_q8 {
    ($(#[$doc:meta])* $name:ident, $features:literal,
     |$row:ident, $g:ident| $load:expr, |$aw:ident, $sx:ident, $ws:ident| $products:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The target features present; the lengths of [`super::tiles`]'s kernels for 8-bit
        /// codes (codes 32·G bytes, 24·G for `q6_k`).
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            w: WeightRow<'_>,
            x: ActTile<'_>,
            groups: usize,
        ) -> ([f32; TX], [f32; TX]) {
            let (sc, mn, dxt, sumt) = (w.sc, w.mn, x.dx, x.sum);
            // SAFETY: group g reads codes[W·g..W·g+W] (W = 32, or 24 for `q6_k`), subs[4g..4g+4],
            // sc/mn[g], dxt/sumt[4g..4g+4] and qs[32g..32g+32] of each activation row (a
            // pair: groups 2p and 2p + 1): inside the lengths `tiles` passes (codes W·G,
            // subs 4·G, sc/mn G, dxt/sumt 4·G, qs 32·G).
            unsafe {
                let xq: [*const i8; TX] = std::array::from_fn(|t| x.rows[t].qs.as_ptr());
                // Group g's products for the four rows, as [rows 0–3: lanes 0–3 | rows 0–3:
                // lanes 4–7] of its eight i32 partial sums.
                let group = |g: usize| {
                    let ($row, $g) = (w, g);
                    let (wv, $ws): (__m256i, __m256i) = $load;
                    let $aw = _mm256_sign_epi8(wv, wv);
                    let m: [__m256i; TX] = std::array::from_fn(|t| {
                        let v = _mm256_loadu_si256(xq[t].add(32 * g) as *const __m256i);
                        let $sx = _mm256_sign_epi8(v, wv);
                        $products
                    });
                    _mm256_hadd_epi32(
                        _mm256_hadd_epi32(m[0], m[1]),
                        _mm256_hadd_epi32(m[2], m[3]),
                    )
                };
                let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for p in 0..groups / 2 {
                    let (h0, h1) = (group(2 * p), group(2 * p + 1));
                    let q = _mm256_add_epi32(
                        _mm256_permute2x128_si256::<0x20>(h0, h1),
                        _mm256_permute2x128_si256::<0x31>(h0, h1),
                    );
                    let s = _mm256_mul_ps(
                        pair_lanes(sc.as_ptr().add(2 * p)),
                        _mm256_loadu_ps(dxt.as_ptr().add(8 * p)),
                    );
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, acc);
                    let sm = _mm256_loadu_ps(sumt.as_ptr().add(8 * p));
                    acc_m = _mm256_fmadd_ps(pair_lanes(mn.as_ptr().add(2 * p)), sm, acc_m);
                }
                let (mut acc, mut acc_m) = (fold_pairs(acc), fold_pairs(acc_m));
                if groups % 2 == 1 {
                    let g = groups - 1;
                    let h = group(g);
                    let q = _mm_add_epi32(
                        _mm256_castsi256_si128(h),
                        _mm256_extracti128_si256::<1>(h),
                    );
                    let s = _mm_mul_ps(_mm_set1_ps(sc[g]), _mm_loadu_ps(dxt.as_ptr().add(TX * g)));
                    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(q), s, acc);
                    let sm = _mm_loadu_ps(sumt.as_ptr().add(TX * g));
                    acc_m = _mm_fmadd_ps(_mm_set1_ps(mn[g]), sm, acc_m);
                }
                let (mut res, mut min) = ([0f32; TX], [0f32; TX]);
                _mm_storeu_ps(res.as_mut_ptr(), acc);
                _mm_storeu_ps(min.as_mut_ptr(), acc_m);
                (res, min)
            }
        }
    };
}

tile_row_q8!(
    /// [`tile_row_q8!`] with AVX2: `vpmaddubsw` of `|w|` and the signed activations into i16
    /// pairs (at most 2·128·127, no saturation), widened by `vpmaddwd`.
    tile_row_q8,
    "avx2,fma",
    |w, g| (
        _mm256_loadu_si256(w.codes.as_ptr().add(32 * g) as *const __m256i),
        _mm256_set1_epi16(1)
    ),
    |aw, sx, ones| _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones)
);

tile_row_q8!(
    /// [`tile_row_q8!`] with AVX-512 VNNI on 256-bit registers: one `vpdpbusd`.
    tile_row_q8_vnni,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    |w, g| (
        _mm256_loadu_si256(w.codes.as_ptr().add(32 * g) as *const __m256i),
        _mm256_setzero_si256()
    ),
    |aw, sx, zero| _mm256_dpbusd_epi32(zero, aw, sx)
);

tile_row_q8!(
    /// [`tile_row_q8!`] for `q6_k` rows: each group's codes unpacked once to signed bytes
    /// ([`super::avx2_q6::unpack`]), and `vpmaddwd` against the half scales applies them in
    /// integers while widening (so the driver's per-group scale is `d`).
    tile_row_q6,
    "avx2,fma",
    |w, g| (
        super::avx2_q6::unpack(w.codes.as_ptr(), w.sc.len(), g),
        super::avx2_q6::half_scales(
            _mm_cvtsi32_si128(super::avx2_q6::word(w.subs.as_ptr(), g) as i32),
            0
        )
    ),
    |aw, sx, scales| _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), scales)
);

/// True where the CPU has AVX-512 VNNI with 256-bit forms (detected once).
pub(super) fn vnni_present() -> bool {
    static VNNI: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VNNI.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512f")
    })
}
