//! The row kernels, one workgroup per row (`common.wgsl` prepended, with its workgroup
//! reductions): RMSNorm (with RoPE, and with Qwen3's KV append), LayerNorm and softmax. Shapes
//! are checked by the caller.

use super::{dispatch_rows, Words};
use crate::backend::{KvFormat, RopeShape};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// `x / rms(x) * (weight + offset)` per row.
pub const RMS_NORM: Shader = crate::shader!("rms_norm", common);
/// RMSNorm per head, then RoPE (Qwen3's q_norm / k_norm before the rotation).
pub const RMS_NORM_ROPE: Shader = crate::shader!("rms_norm_rope", common);
/// RMSNorm with RoPE of a layer's queries (in place) and keys with the keys and values
/// appended to an f32 cache, in one dispatch.
pub const RMS_NORM_ROPE_APPEND: Shader = crate::shader!(
    "rms_norm_rope_append" = "rms_norm_rope_append",
    common,
    kv_store_f32
);
/// [`RMS_NORM_ROPE_APPEND`] over an f16 cache.
const RMS_NORM_ROPE_APPEND_F16: Shader = crate::shader!(
    "rms_norm_rope_append/f16" = "rms_norm_rope_append",
    common,
    kv_store_f16
);
/// `(x - mean) / std * weight + bias` per row.
pub const LAYER_NORM: Shader = crate::shader!("layer_norm", common);
/// Softmax per row.
pub const SOFTMAX: Shader = crate::shader!("softmax", common);

/// The shape and constants of a row kernel: `rows` of `dim`, `eps` and the weight offset
/// (the norms).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows {
    /// Rows (one workgroup each).
    pub rows: usize,
    /// Row length.
    pub dim: usize,
    /// Variance epsilon of the norms.
    pub eps: f32,
    /// RMSNorm's weight offset (1 for Qwen3.5's `(1 + w)`).
    pub offset: f32,
}

impl Rows {
    fn words(self) -> Words {
        [
            self.rows as u32,
            self.dim as u32,
            self.eps.to_bits(),
            self.offset.to_bits(),
        ]
    }
}

/// Records RMSNorm of `x` into `out`.
pub(crate) fn rms_norm(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: Rows,
) -> Result<()> {
    dispatch_rows(ctx, &RMS_NORM, s.words(), &[x, weight, out], s.rows)
}

/// A second tensor for [`rms_norm_rope`]'s dispatch (Qwen3's keys beside its queries): its
/// input, norm weight and output, and `(rows, heads)` = (tokens x its heads, its heads).
pub(crate) type Second<'a> = ([&'a wgpu::Buffer; 3], (usize, usize));

/// Records RMSNorm of each head of `x` (`s.rows` = tokens x heads, `s.dim` = head_dim)
/// followed by RoPE at `(heads, rot_dim, pos0)`, into `out`; with `second`, the same of a
/// second tensor of the same head_dim in the same dispatch.
pub(crate) fn rms_norm_rope(
    ctx: &GpuContext,
    (x, weight, table): (&wgpu::Buffer, &wgpu::Buffer, &wgpu::Buffer),
    out: &wgpu::Buffer,
    s: Rows,
    (heads, rot_dim, pos0): (usize, usize, usize),
    second: Option<Second<'_>>,
) -> Result<()> {
    let w = s.words();
    let ([x2, w2, out2], (rows2, heads2)) =
        second.unwrap_or(([ctx.dummy(), ctx.dummy(), ctx.dummy_out(0)], (0, 1)));
    let params: [u32; 12] = [
        w[0],
        w[1],
        w[2],
        w[3],
        heads as u32,
        rot_dim as u32,
        pos0 as u32,
        rows2 as u32,
        heads2 as u32,
        0,
        0,
        0,
    ];
    let wg = ctx.tuning.reduce_wg;
    let p = bytemuck::bytes_of(&params);
    let groups = super::groups_for(s.rows + rows2, 1);
    ctx.dispatch(
        &RMS_NORM_ROPE,
        &[("WG", wg)],
        p,
        &[x, weight, table, out, x2, w2, out2],
        groups,
    )
}

/// Whether [`rms_norm_rope_append`] takes these shapes: queries and keys of one head_dim (even,
/// at most 256: a key row in workgroup memory), fully rotated, at the same tokens and
/// positions, appended from an even cache value.
pub(crate) fn norm_append_fits(q: &RopeShape, k: &RopeShape, dst: usize) -> bool {
    let full = |s: &RopeShape| s.rot_dim == s.head_dim;
    full(q)
        && full(k)
        && q.head_dim == k.head_dim
        && q.head_dim.is_multiple_of(2)
        && q.head_dim <= 256
        && (q.tokens, q.pos0) == (k.tokens, k.pos0)
        && dst.is_multiple_of(2)
}

/// Records RMSNorm (`s.eps`, `s.offset`) with RoPE of the queries `q` in place and of the keys
/// `k`, the keys and values `v` appended to caches in `format` at value `dst`, as one dispatch.
/// Shapes are checked, and [`norm_append_fits`], by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rms_norm_rope_append(
    ctx: &GpuContext,
    [q, k, v]: [&wgpu::Buffer; 3],
    [wq, wk]: [&wgpu::Buffer; 2],
    table: &wgpu::Buffer,
    [kc, vc]: [&wgpu::Buffer; 2],
    format: KvFormat,
    s: Rows,
    (qs, ks): (RopeShape, RopeShape),
    dst: usize,
) -> Result<()> {
    let w = s.words();
    let rows2 = ks.tokens * ks.heads;
    let params: [u32; 12] = [
        w[0],
        w[1],
        w[2],
        w[3],
        qs.heads as u32,
        ks.heads as u32,
        qs.pos0 as u32,
        rows2 as u32,
        (dst / 2) as u32,
        0,
        0,
        0,
    ];
    let kernel = match format {
        KvFormat::F32 => &RMS_NORM_ROPE_APPEND,
        KvFormat::F16 => &RMS_NORM_ROPE_APPEND_F16,
    };
    let wg = ctx.tuning.reduce_wg;
    ctx.dispatch(
        kernel,
        &[("WG", wg)],
        bytemuck::bytes_of(&params),
        &[q, wq, table, k, kc, vc, wk, v],
        super::groups_for(s.rows + 2 * rows2, 1),
    )
}

/// Records LayerNorm of `x` into `out` (`weight`, `bias`).
pub(crate) fn layer_norm(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    wb: [&wgpu::Buffer; 2],
    out: &wgpu::Buffer,
    s: Rows,
) -> Result<()> {
    dispatch_rows(ctx, &LAYER_NORM, s.words(), &[x, wb[0], wb[1], out], s.rows)
}

/// Records the softmax of each row of `x` into `out`.
pub(crate) fn softmax(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: Rows,
) -> Result<()> {
    dispatch_rows(ctx, &SOFTMAX, s.words(), &[x, out], s.rows)
}
