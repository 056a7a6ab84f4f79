//! AVX2 form of the activations' 8-bit row quantizer ([`crate::cpu::q8::quantize_row`]).

use std::arch::x86_64::*;

/// [`crate::cpu::q8::quantize_row`] with AVX2, the same bits for finite activations: per block of 32 the largest
/// magnitude by a max tree, the codes rounded ties-to-even (`vroundps`, as the portable
/// form's 1.5·2²³ trick), packed to bytes and, for the paired order, split into even and odd
/// halves by one in-lane shuffle and one cross-lane permute.
pub fn quantize_row(row: &[f32], natural: bool, qs: &mut [i8], d: &mut [f32], sum: &mut [f32]) {
    let blocks = row.len() / crate::quant::GROUP;
    assert!(
        qs.len() >= 32 * blocks && d.len() >= blocks && sum.len() >= blocks,
        "quantize_row: buffers shorter than the row's {blocks} blocks"
    );
    // SAFETY: `row_quantizer` hands this out only where AVX2, FMA and F16C were detected; the
    // lengths are checked above.
    unsafe { quantize_blocks(row, natural, qs, d, sum, blocks) }
}

/// The loop of [`quantize_row`].
///
/// # Safety
/// AVX2 present; `row` and `qs` 32·`blocks` elements, `d` and `sum` `blocks`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_blocks(
    row: &[f32],
    natural: bool,
    qs: &mut [i8],
    d: &mut [f32],
    sum: &mut [f32],
    blocks: usize,
) {
    // SAFETY: block b reads row[32b..32b+32] and writes qs at its paired or natural positions
    // (inside [32·(b − b % 2)..+64], below 32·blocks), d[b] and sum[b].
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let split = _mm256_setr_epi8(
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3,
            5, 7, 9, 11, 13, 15,
        );
        for b in 0..blocks {
            let p = row.as_ptr().add(32 * b);
            let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(p.add(8 * i)));
            let a: [__m256; 4] = std::array::from_fn(|i| _mm256_andnot_ps(sign, v[i]));
            let m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
            let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps::<1>(m2, m2)));
            let db = amax / 127.0;
            let id = _mm256_set1_ps(if db > 0.0 { 1.0 / db } else { 0.0 });
            let q: [__m256i; 4] = std::array::from_fn(|i| {
                _mm256_cvtps_epi32(_mm256_round_ps::<
                    { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                >(_mm256_mul_ps(v[i], id)))
            });
            let s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            let s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s2 = _mm_add_epi32(s4, _mm_srli_si128::<8>(s4));
            let qsum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_srli_si128::<4>(s2)));
            // i32 → i16 → i8 in-lane packs leave the 4-byte groups as 0 2 4 6 | 1 3 5 7
            // (indices of 8-element runs … of 4 codes); the permute restores natural order.
            let w16a = _mm256_packs_epi32(q[0], q[1]);
            let w16b = _mm256_packs_epi32(q[2], q[3]);
            let w8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16a, w16b), order);
            if natural {
                _mm256_storeu_si256(qs.as_mut_ptr().add(32 * b) as *mut __m256i, w8);
            } else {
                // [e0..e7 o0..o7 | e8..e15 o8..o15] → [e0..e15 | o0..o15].
                let eo = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(w8, split));
                let (even, odd) = (
                    super::super::q8::position(b, blocks, 0),
                    super::super::q8::position(b, blocks, 1),
                );
                _mm_storeu_si128(
                    qs.as_mut_ptr().add(even) as *mut __m128i,
                    _mm256_castsi256_si128(eo),
                );
                _mm_storeu_si128(
                    qs.as_mut_ptr().add(odd) as *mut __m128i,
                    _mm256_extracti128_si256::<1>(eo),
                );
            }
            d[b] = db;
            sum[b] = db * qsum as f32;
        }
    }
}
