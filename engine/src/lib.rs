//! Lorekeeper's engine: one crate for the browser (WebGPU) and the desktop (native wgpu).
//!
//! This layer holds the GPU context, the WGSL kernels with their plain-Rust references, the
//! LQ4 4-bit weight format, one tolerance type for numeric comparisons and a platform-identical
//! RNG. Models, tokenizer, retrieval and the answer protocol build on it.

pub mod answer;
pub mod backend;
pub mod choose;
pub mod cpu;
pub mod embed;
pub mod error;
pub mod format;
pub mod generate;
pub mod gpu;
#[cfg(not(target_arch = "wasm32"))]
pub mod loader;
pub mod models;
pub mod quant;
pub mod retrieval;
pub mod rng;
pub mod tokenizer;
pub mod tolerance;

pub use backend::{
    AttnShape, Backend, BufferLen, KernelTime, KvFormat, LogitFilter, MatmulInput, MatmulKernel,
    MatrixShape, Profile, RopeShape, Selection,
};
pub use cpu::CpuBackend;
pub use error::{EngineError, Result};
pub use gpu::{GpuContext, Requirements};
pub use quant::Q4Matrix;
pub use tolerance::Tolerance;
