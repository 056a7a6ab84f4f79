//! The 4-bit × 8-bit GEMM of prefill with AVX-512 VNNI on 512-bit registers, sixteen weight
//! rows interleaved (llama.cpp's repacked `q4_0_8x8` / `q4_K_8x8` GEMMs, twice as wide): each
//! 4-byte lane of a `vpdpbusd` is one weight row, so an activation's four bytes are broadcast
//! from memory (`m32bcst`) into the instruction itself and a group's sixteen lanes end as the
//! sixteen rows' sums, with no horizontal adds ([`super::tiles`]' kernels spend a third of
//! their instructions gathering lanes).
//!
//! CPUs with AVX2 alone (no AVX-512 VNNI: most laptops) take the same driver and repacked
//! blocks ([`gemm_avx2`]): each half of eight rows is a 256-bit register, and a `vpmaddubsw`
//! (codes unsigned, the activation's four bytes broadcast) stands for each `vpdpbusd`, its i16
//! pairs summed over the group before one `vpmaddwd` widens them ([`tile_avx2`],
//! [`tile_avx2_offset`]). So do `q8_0` rows whose codes span at most 32 values (GGUF's Q5_0 and
//! Q5_1 blocks), stored `q + offset` in 0–31 ([`q8_offset`], [`tile_avx2_offset`]); wider `q8_0`
//! codes (GGUF's Q8_0) stay on the tiles there: `vpmaddubsw` would saturate on them.
//!
//! Per block of [`IL_ROWS`] weight rows the driver repacks the codes once into a scratch of
//! `[group][chunk 0..8][row 0..16][4 bytes]` (chunks 0–3: the group's low nibbles, 4–7: its high
//! nibbles, one code per byte, two 8×8 transposes of 32-bit words) and the rows' scales and
//! mins into `[group][row]`, then passes that block over up to [`IL_ACT_BYTES`] of activation
//! codes (kept in L2), [`IT_4BIT`] at a time, and hands the sums out per run of rows after the
//! block's tiles. The repack costs about as much as one tile's arithmetic, so it takes from
//! [`IL_MIN_ROWS`] activation rows on; fewer take [`super::tiles`].
//!
//! `q5` rows (GGUF's Q5_0 and Q5_1 blocks as they are) take the 4-bit rows' path: the repack
//! ors each code's fifth bit into its nibble ([`q5_group_bits`]), so the codes are 0–31 with no
//! offset and the min term is the 4-bit rows'; VNNI's tile is the 4-bit one (`vpdpbusd` sums in
//! i32), AVX2's sums each half group in i16 apart ([`tile_avx2`]: 4·2·31·128 = 31744).
//!
//! `q6_k` rows take the same path: each group unpacked once per block ([`super::avx2_q6`]) and
//! stored as `q + 32` (0–63, the unsigned operand `vpdpbusd` needs), each half of 16 its own
//! chain and scale `d·sc`, and the offset `32·Σqx` of each half (the activations' half sums,
//! taken once per call) subtracted in integers before the conversion, so the sums stay exact
//! (the min term is 0).
//!
//! The integer products are exact (at most 16·63·127 per half group), so the result differs
//! from the row forms only in the order of f32 additions. Measured (0.9B Llama shape,
//! `lorekeeper bench`, alternated with the tiles before it): prefill 1.15–1.46× on Q4_1 and
//! Q4_K_M files, `q6_k` alone 1.37× (median of five). The 512-bit form against the 256-bit one
//! of eight rows (`examples/gemm_bench`, `[5632, 2048]` × 256 rows, two threads): 1.46× on
//! `lq4k`, 1.53× on `q6_k`; this host's 512-bit `vpdpbusd` does 1.7× the multiply-adds of its
//! 256-bit one.

use std::arch::x86_64::*;

use super::tiles::row_scales;
use super::{f16_to_f32, RowBlock};
use crate::cpu::q8::Q8Row;
use crate::quant::BlockLayout;

/// [`run`]'s kinds of rows: 4-bit (LQ4, `lq4h`, `lq4k`), `q6_k`, `q8_0` whose codes span at
/// most 32 values ([`q8_offset`]), and `q5`.
const K4: u8 = 0;
/// See [`K4`].
const K6: u8 = 1;
/// See [`K4`].
const K8: u8 = 2;
/// `q5` rows: the 4-bit rows' nibbles with each code's fifth bit (0–31, no offset).
const K5: u8 = 3;

/// Weight rows interleaved: the lanes of a 512-bit `vpdpbusd`.
pub(super) const IL_ROWS: usize = 16;

/// Weight rows [`repack`] transposes at a time (the lanes of a 256-bit register).
const HALF: usize = 8;

