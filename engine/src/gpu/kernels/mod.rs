//! The WGSL kernels, one `.wgsl` file per op beside the Rust that dispatches it. Each module
//! holds the kernel's [`Shader`], its uniform parameters and its
//! dispatch on [`GpuContext`]; the CPU's code for the same ops
//! lives in the `cpu` module, and the tests crate checks both against f64 oracles.

pub mod attention;
pub mod attention_lanes;
pub mod conv1d;
pub mod delta_rule;
pub mod elementwise;
pub mod embed_q4;
pub mod f32_matmul;
pub mod q4_gemm_lanes;
pub mod q4_matmul;
pub mod rope;
pub mod rows;
pub mod topk;

use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The shader named `label` whose source `make` writes (a template expanded for a shape),
/// made on first use and kept for the process's life, as the pipeline cache keeps its
/// pipelines: a process meets one or two shapes of each template, a few KB each.
pub(crate) fn expanded(label: String, make: impl FnOnce() -> String) -> &'static Shader {
    static EXPANDED: std::sync::Mutex<Vec<&'static Shader>> = std::sync::Mutex::new(Vec::new());
    let mut all = EXPANDED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = all.iter().find(|s| s.label == label) {
        return s;
    }
    let shader: &'static Shader = Box::leak(Box::new(Shader {
        label: Box::leak(label.into_boxed_str()),
        source: Box::leak(make().into_boxed_str()),
        entry: "main",
    }));
    all.push(shader);
    shader
}

/// Workgroups for `n` items at `per_group` items each, folded into a 2-D grid.
pub(crate) fn groups_for(n: usize, per_group: u32) -> [u32; 3] {
    crate::gpu::context::grid((n as u64).div_ceil(per_group as u64) as u32)
}

/// Uniform parameters of the element-wise and row kernels: four 32-bit words (an f32 as its
/// bits), the layout of their WGSL `Params`.
pub(crate) type Words = [u32; 4];

/// Records `shader` over `items` elements, one per invocation (`elem_wg` per workgroup).
pub(crate) fn dispatch_items(
    ctx: &GpuContext,
    shader: &Shader,
    params: Words,
    buffers: &[&wgpu::Buffer],
    items: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = bytemuck::bytes_of(&params);
    ctx.dispatch(shader, &[("WG", wg)], p, buffers, groups_for(items, wg))
}

/// Records `shader` with one workgroup (`reduce_wg` invocations) per row.
pub(crate) fn dispatch_rows(
    ctx: &GpuContext,
    shader: &Shader,
    params: Words,
    buffers: &[&wgpu::Buffer],
    rows: usize,
) -> Result<()> {
    let wg = ctx.tuning.reduce_wg;
    let p = bytemuck::bytes_of(&params);
    ctx.dispatch(shader, &[("WG", wg)], p, buffers, groups_for(rows, 1))
}
