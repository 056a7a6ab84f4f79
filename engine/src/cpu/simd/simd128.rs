//! WebAssembly `simd128` form of the LQ4 × Q8 row dot product (the page's build enables
//! `+simd128`, which every current browser runs), and of the `lq4h`, `q8_0` and `q5` rows.
//!
//! One group per step: low and high nibbles of the 16 code bytes and the matching activation
//! halves are widened to i16 and multiplied pairwise into i32 lanes by `i32x4.dot_i16x8_s`;
//! each group's i32 lanes are scaled by `sc·dx` into an f32x4 accumulator. Built with
//! `+relaxed-simd` (the page's threaded build, `scripts/threads-env.sh`), the widening and the
//! four dot products of a group become two `i32x4.relaxed_dot_i8x16_i7x16_add_s`.
//!
//! A `q5` row (GGUF's Q5_0 / Q5_1 blocks as they are) takes the `lq4h` forms with each
//! group's fifth bits put back beside its nibbles: two 16-bit words of the row's bit plane
//! (the even and the odd weights, [`q5_bit_words`]) spread to bytes of 0x10 ([`fifth_bits`])
//! and or-ed into the low and high nibbles, so the codes are 0..31 and the same products
//! take them (pair sums at most 2·31·128, no 16-bit saturation; 0..31 is a 7-bit operand).

use core::arch::wasm32::*;

use super::tiles::{tiles, ActTile, WeightRow, TILE_MIN_ROWS, TX};
use super::{each_row, f16_to_f32, half_scales_tail, RowBlock};
use crate::cpu::q8::{Lq4Row, Q8Row};
use crate::quant::BlockLayout;

