//! The WGSL kernels, one `.wgsl` file per op beside the Rust that dispatches it. Each module
//! holds the kernel's [`Shader`](crate::gpu::context::Shader), its uniform parameters and its
//! dispatch on [`GpuContext`](crate::gpu::context::GpuContext); the CPU's code for the same ops
//! lives in [`crate::cpu`], and the tests crate checks both against f64 oracles.

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

/// Workgroups for `n` items at `per_group` items each, folded into a 2-D grid.
pub(crate) fn groups_for(n: usize, per_group: u32) -> [u32; 3] {
    crate::gpu::context::grid((n as u64).div_ceil(per_group as u64) as u32)
}
