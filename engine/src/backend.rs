//! The operations a model needs, implemented twice: by the CPU backend (`cpu::CpuBackend`, SIMD
//! and threads) and by the GPU's (`gpu::GpuContext`, the WGSL kernels). This file is the bottom
//! layer of the engine: it imports nothing from either backend.
//! Tests run one body against both and compare with an f64 oracle.
//!
//! Buffers are flat arrays of 4-byte words (f32 unless an op says otherwise); every op
//! checks the lengths it is given and writes into a caller-provided output, so a model
//! preallocates its run state once.

use crate::error::{shape_err, Result};
use crate::quant::{BlockLayout, Q4Matrix};

/// Longest causal conv1d kernel the backends hold (the WGSL window's `MAX_K`).
pub const MAX_CONV_KERNEL: usize = 8;

/// Largest key head dimension the kernel holds in registers (`MAX_DK` in the WGSL).
pub const MAX_DELTA_K_DIM: usize = 128;

/// Which 4-bit matmul kernel to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulKernel {
    /// Matrix-vector form for a few rows of activations (decode).
    Gemv,
    /// Tiled matrix-matrix form (prefill).
    Gemm,
}

/// The activations `[m][k]` a matmul reads: a buffer as it is, or RMSNorm of one (a decoder
/// layer's input norm), which a backend may apply in the matmul's prologue instead of in a
/// pass of its own ([`Backend::matmul_input`] is that pass).
#[derive(Debug)]
pub enum MatmulInput<'a, T> {
    /// `x` as it is.
    Plain(&'a T),
    /// `x[r] / rms(x[r]) * (weight + offset)`, with `normed` `[m][k]` to hold it where the
    /// backend normalizes in a pass of its own (left as it was where it does not).
    RmsNormed {
        /// The activations before the norm.
        x: &'a T,
        /// The norm's weight `[k]`.
        weight: &'a T,
        /// Variance epsilon.
        eps: f32,
        /// Added to the weight (1 for Qwen3.5's `(1 + w)`).
        offset: f32,
        /// Room for the normalized activations.
        normed: &'a T,
    },
}

impl<T> Clone for MatmulInput<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for MatmulInput<'_, T> {}

/// Shape of a RoPE call on `x[tokens][heads][head_dim]`.
#[derive(Clone, Copy, Debug)]
pub struct RopeShape {
    /// Tokens in the batch.
    pub tokens: usize,
    /// Heads per token.
    pub heads: usize,
    /// Dimension of each head.
    pub head_dim: usize,
    /// Rotated dimensions (first `rot_dim` of each head; `head_dim` for full rotary).
    pub rot_dim: usize,
    /// Position of the first token.
    pub pos0: usize,
}

/// Shape of an attention call: queries `q[tokens][heads][head_dim]` at positions
/// `pos0..pos0+tokens` against caches `k, v[ctx][kv_heads][head_dim]` holding
/// positions `0..pos0+tokens`. Causal (decoders): query `t` sees keys `0..=pos0+t`;
/// bidirectional (encoders): every query sees keys `0..pos0+tokens`.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    /// Query tokens.
    pub tokens: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (`heads % kv_heads == 0`).
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Position of the first query.
    pub pos0: usize,
    /// Capacity of the caches in positions.
    pub ctx: usize,
    /// Score scale, usually `head_dim^-0.5`.
    pub scale: f32,
    /// Causal mask (decoders) or none (encoders).
    pub causal: bool,
}

/// Shape of a gated-delta-rule call (Qwen3.5's linear attention): `tokens` steps over
/// `qkv[tokens][2*k_heads*k_dim + v_heads*v_dim]` (query, key, value of every head, in that
/// order), each value head `h` reading key head `h / (v_heads / k_heads)`, with the state
/// `[v_heads][k_dim][v_dim]`.
#[derive(Clone, Copy, Debug)]
pub struct DeltaShape {
    /// Steps (tokens) in the call.
    pub tokens: usize,
    /// Query/key heads.
    pub k_heads: usize,
    /// Value heads (`v_heads % k_heads == 0`).
    pub v_heads: usize,
    /// Query/key head dimension.
    pub k_dim: usize,
    /// Value head dimension.
    pub v_dim: usize,
}

