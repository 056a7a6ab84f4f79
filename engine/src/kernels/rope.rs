//! Rotary position embedding (rotate-half pairing, partial rotary) from a host-built table.

use super::{groups_for, Kernel};
use crate::backend::RopeShape;
use crate::error::Result;
use crate::gpu::GpuContext;

/// The kernel.
pub const KERNEL: Kernel = Kernel {
    label: "rope",
    source: include_str!("rope.wgsl"),
    entry: "main",
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    rot_dim: u32,
    pos0: u32,
    _p: [u32; 3],
}

/// Records the rotation. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    table: &wgpu::Buffer,
    s: RopeShape,
) -> Result<()> {
    let p = Params {
        tokens: s.tokens as u32,
        heads: s.heads as u32,
        head_dim: s.head_dim as u32,
        rot_dim: s.rot_dim as u32,
        pos0: s.pos0 as u32,
        _p: [0; 3],
    };
    let wg = ctx.tuning.elem_wg;
    ctx.dispatch(
        &KERNEL,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[x, table],
        groups_for(s.tokens * s.heads * s.rot_dim / 2, wg),
    )
}

/// Plain-Rust reference.
pub fn cpu(x: &mut [f32], table: &[f32], s: RopeShape) {
    let half = s.rot_dim / 2;
    for t in 0..s.tokens {
        for h in 0..s.heads {
            let base = (t * s.heads + h) * s.head_dim;
            for i in 0..half {
                let c = table[((s.pos0 + t) * half + i) * 2];
                let sn = table[((s.pos0 + t) * half + i) * 2 + 1];
                let a = x[base + i];
                let b = x[base + i + half];
                x[base + i] = a * c - b * sn;
                x[base + i + half] = b * c + a * sn;
            }
        }
    }
}
