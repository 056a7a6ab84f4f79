//! The row kernels, one workgroup per row (`common.wgsl` prepended, with its workgroup
//! reductions): RMSNorm, LayerNorm and softmax. Shapes are checked by the caller.

use super::{dispatch_rows, Words};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// `x / rms(x) * (weight + offset)` per row.
pub const RMS_NORM: Shader = crate::shader!("rms_norm", common);
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
