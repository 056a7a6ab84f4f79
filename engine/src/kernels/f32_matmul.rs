//! f32-weight matmul, GEMV (decode) and GEMM (prefill), for unquantized models and tests
//! against Hugging Face at full precision.

use super::{groups_for, Kernel};
use crate::error::Result;
use crate::gpu::GpuContext;

/// The GEMV kernel.
pub const GEMV: Kernel = Kernel {
    label: "f32_gemv",
    source: include_str!("f32_gemv.wgsl"),
    entry: "main",
};

/// The GEMM kernel.
pub const GEMM: Kernel = Kernel {
    label: "f32_gemm",
    source: include_str!("f32_gemm.wgsl"),
    entry: "main",
};

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

/// CPU path: for a few activation rows each weight row is read once and dotted with every
/// activation row while it is in cache; from `GEMM_MIN_ROWS` rows on, a packed SGEMM per block
/// of weight rows. Row blocks are split across the CPU's threads (natively).
pub fn cpu(x: &[f32], w: &[f32], rows: usize, cols: usize, out: &mut [f32], m: usize) {
    if m >= crate::cpu::GEMM_MIN_ROWS {
        let w = crate::cpu::GemmWeights::F32(&w[..rows * cols]);
        return crate::cpu::par_gemm(x, w, rows, cols, m, out);
    }
    crate::cpu::par_rows(rows, m, out, |r0, r1, part| {
        for r in r0..r1 {
            let wr = &w[r * cols..(r + 1) * cols];
            for mi in 0..m {
                let xr = &x[mi * cols..(mi + 1) * cols];
                part[(r - r0) * m + mi] = crate::cpu::dot(xr, wr);
            }
        }
    });
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
