//! The GPU: one layer on top of the other, each importing only from those below it.
//!
//! - [`context`]: the runtime for native wgpu and the browser's WebGPU — adapter and limits,
//!   pipelines cached by [`context::Shader`], one compute pass per submission, uniform ring
//!   at dynamic offsets, bind groups built once, pooled readback, the `--profile` counts.
//! - [`buffer`]: the device buffers the backend hands out.
//! - [`kernels`]: one `.wgsl` per op beside the Rust that dispatches it.
//! - [`kv`]: the KV cache — its format, appends, the fused rotation-and-append, attention.
//! - [`backend`]: [`crate::backend::Backend`] on the GPU — shape checks, then the kernels.
//! - [`fused_check`]: the fused kernels checked against the plain ops on the adapter in hand.

pub mod backend;
pub mod buffer;
pub mod context;
pub mod fused_check;
pub mod kernels;
pub mod kv;

pub use buffer::{GpuBuffer, GpuKv, GpuQ4};
pub use context::{GpuContext, Requirements, Tuning};
