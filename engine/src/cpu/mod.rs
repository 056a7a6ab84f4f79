//! [`crate::backend::Backend`] on the CPU: the path most readers run (no GPU, or only a
//! software adapter). One module per op family; each holds the CPU code for its ops, and the
//! fast paths are tested against plain references (`select::select_reference`, the f64
//! oracles of the tests crate).
//!
//! - [`backend`]: the trait's implementation — shape checks, then the families;
//! - [`matmul`], [`gemv`], [`q8`], [`simd`]: matmuls; 4-bit decode as integer dot products of
//!   8-bit activation blocks with the 4-bit weights, one implementation per instruction set
//!   behind one dispatch (AVX2, NEON, simd128, scalar); prefill as a packed SGEMM;
//! - [`attention`], [`rope`], [`norm`], [`elementwise`], [`recurrent`], [`embed`], [`select`]:
//!   the other op families;
//! - [`importance`]: activation statistics for importance-weighted quantization;
//! - [`math`]: `dot`, `sum`, `fast_exp`, the SGEMM and the row split; [`pool`]: the threads
//!   (one persistent pool, sized to the physical cores by default).

pub mod attention;
pub mod backend;
pub mod elementwise;
pub mod embed;
pub mod gemv;
pub mod importance;
pub mod math;
pub mod matmul;
pub mod norm;
pub mod pool;
pub mod q8;
pub mod recurrent;
pub mod rope;
pub mod select;
pub mod simd;

pub use backend::{CpuBackend, CpuBuffer};