impl DeltaShape {
    /// Elements per token of the `qkv` input.
    pub fn qkv_stride(&self) -> usize {
        2 * self.k_heads * self.k_dim + self.v_heads * self.v_dim
    }
}

/// What sampling reads back from the logits: the top `k` candidates and, optionally,
/// the softmax normaliser at a temperature.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// `(token, logit)` best first; ties go to the lower token id.
    pub top: Vec<(u32, f32)>,
    /// `sum_i exp((logit_i - max) * inv_temp)` over the whole vocabulary, if asked for.
    pub sum_exp: Option<f64>,
}

/// What sampling removes or reweights before its top-k, so a grammar-constrained or penalized
/// step reads back `k` pairs like a plain one instead of the whole logit row. Both sets are
/// bitsets over token ids (bit `id % 32` of word `id / 32`) of at least `n.div_ceil(32)` words.
#[derive(Clone, Copy, Debug)]
pub struct LogitFilter<'a> {
    /// Only these tokens may be drawn (a grammar's mask less the repetition guard's tokens);
    /// `None`: every token.
    pub allowed: Option<&'a [u32]>,
    /// Tokens already seen, reweighted by the repetition penalty (CTRL / Hugging Face rule:
    /// a positive logit divided by `penalty`, any other multiplied by it); `None`: none.
    pub penalized: Option<&'a [u32]>,
    /// The repetition penalty, >= 1 (1 leaves the penalized logits as they are).
    pub penalty: f32,
}

/// Is bit `id` of the bitset `words` set (bit `id % 32` of word `id / 32`; ids past it: no)?
pub fn bit_set(words: &[u32], id: usize) -> bool {
    words.get(id / 32).is_some_and(|w| w >> (id % 32) & 1 == 1)
}

/// The repetition penalty's rule (CTRL / Hugging Face): a positive logit divided by
/// `penalty`, any other multiplied by it.
pub fn penalized(l: f32, penalty: f32) -> f32 {
    if l > 0.0 {
        l / penalty
    } else {
        l * penalty
    }
}

impl LogitFilter<'_> {
    /// Is token `id` allowed?
    pub fn allows(&self, id: usize) -> bool {
        self.allowed.is_none_or(|w| bit_set(w, id))
    }

    /// Token `id`'s logit `l` as the filter leaves it (`None`: not allowed).
    pub fn apply(&self, id: usize, l: f32) -> Option<f32> {
        if !self.allows(id) {
            return None;
        }
        let pen = self.penalty != 1.0 && self.penalized.is_some_and(|w| bit_set(w, id));
        Some(if pen { penalized(l, self.penalty) } else { l })
    }
}

/// How a backend's KV cache stores keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvFormat {
    /// 4-byte floats, exactly as computed.
    F32,
    /// IEEE half precision (round to nearest even), as llama.cpp's default cache: half the
    /// bytes that decode attention reads per position.
    F16,
}

/// Where a backend's work went between [`Backend::start_profile`] and
/// [`Backend::take_profile`]: what `lorekeeper bench --profile` prints per token.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Kernel dispatches recorded.
    pub dispatches: u64,
    /// Submissions to the device's queue.
    pub submissions: u64,
    /// Whether [`KernelTime::ns`] holds device time (adapters with timestamp queries).
    pub timed: bool,
    /// Per kernel, most device time first (by dispatches where untimed).
    pub kernels: Vec<KernelTime>,
}