/// [`super::rows_dot`]'s loop with this file's row forms (the loop compiled here, so the
/// per-row dispatch and checks of [`super::lq4_q8`] are not paid per row).
pub fn rows(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    scratch: &mut [f32],
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
) {
    // Several activation rows (prefill): 4-bit and `q5` rows in tiles of four activation rows.
    if xs.len() >= TILE_MIN_ROWS && w.layout == BlockLayout::Q5 {
        return tiles(w, rows, xs, out, |wr: &[WeightRow<'_>; 1], x, g| {
            [tile_row::<true>(wr[0], x, g)]
        });
    }
    if xs.len() >= TILE_MIN_ROWS && !w.layout.natural_order() {
        return tiles(w, rows, xs, out, |wr: &[WeightRow<'_>; 1], x, g| {
            [tile_row::<false>(wr[0], x, g)]
        });
    }
    match w.layout {
        BlockLayout::Q8 => each_row(w, rows, xs, out, |c, s, x| {
            let m = half_scales(s, x, scratch);
            (q8_dot(bytemuck::cast_slice(c), x, scratch) - m, 0.0)
        }),
        BlockLayout::Lq4 => each_row(w, rows, xs, out, |c, s, x| {
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
        BlockLayout::Lq4h => each_row(w, rows, xs, out, lq4h_q8),
        // The page's backend receives `lq4k` as `lq4h` (`Isa::runs`); this form serves
        // the tests.
        BlockLayout::Lq4k => each_row(w, rows, xs, out, |c, s, x| {
            super::lq4_q8(
                super::Isa::Simd128,
                Lq4Row {
                    codes: c,
                    subs: s,
                    layout: BlockLayout::Lq4k,
                },
                x,
                scratch,
            )
        }),
        // The page's backend receives `q6_k` as `q8_0` (`Isa::runs`); the reference serves
        // the tests.
        BlockLayout::Q6 => each_row(w, rows, xs, out, |c, s, x| {
            (super::scalar::q6_dot(c, s, x), 0.0)
        }),
        BlockLayout::Q5 => each_row(w, rows, xs, out, q5_q8),
    }
}

/// One weight row of a tile ([`super::tiles`]): `(acc, min)` with
/// `acc[t] = Σ_g sc[g]·dx_t[g]·Σ_i q·qx_t` and `min[t] = Σ_g mn[g]·Σx_t[g]` for the tile's
/// [`TX`] activation rows. Per group the codes are split into nibbles once; the four rows'
/// [`group_dot`]s (i32x4 each) are transposed and added by six shuffles and adds into one
/// i32x4 whose lanes are the rows, so one conversion, one scale multiply and one add serve
/// four products, and one multiply-add the min terms. With `Q5` the row is a `q5` row (20·G
/// code bytes) and each group's fifth bits are or-ed into its nibbles once for the four rows.
fn tile_row<const Q5: bool>(
    w: WeightRow<'_>,
    x: ActTile<'_>,
    groups: usize,
) -> ([f32; TX], [f32; TX]) {
    assert!(
        w.codes.len() == if Q5 { 20 } else { 16 } * groups
            && w.sc.len() == groups
            && w.mn.len() == groups
            && x.dx.len() == TX * groups
            && x.sum.len() == TX * groups
            && x.rows.iter().all(|r| r.qs.len() == 32 * groups),
        "tile_row: slices disagree on the group count {groups}"
    );
    let mask = u8x16_splat(0x0F);
    let xq: [*const i8; TX] = std::array::from_fn(|t| x.rows[t].qs.as_ptr());
    let (mut acc, mut acc_m) = (f32x4_splat(0.0), f32x4_splat(0.0));
    for g in 0..groups {
        let (e, o) = group_acts(groups, g);
        // SAFETY: codes[16g..16g+16] (and a `q5` row's fifth bits, inside its 20·G bytes:
        // `q5_bit_words`), each row's qs[e..e+16] and qs[o..o+16] (inside its 32·G codes) and
        // dx/sum[4g..4g+4]: inside the lengths asserted above.
        unsafe {
            let v = v128_load(w.codes.as_ptr().add(16 * g) as *const v128);
            let (mut lo, mut hi) = (v128_and(v, mask), u8x16_shr(v, 4));
            if Q5 {
                let (eb, ob) = q5_bit_words(groups, g);
                lo = v128_or(lo, fifth_bits(w.codes.as_ptr().add(eb)));
                hi = v128_or(hi, fifth_bits(w.codes.as_ptr().add(ob)));
            }
            let d: [v128; TX] = std::array::from_fn(|t| {
                let xe = v128_load(xq[t].add(e) as *const v128);
                let xo = v128_load(xq[t].add(o) as *const v128);
                group_dot(lo, hi, xe, xo)
            });
            // [a0+a2, b0+b2, a1+a3, b1+b3], the same for c, d; then [Σa, Σb, Σc, Σd].
            let ab = i32x4_add(
                i32x4_shuffle::<0, 4, 1, 5>(d[0], d[1]),
                i32x4_shuffle::<2, 6, 3, 7>(d[0], d[1]),
            );
            let cd = i32x4_add(
                i32x4_shuffle::<0, 4, 1, 5>(d[2], d[3]),
                i32x4_shuffle::<2, 6, 3, 7>(d[2], d[3]),
            );
            let sums = i32x4_add(
                i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
                i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
            );
            let dx = v128_load(x.dx.as_ptr().add(TX * g) as *const v128);
            let scale = f32x4_mul(f32x4_splat(w.sc[g]), dx);
            acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(sums), scale));
            let sx = v128_load(x.sum.as_ptr().add(TX * g) as *const v128);
            acc_m = f32x4_add(acc_m, f32x4_mul(f32x4_splat(w.mn[g]), sx));
        }
    }
    let (mut res, mut min) = ([0f32; TX], [0f32; TX]);
    // SAFETY: each array holds TX = 4 floats, one v128.
    unsafe {
        v128_store(res.as_mut_ptr() as *mut v128, acc);
        v128_store(min.as_mut_ptr() as *mut v128, acc_m);
    }
    (res, min)
}

