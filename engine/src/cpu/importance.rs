//! Activation statistics for importance-weighted quantization (the idea of llama.cpp's
//! importance matrix): while [`collect`] runs a closure, every f32 matmul on the CPU backend adds
//! the squares of its input columns to the weight's entry, so a quantizer can weigh each
//! column's rounding error by how large the activations it multiplies are.
//!
//! A matmul's output error for weight row `w` is `Σ_k x_k Δw_k`; over a calibration text its
//! mean square is about `Σ_k E[x_k²] Δw_k²`, so `E[x_k²]` (column `k`'s importance) is the
//! weight a least-squares fit of row `w` should give column `k`.
//!
//! The recorder is process-wide because the CPU backend is a plain value shared by handle; one
//! collection runs at a time (others wait), and outside [`collect`] the hooks cost one relaxed
//! atomic load per matmul. It is a build-time tool: the index-builder calibrates with it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Per weight tensor (by the label it was uploaded with): `E[x_k²]` per input column, and the
/// number of activation rows it was measured over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportanceMap {
    /// Tensor name → (mean square per column, rows seen).
    pub tensors: BTreeMap<String, (Vec<f32>, u64)>,
}

impl ImportanceMap {
    /// The column weights of `name`, if it was measured.
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        self.tensors.get(name).map(|(v, _)| v.as_slice())
    }
}

#[derive(Default)]
struct Recorder {
    /// Weight buffer address → label (registered at upload while recording).
    labels: HashMap<usize, String>,
    /// Label → (Σ x_k² per column, rows).
    sums: BTreeMap<String, (Vec<f64>, u64)>,
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<Option<Recorder>> = Mutex::new(None);
static EXCLUSIVE: Mutex<()> = Mutex::new(());

/// Runs `f` with recording on and returns its result with the statistics of every f32 matmul
/// whose weights were uploaded inside `f` (load the model inside the closure).
pub fn collect<T>(f: impl FnOnce() -> T) -> (T, ImportanceMap) {
    /// Turns recording off however `f` ends (a panic included).
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ACTIVE.store(false, Ordering::SeqCst);
        }
    }
    let _one = EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner());
    *state() = Some(Recorder::default());
    ACTIVE.store(true, Ordering::SeqCst);
    let off = Off;
    let out = f();
    drop(off);
    let rec = state().take().unwrap_or_default();
    let tensors = rec
        .sums
        .into_iter()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(k, (s, n))| (k, (s.iter().map(|v| (v / n as f64) as f32).collect(), n)))
        .collect();
    (out, ImportanceMap { tensors })
}

fn state() -> std::sync::MutexGuard<'static, Option<Recorder>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Allocation hook: remembers which label the buffer at `addr` holds (`None`: a scratch
/// buffer, which may reuse a freed weight's address).
pub(crate) fn register(addr: usize, label: Option<&str>) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    if let Some(r) = state().as_mut() {
        match label {
            Some(l) => r.labels.insert(addr, l.to_string()),
            None => r.labels.remove(&addr),
        };
    }
}

/// Matmul hook: adds the squares of `x[m][cols]` to the weight at `addr`.
pub(crate) fn observe(addr: usize, x: &[f32], m: usize, cols: usize) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let mut guard = state();
    let Some(r) = guard.as_mut() else { return };
    let Some(label) = r.labels.get(&addr).cloned() else {
        return;
    };
    let (sum, n) = r.sums.entry(label).or_insert_with(|| (vec![0.0; cols], 0));
    if sum.len() != cols {
        return;
    }
    for row in x[..m * cols].chunks_exact(cols) {
        for (s, &v) in sum.iter_mut().zip(row) {
            *s += (v as f64) * (v as f64);
        }
    }
    *n += m as u64;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, MatmulKernel};
    use crate::cpu::CpuBackend;

    #[test]
    fn records_mean_squares_per_column_of_uploaded_weights_only() {
        let b = CpuBackend;
        let outside = b.upload("outside", &[1.0; 8]).unwrap();
        let ((), map) = collect(|| {
            let w = b.upload("w", &[0.5; 8]).unwrap(); // [2 rows, 4 cols]
            let x = b
                .upload("x", &[1.0, 2.0, -3.0, 0.0, 3.0, 0.0, 1.0, 2.0])
                .unwrap(); // [2, 4]
            let out = b.alloc("out", 4).unwrap();
            b.f32_matmul(&x, &w, 2, 4, &out, 2, MatmulKernel::Gemv)
                .unwrap();
            b.f32_matmul(&x, &outside, 2, 4, &out, 2, MatmulKernel::Gemv)
                .unwrap();
        });
        assert_eq!(map.tensors.len(), 1, "{map:?}");
        let (v, n) = &map.tensors["w"];
        assert_eq!(*n, 2);
        // Column means of x²: (1+9)/2, (4+0)/2, (9+1)/2, (0+4)/2.
        assert_eq!(v, &vec![5.0, 2.0, 5.0, 2.0]);
        // Off again: nothing recorded, nothing kept.
        let out = b.alloc("out", 4).unwrap();
        let x = b.upload("x", &[1.0; 8]).unwrap();
        b.f32_matmul(&x, &outside, 2, 4, &out, 2, MatmulKernel::Gemv)
            .unwrap();
        assert!(state().is_none());
    }
}
