//! Integer dot products of 4-bit weight rows with 8-bit activation rows, one implementation
//! per instruction set behind one dispatch (the layout of candle-core's `quantized/` and
//! llama.cpp's `ggml-cpu`): AVX2 + FMA + F16C (detected at run time), NEON (aarch64 baseline),
//! `simd128` (wasm32 built with `+simd128`) and a portable scalar form, which is also the
//! reference the others are tested against (`cargo test -p lorekeeper-engine simd`).
//!
//! For an LQ4 row (`w = d·sc·q − dmin·mn` per group of 32, see [`crate::quant`]) and a
//! [`Q8Row`] (`x ≈ dx·qx` per block of 32, block sums `Σx = dx·Σqx`), every function returns
//! `(Σ_g sc_g·dx_g·Σ_i q_i·qx_i, Σ_g mn_g·Σx_g)`; the row's result is `d·first − dmin·second`.
//! The inner products are exact in integers (at most 32·15·127 per group), so the ISAs differ
//! from the scalar form only in the order of f32 additions.
//!
//! An `lq4h` row (per group an f16 `(s, m)`, `w = s·q − m`) takes the same path with `sc = s`,
//! `mn = m` and `d = dmin = 1`: a pre-pass (`half_scales`) computes `s·dx` per group,
//! then each ISA's `codes_dot` (the second half of its LQ4 form) does the integer work; on
//! AVX2 one pass does both, the f16 scales converted with F16C beside the products.

use super::q8::{Lq4Row, Q8Row, Q8Rows};
use crate::quant::{BlockLayout, GROUP};

pub mod scalar;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "aarch64")]
pub mod neon;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod simd128;

#[cfg(target_endian = "big")]
compile_error!("the CPU kernels read LQ4 words as little-endian bytes");

/// An instruction set the dot products are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust (the reference).
    Scalar,
    /// x86-64 AVX2 with FMA and F16C.
    Avx2,
    /// aarch64 NEON.
    Neon,
    /// WebAssembly 128-bit SIMD.
    Simd128,
}

impl Isa {
    /// The fastest implementation this machine (or this wasm build) runs, detected once.
    pub fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| *Isa::available().last().unwrap_or(&Isa::Scalar))
    }

    /// True where AVX2 is the best: the CPU then converts half floats in hardware (F16C,
    /// which [`Isa::Avx2`] requires, as every AVX2 CPU made has it) and its KV cache is f16.
    pub fn f16c() -> bool {
        Isa::best() == Isa::Avx2
    }

    /// Every implementation that can run here, slowest first (tests run them all).
    pub fn available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut v = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        if avx2_present() {
            v.push(Isa::Avx2);
        }
        #[cfg(target_arch = "aarch64")]
        v.push(Isa::Neon);
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        v.push(Isa::Simd128);
        v
    }

    /// Short name for reports: `avx2`, `neon`, `simd128` (`relaxed-simd` where the build
    /// enables it), `scalar`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Neon => "neon",
            // The page's threaded build adds relaxed SIMD (its 4-bit dot products).
            Isa::Simd128 if cfg!(target_feature = "relaxed-simd") => "relaxed-simd",
            Isa::Simd128 => "simd128",
        }
    }
}

/// One matrix's rows as stored ([`crate::quant::Q4Matrix`]'s bytes): every row's codes (16·G
/// bytes for 4-bit layouts, 32·G for `q8_0`) from `codes[0]`, its per-group scales
/// (`layout.group_bytes()`·G) from `subs[0]`.
#[derive(Clone, Copy, Debug)]
pub struct RowBlock<'a> {
    /// The codes of row 0, then row 1, …
    pub codes: &'a [u8],
    /// The scales of row 0, then row 1, … (may run on past the last row).
    pub subs: &'a [u8],
    /// How codes and scales are stored.
    pub layout: BlockLayout,
}