/// One kernel's share of a [`Profile`].
#[derive(Clone, Debug, Default)]
pub struct KernelTime {
    /// The kernel's label (its `.wgsl` file).
    pub label: &'static str,
    /// Dispatches.
    pub count: u64,
    /// Device nanoseconds, from timestamps around each dispatch (0 where untimed).
    pub ns: u64,
    /// Weight bytes its dispatches read (matmuls; 0 for other kernels).
    pub weight_bytes: u64,
}

/// A device matrix's shape `[rows][cols]`, for shape checks.
pub trait MatrixShape {
    /// Output features `N`.
    fn rows(&self) -> usize;
    /// Input features `K`.
    fn cols(&self) -> usize;
}

impl MatrixShape for std::sync::Arc<Q4Matrix> {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
}

/// Length in 4-byte elements, for shape checks.
pub trait BufferLen {
    /// Number of 4-byte elements.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The op set. See the module documentation.
#[allow(async_fn_in_trait)]
pub trait Backend {
    /// A device buffer of 4-byte elements.
    type Buffer: Clone + BufferLen;
    /// A device-resident LQ4 matrix.
    type Q4: Clone + MatrixShape;
    /// A KV cache, `[ctx][kv_heads][head_dim]` values stored as [`Backend::kv_format`] says
    /// (its length counts values).
    type Kv: BufferLen;

    /// Starts the work recorded so far on the device without waiting for it (a no-op where
    /// ops run as they are called): the decode loop calls it after each forward pass, so a
    /// GPU runs the step while the CPU computes the grammar's next mask.
    fn submit(&self) -> Result<()> {
        Ok(())
    }

    /// The adapter or implementation, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]`.
    fn describe(&self) -> String;
    /// A zeroed buffer of `len` elements.
    fn alloc(&self, label: &str, len: usize) -> Result<Self::Buffer>;
    /// A buffer holding `data`.
    fn upload(&self, label: &str, data: &[f32]) -> Result<Self::Buffer>;
    /// Overwrites the start of `buf` with `data` (ordered after ops already recorded).
    fn write(&self, buf: &Self::Buffer, data: &[f32]) -> Result<()>;
    /// An LQ4 matrix on the device.
    fn upload_q4(&self, label: &str, m: &Q4Matrix) -> Result<Self::Q4>;
    /// The layout [`Backend::upload_q4`] keeps a matrix of `layout` in: its own, or where the
    /// backend has no kernel for it `q8_0` for `q6_k` and `q5`, `lq4h` for `lq4k`
    /// ([`Q4Matrix::to_portable`]). Tests choose their oracle by it.
    fn runs_layout(&self, layout: BlockLayout) -> BlockLayout {
        match layout {
            BlockLayout::Q6 | BlockLayout::Q5 => BlockLayout::Q8,
            BlockLayout::Lq4k => BlockLayout::Lq4h,
            other => other,
        }
    }
    /// How a 4-bit matmul of `m` activation rows against rows of `layout` rounds the
    /// activations: `None` keeps them f32; `Some(n)` rounds them to 8-bit blocks of 32 (the
    /// CPU's integer dot products, `cpu::q8`), each `n` consecutive blocks of a row under one
    /// scale (1, or 8 for `lq4k` in decode). Tests choose their oracle by it.
    fn q4_activation_rounding(&self, layout: BlockLayout, m: usize) -> Option<usize> {
        let _ = (layout, m);
        None
    }
    /// Prompt tokens per prefill pass this backend runs best at (sessions and benchmarks size
    /// their run state for it).
    fn prefill_chunk(&self) -> usize {
        256
    }
    /// Starts counting dispatches and, where the device can, timing each kernel. Profiling
    /// slows the work it measures (each dispatch timed alone); backends without a profile
    /// ignore it.
    fn start_profile(&self) {}
    /// What was counted since [`Backend::start_profile`] (which stops); `None` where the
    /// backend keeps no profile.
    fn take_profile(&self) -> Option<Profile> {
        None
    }
    /// Reads `len` elements at `offset`, after every op recorded so far.
    async fn read(&self, buf: &Self::Buffer, offset: usize, len: usize) -> Result<Vec<f32>>;