/// An `lq4h` row (f16 `(s, m)` per group) times a [`Q8Row`] in one pass, as
/// [`super::lq4_q8`]: four groups' halves converted together ([`f16x4`], the scalar form's
/// bits), each group's `s·dx` broadcast from its lane beside its integer products; the last
/// `G % 4` groups with the scalar conversion.
pub fn lq4h_q8(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    half_row::<false>(codes, subs, x)
}

/// A `q5` row (20·G code bytes, an f16 `(s, m)` per group; GGUF's Q5_0 / Q5_1 blocks) times a
/// [`Q8Row`] in one pass, as [`super::q5_q8`]: [`lq4h_q8`] with each group's fifth bits or-ed
/// into its nibbles.
pub fn q5_q8(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    half_row::<true>(codes, subs, x)
}

/// [`lq4h_q8`] (`Q5` false: 16·G code bytes) and [`q5_q8`] (`Q5` true: 20·G, the fifth bits
/// of [`q5_bit_words`] or-ed into the nibbles).
#[inline(always)]
fn half_row<const Q5: bool>(codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    assert!(
        codes.len() == if Q5 { 20 } else { 16 } * groups
            && subs.len() == 4 * groups
            && x.qs.len() == 32 * groups
            && x.sum.len() == groups,
        "{}: row slices disagree on the group count {groups}",
        if Q5 { "q5_q8" } else { "lq4h_q8" }
    );
    let mask = u8x16_splat(0x0F);
    // SAFETY: g < G: codes[16g..16g+16] and, for `q5`, the two bit words of `q5_bit_words`,
    // inside the 20·G bytes (the activations as `group_acts` says).
    half_scaled(subs, x, |g, xe, xo| unsafe {
        let cp = codes.as_ptr();
        let v = v128_load(cp.add(16 * g) as *const v128);
        let (mut lo, mut hi) = (v128_and(v, mask), u8x16_shr(v, 4));
        if Q5 {
            let (eb, ob) = q5_bit_words(groups, g);
            lo = v128_or(lo, fifth_bits(cp.add(eb)));
            hi = v128_or(hi, fifth_bits(cp.add(ob)));
        }
        group_dot(lo, hi, xe, xo)
    })
}

/// The byte offsets, in a `q5` row's code bytes, of group `g`'s two 16-bit fifth-bit words:
/// its even weights' bits, then its odd weights' (the layout in [`crate::quant`]: per pair of
/// groups a word of even bits `[A | B]` and one of odd bits; a last unpaired group one word
/// `[even | odd]`).
#[inline]
fn q5_bit_words(groups: usize, g: usize) -> (usize, usize) {
    let plane = 16 * groups;
    if g + 1 == groups && groups % 2 == 1 {
        (plane + 4 * g, plane + 4 * g + 2)
    } else {
        let even = plane + 8 * (g / 2) + 2 * (g % 2);
        (even, even + 4)
    }
}

/// The 16-bit word at `at` as 16 bytes: byte `b` is 0x10 where bit `b` is set, 0 where not
/// (the fifth bit of the code whose nibble is in byte `b`).
///
/// # Safety
/// `at` readable for 2 bytes.
#[inline]
unsafe fn fifth_bits(at: *const u8) -> v128 {
    // SAFETY: the caller's length; no alignment is required.
    let bits = unsafe { std::ptr::read_unaligned(at as *const u16) };
    // Byte b takes byte b / 8 of the word, then tests its bit b % 8.
    let spread = u8x16_swizzle(
        u16x8_splat(bits),
        u8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
    );
    let bit = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    v128_and(u8x16_eq(v128_and(spread, bit), bit), u8x16_splat(0x10))
}

/// Group g's even and odd activations (16 bytes each) in the paired order of
/// `crate::cpu::q8`: offsets into `qs`.
#[inline]
fn group_acts(groups: usize, g: usize) -> (usize, usize) {
    if g + 1 == groups && groups % 2 == 1 {
        (32 * g, 32 * g + 16)
    } else {
        let b = 64 * (g / 2) + 16 * (g % 2);
        (b, b + 32)
    }
}

