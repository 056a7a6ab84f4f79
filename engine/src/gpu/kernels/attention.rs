//! Grouped-query attention over the KV cache: causal (decode and prefill) or bidirectional
//! (encoders).

use crate::backend::{AttnShape, KvFormat};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// The kernel: one workgroup per (query head, query token) over the whole context.
pub const KERNEL: Shader = crate::shader!("attention" = "attention", common, kv_f32);
/// Flash-decoding, pass 1: one workgroup per (KV head, key range, query token), head_dim a
/// multiple of 4 (16-byte loads, state in registers).
pub const DECODE: Shader = crate::shader!(
    "attention_decode" = "attention_decode",
    attention_params,
    kv4_f32
);
/// Flash-decoding, pass 1 for any head_dim.
pub const SPLIT: Shader = crate::shader!(
    "attention_split" = "attention_split",
    attention_params,
    kv_f32
);
/// Flash-decoding, pass 2: the ranges' partial softmaxes merged per query head.
pub const MERGE: Shader = crate::shader!("attention_merge", common);
/// Tiled prefill (GPUs): one workgroup per (KV head, TQ query tokens), key and value tiles
/// shared by the group's query rows in workgroup memory.
pub const TILES: Shader = crate::shader!(
    "attention_tiles" = "attention_tiles",
    attention_params,
    kv_f32
);

/// [`KERNEL`], [`DECODE`] and [`SPLIT`] over an f16 cache ([`KvFormat::F16`]: halves packed
/// two to a word by `kv_pack.wgsl`).
const KERNEL_F16: Shader = crate::shader!("attention/f16" = "attention", common, kv_f16);
const DECODE_F16: Shader = crate::shader!(
    "attention_decode/f16" = "attention_decode",
    attention_params,
    kv4_f16
);
const SPLIT_F16: Shader = crate::shader!(
    "attention_split/f16" = "attention_split",
    attention_params,
    kv_f16
);
const TILES_F16: Shader = crate::shader!(
    "attention_tiles/f16" = "attention_tiles",
    attention_params,
    kv_f16
);

/// The cache-reading kernels for a cache in `format`: `[one-pass, decode, split, tiles]`.
fn kernels(format: KvFormat) -> [&'static Shader; 4] {
    match format {
        KvFormat::F32 => [&KERNEL, &DECODE, &SPLIT, &TILES],
        KvFormat::F16 => [&KERNEL_F16, &DECODE_F16, &SPLIT_F16, &TILES_F16],
    }
}

/// `attention_tiles.wgsl`'s query tokens a workgroup and keys a tile for this shape, or `None`
/// where the group's query rows do not fit its workgroup memory: R = TQ·G rows with R ≤ 64
/// and R·head_dim ≤ 1024, then TK keys with TK·(head_dim + 1) ≤ 1024 and R·TK ≤ 256 (at most
/// 32), and TQ no more than the tokens.
fn tiles_plan(s: &AttnShape) -> Option<(u32, u32)> {
    let (g, d) = (s.heads / s.kv_heads.max(1), s.head_dim);
    if g == 0 || d == 0 {
        return None;
    }
    let rows = 64.min(1024 / d);
    let tq = (rows / g).min(s.tokens.max(1));
    if tq == 0 {
        return None;
    }
    let tk = 32.min(1024 / (d + 1)).min(256 / (tq * g));
    (tk > 0).then_some((tq as u32, tk as u32))
}

/// Query tokens up to which the split (flash-decoding) kernels run: decode and short batches.
const SPLIT_MAX_TOKENS: usize = 8;

/// Whether `attention_lanes.wgsl` takes this shape: few query tokens, head_dim a multiple of 4
/// up to [`super::attention_lanes::MAX_HEAD_DIM`], at most 8 query heads per KV head.
fn lanes_fit(s: &AttnShape) -> bool {
    let g = s.heads / s.kv_heads.max(1);
    s.tokens <= SPLIT_MAX_TOKENS
        && s.head_dim.is_multiple_of(4)
        && s.head_dim <= super::attention_lanes::MAX_HEAD_DIM
        && (1..=8).contains(&g)
}

/// Whether `attention_rows.wgsl` takes this shape: head_dim a multiple of 4 up to
/// [`super::attention_lanes::MAX_HEAD_DIM`], at most 8 query heads per KV head.
fn rows_fit(s: &AttnShape) -> bool {
    let g = s.heads / s.kv_heads.max(1);
    s.head_dim.is_multiple_of(4)
        && s.head_dim <= super::attention_lanes::MAX_HEAD_DIM
        && (1..=8).contains(&g)
}

/// Uniform parameters of `attention.wgsl` and `attention_split.wgsl` (the one-pass kernel
/// ignores the key ranges).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,
    scale: f32,
    causal: u32,
    split: u32,
    n_splits: u32,
    _p: [u32; 3],
}

