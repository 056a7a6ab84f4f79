//! Exact (erf) GELU.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "gelu",
    source: include_str!("gelu.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    _p: [u32; 3],
}

/// Records the activation. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    out: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    let wg = ctx.tuning.elem_wg;
    let p = Params {
        n: n as u32,
        _p: [0; 3],
    };
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, out],
        groups_for(n, wg),
    )
}

/// erf by Numerical Recipes' `erfcc` (fractional error < 1.2e-7), as in the WGSL; its `exp` is
/// [`crate::cpu::fast_exp`] (relative error < 3e-7), so the loop vectorizes.
pub fn erf(v: f32) -> f32 {
    let z = v.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_2 + t * 0.170_872_77))))))));
    let r = t * crate::cpu::fast_exp(poly);
    if v >= 0.0 {
        1.0 - r
    } else {
        r - 1.0
    }
}

/// Plain-Rust reference (natively in parallel blocks: the `exp` in `erf` dominates an encoder
/// layer's element-wise work).
pub fn cpu(x: &[f32], out: &mut [f32]) {
    let run = |x: &[f32], out: &mut [f32]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        const BLOCK: usize = 16 * 1024;
        out.par_chunks_mut(BLOCK)
            .zip(x.par_chunks(BLOCK))
            .for_each(|(o, x)| run(x, o));
    }
    #[cfg(target_arch = "wasm32")]
    run(x, out);
}