/// Activation rows multiplied per kernel call (each repacked group loaded once for them):
/// eight for 4-bit rows, four for `q6_k` (whose halves' offsets need registers of their own).
/// Measured (`examples/gemm_bench`, one thread, best of 15, alternated): 4-bit rows 1.05× at
/// eight against four, `q6_k` 0.93×.
const IT_4BIT: usize = 8;
/// See [`IT_4BIT`].
const IT_Q6: usize = 4;
/// Activation rows a tile with AVX2 alone ([`tile_avx2`]: two registers per row, of sixteen).
const IT_AVX2: usize = 4;

/// Activation rows from which [`super::avx2::rows`] takes this GEMM. The tiles' time over
/// this GEMM's on a `[2048, 2048]` lq4h matrix, two threads: 8 rows 0.98, 12 1.08, 16 1.11,
/// 32 1.24, 64 1.24, 256 1.26.
pub(super) const IL_MIN_ROWS: usize = 12;

/// Activation rows from which [`super::avx2::rows`] takes [`gemm_avx2`] for 4-bit rows (`q6_k`
/// rows from [`IL_MIN_ROWS`]). The tiles' time over this GEMM's, lq4k `[5632, 2048]`, two
/// threads, best of 15 in two runs: 12 rows 0.97 / 0.89, 16 0.80 / 0.98, 32 1.14 / 1.31, 256
/// 1.50–1.58 (four runs); `q6_k` 1.23 / 1.48 at 12 rows, 2.0–2.7 at 256 (three runs).
pub(super) const IL_MIN_ROWS_AVX2: usize = 24;

/// Activation rows from which [`super::avx2::rows`] takes [`gemm_avx2`] for `q8_0` rows of
/// narrow codes ([`q8_offset`]). The tiles' time over this GEMM's, `[5632, 2048]` of random Q5_0 blocks, two
/// threads, best of 15 in two runs: 16 rows 1.39 / 1.32, 24 1.92 / 1.20, 32 1.75 / 1.13, 256
/// 1.74 / 1.93.
pub(super) const IL_MIN_ROWS_Q8: usize = 16;

/// Activation rows from which [`super::avx2::rows`] takes [`gemm`] (AVX-512 VNNI), or
/// [`gemm_avx2`] without VNNI, for `q5` rows, which have no tiles: below it the row form runs
/// per activation row. The time of `q8_0` rows of the same Q5_0 values (their tiles, VNNI)
/// over `q5`'s, `[5632, 2048]`, two threads, best of 15 (`examples/gemm_bench`): the row form
/// 1.0 at 4 rows, 0.72 at 8; this GEMM 0.78 at 2, 0.73 at 4, 1.02 at 8, 1.19 at 11, 1.1 at 16,
/// 3.0 at 256. Without VNNI (stop 65, the same bench with VNNI switched off, a host with 60 %
/// steal time): the row form's time over [`gemm_avx2`]'s 0.26 at 2 rows, 0.61 at 4, 1.06–1.10
/// at 8, 1.39–1.52 at 12, 1.66 at 16, 1.78 at 24 (it had taken them from 16).
pub(super) const IL_MIN_ROWS_Q5: usize = 8;

/// Bytes of activation codes one repacked block passes over (kept in L2: 256 rows of
/// K = 2048, 93 of K = 5632), so each block is repacked once per prefill chunk of 256 rows
/// where the rows are short.
#[cfg(not(test))]
const IL_ACT_BYTES: usize = 512 << 10;
/// In tests a block of one or two tiles, so the tests' few rows pass several blocks.
#[cfg(test)]
const IL_ACT_BYTES: usize = 1 << 9;

/// Bytes of one group's repacked codes (8 chunks × 16 rows × 4 bytes).
const GROUP_BYTES: usize = 32 * IL_ROWS;

/// Rows `rows` of a 4-bit matrix (LQ4, `lq4h` or `lq4k`, codes in the LQ4 nibble order,
/// activations in the paired order) or a `q6_k` one (activations in natural order) times every
/// row of `xs`: `out(r0, mi, first, second)` receives, per run of up to sixteen rows from `r0`,
/// each row's [`super::lq4_q8`] pair (`q6_k`: a pair whose difference is [`super::q6_q8`]).
/// Every `xs` row has the same group count G and the rows lie inside `w` (internal invariants
/// of [`super::rows_dot`], checked there).
///
/// # Safety
/// AVX2, FMA, AVX-512 F, VL and VNNI present.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn gemm(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    // SAFETY: this function's contract.
    unsafe {
        match w.layout {
            BlockLayout::Q6 => run::<true, K6, IT_Q6>(w, rows, xs, 32, out),
            // Codes 0–31 take the 4-bit rows' tile as they are (`vpdpbusd` sums in i32).
            BlockLayout::Q5 => run::<true, K5, IT_4BIT>(w, rows, xs, 0, out),
            _ => run::<true, K4, IT_4BIT>(w, rows, xs, 0, out),
        }
    }
}