impl<'a> RowBlock<'a> {
    /// `w`'s codes and scales as the row kernels read them.
    pub fn of(w: &'a crate::quant::Q4Matrix) -> RowBlock<'a> {
        let bytes: &[u8] = bytemuck::cast_slice(&w.data);
        let sm = 4 * w.sm_offset();
        RowBlock {
            codes: &bytes[..sm],
            subs: &bytes[sm..],
            layout: w.layout,
        }
    }
}

/// Rows `rows` of `w` times every row of `x`: `out(r, mi, first, second)` receives
/// [`lq4_q8`]'s pair for 4-bit rows and `(`[`q8_q8`]`, 0)` for `q8_0` rows. The lengths are
/// checked and the instruction set chosen once per call, and the SIMD forms run the loop
/// inside their own `#[target_feature]` code (the per-row checks and dispatch cost as
/// much as a 576-wide row's arithmetic).
pub fn rows_dot(
    isa: Isa,
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    x: &Q8Rows,
    scratch: &mut [f32],
    mut out: impl FnMut(usize, usize, f32, f32),
) {
    let groups = x.k / GROUP;
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.group_bytes() * groups,
    );
    // An internal invariant (callers pass one validated matrix and one `Q8Rows`), checked
    // because the SIMD forms read through raw pointers.
    assert!(
        x.k.is_multiple_of(GROUP)
            && rows.end * cb <= w.codes.len()
            && rows.end * sb <= w.subs.len()
            && scratch.len() >= groups,
        "rows_dot: rows {rows:?} of {} × {} do not fit the matrix's bytes",
        x.k,
        w.layout.name()
    );
    if rows.is_empty() || x.m == 0 {
        return;
    }
    let xs: Vec<Q8Row<'_>> = (0..x.m).map(|mi| x.row(mi)).collect();
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 && avx2_present() {
        // SAFETY: the features were detected; each_row slices every row to its lengths.
        return unsafe { avx2::rows(w, rows, &xs, scratch, &mut out) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if isa == Isa::Simd128 {
        return simd128::rows(w, rows, &xs, scratch, &mut out);
    }
    each_row(w, rows, &xs, &mut out, |c, s, xr| match w.layout {
        BlockLayout::Q8 => (q8_q8(isa, bytemuck::cast_slice(c), s, xr, scratch), 0.0),
        layout => lq4_q8(
            isa,
            Lq4Row {
                codes: c,
                subs: s,
                layout,
            },
            xr,
            scratch,
        ),
    });
}

/// The loop of [`rows_dot`]: each row's codes and scales sliced to their lengths, `dot` with
/// every activation row. Inlined into each instruction set's `#[target_feature]` function,
/// so `dot` is compiled for that set.
#[inline(always)]
fn each_row(
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    xs: &[Q8Row<'_>],
    out: &mut impl FnMut(usize, usize, f32, f32),
    mut dot: impl FnMut(&[u8], &[u8], Q8Row<'_>) -> (f32, f32),
) {
    let groups = xs.first().map_or(0, |x| x.d.len());
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.group_bytes() * groups,
    );
    for r in rows {
        let (c, s) = (
            &w.codes[r * cb..(r + 1) * cb],
            &w.subs[r * sb..(r + 1) * sb],
        );
        for (mi, &xr) in xs.iter().enumerate() {
            let (a, b) = dot(c, s, xr);
            out(r, mi, a, b);
        }
    }
}

/// `(Σ_g sc_g·dx_g·Σ_i q_i·qx_i, Σ_g mn_g·Σx_g)` for one row (see the module documentation).
/// `scratch` must hold at least `K / 32` floats. An `isa` not in [`Isa::available`] runs the
/// scalar form.
#[inline]
pub fn lq4_q8(isa: Isa, w: Lq4Row<'_>, x: Q8Row<'_>, scratch: &mut [f32]) -> (f32, f32) {
    let groups = x.d.len();
    // An internal invariant (callers slice one validated matrix and one `Q8Rows`), checked
    // because the SIMD forms read through raw pointers.
    assert!(
        w.codes.len() == 16 * groups
            && w.subs.len() == w.layout.group_bytes() * groups
            && x.qs.len() == 32 * groups
            && x.sum.len() == groups
            && scratch.len() >= groups,
        "lq4_q8: row slices disagree on the group count {groups}"
    );
    if w.layout != BlockLayout::Lq4 {
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx2 && avx2_present() {
            // SAFETY: AVX2, FMA and F16C were detected; the lengths are checked above.
            return unsafe { avx2::lq4h_q8(w.codes, w.subs, x) };
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if isa == Isa::Simd128 {
            return simd128::lq4h_q8(w.codes, w.subs, x);
        }
        let acc_m = half_scales(isa, w.subs, x, scratch);
        let acc_q = match isa {
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => neon::codes_dot(w.codes, x, scratch),
            _ => scalar::codes_dot(w.codes, x, scratch),
        };
        return (acc_q, acc_m);
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if avx2_present() => {
            // SAFETY: AVX2, FMA and F16C were detected at run time; the lengths are checked
            // above.
            unsafe { avx2::lq4_q8(w, x, scratch) }
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => neon::lq4_q8(w, x, scratch),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => simd128::lq4_q8(w, x, scratch),
        _ => scalar::lq4_q8(w, x),
    }
}

/// `Σ_g (s_g·dx_g·Σ_i q_i·qx_i − m_g·Σx_g)` for one `q8_0` weight row (signed codes in natural
/// order, f16 `(s, m)` per group, `m` = 0 for GGUF's Q8_0) and an activation row quantized in
/// natural order ([`super::q8::Q8Rows::quantize_natural`]). `scratch` must hold `K / 32`
/// floats. The integer products are exact (at most 32·128·127 per group).
#[inline]
pub fn q8_q8(isa: Isa, codes: &[i8], subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    let groups = x.d.len();
    assert!(
        codes.len() == 32 * groups
            && subs.len() == 4 * groups
            && x.qs.len() == 32 * groups
            && x.sum.len() == groups
            && scratch.len() >= groups,
        "q8_q8: row slices disagree on the group count {groups}"
    );
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 && avx2_present() {
        // SAFETY: AVX2, FMA and F16C were detected at run time; the lengths are checked above.
        return unsafe { avx2::q8_row(codes, subs, x) };
    }
    let acc_m = half_scales(isa, subs, x, scratch);
    let acc_q = match isa {
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => neon::q8_dot(codes, x, scratch),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => simd128::q8_dot(codes, x, scratch),
        _ => scalar::q8_dot(codes, x, scratch),
    };
    acc_q - acc_m
}

/// AVX2 with FMA and F16C, detected at run time (each macro call reads a cached flag).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_present() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// The per-group pre-pass of `lq4h` and `q8_0` rows: `scratch[g] = s_g·dx_g` and the
/// returned `Σ_g m_g·Σx_g`, from the f16 `(s, m)` pairs in `subs` (4 bytes per group).
#[inline]
fn half_scales(isa: Isa, subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if isa == Isa::Simd128 {
        return simd128::half_scales(subs, x, scratch);
    }
    let _ = isa;
    half_scales_scalar(subs, x, scratch)
}

/// The portable form of [`half_scales`] (the reference of the SIMD ones).
fn half_scales_scalar(subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    half_scales_tail(subs, x, scratch, 0)
}

/// [`half_scales_scalar`] from group `from` on (also the SIMD forms' last groups).
fn half_scales_tail(subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32], from: usize) -> f32 {
    let mut acc_m = 0f32;
    for g in from..x.d.len() {
        let w = u32::from_le_bytes([
            subs[4 * g],
            subs[4 * g + 1],
            subs[4 * g + 2],
            subs[4 * g + 3],
        ]);
        scratch[g] = f16_to_f32(w as u16) * x.d[g];
        acc_m += f16_to_f32((w >> 16) as u16) * x.sum[g];
    }
    acc_m
}

/// IEEE half to single precision, exactly, in a few integer and one float operation (the
/// pre-pass runs once per group of every row, so a library call per value would cost as much
/// as the group's dot product): the exponent and mantissa moved into place and rescaled by
/// 2¹¹² (normal and subnormal halves alike); infinities and NaNs mapped apart.
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let em = (h & 0x7FFF) as u32;
    let v = if em >= 0x7C00 {
        // Inf / NaN: all-ones exponent, the mantissa kept.
        0x7F80_0000 | ((em & 0x03FF) << 13)
    } else {
        (f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)).to_bits()
    };
    f32::from_bits(v | sign)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cpu::q8::Q8Rows;
    use crate::quant::Q4Matrix;
    use crate::rng::Pcg32;

    /// GGUF Q4_1 blocks as a file holds them (an f16 scale and minimum, ~N(0, 0.03), then 16
    /// random code bytes per group), imported as `lq4h` rows.
    pub(crate) fn random_q4_1(rng: &mut Pcg32, rows: usize, k: usize) -> Q4Matrix {
        let raw: Vec<u8> = (0..rows * k / 32)
            .flat_map(|_| {
                let mut b: Vec<u8> = rng
                    .normal_vec(2, 0.03)
                    .iter()
                    .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
                    .collect();
                b.extend((0..16).map(|_| rng.next_u32() as u8));
                b
            })
            .collect();
        Q4Matrix::from_ggml_q4_1("w", rows, k, &raw).expect("q4_1")
    }

    /// GGUF Q8_0 blocks (a positive f16 scale, 32 random signed codes over the whole range per
    /// group), imported as `q8_0` rows.
    pub(crate) fn random_q8_0(rng: &mut Pcg32, rows: usize, k: usize) -> Q4Matrix {
        let raw: Vec<u8> = (0..rows * k / 32)
            .flat_map(|_| {
                let d = half::f16::from_f32(0.001 + 0.002 * rng.normal_vec(1, 1.0)[0].abs());
                let mut b = d.to_bits().to_le_bytes().to_vec();
                b.extend((0..32).map(|_| rng.next_u32() as u8));
                b
            })
            .collect();
        Q4Matrix::from_ggml_q8_0("w", rows, k, &raw).expect("q8_0")
    }

    /// Every available ISA against the scalar form and against an f64 evaluation of the same
    /// integer codes, on group counts that are odd, even, below and above the two-group
    /// vector step.
    #[test]
    fn every_isa_matches_the_scalar_form() {
        let mut rng = Pcg32::new(7);
        for groups in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49] {
            let (rows, k) = (5, 32 * groups);
            let wf = rng.normal_vec(rows * k, 0.05);
            let w = Q4Matrix::quantize("w", rows, k, &wf).expect("quantize");
            let xf = rng.normal_vec(k, 1.0);
            let mut xq = Q8Rows::default();
            xq.quantize(&xf, 1, k);
            let bytes: &[u8] = bytemuck::cast_slice(&w.data);
            let sm = 4 * w.sm_offset();
            let mut scratch = vec![0f32; groups];
            for r in 0..rows {
                let row = Lq4Row {
                    codes: &bytes[r * k / 2..(r + 1) * k / 2],
                    subs: &bytes[sm + r * 2 * groups..sm + (r + 1) * 2 * groups],
                    layout: BlockLayout::Lq4,
                };
                // f64 oracle over the same integers; f32 accumulation over G terms errs by at
                // most ~G·2⁻²⁴ of the terms' absolute sum, bounded here by 1e-5 of it.
                let (mut want_q, mut want_m, mut abs_q, mut abs_m) = (0f64, 0f64, 0f64, 0f64);
                for g in 0..groups {
                    let (sc, mn) = w.sub(r, g);
                    let mut isum = 0i64;
                    for i in 0..32 {
                        isum += w.code(r, 32 * g + i) as i64 * xq.code(0, 32 * g + i) as i64;
                    }
                    let (tq, tm) = (
                        sc as f64 * xq.d[g] as f64 * isum as f64,
                        mn as f64 * xq.sum[g] as f64,
                    );
                    (want_q, want_m, abs_q, abs_m) =
                        (want_q + tq, want_m + tm, abs_q + tq.abs(), abs_m + tm.abs());
                }
                for isa in Isa::available() {
                    let (q, m) = lq4_q8(isa, row, xq.row(0), &mut scratch);
                    assert!(
                        (q as f64 - want_q).abs() <= 1e-5 * abs_q
                            && (m as f64 - want_m).abs() <= 1e-5 * abs_m,
                        "{} groups {groups} row {r}: ({q}, {m}) vs f64 ({want_q}, {want_m})",
                        isa.name()
                    );
                }
            }
        }
    }

    /// `lq4h` rows (f16 `(s, m)` per group) on every ISA against an f64 evaluation of the
    /// same integers and scales, on the same odd and even group counts.
    #[test]
    fn every_isa_matches_f64_on_half_scale_rows() {
        let mut rng = Pcg32::new(9);
        for groups in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49] {
            let (rows, k) = (3, 32 * groups);
            let w = random_q4_1(&mut rng, rows, k);
            let xf = rng.normal_vec(k, 1.0);
            let mut xq = Q8Rows::default();
            xq.quantize(&xf, 1, k);
            let bytes: &[u8] = bytemuck::cast_slice(&w.data);
            let sm = 4 * w.sm_offset();
            let mut scratch = vec![0f32; groups];
            for r in 0..rows {
                let row = Lq4Row {
                    codes: &bytes[r * k / 2..(r + 1) * k / 2],
                    subs: &bytes[sm + r * 4 * groups..sm + (r + 1) * 4 * groups],
                    layout: BlockLayout::Lq4h,
                };
                let (mut want, mut abs) = (0f64, 0f64);
                for g in 0..groups {
                    let (s, m) = w.group_scales(r, g);
                    let mut isum = 0i64;
                    for i in 0..32 {
                        isum += w.code(r, 32 * g + i) as i64 * xq.code(0, 32 * g + i) as i64;
                    }
                    let t = s as f64 * xq.d[g] as f64 * isum as f64 - m as f64 * xq.sum[g] as f64;
                    want += t;
                    abs += t.abs();
                }
                for isa in Isa::available() {
                    let (q, m) = lq4_q8(isa, row, xq.row(0), &mut scratch);
                    let got = q as f64 - m as f64;
                    assert!(
                        (got - want).abs() <= 1e-5 * abs,
                        "{} groups {groups} row {r}: {got} vs f64 {want}",
                        isa.name()
                    );
                }
            }
        }
    }

