//! The WGSL kernels, one `.wgsl` file per op beside the Rust that dispatches it. Each module
//! holds the kernel's uniform parameters, its dispatch on [`crate::gpu::GpuContext`], and its
//! plain-Rust reference `cpu`, which [`crate::cpu::CpuBackend`] runs.

pub mod add;
pub mod add_bias;
pub mod attention;
pub mod conv1d;
pub mod copy;
pub mod delta_rule;
pub mod embed_q4;
pub mod f32_matmul;
pub mod gelu;
pub mod layer_norm;
pub mod q4_gemm;
pub mod q4_gemv;
pub mod rms_norm;
pub mod rope;
pub mod sigmoid_mul;
pub mod silu_mul;
pub mod softmax;
pub mod take_half;
pub mod topk;

/// A kernel's source and entry point; pipelines are cached per (kernel, overrides).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// Label, also the cache key and the debug name in driver tools.
    pub label: &'static str,
    /// WGSL source.
    pub source: &'static str,
    /// Entry point.
    pub entry: &'static str,
}

/// Every kernel, for tools that compile them all up front.
pub const ALL: &[Kernel] = &[
    add::KERNEL,
    attention::KERNEL,
    conv1d::KERNEL,
    copy::KERNEL,
    delta_rule::KERNEL,
    embed_q4::KERNEL,
    f32_matmul::GEMV,
    f32_matmul::GEMM,
    q4_gemm::KERNEL,
    q4_gemv::KERNEL,
    rms_norm::KERNEL,
    rope::KERNEL,
    sigmoid_mul::KERNEL,
    silu_mul::KERNEL,
    softmax::KERNEL,
    take_half::KERNEL,
    topk::KERNEL,
    topk::SUM_EXP,
];

/// Workgroups for `n` items at `per_group` items each, folded into a 2-D grid.
pub(crate) fn groups_for(n: usize, per_group: u32) -> [u32; 3] {
    crate::gpu::grid((n as u64).div_ceil(per_group as u64) as u32)
}
