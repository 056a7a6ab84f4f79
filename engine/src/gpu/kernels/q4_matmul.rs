//! Block-quantized matmuls `out[m][n] = sum_k x[m][k] * W[n][k]` (LQ4, lq4h, q8_0): the GEMV for a few
//! activation rows (decode; `TPR` threads per output row) and the tiled GEMM (prefill). Both
//! read the same parameters and write into an output window `(row stride, offset)`.

use super::groups_for;
use crate::backend::MatmulKernel;
use crate::error::Result;
use crate::gpu::buffer::GpuQ4;
use crate::gpu::context::{GpuContext, Shader};

/// The decode kernel (LQ4, lq4h): one 4-byte word per lane and step (`U` steps' loads issued
/// together), for GPUs.
pub const GEMV: Shader = crate::shader!("q4_gemv" = "q4_gemv", gemv_common, gemv_reduce);
/// The decode kernel for CPU rasterisers: one 32-weight group (16 bytes) per lane and step.
pub const GEMV_GROUPS: Shader = crate::shader!(
    "q4_gemv_groups" = "q4_gemv_groups",
    gemv_common,
    gemv_reduce
);
/// The decode kernel for `q8_0` weights on GPUs: one word per lane and step.
pub const Q8_GEMV: Shader = crate::shader!("q8_gemv" = "q8_gemv", gemv_common, gemv_reduce);
/// The decode kernel for `q8_0` weights on CPU rasterisers: the group kernel with `KIND` 2 (one
/// 32-byte group per lane and step), under its own label.
pub const Q8_GEMV_GROUPS: Shader = crate::shader!(
    "q8_gemv_groups" = "q4_gemv_groups",
    gemv_common,
    gemv_reduce
);

/// The same four kernels with a row's lanes summed by subgroup shuffles
/// (`gemv_reduce_sg.wgsl`), where [`GpuContext::subgroup_rows`] says so.
pub const GEMV_SG: Shader = crate::shader!("q4_gemv_sg" = "q4_gemv", gemv_common, gemv_reduce_sg);
/// [`GEMV_GROUPS`] with subgroup shuffles.
pub const GEMV_GROUPS_SG: Shader = crate::shader!(
    "q4_gemv_groups_sg" = "q4_gemv_groups",
    gemv_common,
    gemv_reduce_sg
);
/// [`Q8_GEMV`] with subgroup shuffles.
pub const Q8_GEMV_SG: Shader =
    crate::shader!("q8_gemv_sg" = "q8_gemv", gemv_common, gemv_reduce_sg);
/// [`Q8_GEMV_GROUPS`] with subgroup shuffles.
pub const Q8_GEMV_GROUPS_SG: Shader = crate::shader!(
    "q8_gemv_groups_sg" = "q4_gemv_groups",
    gemv_common,
    gemv_reduce_sg
);

/// `plain`, or `sg` (its subgroup form) where [`GpuContext::subgroup_rows`] says so.
fn reduced<'a>(ctx: &GpuContext, plain: &'a Shader, sg: &'a Shader) -> &'a Shader {
    if ctx.subgroup_rows() {
        sg
    } else {
        plain
    }
}
/// The prefill kernel.
pub const GEMM: Shader = crate::shader!("q4_gemm");

/// GEMM output tile edge (`BM` = `BN` in the WGSL; a test checks they agree).
pub const TILE: usize = 32;

/// Uniform parameters (layout of `Params` in the WGSL).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Params {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub sm_off: u32,
    pub rows_off: u32,
    pub out_stride: u32,
    pub out_off: u32,
    pub kind: u32,
    /// The word GEMV's second and third matrices (`PARTS` > 1): rows, section offsets and
    /// first workgroup of each; zero elsewhere.
    pub parts: [u32; 8],
}

impl Params {
    /// Parameters for `out[mi * stride + off + n] = (x W^T)[mi][n]`; `(w.rows, 0)` is a
    /// whole matrix.
    pub(crate) fn for_matrix(w: &GpuQ4, m: usize, (stride, off): (usize, usize)) -> Params {
        Params {
            m: m as u32,
            n: w.rows as u32,
            k: w.cols as u32,
            sm_off: w.sm_off as u32,
            rows_off: w.rows_off as u32,
            out_stride: stride as u32,
            out_off: off as u32,
            kind: w.kind,
            parts: [0; 8],
        }
    }
}

/// RMSNorm in the word GEMV's prologue (a layer's input norm): its weight `[k]`, variance
/// epsilon and weight offset (1 for `(1 + w)` norms).
#[derive(Clone, Copy)]
pub(crate) struct NormIn<'a> {
    pub weight: &'a wgpu::Buffer,
    pub eps: f32,
    pub offset: f32,
}

