//! Random block matrices as GGUF files hold them, for the CPU's kernel tests.

use crate::quant::{BlockLayout, Q4Matrix};
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
/// A block's positive f16 scale `d`, as its two little-endian bytes.
fn block_scale(rng: &mut Pcg32) -> [u8; 2] {
    half::f16::from_f32(0.001 + 0.002 * rng.normal_vec(1, 1.0)[0].abs())
        .to_bits()
        .to_le_bytes()
}

pub(crate) fn random_q8_0(rng: &mut Pcg32, rows: usize, k: usize) -> Q4Matrix {
    let raw: Vec<u8> = (0..rows * k / 32)
        .flat_map(|_| {
            let mut b = block_scale(rng).to_vec();
            b.extend((0..32).map(|_| rng.next_u32() as u8));
            b
        })
        .collect();
    Q4Matrix::from_ggml_q8_0("w", rows, k, &raw).expect("q8_0")
}

/// `q8_0` rows whose codes span 32 values from `lo` (as GGUF's Q5_0 blocks become with `lo` −16,
/// Q5_1's with 0), `lo` and `lo + 31` in every row.
pub(crate) fn random_q8_narrow(rng: &mut Pcg32, rows: usize, k: usize, lo: i32) -> Q4Matrix {
    let mut raw = Vec::new();
    for b in 0..rows * k / 32 {
        raw.extend(block_scale(rng));
        raw.extend((0..32).map(|i| {
            let q = match (b % (k / 32), i) {
                (0, 0) => lo,
                (0, 1) => lo + 31,
                _ => lo + (rng.next_u32() % 32) as i32,
            };
            q as i8 as u8
        }));
    }
    Q4Matrix::from_ggml_q8_0("w", rows, k, &raw).expect("q8_0")
}

/// GGUF Q5_0 blocks (`with_min`: Q5_1) as a file holds them, imported as `q5` rows: a positive
/// f16 scale (and for Q5_1 a signed min), random fifth bits and nibbles, with codes 0 and 31
/// in every row (weights 0 and 16 of its first group).
pub(crate) fn random_q5(rng: &mut Pcg32, rows: usize, k: usize, with_min: bool) -> Q4Matrix {
    let mut raw = Vec::new();
    for b in 0..rows * k / 32 {
        raw.extend(block_scale(rng));
        if with_min {
            let m = half::f16::from_f32(rng.normal_vec(1, 0.02)[0]);
            raw.extend(m.to_bits().to_le_bytes());
        }
        let mut qh_qs: Vec<u8> = (0..20).map(|_| rng.next_u32() as u8).collect();
        if b % (k / 32) == 0 {
            // Weight 0: code 0 (nibble 0, bit 0 clear); weight 16: code 31.
            qh_qs[0] &= !1;
            qh_qs[2] |= 1;
            qh_qs[4] = 0xF0;
        }
        raw.extend(qh_qs);
    }
    let m = Q4Matrix::from_ggml_q5("w", rows, k, &raw, with_min).expect("q5");
    assert_eq!(m.layout, BlockLayout::Q5);
    m
}

/// `q6_k` rows as GGUF's Q6_K blocks become (see [`crate::quant`]): random 6-bit codes, per
/// group two random signed 8-bit half scales over the whole range (−128 included) and a
/// positive f16 `d`.
pub(crate) fn random_q6(rng: &mut Pcg32, rows: usize, k: usize) -> Q4Matrix {
    let layout = BlockLayout::Q6;
    let mut data = vec![0u32; layout.words(rows, k)];
    let sm = layout.sm_offset(rows, k);
    for w in &mut data[..sm] {
        *w = rng.next_u32();
    }
    for w in &mut data[sm..] {
        let d = half::f16::from_f32(1e-4 + 2e-4 * rng.normal_vec(1, 1.0)[0].abs());
        *w = (rng.next_u32() & 0xFFFF) | (d.to_bits() as u32) << 16;
    }
    let m = Q4Matrix {
        rows,
        cols: k,
        data,
        layout,
    };
    m.validate("q6").expect("q6_k");
    m
}

/// `lq4k` rows as GGUF's Q4_K blocks become (see [`crate::quant`]): random codes, per group
/// random 6-bit `(sc, mn)`, per 8 groups (or fewer, at the end of a row) positive f16 `(d,
/// dmin)`.
pub(crate) fn random_lq4k(rng: &mut Pcg32, rows: usize, k: usize) -> Q4Matrix {
    let layout = BlockLayout::Lq4k;
    let groups = k / 32;
    let sm = layout.sm_offset(rows, k);
    let mut data: Vec<u32> = (0..sm).map(|_| rng.next_u32()).collect();
    let mut bytes = Vec::new();
    for _ in 0..rows {
        for g0 in (0..groups).step_by(8) {
            for scale in [0.002f32, 0.01] {
                let v = half::f16::from_f32(scale * (0.2 + rng.normal_vec(1, 1.0)[0].abs()));
                bytes.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            for _ in g0..(g0 + 8).min(groups) {
                bytes
                    .extend_from_slice(&[(rng.next_u32() & 63) as u8, (rng.next_u32() & 63) as u8]);
            }
        }
    }
    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    data.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    let m = Q4Matrix {
        rows,
        cols: k,
        data,
        layout,
    };
    m.validate("lq4k").expect("lq4k");
    m
}