/// [`gemm`] with AVX2 alone, for 4-bit rows (LQ4, `lq4h`, `lq4k`), `q6_k` ones and `q8_0`
/// ones whose codes q all lie in `−offset..=31 − offset` (`q8_offset`, from [`q8_offset`]; GGUF's
/// Q5_0 and Q5_1 blocks become such rows): the same repacked blocks, each half of eight rows a
/// 256-bit register, `vpmaddubsw` for `vpdpbusd` ([`tile_avx2`], [`tile_avx2_offset`]: `q8_0`
/// codes stored as `q + offset`, 0–31, the offset taken off in integers as `q6_k`'s is).
///
/// # Safety
/// AVX2, FMA and F16C present; `w` a 4-bit or `q6_k` layout, or a `q8_0` one whose rows `rows`
/// have codes in `q8_offset`'s range; the rest as [`gemm`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_avx2(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    q8_offset: i32,
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    // SAFETY: this function's contract.
    unsafe {
        match w.layout {
            BlockLayout::Q6 => run::<false, K6, IT_AVX2>(w, rows, xs, 32, out),
            BlockLayout::Q8 => run::<false, K8, IT_AVX2>(w, rows, xs, q8_offset, out),
            BlockLayout::Q5 => run::<false, K5, IT_AVX2>(w, rows, xs, 0, out),
            _ => run::<false, K4, IT_AVX2>(w, rows, xs, 0, out),
        }
    }
}

/// The offset that brings every code of `codes` (a `q8_0` matrix's rows) into 0–31, where
/// their values span at most 32 (`max − min ≤ 31`): `−min`. `None` for wider codes (GGUF's
/// Q8_0 blocks), which `vpmaddubsw` would saturate on. One more pass over the rows' codes
/// (byte minima and maxima), counted in [`IL_MIN_ROWS_Q8`]'s ratios: the GEMM pays it back from
/// 16 activation rows.
///
/// # Safety
/// AVX2 present.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn q8_offset(codes: &[u8]) -> Option<i32> {
    let chunks = codes.chunks_exact(32);
    let tail = chunks.remainder();
    // SAFETY: each chunk holds 32 bytes.
    let (lo, hi) = unsafe {
        let (mut lo, mut hi) = (_mm256_set1_epi8(i8::MAX), _mm256_set1_epi8(i8::MIN));
        for c in chunks {
            let v = _mm256_loadu_si256(c.as_ptr() as *const __m256i);
            (lo, hi) = (_mm256_min_epi8(lo, v), _mm256_max_epi8(hi, v));
        }
        let (mut l, mut h) = ([0i8; 32], [0i8; 32]);
        _mm256_storeu_si256(l.as_mut_ptr() as *mut __m256i, lo);
        _mm256_storeu_si256(h.as_mut_ptr() as *mut __m256i, hi);
        let t = tail.iter().map(|&b| b as i8);
        (
            l.into_iter().chain(t.clone()).min().unwrap_or(0) as i32,
            h.into_iter().chain(t).max().unwrap_or(0) as i32,
        )
    };
    (hi - lo <= 31).then_some(-lo)
}

