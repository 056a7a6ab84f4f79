//! One tolerance type for every numeric comparison (kernels against references,
//! models against transformers' logits).

use std::fmt;

/// `|actual - expected| <= abs + rel * |expected|`, element by element.
/// NaN or infinity in `actual` where `expected` is finite always fails.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute part of the bound.
    pub abs: f64,
    /// Relative part of the bound (times `|expected|`).
    pub rel: f64,
}

/// The first and worst element that broke a [`Tolerance`].
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// Index of the worst element (largest excess over the bound).
    pub index: usize,
    /// Expected value there.
    pub expected: f64,
    /// Actual value there.
    pub actual: f64,
    /// How many elements broke the bound.
    pub count: usize,
    /// Total elements compared.
    pub total: usize,
    /// Largest absolute error over all elements.
    pub max_abs_err: f64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} elements out of tolerance; worst at [{}]: expected {:.6e}, got {:.6e} (max abs err {:.3e})",
            self.count, self.total, self.index, self.expected, self.actual, self.max_abs_err
        )
    }
}

impl Tolerance {
    /// A bound with both parts.
    pub const fn new(abs: f64, rel: f64) -> Self {
        Tolerance { abs, rel }
    }

    /// Exact equality.
    pub const EXACT: Tolerance = Tolerance::new(0.0, 0.0);

    /// Checks two slices of equal length; the error reports the worst element.
    pub fn check(&self, expected: &[f64], actual: &[f32]) -> Result<f64, Mismatch> {
        let mut count = 0;
        let mut worst: Option<(usize, f64)> = None;
        let mut max_abs_err = 0f64;
        let n = expected.len().max(actual.len());
        for i in 0..n {
            let (e, a) = match (expected.get(i), actual.get(i)) {
                (Some(&e), Some(&a)) => (e, a as f64),
                _ => {
                    return Err(Mismatch {
                        index: i,
                        expected: expected.get(i).copied().unwrap_or(f64::NAN),
                        actual: actual.get(i).map(|&a| a as f64).unwrap_or(f64::NAN),
                        count: n - expected.len().min(actual.len()),
                        total: n,
                        max_abs_err: f64::INFINITY,
                    })
                }
            };
            let err = (a - e).abs();
            let bound = self.abs + self.rel * e.abs();
            let within = err <= bound || a == e; // false for NaN
            let bad = !within;
            if err.is_finite() {
                max_abs_err = max_abs_err.max(err);
            } else if bad {
                max_abs_err = f64::INFINITY;
            }
            if bad {
                count += 1;
                let excess = if err.is_finite() {
                    err - bound
                } else {
                    f64::INFINITY
                };
                if worst.is_none_or(|(_, w)| excess > w) {
                    worst = Some((i, excess));
                }
            }
        }
        match worst {
            None => Ok(max_abs_err),
            Some((index, _)) => Err(Mismatch {
                index,
                expected: expected[index],
                actual: actual[index] as f64,
                count,
                total: n,
                max_abs_err,
            }),
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "abs {:.1e} + rel {:.1e}", self.abs, self.rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_errors_and_nan() {
        let t = Tolerance::new(1e-3, 1e-3);
        assert!(t.check(&[1.0, 2.0], &[1.0005, 2.001]).is_ok());
        let m = t.check(&[1.0, 2.0], &[1.0, 2.1]).unwrap_err();
        assert_eq!(m.index, 1);
        assert_eq!(m.count, 1);
        assert!(t.check(&[1.0], &[f32::NAN]).is_err());
        assert!(t.check(&[1.0, 2.0], &[1.0]).is_err());
    }
}