/// `(Σ_g s_g·dx_g·dot(g), Σ_g m_g·Σx_g)` for a row with an f16 `(s, m)` per group (`subs`,
/// 4·G bytes) and `dot(g, xe, xo)` group g's integer products (four i32 lanes) against its even
/// and odd activations: four groups' halves converted together ([`f16x4`], the scalar form's
/// bits), each group's `s·dx` broadcast from its lane; the last `G % 4` groups with the scalar
/// conversion. The caller checked the lengths (`subs` 4·G, `x.qs` 32·G, `x.d` and `x.sum` G).
#[inline(always)]
fn half_scaled(subs: &[u8], x: Q8Row<'_>, dot: impl Fn(usize, v128, v128) -> v128) -> (f32, f32) {
    let groups = x.d.len();
    let xp = x.qs.as_ptr();
    // SAFETY: g < G: the activations of a paired group lie in qs[64(g/2)..64(g/2)+64], those
    // of an unpaired last group in qs[32g..32g+32].
    let group = |g: usize| unsafe {
        let (e, o) = group_acts(groups, g);
        let xe = v128_load(xp.add(e) as *const v128);
        let xo = v128_load(xp.add(o) as *const v128);
        f32x4_convert_i32x4(dot(g, xe, xo))
    };
    let (mut acc, mut acc_m) = (f32x4_splat(0.0), f32x4_splat(0.0));
    let mut g = 0;
    while g + 4 <= groups {
        // SAFETY: subs[4g..4g+16] and d/sum[g..g+4], g + 4 <= G.
        let sc = unsafe {
            let v = v128_load(subs.as_ptr().add(4 * g) as *const v128);
            let s = f16x4(v128_and(v, u32x4_splat(0xFFFF)));
            let m = f16x4(u32x4_shr(v, 16));
            let dx = v128_load(x.d.as_ptr().add(g) as *const v128);
            let sx = v128_load(x.sum.as_ptr().add(g) as *const v128);
            acc_m = f32x4_add(acc_m, f32x4_mul(m, sx));
            f32x4_mul(s, dx)
        };
        acc = f32x4_add(
            acc,
            f32x4_mul(group(g), i32x4_shuffle::<0, 0, 0, 0>(sc, sc)),
        );
        acc = f32x4_add(
            acc,
            f32x4_mul(group(g + 1), i32x4_shuffle::<1, 1, 1, 1>(sc, sc)),
        );
        acc = f32x4_add(
            acc,
            f32x4_mul(group(g + 2), i32x4_shuffle::<2, 2, 2, 2>(sc, sc)),
        );
        acc = f32x4_add(
            acc,
            f32x4_mul(group(g + 3), i32x4_shuffle::<3, 3, 3, 3>(sc, sc)),
        );
        g += 4;
    }
    let mut acc_m = hsum(acc_m);
    for g in g..groups {
        let half = |i: usize| f16_to_f32(u16::from_le_bytes([subs[i], subs[i + 1]]));
        acc_m += half(4 * g + 2) * x.sum[g];
        acc = f32x4_add(acc, f32x4_mul(group(g), f32x4_splat(half(4 * g) * x.d[g])));
    }
    (hsum(acc), acc_m)
}

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
        let s = group_dot(v128_and(v, mask), u8x16_shr(v, 4), xe, xo);
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(s), f32x4_splat(scale)));
    }
    hsum(acc)
}

