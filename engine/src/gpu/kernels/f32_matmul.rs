//! f32-weight matmul, GEMV (decode) and GEMM (prefill), for unquantized models and tests
//! against Hugging Face at full precision.

use super::groups_for;
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The GEMV kernel.
pub const GEMV: Shader = crate::shader!("f32_gemv");

/// The GEMM kernel.
pub const GEMM: Shader = crate::shader!("f32_gemm");

/// Output tile edge of the GEMM (`BM` = `BN` in the WGSL).
pub const TILE: usize = 32;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    out_stride: u32,
}

/// Records `out[m][n] = x[m][k] . W[n][k]`. Shapes are checked by the caller (`k % 4 == 0`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    w: &wgpu::Buffer,
    rows: usize,
    cols: usize,
    out: &wgpu::Buffer,
    m: usize,
    gemm: bool,
) -> Result<()> {
    let p = Params {
        m: m as u32,
        n: rows as u32,
        k: cols as u32,
        out_stride: rows as u32,
    };
    if gemm {
        let g = [rows.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1];
        ctx.dispatch(&GEMM, &[], bytemuck::bytes_of(&p), &[w, x, out], g)
    } else {
        let t = ctx.tuning;
        let mut g = groups_for(rows, t.gemv_wg / t.gemv_tpr);
        g[2] = m as u32;
        ctx.dispatch(
            &GEMV,
            &[("WG", t.gemv_wg), ("TPR", t.gemv_tpr)],
            bytemuck::bytes_of(&p),
            &[w, x, out],
            g,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tile_matches_wgsl() {
        let src = super::GEMM.source;
        assert!(src.contains(&format!("const BM: u32 = {}u;", super::TILE)));
        assert!(src.contains(&format!("const BN: u32 = {}u;", super::TILE)));
    }
}