/// [`gemm`] (`WIDE`: AVX-512 VNNI) or [`gemm_avx2`] for rows of kind `KIND`
/// ([`K4`], [`K6`], [`K8`]), `IT` activation rows a tile; `offset` is what the repacked codes
/// carry over the stored ones (`q6_k`'s 32, [`q8_offset`]'s). Inlined into each caller, so the
/// driver compiles for its features.
///
/// # Safety
/// The features of the caller: [`gemm`]'s where `WIDE`, else [`gemm_avx2`]'s.
#[inline(always)]
unsafe fn run<const WIDE: bool, const KIND: u8, const IT: usize>(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    offset: i32,
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    let Some(last) = xs.len().checked_sub(1) else {
        return;
    };
    let groups = xs[0].d.len();
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.scale_bytes(groups),
    );
    let n = rows.len();
    let mut codes = vec![0u8; GROUP_BYTES * groups];
    let (mut sc, mut mn) = (vec![0f32; IL_ROWS * groups], vec![0f32; IL_ROWS * groups]);
    let (mut sc_row, mut mn_row) = (vec![0f32; groups], vec![0f32; groups]);
    // Activation tiles of IT rows; a last partial tile repeats its last row.
    let tiles_x: Vec<[Q8Row<'_>; IT]> = (0..xs.len().div_ceil(IT))
        .map(|i| std::array::from_fn(|t| xs[(i * IT + t).min(last)]))
        .collect();
    // `q6_k` and `q8_0`: per activation row and group `offset·Σqx` of each half (what the
    // codes' offset adds to the sums).
    let offsets = KIND == K6 || KIND == K8;
    let mut bias = vec![0i32; if offsets { 2 * groups * xs.len() } else { 0 }];
    if offsets {
        for (x, b) in xs.iter().zip(bias.chunks_exact_mut(2 * groups)) {
            for (h, b) in b.iter_mut().enumerate() {
                *b = offset
                    * x.qs[16 * h..16 * h + 16]
                        .iter()
                        .map(|&q| q as i32)
                        .sum::<i32>();
            }
        }
    }
    let act_tiles = (IL_ACT_BYTES / (32 * groups * IT)).max(1);
    // Per activation tile of a block, per row: the sixteen sums and the sixteen min terms.
    let mut res = vec![0f32; 2 * IL_ROWS * IT * act_tiles.min(tiles_x.len())];
    for (b, block) in tiles_x.chunks(act_tiles).enumerate() {
        for j0 in (0..n).step_by(IL_ROWS) {
            // IL_ROWS weight rows; a last partial set repeats its last row.
            let real = IL_ROWS.min(n - j0);
            let row = |k: usize| rows.start + j0 + k.min(real - 1);
            let src: [&[u8]; IL_ROWS] = std::array::from_fn(|k| {
                let r = row(k);
                &w.codes[r * cb..(r + 1) * cb]
            });
            for k in 0..IL_ROWS {
                let r = row(k);
                let subs = &w.subs[r * sb..(r + 1) * sb];
                if KIND == K6 {
                    // `q6_k`: the halves' scales `d·sc_lo`, `d·sc_hi`.
                    for (g, word) in subs.chunks_exact(4).enumerate() {
                        let d = f16_to_f32(u16::from_le_bytes([word[2], word[3]]));
                        (sc_row[g], mn_row[g]) =
                            (d * word[0] as i8 as f32, d * word[1] as i8 as f32);
                    }
                } else {
                    row_scales(w.layout, subs, &mut sc_row, &mut mn_row);
                }
                for g in 0..groups {
                    (sc[IL_ROWS * g + k], mn[IL_ROWS * g + k]) = (sc_row[g], mn_row[g]);
                }
            }
            // SAFETY: the features (this function's contract); `src` rows hold 16·G bytes
            // (`q6_k`: 24·G, `q8_0`: 32·G), `codes` GROUP_BYTES·G.
            unsafe {
                for (half, src) in src.chunks_exact(HALF).enumerate() {
                    repack(src, KIND, offset, groups, &mut codes, half);
                }
            }
            for (i, x) in block.iter().enumerate() {
                let mi0 = (b * act_tiles + i) * IT;
                // The tile's rows' offsets (empty for 4-bit and `q5` rows).
                let bias: [&[i32]; IT] = std::array::from_fn(|t| {
                    let mi = (mi0 + t).min(last);
                    bias.get(2 * groups * mi..2 * groups * (mi + 1))
                        .unwrap_or(&[])
                });
                let r = &mut res[2 * IL_ROWS * IT * i..2 * IL_ROWS * IT * (i + 1)];
                // SAFETY: the features; `codes` GROUP_BYTES·G bytes, `sc`/`mn` 16·G floats,
                // every activation row G groups (qs 32·G, d and sum G), `bias` rows 2·G
                // but for 4-bit rows, `r` 2·16 floats per activation row of the tile.
                unsafe {
                    if WIDE && KIND == K6 {
                        tile::<true, IT>(&codes, &sc, &mn, x, &bias, groups, r)
                    } else if WIDE {
                        tile::<false, IT>(&codes, &sc, &mn, x, &bias, groups, r)
                    } else if KIND == K6 {
                        tile_avx2_offset::<false, IT>(&codes, &sc, &mn, x, &bias, groups, r)
                    } else if KIND == K8 {
                        tile_avx2_offset::<true, IT>(&codes, &sc, &mn, x, &bias, groups, r)
                    } else if KIND == K5 {
                        tile_avx2::<IT, 4>(&codes, &sc, &mn, x, groups, r)
                    } else {
                        tile_avx2::<IT, 8>(&codes, &sc, &mn, x, groups, r)
                    }
                }
            }
            // The results handed out after the block's tiles, not after each: a float read
            // back right after its 512-bit store waits for the store to finish (measured: a
            // fifth of the kernel's time).
            for (i, r) in res
                .chunks_exact(2 * IL_ROWS * IT)
                .take(block.len())
                .enumerate()
            {
                let mi0 = (b * act_tiles + i) * IT;
                for (t, r) in r.chunks_exact(2 * IL_ROWS).enumerate() {
                    if mi0 + t >= xs.len() {
                        break;
                    }
                    out(
                        rows.start + j0,
                        mi0 + t,
                        &r[..real],
                        &r[IL_ROWS..IL_ROWS + real],
                    );
                }
            }
        }
    }
}