impl Params {
    fn new(s: &AttnShape, split: usize, n_splits: usize) -> Params {
        Params {
            tokens: s.tokens as u32,
            heads: s.heads as u32,
            kv_heads: s.kv_heads as u32,
            head_dim: s.head_dim as u32,
            pos0: s.pos0 as u32,
            scale: s.scale,
            causal: u32::from(s.causal),
            split: split as u32,
            n_splits: n_splits as u32,
            _p: [0; 3],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MergeParams {
    rows: u32,
    head_dim: u32,
    n_splits: u32,
    _p: u32,
}

/// Key ranges for the split pass: `(keys per range, ranges)`, ranges a multiple of `wg` keys,
/// as many as fill about `target` workgroups (at most 1,024 ranges: the merge's limit).
fn split_plan(
    keys: usize,
    (kv_heads, tokens): (usize, usize),
    wg: usize,
    target: usize,
) -> (usize, usize) {
    let max_splits = (target / (kv_heads * tokens).max(1)).clamp(1, 1024);
    let n = keys.div_ceil(wg).clamp(1, max_splits);
    let split = keys.div_ceil(n).div_ceil(wg) * wg;
    (split, keys.div_ceil(split))
}

/// Whether the split kernels take this shape: few query tokens, at most 8 query heads per KV
/// head, their query rows within the kernel's workgroup memory.
fn split_fits(s: &AttnShape, wg: usize) -> bool {
    let g = s.heads / s.kv_heads.max(1);
    s.tokens <= SPLIT_MAX_TOKENS && g <= 8 && g * (s.head_dim + 1) <= 1032 && g * wg <= 512
}

/// Whether `attention_decode.wgsl` takes this shape (with `wg` keys per tile): head_dim a
/// multiple of 4, its limits on the group's query rows and tiles.
fn decode_fits(s: &AttnShape, wg: usize) -> bool {
    let (g, d4) = (s.heads / s.kv_heads.max(1), s.head_dim / 4);
    s.tokens <= SPLIT_MAX_TOKENS
        && s.head_dim.is_multiple_of(4)
        && (1..=8).contains(&g)
        && g * d4 <= 256
        && d4 <= wg
        && g * wg <= 1024
        && (8..=256).contains(&wg)
}

/// Records attention over caches in `format` (f32 for an encoder's keys and values). Shapes
/// are checked by the caller; decode goes through the split (flash-decoding) kernels, prefill
/// through the rasterisers' rows kernel, the GPUs' tiled kernel, or the one-pass kernel
/// (`head_dim <= 4 * WG`) where neither fits.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    q: &wgpu::Buffer,
    [k, v]: [&wgpu::Buffer; 2],
    format: KvFormat,
    out: &wgpu::Buffer,
    s: AttnShape,
) -> Result<()> {
    let wg = ctx.tuning.attn_wg;
    if s.head_dim > 4 * wg as usize {
        return Err(crate::error::shape_err(
            "attention",
            format!("head_dim {} exceeds 4 x workgroup size {wg}", s.head_dim),
        ));
    }
    let [one_pass, decode, split, tiles] = kernels(format);
    let lanes = ctx.tuning.decode_lanes;
    if lanes > 0 && lanes_fit(&s) {
        let kernel = super::attention_lanes::shader(format, s.head_dim);
        return dispatch_split(ctx, q, k, v, out, s, Pass1::Lanes(kernel, lanes));
    }
    let dwg = ctx.tuning.decode_wg;
    if decode_fits(&s, dwg as usize) {
        return dispatch_split(ctx, q, k, v, out, s, Pass1::Tiled(decode, dwg, true));
    }
    if split_fits(&s, wg as usize) {
        return dispatch_split(ctx, q, k, v, out, s, Pass1::Tiled(split, wg, false));
    }
    // Prefill: the three kernels take the same bindings; each its own constants and grid.
    let (g, kv_heads, tokens) = (s.heads / s.kv_heads, s.kv_heads as u32, s.tokens as u32);
    let rows = ctx.tuning.prefill_rows;
    let (kernel, consts, grid): (&Shader, Vec<(&str, u32)>, [u32; 3]) = if rows > 0 && rows_fit(&s)
    {
        // Rasterisers': TB query tokens of one KV head a workgroup, RG query heads a lane (at
        // most 256 lanes).
        let rg = super::attention_lanes::prefill_heads(g, s.head_dim);
        let tb = rows.min(256 / (g / rg) as u32).max(1);
        let kernel = super::attention_lanes::prefill_shader(format, s.head_dim, rg);
        let consts = vec![("G", g as u32), ("TB", tb)];
        (kernel, consts, [kv_heads, tokens.div_ceil(tb), 1])
    } else if let (true, Some((tq, tk))) = (ctx.tuning.prefill_tiles, tiles_plan(&s)) {
        // GPUs': TQ query tokens of one KV head a workgroup, the key and value tiles shared.
        let consts = vec![("WG", wg), ("G", g as u32), ("TQ", tq), ("TK", tk)];
        (tiles, consts, [kv_heads, tokens.div_ceil(tq), 1])
    } else {
        (one_pass, vec![("WG", wg)], [s.heads as u32, tokens, 1])
    };
    let p = Params::new(&s, 0, 0);
    ctx.dispatch(
        kernel,
        &consts,
        bytemuck::bytes_of(&p),
        &[q, k, v, out],
        grid,
    )
}

/// The first pass of flash-decoding: a tiled kernel (`attention_decode.wgsl` with `by4`, else
/// `attention_split.wgsl`) with its keys per tile, or `attention_lanes.wgsl` with its fewest
/// keys per range.
enum Pass1<'a> {
    Tiled(&'a Shader, u32, bool),
    Lanes(&'a Shader, u32),
}

fn dispatch_split(
    ctx: &GpuContext,
    q: &wgpu::Buffer,
    k: &wgpu::Buffer,
    v: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: AttnShape,
    pass1: Pass1,
) -> Result<()> {
    let keys = s.pos0 + s.tokens;
    let target = ctx.tuning.attn_groups as usize;
    let grain = match pass1 {
        Pass1::Tiled(_, wg, _) => wg,
        Pass1::Lanes(_, keys) => keys,
    };
    let (split, n_splits) = split_plan(keys, (s.kv_heads, s.tokens), grain as usize, target);
    let rows = s.tokens * s.heads;
    let (ml_label, acc_label) = ("attention partial (m, l)", "attention partial outputs");
    let ml = ctx.take_scratch(ml_label, (rows * n_splits * 8) as u64)?;
    let acc = ctx.take_scratch(acc_label, (rows * n_splits * s.head_dim * 4) as u64)?;
    let p = Params::new(&s, split, n_splits);
    let g = (s.heads / s.kv_heads) as u32;
    let d4 = (s.head_dim / 4) as u32;
    let bindings = [q, k, v, &ml, &acc];
    let params = bytemuck::bytes_of(&p);
    let (kv_heads, n, tokens) = (s.kv_heads as u32, n_splits as u32, s.tokens as u32);
    match pass1 {
        Pass1::Tiled(kernel, wg, by4) => {
            let consts = [("WG", wg), ("G", g), ("D4", d4)];
            let consts = if by4 { &consts[..] } else { &consts[..2] };
            ctx.dispatch(kernel, consts, params, &bindings, [kv_heads, n, tokens])?;
        }
        Pass1::Lanes(kernel, _) => {
            // R key ranges of G lanes a workgroup, within one SIMD vector of the rasteriser.
            let r = (ctx.tuning.lanes_width / g).max(1);
            let grid = [kv_heads, n.div_ceil(r), tokens];
            ctx.dispatch(kernel, &[("G", g), ("R", r)], params, &bindings, grid)?;
        }
    }
    let mp = MergeParams {
        rows: rows as u32,
        head_dim: s.head_dim as u32,
        n_splits: n_splits as u32,
        _p: 0,
    };
    ctx.dispatch(
        &MERGE,
        &[("WG", ctx.tuning.reduce_wg)],
        bytemuck::bytes_of(&mp),
        &[&ml, &acc, out],
        super::groups_for(rows, 1),
    )?;
    ctx.give_scratch(acc_label, acc);
    ctx.give_scratch(ml_label, ml);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_plan_fits_the_workgroup_memory() {
        let shape = |heads, kv_heads, head_dim, tokens| AttnShape {
            tokens,
            heads,
            kv_heads,
            head_dim,
            pos0: 0,
            scale: 1.0,
            causal: true,
            ctx: tokens,
        };
        for (heads, kv, d) in [
            (9, 3, 64),
            (32, 8, 128),
            (16, 4, 256),
            (12, 12, 32),
            (5, 1, 33),
        ] {
            for tokens in [1, 3, 9, 512] {
                let (tq, tk) = tiles_plan(&shape(heads, kv, d, tokens)).unwrap();
                let (r, tk) = (tq as usize * heads / kv, tk as usize);
                assert!(
                    tq as usize <= tokens,
                    "{heads}/{kv}x{d}: {tq} of {tokens} tokens"
                );
                assert!(
                    r <= 64 && r * d <= 1024 && r * tk <= 256,
                    "{heads}/{kv}x{d}: {r} x {tk}"
                );
                assert!(tk >= 1 && tk * (d + 1) <= 1024, "{heads}/{kv}x{d}: {tk}");
            }
        }
        // A group whose query rows alone outgrow the queries' memory takes the one-pass kernel.
        assert_eq!(tiles_plan(&shape(16, 1, 128, 64)), None);
    }

    #[test]
    fn split_plan_covers_the_keys_in_whole_tiles() {
        for keys in [1usize, 63, 64, 65, 700, 1025, 8193] {
            for (kv, tokens) in [(1, 1), (3, 1), (8, 1), (8, 4), (300, 1)] {
                let (split, n) = split_plan(keys, (kv, tokens), 64, 1024);
                assert_eq!(split % 64, 0, "{keys} keys");
                assert!(
                    split * n >= keys && split * (n - 1) < keys,
                    "{keys}: {split} x {n}"
                );
                assert!(n == 1 || kv * tokens * n <= 1024, "{keys}: {n}");
            }
        }
    }
}