    /// [`rows_dot`] on every ISA and layout (LQ4, `lq4h`, `q8_0`) against the scalar row forms,
    /// two activation rows, a block of rows that starts and ends inside the matrix, on group
    /// counts that leave every remainder of the four-group step.
    #[test]
    fn rows_dot_matches_the_row_forms_on_every_isa() {
        let mut rng = Pcg32::new(21);
        for groups in [1usize, 6, 9, 18] {
            let (rows, k, m) = (7, 32 * groups, 2);
            let wf = rng.normal_vec(rows * k, 0.05);
            let mats = [
                Q4Matrix::quantize("w", rows, k, &wf).expect("quantize"),
                random_q4_1(&mut rng, rows, k),
                random_q8_0(&mut rng, rows, k),
            ];
            let xf = rng.normal_vec(m * k, 1.0);
            for w in &mats {
                let mut xq = Q8Rows::default();
                if w.layout == BlockLayout::Q8 {
                    xq.quantize_natural(&xf, m, k);
                } else {
                    xq.quantize(&xf, m, k);
                }
                let block = RowBlock::of(w);
                let (cb, sb) = (
                    w.layout.code_bits() * 4 * groups,
                    w.layout.group_bytes() * groups,
                );
                let mut scratch = vec![0f32; groups];
                let want: Vec<(f32, f32)> = (0..rows * m)
                    .map(|i| {
                        let (r, mi) = (i / m, i % m);
                        let (c, s) = (
                            &block.codes[r * cb..(r + 1) * cb],
                            &block.subs[r * sb..(r + 1) * sb],
                        );
                        match w.layout {
                            BlockLayout::Q8 => (
                                q8_q8(
                                    Isa::Scalar,
                                    bytemuck::cast_slice(c),
                                    s,
                                    xq.row(mi),
                                    &mut scratch,
                                ),
                                0.0,
                            ),
                            layout => lq4_q8(
                                Isa::Scalar,
                                Lq4Row {
                                    codes: c,
                                    subs: s,
                                    layout,
                                },
                                xq.row(mi),
                                &mut scratch,
                            ),
                        }
                    })
                    .collect();
                for isa in Isa::available() {
                    let mut got = vec![None; rows * m];
                    rows_dot(isa, block, 2..6, &xq, &mut scratch, |r, mi, a, b| {
                        assert!(got[r * m + mi].replace((a, b)).is_none(), "row {r} twice");
                    });
                    for (i, (g, want)) in got.iter().zip(&want).enumerate() {
                        let r = i / m;
                        match g {
                            None => assert!(!(2..6).contains(&r), "{} row {r} missing", isa.name()),
                            Some((a, b)) => {
                                assert!(
                                    (2..6).contains(&r),
                                    "{} row {r} outside the block",
                                    isa.name()
                                );
                                let tol = 1e-5 * (want.0.abs() + want.1.abs() + 1e-3);
                                assert!(
                                    (a - want.0).abs() <= tol && (b - want.1).abs() <= tol,
                                    "{} {} groups {groups} row {r}: ({a}, {b}) vs ({}, {})",
                                    isa.name(),
                                    w.layout.name(),
                                    want.0,
                                    want.1
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The fast half conversion equals the `half` crate's for every one of the 65,536 values
    /// (NaNs: NaN).
    #[test]
    fn f16_conversion_is_exact() {
        for h in 0..=u16::MAX {
            let (got, want) = (f16_to_f32(h), half::f16::from_bits(h).to_f32());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#06x}: {got} vs {want}"
            );
        }
    }

    /// Scales of every kind of half (zeros, subnormals, normals of both signs; finite), as a
    /// file may hold them: each ISA's `lq4h` and `q8_0` rows (AVX2's one pass converts them
    /// with F16C, the others with [`f16_to_f32`]) against f64 over the same integers, on
    /// group counts below, at and above the vector steps.
    #[test]
    fn every_isa_reads_every_kind_of_half_scale() {
        let mut rng = Pcg32::new(5);
        for groups in [1usize, 2, 7, 8, 9, 16, 17, 18, 48, 49] {
            let k = 32 * groups;
            let subs: Vec<u8> = (0..2 * groups)
                .flat_map(|_| {
                    // Exponent below all-ones keeps every half finite.
                    let h = (rng.next_u32() as u16) & 0xFBFF;
                    h.to_le_bytes()
                })
                .collect();
            let half = |g: usize, i: usize| {
                f16_to_f32(u16::from_le_bytes([
                    subs[4 * g + 2 * i],
                    subs[4 * g + 2 * i + 1],
                ])) as f64
            };
            let codes4: Vec<u8> = (0..k / 2).map(|_| rng.next_u32() as u8).collect();
            let codes8: Vec<i8> = (0..k).map(|_| rng.next_u32() as i8).collect();
            let xf = rng.normal_vec(k, 1.0);
            let (mut xq, mut xn) = (Q8Rows::default(), Q8Rows::default());
            xq.quantize(&xf, 1, k);
            xn.quantize_natural(&xf, 1, k);
            let mut scratch = vec![0f32; groups];
            let (mut want4, mut abs4, mut want8, mut abs8) = (0f64, 0f64, 0f64, 0f64);
            for g in 0..groups {
                let (lo, hi) = scalar::q8_halves(&xq.qs, g, groups);
                let i4: i64 = (0..16)
                    .map(|j| {
                        let c = codes4[16 * g + j];
                        (c & 0xF) as i64 * lo[j] as i64 + (c >> 4) as i64 * hi[j] as i64
                    })
                    .sum();
                let i8: i64 = (0..32)
                    .map(|j| codes8[32 * g + j] as i64 * xn.qs[32 * g + j] as i64)
                    .sum();
                let (s, m) = (half(g, 0), half(g, 1));
                for (want, abs, isum, x) in [
                    (&mut want4, &mut abs4, i4, &xq),
                    (&mut want8, &mut abs8, i8, &xn),
                ] {
                    let t = (s * x.d[g] as f64 * isum as f64, m * x.sum[g] as f64);
                    *want += t.0 - t.1;
                    *abs += t.0.abs() + t.1.abs();
                }
            }
            let row = Lq4Row {
                codes: &codes4,
                subs: &subs,
                layout: BlockLayout::Lq4h,
            };
            for isa in Isa::available() {
                let (q, m) = lq4_q8(isa, row, xq.row(0), &mut scratch);
                let got4 = q as f64 - m as f64;
                let got8 = q8_q8(isa, &codes8, &subs, xn.row(0), &mut scratch) as f64;
                assert!(
                    (got4 - want4).abs() <= 1e-5 * abs4.max(1e-30)
                        && (got8 - want8).abs() <= 1e-5 * abs8.max(1e-30),
                    "{} groups {groups}: lq4h {got4} vs {want4}, q8_0 {got8} vs {want8}",
                    isa.name()
                );
            }
        }
    }

    /// `q8_0` rows on every ISA against an f64 evaluation of the same integers and scales
    /// (random codes over the whole signed range), on odd and even group counts.
    #[test]
    fn every_isa_matches_f64_on_q8_rows() {
        let mut rng = Pcg32::new(13);
        for groups in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49] {
            let (rows, k) = (3, 32 * groups);
            let w = random_q8_0(&mut rng, rows, k);
            let xf = rng.normal_vec(k, 1.0);
            let mut xq = Q8Rows::default();
            xq.quantize_natural(&xf, 1, k);
            let bytes: &[u8] = bytemuck::cast_slice(&w.data);
            let codes: &[i8] = bytemuck::cast_slice(&bytes[..rows * k]);
            let sm = 4 * w.sm_offset();
            let mut scratch = vec![0f32; groups];
            for r in 0..rows {
                let (mut want, mut abs) = (0f64, 0f64);
                for g in 0..groups {
                    let (s, _) = w.group_scales(r, g);
                    let isum: i64 = (0..32)
                        .map(|i| w.code(r, 32 * g + i) as i64 * xq.code(0, 32 * g + i) as i64)
                        .sum();
                    let t = s as f64 * xq.d[g] as f64 * isum as f64;
                    want += t;
                    abs += t.abs();
                }
                let subs = &bytes[sm + 4 * groups * r..sm + 4 * groups * (r + 1)];
                for isa in Isa::available() {
                    let got = q8_q8(
                        isa,
                        &codes[r * k..(r + 1) * k],
                        subs,
                        xq.row(0),
                        &mut scratch,
                    );
                    assert!(
                        (got as f64 - want).abs() <= 1e-5 * abs,
                        "{} groups {groups} row {r}: {got} vs f64 {want}",
                        isa.name()
                    );
                }
            }
        }
    }
}