/// Group `g`'s fifth bits of a `q5` row (`hb`: the row's fifth-bit plane, 4·G bytes) as one
/// word in the order of [`repack`]'s `[low nibbles | high nibbles]`: bits 0–15 the even weights,
/// 16–31 the odd ones (a pair's two words hold A's and B's halves side by side).
///
/// # Safety
/// `hb` readable for 4·`groups` bytes, `g < groups`.
#[inline(always)]
unsafe fn q5_group_bits(hb: *const u8, groups: usize, g: usize) -> u32 {
    // SAFETY: the pair's words lie at 8·(g / 2) and 8·(g / 2) + 4, an unpaired group's at 4g,
    // inside 4·groups bytes.
    unsafe {
        if g / 2 * 2 + 1 < groups {
            let p = hb.add(8 * (g / 2));
            let sh = 16 * (g % 2) as u32;
            let even = std::ptr::read_unaligned(p as *const u32) >> sh & 0xFFFF;
            let odd = std::ptr::read_unaligned(p.add(4) as *const u32) >> sh & 0xFFFF;
            even | odd << 16
        } else {
            std::ptr::read_unaligned(hb.add(4 * g) as *const u32)
        }
    }
}

/// Eight rows' codes (16·G bytes each, the LQ4 nibble order; `q5`: 20·G, the nibbles then the
/// fifth bits; `q6_k`: 24·G; `q8_0`: 32·G) into half `half` of `out`'s
/// `[group][chunk][row 0..16][4 bytes]`, one code per byte: per group each row's 16 bytes become
/// `[low nibbles | high nibbles]` (`q5`: with each code's fifth bit; `q6_k`: its 32 codes
/// `q + 32` in weight order; `q8_0`: its 32 codes `q + offset`),
/// eight 32-bit words, chunks 0–7, and the 8×8 matrix of words is transposed, so chunk c's 32
/// bytes of this half hold the eight rows' four codes (rows `8·half..8·half + 8` of the chunk's
/// 64 bytes).
///
/// # Safety
/// AVX2 present; `src` eight rows of 16·G bytes (`q5`: 20·G, `q6_k`: 24·G, `q8_0`: 32·G), `out`
/// [`GROUP_BYTES`]·G, `half` 0 or 1.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn repack(src: &[&[u8]], kind: u8, offset: i32, groups: usize, out: &mut [u8], half: usize) {
    // SAFETY: group g reads src[k][16g..16g+16] (`q5`: and its fifth bits' words inside
    // src[k][16G..20G]; `q6_k`: its group's bytes of 24·G, `q8_0`: src[k][32g..32g+32]) and writes 32 bytes of each 64-byte chunk of out[512g..512g+512].
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        // The offset's byte (wrapping: the codes plus it lie in 0..=31).
        let add = _mm256_set1_epi8(offset as i8);
        for g in 0..groups {
            // Plain loops, not `array::from_fn` closures: the compiler left one out of line
            // (measured: 10 % of a 16-token prefill), a call per row and group with every
            // vector passed through memory.
            let mut y = [_mm256_setzero_si256(); HALF];
            for (k, y) in y.iter_mut().enumerate() {
                *y = if kind == K6 {
                    let v = super::avx2_q6::unpack(src[k].as_ptr(), groups, g);
                    _mm256_add_epi8(v, add)
                } else if kind == K8 {
                    let v = _mm256_loadu_si256(src[k].as_ptr().add(32 * g) as *const __m256i);
                    _mm256_add_epi8(v, add)
                } else if kind == K5 {
                    let v = _mm_loadu_si128(src[k].as_ptr().add(16 * g) as *const __m128i);
                    let v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(v), v), mask);
                    let bits = q5_group_bits(src[k].as_ptr().add(16 * groups), groups, g);
                    _mm256_or_si256(v, super::avx2_q5::fifth_bits(bits))
                } else {
                    let v = _mm_loadu_si128(src[k].as_ptr().add(16 * g) as *const __m128i);
                    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(v), v), mask)
                };
            }
            // [a_k0, a_k1, a_k2, a_k3 | a_k4 … a_k7] → [a_0c … a_7c] for each chunk c.
            let mut t = [_mm256_setzero_si256(); HALF];
            for (i, t) in t.iter_mut().enumerate() {
                let (a, b) = (y[2 * (i / 2)], y[2 * (i / 2) + 1]);
                *t = if i % 2 == 0 {
                    _mm256_unpacklo_epi32(a, b)
                } else {
                    _mm256_unpackhi_epi32(a, b)
                };
            }
            // u[4h + j]: rows 4h..4h+4, chunks j and j + 4.
            let mut u = [_mm256_setzero_si256(); HALF];
            for (i, u) in u.iter_mut().enumerate() {
                let (h, j) = (i / 4, i % 4);
                let (a, b) = (t[4 * h + j / 2], t[4 * h + 2 + j / 2]);
                *u = if j % 2 == 0 {
                    _mm256_unpacklo_epi64(a, b)
                } else {
                    _mm256_unpackhi_epi64(a, b)
                };
            }
            // Chunk c's 32 bytes of this half at 64·c + 32·half: `__m256i` steps of two per chunk.
            let o = out.as_mut_ptr().add(GROUP_BYTES * g + 32 * half) as *mut __m256i;
            for j in 0..4 {
                _mm256_storeu_si256(
                    o.add(2 * j),
                    _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]),
                );
                _mm256_storeu_si256(
                    o.add(2 * (4 + j)),
                    _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]),
                );
            }
        }
    }
}

