//! Sampling's read of the logits on the CPU: the top `k` candidates in one pass over the
//! vocabulary (a sorted buffer of `k`, touched only by values above its last), and the softmax
//! normaliser with the vectorizable [`super::math::fast_exp`]. Same contract as the reference
//! [`select_reference`] (ties to the lower id, NaN and −∞ lowest), which sorts the
//! whole vocabulary and is this function's oracle.

use crate::backend::{LogitFilter, Selection};

/// Offers `(i, v)` to `top`, the best `k` so far sorted best first.
fn keep(top: &mut Vec<(u32, f32)>, k: usize, i: usize, v: f32) {
    // A later id never beats an equal value already held (ties go to the lower id).
    if top.len() == k && top.last().is_none_or(|&(_, last)| v <= last) {
        return;
    }
    let at = top.partition_point(|&(_, t)| t >= v);
    top.insert(at, (i as u32, v));
    top.truncate(k);
}

/// Top `k` of `logits` (`k <= logits.len()`) and, with `inv_temp`, `Σ exp((l − max)·inv_temp)`.
pub fn select(logits: &[f32], k: usize, inv_temp: Option<f32>) -> Selection {
    let key = |v: f32| if v >= f32::MIN { v } else { f32::MIN };
    let k = k.min(logits.len());
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in logits.iter().enumerate() {
        keep(&mut top, k, i, key(v));
    }
    let sum_exp = inv_temp.map(|it| {
        let mx = top.first().map_or(0.0, |t| t.1);
        let mut total = 0f64;
        for chunk in logits.chunks(256) {
            let mut acc = [0f32; 8];
            let c = chunk.chunks_exact(8);
            let rest = c.remainder();
            for x in c {
                for j in 0..8 {
                    // NaN and −∞ (below f32::MIN) contribute nothing, as in the reference.
                    let v = x[j];
                    acc[j] += if v >= f32::MIN {
                        super::math::fast_exp((v - mx) * it)
                    } else {
                        0.0
                    };
                }
            }
            let mut s: f64 = acc.iter().map(|&a| a as f64).sum();
            for &v in rest {
                if v >= f32::MIN {
                    s += super::math::fast_exp((v - mx) * it) as f64;
                }
            }
            total += s;
        }
        total
    });
    Selection { top, sum_exp }
}

/// [`select`] over the logits as `filter` leaves them (the contract of
/// [`crate::Backend::select_filtered`]), in one pass without a copy of the row: whole words
/// of the allowed set that are zero are skipped, as a grammar's mask mostly is.
pub fn select_filtered(
    logits: &[f32],
    k: usize,
    inv_temp: Option<f32>,
    filter: &LogitFilter<'_>,
) -> Selection {
    let key = |v: f32| if v >= f32::MIN { v } else { f32::MIN };
    let n = logits.len();
    // The ids to visit: every id, or the set bits of the allowed words.
    let each = |f: &mut dyn FnMut(usize, f32)| match filter.allowed {
        None => {
            for (i, &l) in logits.iter().enumerate() {
                if let Some(v) = filter.apply(i, l) {
                    f(i, v);
                }
            }
        }
        Some(words) => {
            for (w, &bits) in words.iter().enumerate().take(n.div_ceil(32)) {
                let mut bits = bits;
                while bits != 0 {
                    let i = w * 32 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if i < n {
                        if let Some(v) = filter.apply(i, logits[i]) {
                            f(i, v);
                        }
                    }
                }
            }
        }
    };
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    each(&mut |i, v| keep(&mut top, k, i, key(v)));
    let sum_exp = inv_temp.map(|it| {
        let mx = top.first().map_or(0.0, |t| t.1);
        let mut total = 0f64;
        each(&mut |_, v| {
            if v >= f32::MIN {
                total += super::math::fast_exp((v - mx) * it) as f64;
            }
        });
        total
    });
    Selection { top, sum_exp }
}

/// Plain-Rust reference of [`select_filtered`]: the allowed tokens' filtered logits
/// collected and fully sorted (ties to the lower id, NaN and −∞ lowest), the normaliser over
/// them in f64.
pub fn select_filtered_reference(
    logits: &[f32],
    k: usize,
    inv_temp: Option<f32>,
    filter: &LogitFilter<'_>,
) -> Selection {
    let key = |v: f32| if v >= f32::MIN { v } else { f32::MIN };
    let kept: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter_map(|(i, &l)| filter.apply(i, l).map(|v| (i as u32, v)))
        .collect();
    let mut top: Vec<(u32, f32)> = kept.iter().map(|&(i, v)| (i, key(v))).collect();
    top.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    });
    top.truncate(k);
    let sum_exp = inv_temp.map(|it| {
        let mx = top.first().map_or(0.0, |t| t.1);
        kept.iter()
            .filter(|(_, v)| *v >= f32::MIN)
            .map(|&(_, v)| (((v - mx) * it) as f64).exp())
            .sum()
    });
    Selection { top, sum_exp }
}

