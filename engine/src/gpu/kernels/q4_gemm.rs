//! 4-bit GEMM (prefill): tiled `out[m][n] = sum_k x[m][k] * W[n][k]`.

use crate::error::Result;
use crate::gpu::buffer::GpuQ4;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel.
pub const KERNEL: Shader = crate::shader!("q4_gemm");

/// Output tile edge (`BM` = `BN` in the WGSL; a test checks they agree).
pub const TILE: usize = 32;

pub(crate) use super::q4_gemv::Params;

/// Records the GEMM into the output window `(row stride, offset)`. Shapes are checked by the
/// caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    m: usize,
    window: (usize, usize),
) -> Result<()> {
    let params = Params::for_matrix(w, m, window);
    let g = [w.rows.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1];
    ctx.dispatch(
        &KERNEL,
        &[],
        bytemuck::bytes_of(&params),
        &[&w.buf, x, out],
        g,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn tile_matches_wgsl() {
        let src = super::KERNEL.source;
        assert!(src.contains(&format!("const BM: u32 = {}u;", super::TILE)));
        assert!(src.contains(&format!("const BN: u32 = {}u;", super::TILE)));
    }
}
