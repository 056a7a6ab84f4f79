//! Tests of the instruction sets' dot products and quantizers against the portable forms
//! (and f64), and the GGUF block builders the CPU's other tests share.

use super::*;
use crate::cpu::q8::Q8Rows;
use crate::quant::Q4Matrix;
use crate::rng::Pcg32;

mod matrices;
pub(crate) use matrices::*;

/// `lq4k` rows on every ISA against an f64 evaluation of the same codes and scales
/// ([`Q4Matrix::code`], [`Q4Matrix::group_scales`]), on group counts that are odd, even, below,
/// at and above a super-block of 8 (so partial super-blocks and a last unpaired group), with
/// activations scaled per block (prefill's) and per super-block (decode's integer sub-scales).
#[test]
fn every_isa_matches_f64_on_lq4k_rows() {
    let mut rng = Pcg32::new(37);
    for (groups, shared) in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49]
        .into_iter()
        .flat_map(|g| [(g, false), (g, true)])
    {
        let (rows, k) = (3, 32 * groups);
        let w = random_lq4k(&mut rng, rows, k);
        let xf = rng.normal_vec(k, 1.0);
        let mut xq = Q8Rows::default();
        if shared {
            xq.quantize_shared(&xf, 1, k);
        } else {
            xq.quantize(&xf, 1, k);
        }
        let block = RowBlock::of(&w);
        let sb = w.layout.scale_bytes(groups);
        let mut scratch = vec![0f32; groups];
        for r in 0..rows {
            let (want, abs) = f64_row(&w, r, &xq);
            let row = Lq4Row {
                codes: &block.codes[16 * groups * r..16 * groups * (r + 1)],
                subs: &block.subs[sb * r..sb * (r + 1)],
                layout: BlockLayout::Lq4k,
            };
            for isa in Isa::available() {
                let (q, m) = lq4_q8(isa, row, xq.row(0), &mut scratch);
                let got = q as f64 - m as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * abs,
                    "{} groups {groups} shared {shared} row {r}: {got} vs f64 {want}",
                    isa.name()
                );
            }
        }
    }
}

/// Decode's `lq4k` rows through [`rows_dot`] (AVX2: two weight rows a step, a last single
/// one, prefetching past the block's end) with activations sharing their scales, on every ISA
/// against the f64 evaluation: whole super-blocks, and group counts that leave a partial one.
#[test]
fn lq4k_rows_with_shared_scales_match_f64() {
    let mut rng = Pcg32::new(41);
    for groups in [8usize, 16, 9, 24, 17] {
        let (rows, k) = (9, 32 * groups);
        let w = random_lq4k(&mut rng, rows, k);
        let mut xq = Q8Rows::default();
        xq.quantize_shared(&rng.normal_vec(k, 1.0), 1, k);
        let mut scratch = vec![0f32; groups];
        for (isa, block) in Isa::available()
            .into_iter()
            .flat_map(|i| [(i, 1..8), (i, 2..9)])
        {
            let mut got = vec![f64::NAN; rows];
            rows_dot(
                isa,
                RowBlock::of(&w),
                block.clone(),
                &xq,
                &mut scratch,
                |r0, mi, a: &[f32], b: &[f32]| {
                    assert_eq!(mi, 0);
                    for (j, (&a, &b)) in a.iter().zip(b).enumerate() {
                        let (d, dmin) = w.row_scales(r0 + j);
                        got[r0 + j] = (d * a - dmin * b) as f64;
                    }
                },
            );
            for (r, &got) in got.iter().enumerate() {
                if !block.contains(&r) {
                    assert!(
                        got.is_nan(),
                        "{} row {r} outside {block:?} written",
                        isa.name()
                    );
                    continue;
                }
                let (want, abs) = f64_row(&w, r, &xq);
                assert!(
                    (got - want).abs() <= 1e-5 * abs,
                    "{} groups {groups} rows {block:?} row {r}: {got} vs f64 {want}",
                    isa.name()
                );
            }
        }
    }
}

