//! Rotary position embedding (rotate-half pairing, partial rotary) from a host-built table;
//! and the same for a layer's queries and keys with its KV cache append, in one dispatch.

use super::groups_for;
use crate::backend::{KvFormat, RopeShape};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("rope", common);
/// Queries and keys rotated, keys and values appended to an f32 cache, in one dispatch.
pub const APPEND: Shader = crate::shader!("rope_append" = "rope_append", common, kv_store_f32);
/// [`APPEND`] over an f16 cache (halves two to a word, as `kv_pack.wgsl` writes them).
const APPEND_F16: Shader = crate::shader!("rope_append/f16" = "rope_append", common, kv_store_f16);

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

/// Whether [`dispatch_append`] takes these shapes: queries and keys of one head_dim (a multiple
/// of 4), fully rotated, at the same tokens and positions, appended from an even cache value
/// (each invocation owns whole pairs: whole words of an f16 cache).
pub(crate) fn append_fits(q: &RopeShape, k: &RopeShape, dst: usize) -> bool {
    let full = |s: &RopeShape| s.rot_dim == s.head_dim;
    full(q)
        && full(k)
        && q.head_dim == k.head_dim
        && q.head_dim.is_multiple_of(4)
        && (q.tokens, q.pos0) == (k.tokens, k.pos0)
        && dst.is_multiple_of(2)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AppendParams {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,
    dst2: u32,
    _p: [u32; 2],
}

/// Records RoPE of `q` and `k` in place and the append of `k` and `v` to caches in `format`
/// at value `dst`, as one dispatch. Shapes are checked, and [`append_fits`], by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch_append(
    ctx: &GpuContext,
    [q, k, v]: [&wgpu::Buffer; 3],
    table: &wgpu::Buffer,
    [kc, vc]: [&wgpu::Buffer; 2],
    format: KvFormat,
    (qs, ks): (RopeShape, RopeShape),
    dst: usize,
) -> Result<()> {
    let p = AppendParams {
        tokens: qs.tokens as u32,
        heads: qs.heads as u32,
        kv_heads: ks.heads as u32,
        head_dim: qs.head_dim as u32,
        pos0: qs.pos0 as u32,
        dst2: (dst / 2) as u32,
        _p: [0; 2],
    };
    let half = qs.head_dim / 2;
    let items = qs.tokens * qs.heads * half + ks.tokens * ks.heads * (half / 2 + half);
    let kernel = match format {
        KvFormat::F32 => &APPEND,
        KvFormat::F16 => &APPEND_F16,
    };
    let wg = ctx.tuning.elem_wg;
    ctx.dispatch(
        kernel,
        &[("WG", wg)],
        bytemuck::bytes_of(&p),
        &[q, k, v, table, kc, vc],
        groups_for(items, wg),
    )
}
