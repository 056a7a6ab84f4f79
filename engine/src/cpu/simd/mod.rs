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
pub mod tiles;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_il;
#[cfg(target_arch = "x86_64")]
pub mod avx2_q4k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_q5;
#[cfg(target_arch = "x86_64")]
pub mod avx2_q6;
#[cfg(target_arch = "x86_64")]
pub mod avx2_quant;
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

    /// True where [`rows_dot`] multiplies 4-bit rows with several activation rows in tiles
    /// (each weight row unpacked once for a few activation rows), fast enough to replace the
    /// SGEMM over dequantized rows in prefill.
    pub fn tiles_4bit(self) -> bool {
        matches!(self, Isa::Avx2 | Isa::Simd128)
    }

    /// True where this instruction set has kernels of its own for `layout`: every one on AVX2
    /// and in the scalar reference, `q5` too in `simd128`; the CPU backend gives the others a
    /// `q6_k` or `q5` matrix as `q8_0` and an `lq4k` one as `lq4h`
    /// ([`crate::quant::Q4Matrix::to_portable`]), whose kernels they have.
    pub fn runs(self, layout: BlockLayout) -> bool {
        match layout {
            BlockLayout::Q6 | BlockLayout::Lq4k => matches!(self, Isa::Scalar | Isa::Avx2),
            BlockLayout::Q5 => matches!(self, Isa::Scalar | Isa::Avx2 | Isa::Simd128),
            BlockLayout::Lq4 | BlockLayout::Lq4h | BlockLayout::Q8 => true,
        }
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

/// The fastest row quantizer for `isa` ([`super::q8::quantize_row`]'s contract and bits).
pub fn row_quantizer(isa: Isa) -> super::q8::RowQuantizer {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 && avx2_present() {
        return avx2_quant::quantize_row;
    }
    let _ = isa;
    super::q8::quantize_row
}

/// One matrix's rows as stored ([`crate::quant::Q4Matrix`]'s bytes): every row's codes (16·G
/// bytes for 4-bit layouts, 24·G for `q6_k`, 32·G for `q8_0`) from `codes[0]`, its per-group scales
/// (`layout.scale_bytes(G)`) from `subs[0]`.
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

/// Rows `rows` of `w` times every row of `x`: `out(r0, mi, first, second)` receives, for the
/// run of weight rows `r0..r0 + first.len()` and activation row `mi`, each row's
/// [`lq4_q8`] pair for 4-bit rows and for `q8_0` rows a pair whose difference is
/// [`q8_q8`] (`(q8_q8, 0)` from the row forms; the tiles' products and min term); the row
/// forms hand out runs of one, the interleaved GEMM runs of up to sixteen. The lengths are
/// checked and the instruction set chosen once per call, and the SIMD forms run the loop
/// inside their own `#[target_feature]` code (the per-row checks and dispatch cost as
/// much as a 576-wide row's arithmetic).
pub fn rows_dot(
    isa: Isa,
    w: RowBlock<'_>,
    rows: std::ops::Range<usize>,
    x: &Q8Rows,
    scratch: &mut [f32],
    mut out: impl FnMut(usize, usize, &[f32], &[f32]),
) {
    let groups = x.k / GROUP;
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.scale_bytes(groups),
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
        BlockLayout::Q6 => (q6_q8(isa, c, s, xr), 0.0),
        BlockLayout::Q5 => q5_q8(isa, c, s, xr),
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
    out: &mut impl FnMut(usize, usize, &[f32], &[f32]),
    mut dot: impl FnMut(&[u8], &[u8], Q8Row<'_>) -> (f32, f32),
) {
    let groups = xs.first().map_or(0, |x| x.d.len());
    let (cb, sb) = (
        w.layout.code_bits() * 4 * groups,
        w.layout.scale_bytes(groups),
    );
    for r in rows {
        let (c, s) = (
            &w.codes[r * cb..(r + 1) * cb],
            &w.subs[r * sb..(r + 1) * sb],
        );
        for (mi, &xr) in xs.iter().enumerate() {
            let (a, b) = dot(c, s, xr);
            out(r, mi, &[a], &[b]);
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
            && w.subs.len() == w.layout.scale_bytes(groups)
            && x.qs.len() == 32 * groups
            && x.sum.len() == groups
            && scratch.len() >= groups,
        "lq4_q8: row slices disagree on the group count {groups}"
    );
    if w.layout == BlockLayout::Lq4k {
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx2 && avx2_present() {
            // SAFETY: AVX2, FMA and F16C were detected; the lengths are checked above.
            return unsafe { avx2_q4k::lq4k_q8(w.codes, w.subs, x, scratch) };
        }
        let acc_m = lq4k_scales_pass(w.subs, x, scratch);
        let acc_q = match isa {
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => neon::codes_dot(w.codes, x, scratch),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::codes_dot(w.codes, x, scratch),
            _ => scalar::codes_dot(w.codes, x, scratch),
        };
        return (acc_q, acc_m);
    }
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

/// `Σ_g d_g·dx_g·(sc_lo·Σ_lo c·qx + sc_hi·Σ_hi c·qx)` for one `q6_k` weight row (24·G code
/// bytes, 4·G scale bytes; see [`crate::quant`]) and an activation row in natural order. The
/// integer products are exact (at most 16·32·127 per half, times a scale of at most 128), so
/// the instruction sets differ only in the order of f32 additions. An `isa` without a `q6_k`
/// kernel runs the scalar form.
#[inline]
pub fn q6_q8(isa: Isa, codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> f32 {
    let groups = x.d.len();
    assert!(
        codes.len() == 24 * groups && subs.len() == 4 * groups && x.qs.len() == 32 * groups,
        "q6_q8: row slices disagree on the group count {groups}"
    );
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 && avx2_present() {
        // SAFETY: AVX2, FMA and F16C were detected at run time; the lengths are checked above.
        return unsafe { avx2_q6::q6_row(codes, subs, x) };
    }
    let _ = isa;
    scalar::q6_dot(codes, subs, x)
}

/// `(Σ_g s_g·dx_g·Σ_i q_i·qx_i, Σ_g m_g·Σx_g)` for one `q5` weight row (20·G code bytes, 4·G
/// scale bytes: an f16 `(s, m)` per group; see [`crate::quant`]) and an activation row in
/// paired order; the row's result is their difference. The integer products are exact (at
/// most 32·31·128 per group), so the instruction sets differ only in the order of f32
/// additions. An `isa` without a `q5` kernel runs the scalar form.
#[inline]
pub fn q5_q8(isa: Isa, codes: &[u8], subs: &[u8], x: Q8Row<'_>) -> (f32, f32) {
    let groups = x.d.len();
    assert!(
        codes.len() == 20 * groups
            && subs.len() == 4 * groups
            && x.qs.len() == 32 * groups
            && x.sum.len() == groups,
        "q5_q8: row slices disagree on the group count {groups}"
    );
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 && avx2_present() {
        // SAFETY: AVX2, FMA and F16C were detected at run time; the lengths are checked above.
        return unsafe { avx2_q5::q5_row(codes, subs, x) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if isa == Isa::Simd128 {
        return simd128::q5_q8(codes, subs, x);
    }
    let _ = isa;
    scalar::q5_dot(codes, subs, x)
}

/// AVX2 with FMA and F16C, detected at run time (each macro call reads a cached flag).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_present() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// The per-group pre-pass of `lq4k` rows: `scratch[g] = (d·sc_g)·dx_g` and the returned
/// `Σ_g (dmin·mn_g)·Σx_g` from the row's scale bytes (the portable form; AVX2 does it beside
/// the products).
fn lq4k_scales_pass(subs: &[u8], x: Q8Row<'_>, scratch: &mut [f32]) -> f32 {
    let mut acc_m = 0f32;
    for (g, s) in scratch[..x.d.len()].iter_mut().enumerate() {
        let (d, dmin, sc, mn) = crate::quant::lq4k_scales(subs, g);
        *s = d * sc as f32 * x.d[g];
        acc_m += dmin * mn as f32 * x.sum[g];
    }
    acc_m
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
pub(crate) mod tests;