/// Whether the word-per-lane GEMV (`q4_gemv.wgsl`) is this adapter's kernel for `w`: 4-bit
/// rows (not `q8_0`) and the word kernel in the tuning (GPUs, not CPU rasterisers). Its
/// prologue (RMSNorm) and its several matrices per dispatch exist only there.
pub(crate) fn word_gemv(ctx: &GpuContext, w: &GpuQ4) -> bool {
    w.kind != GpuQ4::Q8 && !ctx.tuning.gemv_groups
}

/// Whether one word-GEMV dispatch computes all of `mats`: one to three 4-bit matrices of one
/// width and layout.
pub(crate) fn parts_fit(ctx: &GpuContext, mats: &[&GpuQ4]) -> bool {
    let Some(first) = mats.first() else {
        return false;
    };
    mats.len() <= 3
        && mats
            .iter()
            .all(|w| word_gemv(ctx, w) && (w.cols, w.kind) == (first.cols, first.kind))
}

/// What the GEMV does with a row's product.
#[derive(Clone, Copy)]
pub(crate) enum Epilogue<'a> {
    /// Stores it.
    Store,
    /// Adds it to the output (the residual add).
    Add,
    /// SwiGLU: the product is the gate's, `silu(gate) * up` is stored with the same row of
    /// this up projection (the word-per-lane kernel; see [`glu_fits`]).
    Glu(&'a GpuQ4),
}

/// Whether the GPU's word-per-lane GEMV computes SwiGLU of `gate` and `up` in one dispatch:
/// matrices of one shape and layout, the tuning's kernel that one, an even number of row
/// slots per workgroup.
pub(crate) fn glu_fits(ctx: &GpuContext, gate: &GpuQ4, up: &GpuQ4) -> bool {
    let t = ctx.tuning;
    let same = (gate.rows, gate.cols, gate.kind, gate.sm_off, gate.rows_off)
        == (up.rows, up.cols, up.kind, up.sm_off, up.rows_off);
    same && gate.kind != GpuQ4::Q8 && !t.gemv_groups && (t.gemv_wg / t.gemv_tpr).is_multiple_of(2)
}

/// Records the matmul into the output window `(row stride, offset)`; `(w.rows, 0)` is a
/// whole output. Shapes are checked by the caller.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    kernel: MatmulKernel,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    (m, window): (usize, (usize, usize)),
) -> Result<()> {
    dispatch_with(ctx, kernel, x, w, out, (m, window), Epilogue::Store)
}

/// [`dispatch`] with a GEMV epilogue other than the store (the GEMM only stores: the caller
/// composes the rest). Shapes are checked by the caller.
pub(crate) fn dispatch_with(
    ctx: &GpuContext,
    kernel: MatmulKernel,
    x: &wgpu::Buffer,
    w: &GpuQ4,
    out: &wgpu::Buffer,
    (m, window): (usize, (usize, usize)),
    epilogue: Epilogue<'_>,
) -> Result<()> {
    if kernel == MatmulKernel::Gemv && word_gemv(ctx, w) {
        return gemv_word(ctx, x, &[(w, out)], (m, window), epilogue, None);
    }
    let params = Params::for_matrix(w, m, window);
    let p = bytemuck::bytes_of(&params);
    let buffers = [&w.buf, x, out];
    let t = ctx.tuning;
    let q8 = w.kind == GpuQ4::Q8;
    let gemv = match (q8, t.gemv_groups) {
        (true, false) => reduced(ctx, &Q8_GEMV, &Q8_GEMV_SG),
        (true, true) => reduced(ctx, &Q8_GEMV_GROUPS, &Q8_GEMV_GROUPS_SG),
        (false, _) => reduced(ctx, &GEMV_GROUPS, &GEMV_GROUPS_SG),
    };
    match kernel {
        MatmulKernel::Gemv => {
            ctx.note_weight_bytes(gemv.label, w.buf.size());
            if matches!(epilogue, Epilogue::Glu(_)) {
                return Err(crate::error::shape_err(
                    "q4_matmul_glu",
                    "SwiGLU in one pass needs the word-per-lane GEMV".to_string(),
                ));
            }
            let acc = u32::from(matches!(epilogue, Epilogue::Add));
            // Several rows a lane: the group kernel with one thread per row (q8_gemv has no
            // RPL).
            let groups = !q8 || t.gemv_groups;
            let rpl = if groups && t.gemv_tpr == 1 {
                t.gemv_rpl
            } else {
                1
            };
            let consts = [
                ("WG", t.gemv_wg),
                ("TPR", t.gemv_tpr),
                ("ACC", acc),
                ("KIND", w.kind),
                ("RPL", rpl),
            ];
            let consts = if groups { &consts[..] } else { &consts[..4] };
            let mut g = groups_for(w.rows, t.gemv_wg / t.gemv_tpr * rpl);
            g[2] = m as u32;
            ctx.dispatch(gemv, consts, p, &buffers, g)
        }
        MatmulKernel::Gemm => {
            if !matches!(epilogue, Epilogue::Store) {
                return Err(crate::error::shape_err(
                    "q4_matmul",
                    "the GEMM stores its product (no fused epilogue)".to_string(),
                ));
            }
            if t.gemm_tokens > 0 {
                // Rasterisers: a lane takes RPL rows (WG apart) and `gemm_tokens` tokens.
                let (r, tt) = (t.gemv_rpl, t.gemm_tokens);
                let kernel = super::q4_gemm_lanes::shader(r as usize, tt as usize);
                ctx.note_weight_bytes(kernel.label, w.buf.size());
                let mut g = groups_for(w.rows, t.gemv_wg * r);
                g[2] = (m as u32).div_ceil(tt);
                let consts = [("WG", t.gemv_wg), ("KIND", w.kind)];
                return ctx.dispatch(kernel, &consts, p, &buffers, g);
            }
            ctx.note_weight_bytes(GEMM.label, w.buf.size());
            let g = [w.rows.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1];
            ctx.dispatch(&GEMM, &[], p, &buffers, g)
        }
    }
}