    /// `out[m][n] = sum_k x[m][k] * W[n][k]` for LQ4 `W[N][K]`.
    fn q4_matmul(
        &self,
        x: &Self::Buffer,
        w: &Self::Q4,
        out: &Self::Buffer,
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()>;
    /// `acc[m][n] += sum_k x[m][k] * W[n][k]`: the matmul and the residual add after it
    /// (`n_out = m * N`). By default the matmul into `tmp` and [`Backend::add_assign`]; a
    /// backend may add in the matmul's epilogue, one pass instead of two.
    #[allow(clippy::too_many_arguments)]
    fn q4_matmul_add(
        &self,
        x: &Self::Buffer,
        w: &Self::Q4,
        acc: &Self::Buffer,
        tmp: &Self::Buffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        self.q4_matmul(x, w, tmp, m, kernel)?;
        self.add_assign(acc, tmp, n_out)
    }
    /// The buffer holding a matmul's activations `[m][k]`: `x` as it is, or `normed` after an
    /// RMSNorm pass of `x` into it.
    fn matmul_input<'a>(
        &self,
        x: MatmulInput<'a, Self::Buffer>,
        m: usize,
        k: usize,
    ) -> Result<&'a Self::Buffer> {
        match x {
            MatmulInput::Plain(x) => Ok(x),
            MatmulInput::RmsNormed {
                x,
                weight,
                eps,
                offset,
                normed,
            } => {
                self.rms_norm(x, weight, normed, m, k, eps, offset)?;
                Ok(normed)
            }
        }
    }
    /// `out[m][n] = silu(x W_gate^T)[m][n] * (x W_up^T)[m][n]`, SwiGLU's gated product of two
    /// LQ4 matrices of one shape (`n_out = m * N`). By default both matmuls into `gate` and
    /// `up` and [`Backend::silu_mul`]; a backend may compute both rows in one pass (and the
    /// input's norm in its prologue).
    #[allow(clippy::too_many_arguments)]
    fn q4_matmul_glu(
        &self,
        x: MatmulInput<'_, Self::Buffer>,
        (w_gate, w_up): (&Self::Q4, &Self::Q4),
        (gate, up): (&Self::Buffer, &Self::Buffer),
        out: &Self::Buffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        let x = self.matmul_input(x, m, w_gate.cols())?;
        self.q4_matmul(x, w_gate, gate, m, kernel)?;
        self.q4_matmul(x, w_up, up, m, kernel)?;
        self.silu_mul(gate, up, out, n_out)
    }
    /// `out_j[m][n] = sum_k x[m][k] * W_j[n][k]` for several 4-bit matrices over the same
    /// activations (a layer's q, k and v projections), each into its own buffer. By default
    /// one [`Backend::q4_matmul`] each; a backend may compute the rows of matrices of one width
    /// in one pass (the CPU: one job over the thread pool, the activations rounded once; the
    /// GPU: one dispatch, the input's norm in its prologue).
    fn q4_matmul_many(
        &self,
        x: MatmulInput<'_, Self::Buffer>,
        parts: &[(&Self::Q4, &Self::Buffer)],
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        let Some((w0, _)) = parts.first() else {
            return Ok(());
        };
        let x = self.matmul_input(x, m, w0.cols())?;
        for (w, out) in parts {
            self.q4_matmul(x, w, out, m, kernel)?;
        }
        Ok(())
    }
    /// A row block of a larger LQ4 matrix: `out[mi * out_stride + out_off + n] =
    /// sum_k x[mi][k] * W[n][k]` for the block's `n` rows (`out_off + rows <= out_stride`).
    /// Matrices over one binding's size limit are stored as such blocks.
    #[allow(clippy::too_many_arguments)]
    fn q4_matmul_block(
        &self,
        x: &Self::Buffer,
        w: &Self::Q4,
        out: &Self::Buffer,
        m: usize,
        kernel: MatmulKernel,
        out_stride: usize,
        out_off: usize,
    ) -> Result<()>;
    /// `out[m][n] = sum_k x[m][k] * W[n][k]` for an f32 matrix `W[rows][cols]` in `w`
    /// (`cols % 4 == 0`).
    #[allow(clippy::too_many_arguments)]
    fn f32_matmul(
        &self,
        x: &Self::Buffer,
        w: &Self::Buffer,
        rows: usize,
        cols: usize,
        out: &Self::Buffer,
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()>;
    /// `out[r] = x[r] / rms(x[r]) * (weight + weight_offset)` (offset 1 for Qwen3.5's `(1 + w)`).
    #[allow(clippy::too_many_arguments)]
    fn rms_norm(
        &self,
        x: &Self::Buffer,
        weight: &Self::Buffer,
        out: &Self::Buffer,
        rows: usize,
        dim: usize,
        eps: f32,
        weight_offset: f32,
    ) -> Result<()>;
    /// Rotates `x` in place (rotate-half / NeoX pairing `(i, i + rot_dim/2)`) with a
    /// `[positions][rot_dim/2][cos, sin]` table (see [`rope_table`]).
    fn rope(&self, x: &Self::Buffer, table: &Self::Buffer, shape: RopeShape) -> Result<()>;
    /// RMSNorm of each head of `x[tokens][heads][head_dim]` (`weight[head_dim]`, plus
    /// `weight_offset`) into `out`, then RoPE of `out` in place (Qwen3's per-head q / k norm
    /// before the rotation). By default [`Backend::rms_norm`] and [`Backend::rope`]; a backend
    /// may do both in one pass.
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_rope(
        &self,
        x: &Self::Buffer,
        weight: &Self::Buffer,
        out: &Self::Buffer,
        (eps, weight_offset): (f32, f32),
        table: &Self::Buffer,
        shape: RopeShape,
    ) -> Result<()> {
        let rows = shape.tokens * shape.heads;
        self.rms_norm(x, weight, out, rows, shape.head_dim, eps, weight_offset)?;
        self.rope(out, table, shape)
    }
    /// [`Backend::rms_norm_rope`] of a layer's queries and keys, each `(x, weight, out)` with
    /// its own shape (`heads`; the other fields equal): by default one call each; a backend
    /// may do both in one pass.
    fn rms_norm_rope_pair(
        &self,
        [q, k]: [(&Self::Buffer, &Self::Buffer, &Self::Buffer); 2],
        norm: (f32, f32),
        table: &Self::Buffer,
        [q_shape, k_shape]: [RopeShape; 2],
    ) -> Result<()> {
        self.rms_norm_rope(q.0, q.1, q.2, norm, table, q_shape)?;
        self.rms_norm_rope(k.0, k.1, k.2, norm, table, k_shape)
    }
    /// Causal grouped-query attention of `q` over the caches into `out[tokens][heads][head_dim]`.
    fn attention(
        &self,
        q: &Self::Buffer,
        k_cache: &Self::Buffer,
        v_cache: &Self::Buffer,
        out: &Self::Buffer,
        shape: AttnShape,
    ) -> Result<()>;
    /// How [`Backend::Kv`] stores keys and values unless asked otherwise.
    fn kv_format(&self) -> KvFormat {
        KvFormat::F32
    }
    /// A KV cache of `len` values (zeros) in `format` (an error where the backend has none).
    fn alloc_kv(&self, label: &str, len: usize, format: KvFormat) -> Result<Self::Kv>;
    /// Writes `len` values of `src[src_offset..]` into the cache at `dst_offset`, in the
    /// cache's format (e.g. new keys after the positions already filled).
    fn write_kv(
        &self,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Kv,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// [`Backend::write_kv`] of a layer's keys and values at once (`[k, v]` into `[k_cache,
    /// v_cache]` at the same offsets): by default one call each; a backend may append both in
    /// one pass.
    fn write_kv_pair(
        &self,
        [k, v]: [&Self::Buffer; 2],
        src_offset: usize,
        [k_cache, v_cache]: [&Self::Kv; 2],
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.write_kv(k, src_offset, k_cache, dst_offset, len)?;
        self.write_kv(v, src_offset, v_cache, dst_offset, len)
    }
    /// RoPE of a layer's queries and keys in place (`q[tokens][heads][head_dim]`,
    /// `k[tokens][kv_heads][head_dim]`, each with its own shape: `heads` differs, the other
    /// fields are equal), then the rotated keys and the values `v` (shaped as `k`) appended to
    /// the caches at `dst_offset` ([`Backend::write_kv_pair`] of all of `k` and `v`): what a
    /// layer without q / k norms does between its projections and its attention. By default
    /// [`rope_append_unfused`]; a backend may do it in one pass.
    fn rope_append(
        &self,
        qkv: [&Self::Buffer; 3],
        table: &Self::Buffer,
        shapes: [RopeShape; 2],
        caches: [&Self::Kv; 2],
        dst_offset: usize,
    ) -> Result<()> {
        rope_append_unfused(self, qkv, table, shapes, caches, dst_offset)
    }
    /// Qwen3's steps between its projections and its attention: RMSNorm of each head of `q`
    /// and of `k` (`weights`: q_norm, k_norm; `norm` = (eps, weight offset)) followed by RoPE
    /// ([`Backend::rms_norm_rope_pair`]), the rotated queries written back into `q`, and the
    /// rotated keys and the values `v` appended to the caches at `dst_offset`. `scratch`
    /// (as long as `q` and `k`) serves the plain ops; what it holds afterwards is unspecified.
    /// By default [`rms_norm_rope_append_unfused`]; a backend may do it in one pass.
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_rope_append(
        &self,
        qkv: [&Self::Buffer; 3],
        weights: [&Self::Buffer; 2],
        norm: (f32, f32),
        table: &Self::Buffer,
        shapes: [RopeShape; 2],
        scratch: [&Self::Buffer; 2],
        caches: [&Self::Kv; 2],
        dst_offset: usize,
    ) -> Result<()> {
        rms_norm_rope_append_unfused(
            self, qkv, weights, norm, table, shapes, scratch, caches, dst_offset,
        )
    }
    /// [`Backend::attention`] over KV caches.
    fn attention_kv(
        &self,
        q: &Self::Buffer,
        k_cache: &Self::Kv,
        v_cache: &Self::Kv,
        out: &Self::Buffer,
        shape: AttnShape,
    ) -> Result<()>;
    /// LayerNorm over rows: `out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &self,
        x: &Self::Buffer,
        weight: &Self::Buffer,
        bias: &Self::Buffer,
        out: &Self::Buffer,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> Result<()>;
    /// `x[r][c] += bias[c]` in place (linear-layer biases).
    fn add_bias(
        &self,
        x: &Self::Buffer,
        bias: &Self::Buffer,
        rows: usize,
        cols: usize,
    ) -> Result<()>;
    /// `out[i] = gelu(x[i])` with the exact (erf) GELU, for `i < n`.
    fn gelu(&self, x: &Self::Buffer, out: &Self::Buffer, n: usize) -> Result<()>;
    /// `out[i] = silu(gate[i]) * up[i]` for `i < n`.
    fn silu_mul(
        &self,
        gate: &Self::Buffer,
        up: &Self::Buffer,
        out: &Self::Buffer,
        n: usize,
    ) -> Result<()>;
    /// `out[i] = x[i] * sigmoid(gate[i])` for `i < n` (Qwen3.5's attention output gate).
    fn sigmoid_mul(
        &self,
        x: &Self::Buffer,
        gate: &Self::Buffer,
        out: &Self::Buffer,
        n: usize,
    ) -> Result<()>;
    /// `out[r][i] = src[r][half * dim + i]` for `src[rows][2 * dim]`, `half` 0 or 1.
    fn take_half(
        &self,
        src: &Self::Buffer,
        out: &Self::Buffer,
        rows: usize,
        dim: usize,
        half: usize,
    ) -> Result<()>;
    /// Causal depthwise conv1d with SiLU: `out[t][c] = silu(sum_j w[c][j] * in(t - K + 1 + j))`
    /// over `x[tokens][channels]`, continuing from `state[K-1][channels]` (the previous inputs,
    /// oldest first), which is updated to the last `K-1` inputs.
    #[allow(clippy::too_many_arguments)]
    fn conv1d_silu(
        &self,
        x: &Self::Buffer,
        w: &Self::Buffer,
        state: &Self::Buffer,
        out: &Self::Buffer,
        tokens: usize,
        channels: usize,
        kernel: usize,
    ) -> Result<()>;
    /// The gated delta rule over `shape.tokens` steps from `state` (updated) into
    /// `out[tokens][v_heads*v_dim]`; `a, b[tokens][v_heads]` are the raw `in_proj_a`/`in_proj_b`
    /// outputs, `a_log, dt_bias[v_heads]` the layer's parameters (see
    /// `gpu::kernels::delta_rule`).
    #[allow(clippy::too_many_arguments)]
    fn gated_delta_rule(
        &self,
        qkv: &Self::Buffer,
        a: &Self::Buffer,
        b: &Self::Buffer,
        a_log: &Self::Buffer,
        dt_bias: &Self::Buffer,
        state: &Self::Buffer,
        out: &Self::Buffer,
        shape: DeltaShape,
    ) -> Result<()>;
    /// `acc[i] += x[i]` for `i < n` (the residual add).
    fn add_assign(&self, acc: &Self::Buffer, x: &Self::Buffer, n: usize) -> Result<()>;
    /// Row-wise softmax of `x[rows][cols]` into `out`.
    fn softmax(&self, x: &Self::Buffer, out: &Self::Buffer, rows: usize, cols: usize)
        -> Result<()>;
    /// Gathers and dequantizes rows `ids` of an LQ4 table into `out[ids.len()][cols]`.
    fn embed_q4(&self, ids: &[u32], table: &Self::Q4, out: &Self::Buffer) -> Result<()>;
    /// Embedding gather from a row block holding vocabulary rows `row0..row0 + rows`: rows
    /// `t` whose id falls in the block are written, the others are left untouched (another
    /// block writes them). The caller checks ids against the whole vocabulary.
    fn embed_q4_block(
        &self,
        ids: &[u32],
        table: &Self::Q4,
        row0: usize,
        out: &Self::Buffer,
    ) -> Result<()>;
    /// Copies `len` elements (e.g. new keys into the KV cache).
    fn copy(
        &self,
        src: &Self::Buffer,
        src_offset: usize,
        dst: &Self::Buffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Top-`k` of `logits[0..n]` and optionally the softmax normaliser at `1/inv_temp`:
    /// reads back only `k` pairs and a few partial sums, never the whole vocabulary.
    async fn select(
        &self,
        logits: &Self::Buffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
    ) -> Result<Selection>;
    /// [`Backend::select`] over the logits as `filter` leaves them: a token it does not allow
    /// is neither a candidate nor in the normaliser, and a penalized token's logit is
    /// reweighted first. Fewer than `k` candidates when fewer tokens are allowed.
    async fn select_filtered(
        &self,
        logits: &Self::Buffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
        filter: &LogitFilter<'_>,
    ) -> Result<Selection>;
}

/// Largest `k` that [`Backend::select`] accepts.
pub const MAX_TOP_K: usize = 64;

/// [`Backend::rope_append`] as its three plain ops: [`Backend::rope`] of `q`, of `k`, then
/// [`Backend::write_kv_pair`] of `k` and `v` (the whole of `k`'s shape) at `dst_offset`. Every
/// shape is checked before the first op, so a bad call changes nothing.
pub fn rope_append_unfused<B: Backend + ?Sized>(
    b: &B,
    [q, k, v]: [&B::Buffer; 3],
    table: &B::Buffer,
    [q_shape, k_shape]: [RopeShape; 2],
    caches: [&B::Kv; 2],
    dst_offset: usize,
) -> Result<()> {
    let len = check::rope_append([q, k, v], table, [q_shape, k_shape], caches, dst_offset)?;
    b.rope(q, table, q_shape)?;
    b.rope(k, table, k_shape)?;
    b.write_kv_pair([k, v], 0, caches, dst_offset, len)
}

/// [`Backend::rms_norm_rope_append`] as its plain ops: [`Backend::rms_norm_rope_pair`] into
/// `scratch`, the queries copied back into `q`, then [`Backend::write_kv_pair`] of the keys
/// and `v`. Every shape is checked before the first op, so a bad call changes nothing.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_rope_append_unfused<B: Backend + ?Sized>(
    b: &B,
    [q, k, v]: [&B::Buffer; 3],
    [q_weight, k_weight]: [&B::Buffer; 2],
    norm: (f32, f32),
    table: &B::Buffer,
    [q_shape, k_shape]: [RopeShape; 2],
    [q_out, k_out]: [&B::Buffer; 2],
    caches: [&B::Kv; 2],
    dst_offset: usize,
) -> Result<()> {
    let len = check::rope_append([q, k, v], table, [q_shape, k_shape], caches, dst_offset)?;
    for (x, w, out, s) in [(q, q_weight, q_out, q_shape), (k, k_weight, k_out, k_shape)] {
        check::rms_norm(x, w, out, s.tokens * s.heads, s.head_dim)?;
    }
    let pair = [(q, q_weight, q_out), (k, k_weight, k_out)];
    b.rms_norm_rope_pair(pair, norm, table, [q_shape, k_shape])?;
    let q_len = q_shape.tokens * q_shape.heads * q_shape.head_dim;
    b.copy(q_out, 0, q, 0, q_len)?;
    b.write_kv_pair([k_out, v], 0, caches, dst_offset, len)
}

/// Precomputes the RoPE table `[positions][rot_dim/2][cos, sin]` exactly as Hugging Face
/// computes it: `inv_freq = 1 / theta^(2i/rot_dim)` and `angle = pos * inv_freq` in f32,
/// then `cos`/`sin` (done in f64 here and rounded, i.e. correctly rounded f32). Computing it on
/// the host avoids WGSL's unspecified `sin`/`cos` precision outside `[-pi, pi]`.
pub fn rope_table(theta: f32, rot_dim: usize, positions: usize) -> Vec<f32> {
    let half = rot_dim / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| 1.0f32 / theta.powf((2 * i) as f32 / rot_dim as f32))
        .collect();
    let mut t = Vec::with_capacity(positions * half * 2);
    for p in 0..positions {
        for &f in &inv {
            let a = (p as f32 * f) as f64;
            t.push(a.cos() as f32);
            t.push(a.sin() as f32);
        }
    }
    t
}

/// Fails unless `buf` holds at least `need` elements.
pub(crate) fn need_len<B: BufferLen>(
    op: &'static str,
    what: &str,
    buf: &B,
    need: usize,
) -> Result<()> {
    if buf.len() < need {
        return Err(shape_err(
            op,
            format!("{what} holds {} elements, needs {need}", buf.len()),
        ));
    }
    Ok(())
}

/// Shared shape validation, so both backends reject exactly the same calls.
pub(crate) mod check;
