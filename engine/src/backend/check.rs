//! Shared shape validation, so both backends reject exactly the same calls.

use super::*;

/// The output count of a fused matmul (`q4_matmul_add`, `q4_matmul_glu`): `m` rows of `rows`.
pub fn fused_outputs(op: &'static str, n_out: usize, m: usize, rows: usize) -> Result<()> {
    if n_out != m * rows {
        return Err(shape_err(op, format!("{n_out} outputs for [{m}, {rows}]")));
    }
    Ok(())
}

/// SwiGLU's gate and up matrices (`[rows, cols]` each) share one shape.
pub fn glu_shapes(gate: (usize, usize), up: (usize, usize)) -> Result<()> {
    if gate != up {
        return Err(shape_err(
            "q4_matmul_glu",
            format!(
                "gate [{}, {}] and up [{}, {}] differ",
                gate.0, gate.1, up.0, up.1
            ),
        ));
    }
    Ok(())
}

pub fn q4_matmul<B: BufferLen>(x: &B, out: &B, rows: usize, cols: usize, m: usize) -> Result<()> {
    if m == 0 {
        return Err(shape_err("q4_matmul", "zero activation rows"));
    }
    need_len("q4_matmul", &format!("x [{m}, {cols}]"), x, m * cols)?;
    need_len("q4_matmul", &format!("out [{m}, {rows}]"), out, m * rows)
}

pub fn f32_matmul<B: BufferLen>(
    x: &B,
    w: &B,
    rows: usize,
    cols: usize,
    out: &B,
    m: usize,
) -> Result<()> {
    if !cols.is_multiple_of(4) || cols == 0 {
        return Err(shape_err(
            "f32_matmul",
            format!("{cols} columns are not a positive multiple of 4"),
        ));
    }
    need_len("f32_matmul", &format!("W [{rows}, {cols}]"), w, rows * cols)?;
    q4_matmul(x, out, rows, cols, m)
}

pub fn q4_matmul_block<B: BufferLen>(
    x: &B,
    out: &B,
    (rows, cols): (usize, usize),
    m: usize,
    out_stride: usize,
    out_off: usize,
) -> Result<()> {
    if m == 0 {
        return Err(shape_err("q4_matmul_block", "zero activation rows"));
    }
    if out_off + rows > out_stride {
        return Err(shape_err(
            "q4_matmul_block",
            format!(
                "block rows {out_off}..{} exceed the output stride {out_stride}",
                out_off + rows
            ),
        ));
    }
    need_len("q4_matmul_block", &format!("x [{m}, {cols}]"), x, m * cols)?;
    need_len(
        "q4_matmul_block",
        &format!("out [{m}, {out_stride}]"),
        out,
        m * out_stride,
    )
}

pub fn rms_norm<B: BufferLen>(x: &B, w: &B, out: &B, rows: usize, dim: usize) -> Result<()> {
    if dim == 0 {
        return Err(shape_err("rms_norm", "zero dimension"));
    }
    need_len("rms_norm", &format!("x [{rows}, {dim}]"), x, rows * dim)?;
    need_len("rms_norm", &format!("weight [{dim}]"), w, dim)?;
    need_len("rms_norm", &format!("out [{rows}, {dim}]"), out, rows * dim)
}

pub fn rope<B: BufferLen>(x: &B, table: &B, s: RopeShape) -> Result<()> {
    if !s.rot_dim.is_multiple_of(2) || s.rot_dim > s.head_dim || s.rot_dim == 0 {
        return Err(shape_err(
            "rope",
            format!(
                "rot_dim {} must be even, positive and <= head_dim {}",
                s.rot_dim, s.head_dim
            ),
        ));
    }
    need_len("rope", "x", x, s.tokens * s.heads * s.head_dim)?;
    need_len(
        "rope",
        &format!("table for positions up to {}", s.pos0 + s.tokens),
        table,
        (s.pos0 + s.tokens) * s.rot_dim,
    )
}