/// Where group g's activations meet its codes: the offsets in a paired-order row
/// ([`crate::cpu::q8`]) of the 16 activations of its low nibbles and of its high nibbles.
#[inline(always)]
fn bases(g: usize, groups: usize) -> (usize, usize) {
    if g < groups & !1 {
        let (p, h) = (g / 2, g % 2);
        (64 * p + 16 * h, 64 * p + 32 + 16 * h)
    } else {
        (32 * g, 32 * g + 16)
    }
}

/// One repacked block of sixteen weight rows times `IT` activation rows: per activation row
/// t, lanes k of `(acc, min)` are `(Σ_g sc_k[g]·dx_t[g]·Σ_i q·qx_t, Σ_g mn_k[g]·Σx_t[g])`,
/// stored as `r[32t..32t + 16]` and `r[32t + 16..32t + 32]`. Per
/// group and activation row eight 512-bit `vpdpbusd` with the activations broadcast from memory
/// (two chains of four), one conversion, one multiply and two FMAs. `Q6`: `sc` and `mn` are the
/// halves' `d·sc_lo`, `d·sc_hi`, each chain less its `bias` (per row `[G][2]`, `32·Σqx` of
/// each half) converted and scaled apart, and `min` stays 0.
///
/// # Safety
/// The features of [`gemm`]; `codes` [`GROUP_BYTES`]·G bytes, `sc` and `mn` 16·G floats, every
/// activation row G groups, `bias` rows 2·G where `Q6`, `r` 32·IT floats.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
unsafe fn tile<const Q6: bool, const IT: usize>(
    codes: &[u8],
    sc: &[f32],
    mn: &[f32],
    x: &[Q8Row<'_>; IT],
    bias: &[&[i32]; IT],
    groups: usize,
    r: &mut [f32],
) {
    // SAFETY: group g reads codes[512g..512g+512], sc/mn[16g..16g+16], each row's qs at the
    // group's bases (16 bytes each, inside its 32g..32g+32 pair span) and d/sum[g].
    unsafe {
        let mut acc = [_mm512_setzero_ps(); IT];
        let mut min = [_mm512_setzero_ps(); IT];
        let cp = codes.as_ptr() as *const __m512i;
        for g in 0..groups {
            let wv: [__m512i; 8] = std::array::from_fn(|c| _mm512_loadu_si512(cp.add(8 * g + c)));
            let s = _mm512_loadu_ps(sc.as_ptr().add(IL_ROWS * g));
            let m = _mm512_loadu_ps(mn.as_ptr().add(IL_ROWS * g));
            let (e, o) = if Q6 {
                (32 * g, 32 * g + 16)
            } else {
                bases(g, groups)
            };
            for t in 0..IT {
                let q = x[t].qs.as_ptr();
                let b = |at: usize| {
                    _mm512_set1_epi32(std::ptr::read_unaligned(q.add(at) as *const i32))
                };
                let dx = _mm512_set1_ps(*x[t].d.get_unchecked(g));
                if Q6 {
                    let mut lo = _mm512_setzero_si512();
                    let mut hi = _mm512_setzero_si512();
                    for c in 0..4 {
                        lo = _mm512_dpbusd_epi32(lo, wv[c], b(e + 4 * c));
                        hi = _mm512_dpbusd_epi32(hi, wv[4 + c], b(o + 4 * c));
                    }
                    // The codes' offset taken off in integers (exact), then each half its
                    // own scale.
                    let b = bias[t].as_ptr().add(2 * g);
                    let f = _mm512_cvtepi32_ps(_mm512_sub_epi32(lo, _mm512_set1_epi32(*b)));
                    acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(s, dx), acc[t]);
                    let f = _mm512_cvtepi32_ps(_mm512_sub_epi32(hi, _mm512_set1_epi32(*b.add(1))));
                    acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(m, dx), acc[t]);
                } else {
                    // One chain of eight: the tile's other rows and the next group keep the
                    // multipliers busy meanwhile.
                    let mut q = _mm512_setzero_si512();
                    for c in 0..4 {
                        q = _mm512_dpbusd_epi32(q, wv[c], b(e + 4 * c));
                        q = _mm512_dpbusd_epi32(q, wv[4 + c], b(o + 4 * c));
                    }
                    let f = _mm512_cvtepi32_ps(q);
                    acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(s, dx), acc[t]);
                    let sum = _mm512_set1_ps(*x[t].sum.get_unchecked(g));
                    min[t] = _mm512_fmadd_ps(m, sum, min[t]);
                }
            }
        }
        for t in 0..IT {
            _mm512_storeu_ps(r.as_mut_ptr().add(2 * IL_ROWS * t), acc[t]);
            _mm512_storeu_ps(r.as_mut_ptr().add(2 * IL_ROWS * t + IL_ROWS), min[t]);
        }
    }
}

