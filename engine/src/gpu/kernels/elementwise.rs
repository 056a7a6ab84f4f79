//! The element-wise kernels, one invocation per element (`common.wgsl` prepended to each):
//! residual add, bias add, the SwiGLU and sigmoid gates, GELU, the half-row copy, a range copy
//! inside the compute pass (KV appends) and the plain copy the benchmarks use as a bandwidth
//! yardstick. Shapes are checked by the caller.

use super::{dispatch_items, Words};
use crate::error::Result;
use crate::gpu::context::{GpuContext, Shader};

/// `acc[i] += x[i]`.
pub const ADD: Shader = crate::shader!("add", common);
/// `x[r][c] += bias[c]`.
pub const ADD_BIAS: Shader = crate::shader!("add_bias", common);
/// `out[i] = silu(gate[i]) * up[i]`.
pub const SILU_MUL: Shader = crate::shader!("silu_mul", common);
/// `out[i] = x[i] * sigmoid(gate[i])`.
pub const SIGMOID_MUL: Shader = crate::shader!("sigmoid_mul", common);
/// Exact GELU.
pub const GELU: Shader = crate::shader!("gelu", common);
/// `out[r][i] = src[r][half * dim + i]`.
pub const TAKE_HALF: Shader = crate::shader!("take_half", common);
/// `out[i] = x[i]` as vec4.
pub const COPY: Shader = crate::shader!("copy", common);
/// `out[dst + i] = x[src + i]`: a copy inside the compute pass.
pub const COPY_RANGE: Shader = crate::shader!("copy_range", common);
/// `out[dst + i] = f16(x[src + i])` into an f16 KV cache, inside the compute pass.
pub const KV_PACK: Shader = crate::shader!("kv_pack", common);

/// `{n}`: the parameters of the kernels that only take a length.
fn len(n: usize) -> Words {
    [n as u32, 0, 0, 0]
}

/// Records `acc += x` over `n` elements.
pub(crate) fn add(ctx: &GpuContext, acc: &wgpu::Buffer, x: &wgpu::Buffer, n: usize) -> Result<()> {
    dispatch_items(ctx, &ADD, len(n), &[acc, x], n)
}

/// Records `x[rows][cols] += bias[cols]`.
pub(crate) fn add_bias(
    ctx: &GpuContext,
    x: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let p = [rows as u32, cols as u32, 0, 0];
    dispatch_items(ctx, &ADD_BIAS, p, &[x, bias], rows * cols)
}

/// Records `out = op(a, b)` over `n` elements for the two-input gates ([`SILU_MUL`]:
/// `a` = gate, `b` = up; [`SIGMOID_MUL`]: `a` = x, `b` = gate).
pub(crate) fn gate(
    ctx: &GpuContext,
    op: &Shader,
    ab: [&wgpu::Buffer; 2],
    out: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    dispatch_items(ctx, op, len(n), &[ab[0], ab[1], out], n)
}

/// Records `out = gelu(x)` over `n` elements.
pub(crate) fn gelu(ctx: &GpuContext, x: &wgpu::Buffer, out: &wgpu::Buffer, n: usize) -> Result<()> {
    dispatch_items(ctx, &GELU, len(n), &[x, out], n)
}

/// Records `out[rows][dim] = src[rows][2 * dim]`'s half `half` (0 or 1).
pub(crate) fn take_half(
    ctx: &GpuContext,
    src: &wgpu::Buffer,
    out: &wgpu::Buffer,
    (rows, dim, half): (usize, usize, usize),
) -> Result<()> {
    let p = [rows as u32, dim as u32, half as u32, 0];
    dispatch_items(ctx, &TAKE_HALF, p, &[src, out], rows * dim)
}

/// Records `out_j[dst + i] = x_j[src + i]` for `i < n` and each of the one or two `(x_j,
/// out_j)` in `pairs`, as one dispatch (no pass boundary).
pub(crate) fn copy_range(
    ctx: &GpuContext,
    pairs: &[(&wgpu::Buffer, &wgpu::Buffer)],
    (src, dst): (usize, usize),
    n: usize,
) -> Result<()> {
    ranges(ctx, &COPY_RANGE, pairs, (src, dst), n, n)
}

/// Records `out_j[dst + i] = f16(x_j[src + i])` for `i < n` into one or two f16 caches
/// (halves two to a word; a word half covered keeps its other half), as one dispatch.
pub(crate) fn kv_pack(
    ctx: &GpuContext,
    pairs: &[(&wgpu::Buffer, &wgpu::Buffer)],
    (src, dst): (usize, usize),
    n: usize,
) -> Result<()> {
    let words = (dst + n).div_ceil(2) - dst / 2;
    ranges(ctx, &KV_PACK, pairs, (src, dst), n, words)
}

/// One dispatch of `kernel` over one or two `(x_j, out_j)` ranges of `n` values, `items`
/// invocations each (the parameters `{n, src, dst, pair}` of `copy_range.wgsl` and
/// `kv_pack.wgsl`).
fn ranges(
    ctx: &GpuContext,
    kernel: &Shader,
    pairs: &[(&wgpu::Buffer, &wgpu::Buffer)],
    (src, dst): (usize, usize),
    n: usize,
    items: usize,
) -> Result<()> {
    let (&(x, out), second) = match pairs {
        [one] => (one, None),
        [one, two] => (one, Some(two)),
        _ => {
            return Err(crate::error::shape_err(
                kernel.label,
                format!("one or two ranges per dispatch, not {}", pairs.len()),
            ))
        }
    };
    let (x2, out2) = second.map_or((ctx.dummy(), ctx.dummy_out(0)), |&(a, b)| (a, b));
    let count = if second.is_some() { 2 } else { 1 };
    let p = [n as u32, src as u32, dst as u32, count - 1];
    dispatch_items(ctx, kernel, p, &[x, out, x2, out2], count as usize * items)
}

/// Records a copy of `n` f32 (`n % 4 == 0`) from `x` to `out`.
pub fn copy(ctx: &GpuContext, x: &wgpu::Buffer, out: &wgpu::Buffer, n: usize) -> Result<()> {
    dispatch_items(ctx, &COPY, len(n / 4), &[x, out], n / 4)
}