/// One group's integer products in four i32 lanes: the even weights' codes `lo` against the
/// activations `xe`, the odd weights' `hi` against `xo` (codes 0..15, or 0..31 for `q5`).
/// Widened to i16 and multiplied pairwise by `i32x4.dot_i16x8_s`.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline]
fn group_dot(lo: v128, hi: v128, xe: v128, xo: v128) -> v128 {
    i32x4_add(
        i32x4_add(
            i32x4_dot_i16x8(u16x8_extend_low_u8x16(lo), i16x8_extend_low_i8x16(xe)),
            i32x4_dot_i16x8(u16x8_extend_high_u8x16(lo), i16x8_extend_high_i8x16(xe)),
        ),
        i32x4_add(
            i32x4_dot_i16x8(u16x8_extend_low_u8x16(hi), i16x8_extend_low_i8x16(xo)),
            i32x4_dot_i16x8(u16x8_extend_high_u8x16(hi), i16x8_extend_high_i8x16(xo)),
        ),
    )
}

/// [`group_dot`] with relaxed SIMD (the page's threaded build): each half is one
/// `i32x4.relaxed_dot_i8x16_i7x16_add_s`, activations as the signed operand and the codes
/// (0..15, or `q5`'s 0..31: the same read signed or unsigned, so the instruction's result is
/// deterministic) as the 7-bit one; pair sums are at most 2·127·31, so no 16-bit saturation. V8 lowers it
/// to `pmaddubsw` + `pmaddwd` on x86 and `sdot` on ARM where present.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
fn group_dot(lo: v128, hi: v128, xe: v128, xo: v128) -> v128 {
    let s = i32x4_relaxed_dot_i8x16_i7x16_add(xe, lo, i32x4_splat(0));
    i32x4_relaxed_dot_i8x16_i7x16_add(xo, hi, s)
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
    hsum(acc)
}

/// The per-group pre-pass of `lq4h` and `q8_0` rows (see `half_scales` in the dispatch module), four groups
/// a step, with the scalar form's half conversion lane-wise (the same bits).
pub fn half_scales(subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    let groups = x.d.len();
    let mut acc = f32x4_splat(0.0);
    let mut g = 0;
    while g + 4 <= groups {
        // SAFETY: reads subs[4g..4g+16], d/sum[g..g+4] and writes scratch[g..g+4], g + 4 <= G
        // (the caller checked subs: 4·G bytes, scratch: ≥ G).
        unsafe {
            let v = v128_load(subs.as_ptr().add(4 * g) as *const v128);
            let s = f16x4(v128_and(v, u32x4_splat(0xFFFF)));
            let m = f16x4(u32x4_shr(v, 16));
            let dx = v128_load(x.d.as_ptr().add(g) as *const v128);
            let sx = v128_load(x.sum.as_ptr().add(g) as *const v128);
            v128_store(scratch.as_mut_ptr().add(g) as *mut v128, f32x4_mul(s, dx));
            acc = f32x4_add(acc, f32x4_mul(m, sx));
        }
        g += 4;
    }
    let acc_m = f32x4_extract_lane::<0>(acc)
        + f32x4_extract_lane::<1>(acc)
        + f32x4_extract_lane::<2>(acc)
        + f32x4_extract_lane::<3>(acc);
    acc_m + half_scales_tail(subs, x, scratch, g)
}

/// The sum of the four lanes.
#[inline]
fn hsum(acc: v128) -> f32 {
    f32x4_extract_lane::<0>(acc)
        + f32x4_extract_lane::<1>(acc)
        + f32x4_extract_lane::<2>(acc)
        + f32x4_extract_lane::<3>(acc)
}

/// Four halves (the low 16 bits of each lane) as floats, as [`super::f16_to_f32`].
#[inline]
fn f16x4(h: v128) -> v128 {
    let em = v128_and(h, u32x4_splat(0x7FFF));
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let scaled = f32x4_mul(i32x4_shl(em, 13), u32x4_splat(0x7780_0000));
    let special = v128_or(
        u32x4_splat(0x7F80_0000),
        i32x4_shl(v128_and(em, u32x4_splat(0x03FF)), 13),
    );
    let is_special = i32x4_gt(em, i32x4_splat(0x7BFF));
    v128_or(v128_bitselect(special, scaled, is_special), sign)
}