/// [`tile`] with AVX2 alone, for 4-bit and `q5` rows (codes in the 4-bit rows' order, no
/// offset): the block's two halves of eight rows in turn, each a 256-bit register of eight
/// 4-byte lanes. Per group, half and activation row eight `vpmaddubsw` (the codes unsigned, the
/// activations' four bytes broadcast) summed in i16 over runs of `RUN` chunks — all eight for
/// 4-bit codes (at most 8·2·15·128 = 30720: no saturation), four for `q5`'s (4·2·31·128 =
/// 31744) — each run widened by one `vpmaddwd` by ones into the lanes' i32 sums, then one
/// conversion and one FMA; the min terms in a second pass over the groups (their registers
/// would crowd the products').
///
/// # Safety
/// AVX2 and FMA present; the lengths of [`tile`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const IT: usize, const RUN: usize>(
    codes: &[u8],
    sc: &[f32],
    mn: &[f32],
    x: &[Q8Row<'_>; IT],
    groups: usize,
    r: &mut [f32],
) {
    // SAFETY: as `tile`: group g reads codes[512g..512g+512], sc/mn[16g..16g+16], each row's
    // qs at the group's bases and d/sum[g]; `r` holds 32·IT floats.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        for h in 0..2 {
            let cp = codes.as_ptr().add(HALF * 4 * h);
            let mut acc = [_mm256_setzero_ps(); IT];
            for g in 0..groups {
                let (e, o) = bases(g, groups);
                let mut p = [_mm256_setzero_si256(); IT];
                for c0 in (0..8).step_by(RUN) {
                    let mut s16 = [_mm256_setzero_si256(); IT];
                    for c in c0..c0 + RUN {
                        let wv =
                            _mm256_loadu_si256(cp.add(GROUP_BYTES * g + 64 * c) as *const __m256i);
                        let at = if c < 4 { e + 4 * c } else { o + 4 * (c - 4) };
                        for (t, s16) in s16.iter_mut().enumerate() {
                            let q = x[t].qs.as_ptr().add(at);
                            let xb = _mm256_set1_epi32(std::ptr::read_unaligned(q as *const i32));
                            *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(wv, xb));
                        }
                    }
                    for (p, s16) in p.iter_mut().zip(&s16) {
                        *p = _mm256_add_epi32(*p, _mm256_madd_epi16(*s16, ones));
                    }
                }
                let s = _mm256_loadu_ps(sc.as_ptr().add(IL_ROWS * g + HALF * h));
                for (t, (acc, p)) in acc.iter_mut().zip(&p).enumerate() {
                    let f = _mm256_cvtepi32_ps(*p);
                    let dx = _mm256_set1_ps(*x[t].d.get_unchecked(g));
                    *acc = _mm256_fmadd_ps(f, _mm256_mul_ps(s, dx), *acc);
                }
            }
            store_avx2(&acc, Some(mn), x, groups, h, r);
        }
    }
}