/// Plain-Rust reference: stable top-k (ties to the lower id, NaN lowest) and the normaliser.
pub fn select_reference(logits: &[f32], k: usize, inv_temp: Option<f32>) -> Selection {
    let key = |v: f32| if v >= f32::MIN { v } else { f32::MIN };
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        key(logits[b as usize])
            .partial_cmp(&key(logits[a as usize]))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(&b))
    });
    let top: Vec<(u32, f32)> = idx[..k]
        .iter()
        .map(|&i| (i, key(logits[i as usize])))
        .collect();
    let sum_exp = inv_temp.map(|it| {
        let mx = top[0].1;
        logits
            .iter()
            .filter(|v| **v >= f32::MIN)
            .map(|&v| (((v - mx) * it) as f64).exp())
            .sum()
    });
    Selection { top, sum_exp }
}

#[cfg(test)]
mod tests {
    use crate::rng::Pcg32;

    #[test]
    fn equals_the_full_sort() {
        let mut rng = Pcg32::new(3);
        for (n, k) in [
            (1usize, 1usize),
            (7, 7),
            (100, 1),
            (1000, 40),
            (49_155, 50),
            (5, 3),
        ] {
            let mut l = rng.normal_vec(n, 3.0);
            // Ties, NaN, infinities.
            for i in (0..n).step_by(7) {
                l[i] = 1.5;
            }
            if n > 10 {
                l[3] = f32::NAN;
                l[4] = f32::INFINITY;
                l[5] = f32::NEG_INFINITY;
                l[n - 1] = f32::NAN;
            }
            let want = super::select_reference(&l, k, Some(0.7));
            let got = super::select(&l, k, Some(0.7));
            assert_eq!(got.top.len(), want.top.len());
            for (g, w) in got.top.iter().zip(&want.top) {
                assert_eq!(g.0, w.0, "n {n} k {k}");
                assert!(g.1 == w.1 || (g.1.is_nan() && w.1.is_nan()), "n {n} k {k}");
            }
            let (gs, ws) = (got.sum_exp.unwrap_or(0.0), want.sum_exp.unwrap_or(0.0));
            assert!(
                (gs - ws).abs() <= 1e-5 * ws.abs() || (gs.is_nan() && ws.is_nan()),
                "n {n} k {k}: {gs} vs {ws}"
            );
        }
    }

    /// The one-pass filtered selection against the copy-and-sort reference: masks dense and
    /// sparse (fewer allowed tokens than `k` included), penalties on positive and negative
    /// logits, ids past `n` in the last word, vocabularies off the 32-bit word.
    #[test]
    fn filtered_equals_the_reference() {
        let mut rng = Pcg32::new(11);
        for (n, k, density) in [
            (1usize, 1usize, 1.0f32),
            (45, 7, 0.5),
            (1000, 40, 0.02),
            (49_155, 50, 0.3),
            (49_155, 64, 0.0005),
            (5000, 10, 1.0),
        ] {
            let mut l: Vec<f32> = (0..n).map(|_| (rng.normal() * 6.0).round() / 2.0).collect();
            if n > 10 {
                l[3] = f32::NAN;
                l[n - 2] = f32::NEG_INFINITY;
            }
            let words = n.div_ceil(32);
            let mut bits = |p: f32| -> Vec<u32> {
                (0..words)
                    .map(|_| (0..32).fold(0u32, |w, b| w | ((rng.next_f32() < p) as u32) << b))
                    .collect()
            };
            let allowed = bits(density);
            let seen = bits(0.1);
            for (allowed, penalized, penalty) in [
                (None, Some(&seen[..]), 1.3f32),
                (Some(&allowed[..]), None, 1.0),
                (Some(&allowed[..]), Some(&seen[..]), 2.0),
            ] {
                let f = super::LogitFilter {
                    allowed,
                    penalized,
                    penalty,
                };
                let want = super::select_filtered_reference(&l, k, Some(0.8), &f);
                let got = super::select_filtered(&l, k, Some(0.8), &f);
                assert_eq!(got.top, want.top, "n {n} k {k} density {density}");
                let (gs, ws) = (got.sum_exp.unwrap_or(0.0), want.sum_exp.unwrap_or(0.0));
                assert!(
                    (gs - ws).abs() <= 1e-5 * ws.abs(),
                    "n {n} k {k}: {gs} vs {ws}"
                );
                assert!(got.top.iter().all(|&(i, _)| f.allows(i as usize)));
            }
        }
    }
}
