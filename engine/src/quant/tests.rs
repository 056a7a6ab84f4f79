//! Tests of the LQ4 quantizer and the block layouts' accessors.

use super::*;
use crate::rng::Pcg32;

#[test]
fn roundtrip_error_is_small_and_layout_consistent() {
    let mut rng = Pcg32::new(1);
    let (n, k) = (7, 96);
    let w = rng.normal_vec(n * k, 0.05);
    let q = Q4Matrix::quantize("t", n, k, &w).expect("quantize");
    q.validate("t").expect("valid");
    let dq = q.dequantize();
    let rms_w = (w.iter().map(|x| x * x).sum::<f32>() / w.len() as f32).sqrt();
    let rms_e = (w
        .iter()
        .zip(&dq)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f32>()
        / w.len() as f32)
        .sqrt();
    // 4-bit asymmetric on Gaussian data: ~10% relative RMS error; fail well above that.
    assert!(rms_e / rms_w < 0.12, "relative rms error {}", rms_e / rms_w);
    assert!((q.bits_per_weight() - (4.5 + 64.0 / k as f64)).abs() < 0.1);
    let blk = q.row_block(2, 5);
    assert_eq!(&blk.dequantize()[..], &dq[2 * k..5 * k]);
}

/// `Σ_k imp_k (w - ŵ)²` over the matrix: the output error a calibration predicts.
fn weighted_error(w: &[f32], q: &Q4Matrix, imp: &[f32]) -> f64 {
    let k = imp.len();
    w.iter()
        .zip(q.dequantize())
        .enumerate()
        .map(|(i, (a, b))| imp[i % k] as f64 * ((a - b) as f64).powi(2))
        .sum()
}

#[test]
fn importance_weighting_lowers_the_error_the_activations_feel() {
    let mut rng = Pcg32::new(9);
    // 3 groups per row plus rows of different scales; a few columns carry most activation
    // energy (as the hidden states of real models do).
    let (n, k) = (13, 96);
    let w = rng.normal_vec(n * k, 0.05);
    let imp: Vec<f32> = (0..k)
        .map(|c| {
            if c % 17 == 3 {
                50.0
            } else {
                0.2 + (c % 5) as f32 * 0.1
            }
        })
        .collect();
    let plain = Q4Matrix::quantize("t", n, k, &w).expect("plain");
    let weighted = Q4Matrix::quantize_weighted("t", n, k, &w, Some(&imp)).expect("weighted");
    weighted.validate("t").expect("valid");
    let (e0, e1) = (
        weighted_error(&w, &plain, &imp),
        weighted_error(&w, &weighted, &imp),
    );
    // Measured 0.22 (the heavy columns' error falls several-fold, the others' rises).
    assert!(e1 < 0.5 * e0, "weighted error {e1} vs unweighted {e0}");
    // Uniform importance is no importance.
    let uniform = Q4Matrix::quantize_weighted("t", n, k, &w, Some(&vec![2.5; k])).expect("u");
    let ones = vec![1.0; k];
    let (eu, ep) = (
        weighted_error(&w, &uniform, &ones),
        weighted_error(&w, &plain, &ones),
    );
    assert!((eu - ep).abs() <= 1e-6 * ep, "uniform {eu} vs plain {ep}");
}

#[test]
fn bad_importance_is_refused_by_tensor_and_column() {
    let w = vec![0.1; 2 * 64];
    let e = Q4Matrix::quantize_weighted("blk.3.w", 2, 64, &w, Some(&[1.0; 63])).expect_err("short");
    assert!(
        e.to_string().contains("blk.3.w") && e.to_string().contains("63"),
        "{e}"
    );
    let mut imp = vec![1.0; 64];
    imp[40] = f32::NAN;
    let e = Q4Matrix::quantize_weighted("blk.3.w", 2, 64, &w, Some(&imp)).expect_err("nan");
    assert!(e.to_string().contains("column 40"), "{e}");
    imp[40] = -1.0;
    assert!(Q4Matrix::quantize_weighted("t", 2, 64, &w, Some(&imp)).is_err());
    // All-zero importance (a matrix no calibration token reached) falls back to uniform.
    let z = Q4Matrix::quantize_weighted("t", 2, 64, &w, Some(&[0.0; 64])).expect("zeros");
    assert_eq!(z, Q4Matrix::quantize("t", 2, 64, &w).expect("plain"));
}

#[test]
fn bytes_roundtrip_and_concat_rows_match_one_quantization() {
    let mut rng = Pcg32::new(3);
    // Odd row counts make the sub-scale section end mid-word.
    let (n, k) = (11, 64);
    let w = rng.normal_vec(n * k, 0.1);
    let whole = Q4Matrix::quantize("t", n, k, &w).expect("quantize");
    let back =
        Q4Matrix::from_bytes("t", BlockLayout::Lq4, n, k, &whole.to_bytes()).expect("from_bytes");
    assert_eq!(back, whole);
    assert!(Q4Matrix::from_bytes("t", BlockLayout::Lq4, n + 1, k, &whole.to_bytes()).is_err());
    let blocks: Vec<Q4Matrix> = [(0, 3), (3, 4), (4, 11)]
        .iter()
        .map(|&(a, b)| Q4Matrix::quantize("t", b - a, k, &w[a * k..b * k]).expect("q"))
        .collect();
    let joined = Q4Matrix::concat_rows("t", &blocks).expect("concat");
    assert_eq!(joined, whole);
}

#[test]
fn q8_roundtrip_is_within_half_a_step() {
    let mut rng = Pcg32::new(4);
    let (n, k) = (5, 45); // a ragged last group per row
    let w = rng.normal_vec(n * k, 1.0);
    let q = Q8Matrix::quantize(n, k, &w);
    let b = q.to_bytes();
    assert_eq!(b.len(), Q8Matrix::bytes_for(n, k));
    let d = Q8Matrix::dequantize_bytes("t", n, k, &b).expect("deq");
    for (i, (a, b)) in w.iter().zip(&d).enumerate() {
        let s = q.scales[(i / k) * 2 + (i % k) / GROUP];
        assert!((a - b).abs() <= 0.5 * s + 1e-7, "element {i}: {a} vs {b}");
    }
    assert!(Q8Matrix::dequantize_bytes("t", n, k, &b[1..]).is_err());
}

#[test]
fn rejects_bad_input() {
    assert!(Q4Matrix::quantize("t", 1, 33, &[0.0; 33]).is_err());
    let mut w = vec![0.0; 64];
    w[40] = f32::NAN;
    let e = Q4Matrix::quantize("blk.0.w", 2, 32, &w)
        .unwrap_err()
        .to_string();
    assert!(e.contains("blk.0.w") && e.contains("row 1"), "{e}");
}