pub fn attention<B: BufferLen, K: BufferLen>(
    q: &B,
    k: &K,
    v: &K,
    out: &B,
    s: AttnShape,
) -> Result<()> {
    if s.kv_heads == 0 || !s.heads.is_multiple_of(s.kv_heads) {
        return Err(shape_err(
            "attention",
            format!(
                "{} query heads are not a multiple of {} kv heads",
                s.heads, s.kv_heads
            ),
        ));
    }
    if s.head_dim == 0 || s.head_dim > 256 {
        return Err(shape_err(
            "attention",
            format!("head_dim {} not in 1..=256", s.head_dim),
        ));
    }
    if s.pos0 + s.tokens > s.ctx {
        return Err(shape_err(
            "attention",
            format!(
                "positions up to {} exceed the cache of {}",
                s.pos0 + s.tokens,
                s.ctx
            ),
        ));
    }
    let qn = s.tokens * s.heads * s.head_dim;
    need_len("attention", "q", q, qn)?;
    need_len("attention", "out", out, qn)?;
    let kvn = s.ctx * s.kv_heads * s.head_dim;
    need_len("attention", "k_cache", k, kvn)?;
    need_len("attention", "v_cache", v, kvn)
}

pub fn silu_mul<B: BufferLen>(gate: &B, up: &B, out: &B, n: usize) -> Result<()> {
    need_len("silu_mul", "gate", gate, n)?;
    need_len("silu_mul", "up", up, n)?;
    need_len("silu_mul", "out", out, n)
}

pub fn sigmoid_mul<B: BufferLen>(x: &B, gate: &B, out: &B, n: usize) -> Result<()> {
    need_len("sigmoid_mul", "x", x, n)?;
    need_len("sigmoid_mul", "gate", gate, n)?;
    need_len("sigmoid_mul", "out", out, n)
}

