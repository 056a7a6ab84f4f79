//! Top-k selection and the softmax normaliser, for sampling that reads back only what it needs.

use super::{dispatch_items, groups_for};
use crate::backend::{LogitFilter, Selection};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The top-k stage kernel.
pub const KERNEL: Shader = crate::shader!("topk");

/// The normaliser kernel.
pub const SUM_EXP: Shader = crate::shader!("sum_exp");

/// The sampling filter (the grammar's mask and the repetition penalty applied on the device).
pub const LOGIT_FILTER: Shader = crate::shader!("logit_filter", common);

/// Scratch labels of the top-k stages' (values, indices): the first, the second, any later.
const STAGE_LABELS: [(&str, &str); 3] = [
    ("topk values", "topk indices"),
    ("topk values, stage 2", "topk indices, stage 2"),
    ("topk values, later stages", "topk indices, later stages"),
];

/// Threads per workgroup of both kernels, at most (`Tuning::select_wg` the least).
const WG: u32 = 256;
/// Candidates per thread (`E` in the WGSL; a test checks they agree).
const E: u32 = 16;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    k: u32,
    indirect: u32,
    _p: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SumParams {
    n: u32,
    inv_temp: f32,
    _p: [u32; 2],
}

/// Runs the stages and the normaliser in one submission and reads back `k` pairs plus the
/// normaliser partials. Shapes are checked by the caller.
pub(crate) async fn select(
    ctx: &GpuContext,
    logits: &wgpu::Buffer,
    n: usize,
    k: usize,
    inv_temp: Option<f32>,
) -> Result<Selection> {
    // The workgroup: the adapter's, widened to 2k so a stage shrinks its candidates
    // (WG·E of them a workgroup, k out) at least 32-fold.
    let wg_size = ctx
        .tuning
        .select_wg
        .max((2 * k as u32).next_power_of_two())
        .min(WG);
    let chunk = (wg_size * E) as usize;
    let wg = [("WG", wg_size)];
    // Stage buffers: ping-pong (values, indices).
    let mut n_in = n;
    let mut groups = n.div_ceil(chunk);
    // (label, buffer) of the last stage's values and indices.
    type Stage = ((&'static str, wgpu::Buffer), (&'static str, wgpu::Buffer));
    let mut src: Option<Stage> = None;
    let mut used: Vec<(&'static str, wgpu::Buffer)> = Vec::new();
    let mut stage = 0;
    loop {
        // A label per stage, so each stage gets its own buffers back at the next token.
        let (vl, il) = STAGE_LABELS[stage.min(STAGE_LABELS.len() - 1)];
        stage += 1;
        let vals = ctx.take_scratch(vl, (groups * k * 4) as u64)?;
        let idx = ctx.take_scratch(il, (groups * k * 4) as u64)?;
        let p = Params {
            n: n_in as u32,
            k: k as u32,
            indirect: src.is_some() as u32,
            _p: 0,
        };
        let (vin, iin) = match &src {
            Some(((_, v), (_, i))) => (v, i),
            None => (logits, ctx.dummy()),
        };
        ctx.dispatch(
            &KERNEL,
            &wg,
            bytemuck::bytes_of(&p),
            &[vin, iin, &vals, &idx],
            groups_for(n_in, chunk as u32),
        )?;
        if let Some((v, i)) = src.replace(((vl, vals), (il, idx))) {
            used.extend([v, i]);
        }
        if groups == 1 {
            break;
        }
        n_in = groups * k;
        groups = n_in.div_ceil(chunk);
    }
    let ((vl, vals), (il, idx)) =
        src.ok_or_else(|| crate::error::shape_err("select", "no stage ran"))?;
    let n_parts = n.div_ceil(chunk);
    const PARTS: &str = "sum_exp partials";
    let parts = match inv_temp {
        Some(it) => {
            let part = ctx.take_scratch(PARTS, (n_parts * 8) as u64)?;
            let p = SumParams {
                n: n as u32,
                inv_temp: it,
                _p: [0; 2],
            };
            ctx.dispatch(
                &SUM_EXP,
                &wg,
                bytemuck::bytes_of(&p),
                &[logits, &part],
                groups_for(n, chunk as u32),
            )?;
            Some(part)
        }
        None => None,
    };
    let kb = (k * 4) as u64;
    let mut ranges = vec![(&vals, 0, kb), (&idx, 0, kb)];
    if let Some(part) = &parts {
        ranges.push((part, 0, (n_parts * 8) as u64));
    }
    let got = ctx.read_ranges(&ranges).await;
    used.extend([(vl, vals), (il, idx)]);
    used.extend(parts.map(|b| (PARTS, b)));
    for (label, b) in used.into_iter().rev() {
        ctx.give_scratch(label, b);
    }
    let got = got?;
    let v: &[f32] = bytemuck::cast_slice(&got[0]);
    let i: &[u32] = bytemuck::cast_slice(&got[1]);
    let top: Vec<(u32, f32)> = i.iter().copied().zip(v.iter().copied()).collect();
    let sum_exp = match (inv_temp, got.get(2)) {
        (Some(it), Some(bytes)) => {
            let pr: &[f32] = bytemuck::cast_slice(bytes);
            Some(combine_partials(
                pr,
                top.first().map(|t| t.1).unwrap_or(0.0),
                it,
            ))
        }
        _ => None,
    };
    Ok(Selection { top, sum_exp })
}

/// [`select`] over the logits as `filter` leaves them: its bitsets uploaded (`n / 32` words
/// each), the filter written into a scratch row on the device, the stages run on that row, and
/// only allowed candidates kept. Shapes are checked by the caller.
pub(crate) async fn select_filtered(
    ctx: &GpuContext,
    logits: &wgpu::Buffer,
    n: usize,
    k: usize,
    inv_temp: Option<f32>,
    filter: &LogitFilter<'_>,
) -> Result<Selection> {
    let words = n.div_ceil(32);
    const MASK: &str = "sampling mask";
    const SEEN: &str = "sampling seen tokens";
    const ROW: &str = "filtered logits";
    let upload = |label: &'static str, set: Option<&[u32]>| -> Result<Option<wgpu::Buffer>> {
        let Some(w) = set else { return Ok(None) };
        let buf = ctx.take_scratch(label, (words * 4) as u64)?;
        ctx.write_buffer(&buf, 0, bytemuck::cast_slice(&w[..words]));
        Ok(Some(buf))
    };
    let allowed = upload(MASK, filter.allowed)?;
    let penalized = upload(SEEN, filter.penalized.filter(|_| filter.penalty != 1.0))?;
    let row = ctx.take_scratch(ROW, (n * 4) as u64)?;
    let flags = allowed.is_some() as u32 | (penalized.is_some() as u32) << 1;
    let bound = [
        logits,
        allowed.as_ref().unwrap_or(ctx.dummy()),
        penalized.as_ref().unwrap_or(ctx.dummy()),
        &row,
    ];
    let params = [n as u32, filter.penalty.to_bits(), flags, 0];
    dispatch_items(ctx, &LOGIT_FILTER, params, &bound, n)?;
    let got = select(ctx, &row, n, k, inv_temp).await;
    ctx.give_scratch(ROW, row);
    for (label, b) in [(SEEN, penalized), (MASK, allowed)] {
        if let Some(b) = b {
            ctx.give_scratch(label, b);
        }
    }
    let mut sel = got?;
    sel.top.retain(|&(i, _)| filter.allows(i as usize));
    Ok(sel)
}

/// `sum_w s_w * exp((m_w - max) * inv_temp)` over `(m_w, s_w)` pairs.
fn combine_partials(parts: &[f32], max: f32, inv_temp: f32) -> f64 {
    parts
        .chunks_exact(2)
        .map(|c| c[1] as f64 * (((c[0] - max) * inv_temp) as f64).exp())
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn constants_match_wgsl() {
        assert!(super::KERNEL
            .source
            .contains(&format!("const E: u32 = {}u;", super::E)));
        assert!(super::SUM_EXP
            .source
            .contains(&format!("const E: u32 = {}u;", super::E)));
    }
}