/// `q6_k` rows on every ISA against an f64 evaluation of the same codes and scales
/// ([`Q4Matrix::code`], [`Q4Matrix::weight_scales`]), on odd and even group counts.
#[test]
fn every_isa_matches_f64_on_q6_rows() {
    let mut rng = Pcg32::new(31);
    for groups in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49] {
        let (rows, k) = (3, 32 * groups);
        let w = random_q6(&mut rng, rows, k);
        let xf = rng.normal_vec(k, 1.0);
        let mut xq = Q8Rows::default();
        xq.quantize_natural(&xf, 1, k);
        let bytes: &[u8] = bytemuck::cast_slice(&w.data);
        let sm = 4 * w.sm_offset();
        for r in 0..rows {
            let (mut want, mut abs) = (0f64, 0f64);
            for g in 0..groups {
                let t: f64 = (32 * g..32 * g + 32)
                    .map(|kk| {
                        w.weight_scales(r, kk).0 as f64
                            * w.code(r, kk) as f64
                            * xq.code(0, kk) as f64
                    })
                    .sum::<f64>()
                    * xq.d[g] as f64;
                want += t;
                abs += t.abs();
            }
            let codes = &bytes[24 * groups * r..24 * groups * (r + 1)];
            let subs = &bytes[sm + 4 * groups * r..sm + 4 * groups * (r + 1)];
            for isa in Isa::available() {
                let got = q6_q8(isa, codes, subs, xq.row(0));
                assert!(
                    (got as f64 - want).abs() <= 1e-5 * abs,
                    "{} groups {groups} row {r}: {got} vs f64 {want}",
                    isa.name()
                );
            }
        }
    }
}