/// Records the word-per-lane GEMV (`q4_gemv.wgsl`) of `x` (or, with `norm`, of RMSNorm(x))
/// by one to three matrices of one width and layout, each into its own output: the first into
/// the window `(row stride, offset)`, the others whole. Several matrices store their products
/// (no other epilogue). Shapes are checked by the caller.
pub(crate) fn gemv_word(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    mats: &[(&GpuQ4, &wgpu::Buffer)],
    (m, window): (usize, (usize, usize)),
    epilogue: Epilogue<'_>,
    norm: Option<NormIn<'_>>,
) -> Result<()> {
    let ws: Vec<&GpuQ4> = mats.iter().map(|(w, _)| *w).collect();
    let Some(&(w, out)) = mats.first() else {
        return Ok(());
    };
    if !parts_fit(ctx, &ws) || (mats.len() > 1 && !matches!(epilogue, Epilogue::Store)) {
        return Err(crate::error::shape_err(
            "q4_gemv",
            format!(
                "one dispatch takes one to three 4-bit matrices of one width and layout on the \
                 word kernel, several only storing their products; got {} ({:?})",
                mats.len(),
                ws.iter()
                    .map(|w| (w.rows, w.cols, w.kind))
                    .collect::<Vec<_>>()
            ),
        ));
    }
    let t = ctx.tuning;
    let glu = matches!(epilogue, Epilogue::Glu(_));
    let slots = t.gemv_wg / t.gemv_tpr;
    let per_group = if glu { slots / 2 } else { slots };
    let mut params = Params::for_matrix(w, m, window);
    let mut total = (w.rows as u32).div_ceil(per_group);
    for (i, (wj, _)) in mats.iter().enumerate().skip(1) {
        let base = 4 * (i - 1);
        params.parts[base] = wj.rows as u32;
        params.parts[base + 1] = wj.sm_off as u32;
        params.parts[base + 2] = wj.rows_off as u32;
        params.parts[base + 3] = total;
        total += (wj.rows as u32).div_ceil(per_group);
    }
    let dummy = ctx.dummy();
    let read = |i: usize| mats.get(i).map_or(dummy, |(wj, _)| &wj.buf);
    // Unused outputs get buffers of their own: a browser refuses one buffer bound writable
    // twice in a dispatch.
    let write = |i: usize| mats.get(i).map_or(ctx.dummy_out(i), |(_, o)| *o);
    let w2 = match epilogue {
        Epilogue::Glu(up) => &up.buf,
        _ => read(1),
    };
    let g_buf = norm.map_or(dummy, |n| n.weight);
    let buffers = [&w.buf, x, out, w2, g_buf, read(2), write(1), write(2)];
    let bytes: u64 = ws.iter().map(|w| w.buf.size()).sum::<u64>()
        + match epilogue {
            Epilogue::Glu(up) => up.buf.size(),
            _ => 0,
        };
    let gemv = reduced(ctx, &GEMV, &GEMV_SG);
    ctx.note_weight_bytes(gemv.label, bytes);
    let mut g = crate::gpu::context::grid(total);
    g[2] = m as u32;
    let (eps, offset) = norm.map_or((0, 0), |n| (n.eps.to_bits(), n.offset.to_bits()));
    let consts = [
        ("WG", t.gemv_wg),
        ("TPR", t.gemv_tpr),
        ("ACC", u32::from(matches!(epilogue, Epilogue::Add))),
        ("KIND", w.kind),
        ("U", t.gemv_unroll),
        ("GLU", u32::from(glu)),
        ("PARTS", mats.len() as u32),
        ("NORM", u32::from(norm.is_some())),
        ("NORM_EPS", eps),
        ("NORM_OFFSET", offset),
    ];
    ctx.dispatch(gemv, &consts, bytemuck::bytes_of(&params), &buffers, g)
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