pub fn take_half<B: BufferLen>(
    src: &B,
    out: &B,
    rows: usize,
    dim: usize,
    half: usize,
) -> Result<()> {
    if half > 1 || dim == 0 {
        return Err(shape_err(
            "take_half",
            format!("half {half} must be 0 or 1 and dim {dim} positive"),
        ));
    }
    need_len(
        "take_half",
        &format!("src [{rows}, 2*{dim}]"),
        src,
        rows * 2 * dim,
    )?;
    need_len(
        "take_half",
        &format!("out [{rows}, {dim}]"),
        out,
        rows * dim,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn conv1d<B: BufferLen>(
    x: &B,
    w: &B,
    state: &B,
    out: &B,
    tokens: usize,
    channels: usize,
    kernel: usize,
) -> Result<()> {
    let max = MAX_CONV_KERNEL;
    if kernel < 2 || kernel > max {
        return Err(shape_err(
            "conv1d_silu",
            format!("kernel size {kernel} not in 2..={max}"),
        ));
    }
    need_len(
        "conv1d_silu",
        &format!("x [{tokens}, {channels}]"),
        x,
        tokens * channels,
    )?;
    need_len(
        "conv1d_silu",
        &format!("w [{channels}, {kernel}]"),
        w,
        channels * kernel,
    )?;
    need_len(
        "conv1d_silu",
        &format!("state [{}, {channels}]", kernel - 1),
        state,
        (kernel - 1) * channels,
    )?;
    need_len(
        "conv1d_silu",
        &format!("out [{tokens}, {channels}]"),
        out,
        tokens * channels,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn delta_rule<B: BufferLen>(
    qkv: &B,
    a: &B,
    b: &B,
    a_log: &B,
    dt_bias: &B,
    state: &B,
    out: &B,
    s: DeltaShape,
) -> Result<()> {
    let max = MAX_DELTA_K_DIM;
    if s.k_heads == 0 || !s.v_heads.is_multiple_of(s.k_heads) || s.v_heads == 0 {
        return Err(shape_err(
            "gated_delta_rule",
            format!(
                "{} value heads are not a positive multiple of {} key heads",
                s.v_heads, s.k_heads
            ),
        ));
    }
    if s.k_dim == 0 || s.k_dim > max || s.v_dim == 0 {
        return Err(shape_err(
            "gated_delta_rule",
            format!(
                "key head dim {} not in 1..={max} (or value head dim {} is 0)",
                s.k_dim, s.v_dim
            ),
        ));
    }
    let t = s.tokens;
    need_len("gated_delta_rule", "qkv", qkv, t * s.qkv_stride())?;
    need_len("gated_delta_rule", "a", a, t * s.v_heads)?;
    need_len("gated_delta_rule", "b", b, t * s.v_heads)?;
    need_len("gated_delta_rule", "a_log", a_log, s.v_heads)?;
    need_len("gated_delta_rule", "dt_bias", dt_bias, s.v_heads)?;
    need_len(
        "gated_delta_rule",
        "state",
        state,
        s.v_heads * s.k_dim * s.v_dim,
    )?;
    need_len("gated_delta_rule", "out", out, t * s.v_heads * s.v_dim)
}

pub fn add_assign<B: BufferLen>(acc: &B, x: &B, n: usize) -> Result<()> {
    need_len("add_assign", "acc", acc, n)?;
    need_len("add_assign", "x", x, n)
}

pub fn softmax<B: BufferLen>(x: &B, out: &B, rows: usize, cols: usize) -> Result<()> {
    need_len("softmax", "x", x, rows * cols)?;
    need_len("softmax", "out", out, rows * cols)
}

pub fn embed<B: BufferLen>(ids: &[u32], rows: usize, cols: usize, out: &B) -> Result<()> {
    if let Some(bad) = ids.iter().find(|&&i| i as usize >= rows) {
        return Err(shape_err(
            "embed_q4",
            format!("token id {bad} is outside the vocabulary of {rows}"),
        ));
    }
    need_len("embed_q4", "out", out, ids.len() * cols)
}

pub fn embed_block<B: BufferLen>(ids: &[u32], cols: usize, out: &B) -> Result<()> {
    need_len("embed_q4_block", "out", out, ids.len() * cols)
}

pub fn layer_norm<B: BufferLen>(
    x: &B,
    w: &B,
    b: &B,
    out: &B,
    rows: usize,
    dim: usize,
) -> Result<()> {
    if dim == 0 {
        return Err(shape_err("layer_norm", "zero dimension"));
    }
    need_len("layer_norm", &format!("x [{rows}, {dim}]"), x, rows * dim)?;
    need_len("layer_norm", &format!("weight [{dim}]"), w, dim)?;
    need_len("layer_norm", &format!("bias [{dim}]"), b, dim)?;
    need_len(
        "layer_norm",
        &format!("out [{rows}, {dim}]"),
        out,
        rows * dim,
    )
}

pub fn add_bias<B: BufferLen>(x: &B, bias: &B, rows: usize, cols: usize) -> Result<()> {
    need_len("add_bias", &format!("x [{rows}, {cols}]"), x, rows * cols)?;
    need_len("add_bias", &format!("bias [{cols}]"), bias, cols)
}

pub fn copy<B: BufferLen, D: BufferLen>(
    src: &B,
    src_offset: usize,
    dst: &D,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    need_len("copy", "source", src, src_offset + len)?;
    need_len("copy", "destination", dst, dst_offset + len)
}

/// [`crate::Backend::rope_append`]: both rotations and both appends (`k` and `v` whole, at
/// `dst` in the caches); returns the values appended.
pub fn rope_append<B: BufferLen, K: BufferLen>(
    [q, k, v]: [&B; 3],
    table: &B,
    [q_shape, k_shape]: [RopeShape; 2],
    [kc, vc]: [&K; 2],
    dst: usize,
) -> Result<usize> {
    rope(q, table, q_shape)?;
    rope(k, table, k_shape)?;
    let len = k_shape.tokens * k_shape.heads * k_shape.head_dim;
    copy(k, 0, kc, dst, len)?;
    copy(v, 0, vc, dst, len)?;
    Ok(len)
}

pub fn select<B: BufferLen>(logits: &B, n: usize, k: usize) -> Result<()> {
    if k == 0 || k > MAX_TOP_K || k > n {
        return Err(shape_err(
            "select",
            format!("k = {k} must be in 1..={} and <= n = {n}", MAX_TOP_K),
        ));
    }
    need_len("select", "logits", logits, n)
}

pub fn select_filtered<B: BufferLen>(
    logits: &B,
    n: usize,
    k: usize,
    filter: &LogitFilter<'_>,
) -> Result<()> {
    select(logits, n, k)?;
    let words = n.div_ceil(32);
    for (name, set) in [("allowed", filter.allowed), ("penalized", filter.penalized)] {
        if let Some(w) = set {
            if w.len() < words {
                return Err(shape_err(
                    "select_filtered",
                    format!(
                        "the {name} bitset has {} words; {n} logits need {words}",
                        w.len()
                    ),
                ));
            }
        }
    }
    if !(filter.penalty >= 1.0 && filter.penalty.is_finite()) {
        return Err(shape_err(
            "select_filtered",
            format!("repetition penalty {} must be >= 1", filter.penalty),
        ));
    }
    Ok(())
}