/// `q5` rows (GGUF's Q5_0 and Q5_1 blocks) on every ISA against an f64 evaluation of the same
/// codes and scales ([`Q4Matrix::code`], [`Q4Matrix::group_scales`]), on odd and even group
/// counts (pairs of groups and a last unpaired one).
#[test]
fn every_isa_matches_f64_on_q5_rows() {
    let mut rng = Pcg32::new(33);
    for groups in [1usize, 2, 3, 7, 8, 9, 17, 18, 48, 49] {
        for with_min in [false, true] {
            let (rows, k) = (3, 32 * groups);
            let w = random_q5(&mut rng, rows, k, with_min);
            let xf = rng.normal_vec(k, 1.0);
            let mut xq = Q8Rows::default();
            xq.quantize(&xf, 1, k);
            let bytes: &[u8] = bytemuck::cast_slice(&w.data);
            let sm = 4 * w.sm_offset();
            for r in 0..rows {
                let (want, abs) = f64_row(&w, r, &xq);
                let codes = &bytes[20 * groups * r..20 * groups * (r + 1)];
                let subs = &bytes[sm + 4 * groups * r..sm + 4 * groups * (r + 1)];
                for isa in Isa::available() {
                    let (q, m) = q5_q8(isa, codes, subs, xq.row(0));
                    let got = q as f64 - m as f64;
                    assert!(
                        (got - want).abs() <= 1e-5 * abs,
                        "{} groups {groups} min {with_min} row {r}: {got} vs f64 {want}",
                        isa.name()
                    );
                }
            }
        }
    }
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

/// Row `r` of an `lq4h`, `lq4k` or `q8_0` matrix times activation row 0 of `xq` in f64, from the
/// same integers and scales the kernels read: `(Σ_g t_g, Σ_g |t_g|)` with
/// `t_g = s_g·dx_g·Σ_i q_i·qx_i − m_g·Σx_g` (`m_g` = 0 for GGUF's Q8_0).
fn f64_row(w: &Q4Matrix, r: usize, xq: &Q8Rows) -> (f64, f64) {
    let (mut want, mut abs) = (0f64, 0f64);
    for g in 0..w.cols / 32 {
        let (s, m) = w.group_scales(r, g);
        let isum: i64 = (0..32)
            .map(|i| w.code(r, 32 * g + i) as i64 * xq.code(0, 32 * g + i) as i64)
            .sum();
        let t = s as f64 * xq.d[g] as f64 * isum as f64 - m as f64 * xq.sum[g] as f64;
        want += t;
        abs += t.abs();
    }
    (want, abs)
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
            let (want, abs) = f64_row(&w, r, &xq);
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

/// [`rows_dot`] on every ISA and layout (LQ4, `lq4h`, `q8_0` with codes of 8 bits and of 5 at
/// three offsets, mins in one, `q6_k`, `lq4k`) against the scalar row forms, one to 26
/// activation rows, a block of rows that starts and ends inside the matrix, on group counts
/// that leave every remainder of the four-group step.
#[test]
fn rows_dot_matches_the_row_forms_on_every_isa() {
    let mut rng = Pcg32::new(21);
    // Activation rows 1 (decode), 2, 5 and 9 (AVX2's tiles of four, with a partial one; 4-bit
    // and 8-bit rows), 17 and 22 (the interleaved GEMM from 12 rows: VNNI's, and AVX2's for
    // `q6_k` and narrow `q8_0` from 16, with partial tiles), 26 (AVX2's for 4-bit rows too);
    // weight rows 2..19 (four sets of four and a single row; a block of sixteen and a partial
    // one).
    for (groups, m) in [
        (1usize, 5),
        (6, 2),
        (9, 9),
        (18, 1),
        (18, 5),
        (3, 4),
        (5, 17),
        (2, 22),
        (7, 26),
    ] {
        let (rows, k) = (21, 32 * groups);
        let blk = 2..19;
        let wf = rng.normal_vec(rows * k, 0.05);
        // A `q8_0` matrix with mins too (as GGUF's Q5_1 blocks become).
        let mut with_mins = random_q8_0(&mut rng, rows, k);
        let sm = with_mins.sm_offset();
        for word in &mut with_mins.data[sm..] {
            let m = half::f16::from_f32(rng.normal_vec(1, 0.01)[0]);
            *word |= (m.to_bits() as u32) << 16;
        }
        // Narrow `q8_0` codes (AVX2's interleaved GEMM), with mins as Q5_1's and offset.
        let mut narrow = random_q8_narrow(&mut Pcg32::new(300 + groups as u64), rows, k, 0);
        let sm = narrow.sm_offset();
        let mut r = Pcg32::new(400 + groups as u64);
        for word in &mut narrow.data[sm..] {
            let m = half::f16::from_f32(r.normal_vec(1, 0.01)[0]);
            *word |= (m.to_bits() as u32) << 16;
        }
        let mats = [
            Q4Matrix::quantize("w", rows, k, &wf).expect("quantize"),
            random_q8_narrow(&mut Pcg32::new(500 + groups as u64), rows, k, -16),
            random_q8_narrow(&mut Pcg32::new(600 + groups as u64), rows, k, -20),
            narrow,
            random_q4_1(&mut rng, rows, k),
            random_q8_0(&mut rng, rows, k),
            with_mins,
            // Their own generators, so the other matrices' and the activations' draws stay.
            random_q6(&mut Pcg32::new(100 + groups as u64), rows, k),
            random_lq4k(&mut Pcg32::new(200 + groups as u64), rows, k),
            random_q5(&mut Pcg32::new(700 + groups as u64), rows, k, false),
            random_q5(&mut Pcg32::new(800 + groups as u64), rows, k, true),
        ];
        let xf = rng.normal_vec(m * k, 1.0);
        for w in &mats {
            let mut xq = Q8Rows::default();
            if w.layout.natural_order() {
                xq.quantize_natural(&xf, m, k);
            } else {
                xq.quantize(&xf, m, k);
            }
            let block = RowBlock::of(w);
            let (cb, sb) = (
                w.layout.code_bits() * 4 * groups,
                w.layout.scale_bytes(groups),
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
                        BlockLayout::Q6 => (q6_q8(Isa::Scalar, c, s, xq.row(mi)), 0.0),
                        BlockLayout::Q5 => q5_q8(Isa::Scalar, c, s, xq.row(mi)),
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
            // Σ_k |w_rk·x_k| for each (row, activation row), from the weights as stored.
            let mag: Vec<f64> = (0..rows * m)
                .map(|i| {
                    let (r, mi) = (i / m, i % m);
                    let mut wr = vec![0f32; k];
                    w.dequantize_row(r, &mut wr);
                    let xr = &xf[mi * k..(mi + 1) * k];
                    wr.iter().zip(xr).map(|(a, b)| (a * b).abs() as f64).sum()
                })
                .collect();
            // Every instruction set; AVX2's tiles without VNNI where the CPU has it (`q5` has
            // no tiles); and AVX2's interleaved GEMM without VNNI (what a CPU without AVX-512
            // takes from 16 or 24 rows) on every layout it runs, whatever this CPU has.
            #[allow(unused_mut)]
            let mut forms: Vec<(Isa, Form)> = Isa::available()
                .into_iter()
                .map(|i| (i, Form::Dispatch))
                .collect();
            #[cfg(target_arch = "x86_64")]
            if avx2_present() && m > 1 {
                if avx2::vnni_present() && w.layout != BlockLayout::Q5 {
                    forms.push((Isa::Avx2, Form::Tiles));
                }
                forms.push((Isa::Avx2, Form::GemmAvx2));
            }
            for (isa, form) in forms {
                let plain = form == Form::Tiles;
                let mut got = vec![None; rows * m];
                #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
                let mut put = |r0: usize, mi: usize, a: &[f32], b: &[f32]| {
                    assert_eq!(a.len(), b.len());
                    for (j, (&a, &b)) in a.iter().zip(b).enumerate() {
                        let r = r0 + j;
                        assert!(got[r * m + mi].replace((a, b)).is_none(), "row {r} twice");
                    }
                };
                if plain {
                    #[cfg(target_arch = "x86_64")]
                    {
                        let xs: Vec<Q8Row<'_>> = (0..m).map(|mi| xq.row(mi)).collect();
                        // SAFETY: AVX2 and FMA detected; `tiles` passes the kernel's
                        // lengths. The 4-bit kernel with the AVX2-only row count and with four
                        // weight rows (rows 2..19: four sets of four and a partial set of one).
                        if w.layout == BlockLayout::Q8 {
                            tiles::tiles(
                                block,
                                blk.clone(),
                                &xs,
                                &mut put,
                                |wr: &[_; 1], x, g| unsafe { [avx2::tile_row_q8(wr[0], x, g)] },
                            );
                        } else if w.layout == BlockLayout::Q6 {
                            tiles::tiles(
                                block,
                                blk.clone(),
                                &xs,
                                &mut put,
                                |wr: &[_; 1], x, g| unsafe { [avx2::tile_row_q6(wr[0], x, g)] },
                            );
                        } else if m % 2 == 1 {
                            tiles::tiles(
                                block,
                                blk.clone(),
                                &xs,
                                &mut put,
                                |wr: &[_; avx2::WR_4BIT_AVX2], x, g| unsafe {
                                    avx2::tile_row(wr, x, g)
                                },
                            );
                        } else {
                            tiles::tiles(
                                block,
                                blk.clone(),
                                &xs,
                                &mut put,
                                |wr: &[_; avx2::WR_4BIT], x, g| unsafe { avx2::tile_row(wr, x, g) },
                            );
                        }
                    }
                } else if form == Form::GemmAvx2 {
                    #[cfg(target_arch = "x86_64")]
                    {
                        let xs: Vec<Q8Row<'_>> = (0..m).map(|mi| xq.row(mi)).collect();
                        let offset = if w.layout == BlockLayout::Q8 {
                            let cb = 32 * groups;
                            // SAFETY: AVX2 detected; the rows lie inside the matrix.
                            unsafe {
                                avx2_il::q8_offset(&block.codes[blk.start * cb..blk.end * cb])
                            }
                        } else {
                            Some(0)
                        };
                        // Full-range `q8_0` codes stay on the tiles.
                        let Some(offset) = offset else { continue };
                        // SAFETY: AVX2, FMA and F16C detected; a layout gemm_avx2 runs (q8_0
                        // only with its codes' offset).
                        unsafe { avx2_il::gemm_avx2(block, blk.clone(), &xs, offset, &mut put) };
                    }
                } else {
                    rows_dot(isa, block, blk.clone(), &xq, &mut scratch, put);
                }
                for (i, (g, want)) in got.iter().zip(&want).enumerate() {
                    let r = i / m;
                    match g {
                        None => assert!(!blk.contains(&r), "{} row {r} missing", isa.name()),
                        Some((a, b)) => {
                            assert!(blk.contains(&r), "{} row {r} outside the block", isa.name());
                            // A `q8_0` row's pair is read as its difference (the tiles give
                            // the products and the min term, the row form their difference).
                            // f32 sums in another order: relative to the terms' size
                            // (`mag`: Σ|w·x| over the row, as the terms can cancel).
                            let scale =
                                a.abs() + b.abs() + want.0.abs() + want.1.abs() + mag[i] as f32;
                            let (a, b, want) = if w.layout.natural_order() {
                                (a - b, 0.0, &(want.0 - want.1, 0.0))
                            } else {
                                (*a, *b, want)
                            };
                            let tol = 1e-5 * (scale + 1e-3);
                            assert!(
                                (a - want.0).abs() <= tol && (b - want.1).abs() <= tol,
                                "{}{} {} groups {groups} m {m} row {r}: ({a}, {b}) vs ({}, {})",
                                isa.name(),
                                match form {
                                    Form::Tiles => " (tiles without VNNI)",
                                    Form::GemmAvx2 => " (interleaved GEMM without VNNI)",
                                    Form::Dispatch => "",
                                },
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

/// How [`rows_dot_matches_the_row_forms_on_every_isa`] reaches a kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Form {
    /// [`rows_dot`]'s own choice.
    Dispatch,
    /// AVX2's tiles without VNNI.
    Tiles,
    /// AVX2's interleaved GEMM without VNNI.
    GemmAvx2,
}

/// Every instruction set's row quantizer gives the portable one's codes, scales and sums
/// bit for bit, in both orders, on rows of odd and even block counts with zero blocks,
/// ties (x.5 after scaling) and large magnitudes.
#[test]
fn row_quantizers_give_the_portable_bits() {
    let mut rng = Pcg32::new(23);
    for blocks in [1usize, 2, 3, 7, 18] {
        let k = 32 * blocks;
        let mut x = rng.normal_vec(k, 3.0);
        x[..32].fill(0.0);
        if blocks > 1 {
            // Block 1: 127 at the top, so codes are x itself and halves are ties.
            for (i, v) in x[32..64].iter_mut().enumerate() {
                *v = if i == 0 {
                    127.0
                } else {
                    (i as f32 - 16.0) + 0.5
                };
            }
        }
        if blocks > 2 {
            x[64] = 3.0e6;
        }
        for natural in [false, true] {
            let want = {
                let mut q = Q8Rows::default();
                q.quantize_with(&x, 1, k, natural, crate::cpu::q8::quantize_row);
                q
            };
            for isa in Isa::available() {
                let mut got = Q8Rows::default();
                got.quantize_with(&x, 1, k, natural, row_quantizer(isa));
                assert_eq!(got.qs, want.qs, "{} codes, {blocks} blocks", isa.name());
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got.d), bits(&want.d), "{} scales", isa.name());
                assert_eq!(bits(&got.sum), bits(&want.sum), "{} sums", isa.name());
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
            let (want, abs) = f64_row(&w, r, &xq);
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