/// [`tile_avx2`] for rows stored with an offset (activations in natural order): `q6_k` rows
/// (codes `q + 32`, 0–63) and, where `Q8`, `q8_0` rows of narrow codes (`q + offset`, 0–31,
/// [`q8_offset`]). Per group, half of eight rows and activation row, each half group (chunks
/// 0–3 and 4–7) `vpmaddubsw` products summed in i16 over runs of chunks — two for `q6_k` (at
/// most 2·2·63·128 = 32256), four for `q8_0` (4·2·31·128 = 31744) — each run widened by one
/// `vpmaddwd`, and the half's `bias` (`offset·Σqx`) taken off in integers. `q6_k`: each half
/// converted with its own scale (`d·sc_lo`, `d·sc_hi` in `sc`, `mn`), min terms 0. `q8_0`: the
/// group's two halves summed in integers, converted once and scaled by `d` (`sc`); the min
/// terms (GGUF's Q5_1 `m`, in `mn`) in a second pass as [`tile_avx2`]'s.
///
/// # Safety
/// AVX2 and FMA present; the lengths of [`tile`], `bias` rows 2·G.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2_offset<const Q8: bool, const IT: usize>(
    codes: &[u8],
    sc: &[f32],
    mn: &[f32],
    x: &[Q8Row<'_>; IT],
    bias: &[&[i32]; IT],
    groups: usize,
    r: &mut [f32],
) {
    // Chunks summed in i16 before widening (the bounds above).
    let run = if Q8 { 4 } else { 2 };
    // SAFETY: group g reads codes[512g..512g+512], sc/mn[16g..16g+16], each row's
    // qs[32g..32g+32], d/sum[g] and bias[2g..2g+2]; `r` holds 32·IT floats.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        for h in 0..2 {
            let cp = codes.as_ptr().add(HALF * 4 * h);
            let mut acc = [_mm256_setzero_ps(); IT];
            for g in 0..groups {
                let dx: [__m256; IT] =
                    std::array::from_fn(|t| _mm256_set1_ps(*x[t].d.get_unchecked(g)));
                let mut p = [_mm256_setzero_si256(); IT];
                for (k, scales) in [sc, mn].iter().enumerate() {
                    for c0 in (4 * k..4 * k + 4).step_by(run) {
                        let mut s16 = [_mm256_setzero_si256(); IT];
                        for c in c0..c0 + run {
                            let wv = _mm256_loadu_si256(
                                cp.add(GROUP_BYTES * g + 64 * c) as *const __m256i
                            );
                            for (t, s16) in s16.iter_mut().enumerate() {
                                let at = x[t].qs.as_ptr().add(32 * g + 4 * c);
                                let xb =
                                    _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32));
                                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(wv, xb));
                            }
                        }
                        for (p, s16) in p.iter_mut().zip(&s16) {
                            *p = _mm256_add_epi32(*p, _mm256_madd_epi16(*s16, ones));
                        }
                    }
                    for (t, p) in p.iter_mut().enumerate() {
                        let b = _mm256_set1_epi32(*bias[t].as_ptr().add(2 * g + k));
                        *p = _mm256_sub_epi32(*p, b);
                    }
                    if !Q8 {
                        // `q6_k`: this half's own scale.
                        let s = _mm256_loadu_ps(scales.as_ptr().add(IL_ROWS * g + HALF * h));
                        for t in 0..IT {
                            let f = _mm256_cvtepi32_ps(p[t]);
                            acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(s, dx[t]), acc[t]);
                            p[t] = _mm256_setzero_si256();
                        }
                    }
                }
                if Q8 {
                    let s = _mm256_loadu_ps(sc.as_ptr().add(IL_ROWS * g + HALF * h));
                    for t in 0..IT {
                        let f = _mm256_cvtepi32_ps(p[t]);
                        acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(s, dx[t]), acc[t]);
                    }
                }
            }
            store_avx2(&acc, Q8.then_some(mn), x, groups, h, r);
        }
    }
}

/// Half `h` of a tile's results with AVX2 alone: per activation row t the eight rows' sums
/// `acc[t]` and their min terms `Σ_g mn_k[g]·Σx_t[g]` (a pass of their own over the groups:
/// their registers would crowd the products'; 0 without `mn`), stored as [`tile`] stores its
/// sixteen.
///
/// # Safety
/// AVX2 and FMA present; `mn` (where given) 16·G floats, every activation row G groups, `r`
/// 32·IT floats, `h` 0 or 1.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store_avx2<const IT: usize>(
    acc: &[__m256; IT],
    mn: Option<&[f32]>,
    x: &[Q8Row<'_>; IT],
    groups: usize,
    h: usize,
    r: &mut [f32],
) {
    // SAFETY: group g reads mn[16g + 8h..16g + 8h + 8] and each row's sum[g]; row t writes
    // r[32t + 8h..32t + 8h + 8] and r[32t + 16 + 8h..32t + 16 + 8h + 8].
    unsafe {
        let mut min = [_mm256_setzero_ps(); IT];
        if let Some(mn) = mn {
            for g in 0..groups {
                let m = _mm256_loadu_ps(mn.as_ptr().add(IL_ROWS * g + HALF * h));
                for (t, min) in min.iter_mut().enumerate() {
                    let sum = _mm256_set1_ps(*x[t].sum.get_unchecked(g));
                    *min = _mm256_fmadd_ps(m, sum, *min);
                }
            }
        }
        for t in 0..IT {
            let o = r.as_mut_ptr().add(2 * IL_ROWS * t + HALF * h);
            _mm256_storeu_ps(o, acc[t]);
            _mm256_storeu_ps(o.add(IL_ROWS), min[t]);
        }
    }
}
