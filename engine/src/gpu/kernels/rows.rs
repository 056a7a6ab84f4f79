//! The row kernels, one workgroup per row (`common.wgsl` prepended, with its workgroup
//! reductions): RMSNorm, LayerNorm and softmax. Shapes are checked by the caller.

use super::{dispatch_rows, Words};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// `x / rms(x) * (weight + offset)` per row.
pub const RMS_NORM: Shader = crate::shader!("rms_norm", common);
/// RMSNorm per head, then RoPE (Qwen3's q_norm / k_norm before the rotation).
pub const RMS_NORM_ROPE: Shader = crate::shader!("rms_norm_rope", common);
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
