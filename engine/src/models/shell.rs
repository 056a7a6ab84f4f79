//! The decoder shell every architecture shares: load options, the sequence position and its
//! checks, the chunked forward driver, KV caches and the benchmark seek. An architecture
//! implements [`Architecture`] — its own layers and the forward of one chunk — and nothing
//! else.

use crate::backend::{AttnShape, Backend, KvFormat, RopeShape};
use crate::error::{EngineError, Result};

use super::layers::{OutputHead, WeightFormat};

/// The largest sizes a config may give, far above any released model of the families the
/// engine runs (Qwen3-235B: 94 layers, width 4096, 151,936 tokens), so that a config that
/// lies is refused before it sizes a buffer or a loop.
pub const MAX_LAYERS: usize = 1024;
/// Largest model width or MLP width (see [`MAX_LAYERS`]).
pub const MAX_WIDTH: usize = 1 << 18;
/// Largest head count or head dimension (see [`MAX_LAYERS`]).
pub const MAX_HEADS: usize = 1024;
/// Largest vocabulary (see [`MAX_LAYERS`]).
pub const MAX_VOCAB: usize = 1 << 21;

/// Checks that each `(field, value, max)` of a config is in `1..=max`, and that `eps` (the
/// RMSNorm epsilon) is a small positive number; the error names the field and the file.
pub fn check_sizes(source: &str, sizes: &[(&str, usize, usize)], eps: f64) -> Result<()> {
    for &(field, v, max) in sizes {
        if v == 0 || v > max {
            return Err(EngineError::Format {
                file: source.into(),
                detail: format!("config {field} is {v}; it must be in 1..={max}"),
            });
        }
    }
    if !(eps.is_finite() && eps > 0.0 && eps < 1.0) {
        return Err(EngineError::Format {
            file: source.into(),
            detail: format!("config rms_norm_eps is {eps}; it must be in (0, 1)"),
        });
    }
    Ok(())
}

/// Load-time options.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Matmul weight storage.
    pub format: WeightFormat,
    /// KV-cache capacity in positions.
    pub ctx: usize,
    /// Largest prefill chunk in tokens (activations are sized for it).
    pub chunk: usize,
    /// KV-cache storage; `None`: the backend's own ([`Backend::kv_format`]: f16 on CPUs that
    /// convert halves in hardware, as llama.cpp's default cache; f32 elsewhere).
    pub kv: Option<KvFormat>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            format: WeightFormat::F32,
            ctx: 2048,
            chunk: 64,
            kv: None,
        }
    }
}

impl LoadOptions {
    /// Refuses a zero context or chunk before anything is allocated.
    pub fn check(&self) -> Result<()> {
        if self.ctx == 0 || self.chunk == 0 {
            return Err(EngineError::Shape {
                op: "load",
                detail: "context and chunk must be positive".into(),
            });
        }
        Ok(())
    }
}

/// What an architecture brings to the shell: its layers' forward over one chunk and access to
/// its per-sequence state.
pub trait Architecture<B: Backend> {
    /// Runs `ids` (at most the chunk) at positions `pos0..`, embedding to logits.
    fn forward_chunk(&mut self, b: &B, ids: &[u32], pos0: usize, all_logits: bool) -> Result<()>;
    /// The final norm and LM head, which holds the logits of the last chunk.
    fn head(&self) -> &OutputHead<B>;
    /// The attention layers' KV caches.
    fn kv_caches(&self) -> Vec<&KvCache<B>>;
    /// Zeroes any fixed-size recurrent state (the KV caches are simply overwritten).
    fn reset_state(&self, _b: &B) -> Result<()> {
        Ok(())
    }
}

/// One attention layer's keys and values, `[ctx][kv_heads][head_dim]` each, in the backend's
/// cache format (f16 on the CPU where it converts in hardware).
pub struct KvCache<B: Backend> {
    k: B::Kv,
    v: B::Kv,
    ctx: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl<B: Backend> KvCache<B> {
    /// Allocates a cache of `opts.ctx` positions in `opts.kv`'s format.
    pub fn new(b: &B, opts: LoadOptions, kv_heads: usize, head_dim: usize) -> Result<Self> {
        let (ctx, format) = (opts.ctx, opts.kv.unwrap_or(b.kv_format()));
        let len = ctx * kv_heads * head_dim;
        Ok(KvCache {
            k: b.alloc_kv("k_cache", len, format)?,
            v: b.alloc_kv("v_cache", len, format)?,
            ctx,
            kv_heads,
            head_dim,
        })
    }

    /// Appends `k, v[t][kv_heads][head_dim]` at `pos0`, then causal grouped-query attention of
    /// `q[t][heads][head_dim]` over positions `0..=pos0 + i` into `out[t][heads][head_dim]`.
    pub fn attend(
        &self,
        b: &B,
        qkv: [&B::Buffer; 3],
        out: &B::Buffer,
        t: usize,
        heads: usize,
        pos0: usize,
    ) -> Result<()> {
        let [q, k, v] = qkv;
        let (kv, hd) = (self.kv_heads, self.head_dim);
        b.write_kv_pair([k, v], 0, [&self.k, &self.v], pos0 * kv * hd, t * kv * hd)?;
        self.attention(b, q, out, t, heads, pos0)
    }

    /// RoPE of `q[t][heads][head_dim]` and `k[t][kv_heads][head_dim]` in place (full rotary,
    /// `table` as [`crate::backend::rope_table`] builds it) with `k` and `v` appended at `pos0`
    /// (one pass where the backend fuses them: [`Backend::rope_append`]), then the attention of
    /// [`KvCache::attend`].
    pub fn rope_attend(
        &self,
        b: &B,
        qkv: [&B::Buffer; 3],
        table: &B::Buffer,
        out: &B::Buffer,
        (t, heads, pos0): (usize, usize, usize),
    ) -> Result<()> {
        let (shapes, dst) = self.rotation(t, heads, pos0);
        b.rope_append(qkv, table, shapes, [&self.k, &self.v], dst)?;
        self.attention(b, qkv[0], out, t, heads, pos0)
    }

    /// Qwen3's [`KvCache::rope_attend`]: RMSNorm of each head of `q` and `k` (`weights` =
    /// q_norm, k_norm; `eps`) before the rotation, the rotated queries back in `q`, the keys and
    /// `v` appended at `pos0` (one pass where the backend fuses them:
    /// [`Backend::rms_norm_rope_append`]; `scratch` as long as `q` and `k`), then the attention.
    #[allow(clippy::too_many_arguments)]
    pub fn norm_rope_attend(
        &self,
        b: &B,
        qkv: [&B::Buffer; 3],
        (weights, eps): ([&B::Buffer; 2], f32),
        table: &B::Buffer,
        scratch: [&B::Buffer; 2],
        out: &B::Buffer,
        (t, heads, pos0): (usize, usize, usize),
    ) -> Result<()> {
        let (shapes, dst) = self.rotation(t, heads, pos0);
        let caches = [&self.k, &self.v];
        let norm = (eps, 0.0);
        b.rms_norm_rope_append(qkv, weights, norm, table, shapes, scratch, caches, dst)?;
        self.attention(b, qkv[0], out, t, heads, pos0)
    }

    /// The full rotation's shapes of `t` tokens' queries (`heads`) and keys at `pos0`, and where
    /// in the caches their keys and values go.
    fn rotation(&self, t: usize, heads: usize, pos0: usize) -> ([RopeShape; 2], usize) {
        let (kv, hd) = (self.kv_heads, self.head_dim);
        let shape = |heads| RopeShape {
            tokens: t,
            heads,
            head_dim: hd,
            rot_dim: hd,
            pos0,
        };
        ([shape(heads), shape(kv)], pos0 * kv * hd)
    }

    /// Causal grouped-query attention of `q[t][heads][head_dim]` over positions
    /// `0..=pos0 + i` of the cache into `out[t][heads][head_dim]`.
    fn attention(
        &self,
        b: &B,
        q: &B::Buffer,
        out: &B::Buffer,
        t: usize,
        heads: usize,
        pos0: usize,
    ) -> Result<()> {
        let (kv, hd) = (self.kv_heads, self.head_dim);
        let shape = AttnShape {
            causal: true,
            tokens: t,
            heads,
            kv_heads: kv,
            head_dim: hd,
            pos0,
            ctx: self.ctx,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        b.attention_kv(q, &self.k, &self.v, out, shape)
    }

    /// Fills the first `pos` positions with pseudo-random values (for timing only).
    fn fill_for_benchmark(&self, b: &B, pos: usize) -> Result<()> {
        let n = pos * self.kv_heads * self.head_dim;
        let fill = b.upload("kv_fill", &bench_fill(n))?;
        b.write_kv(&fill, 0, &self.k, 0, n)?;
        b.write_kv(&fill, 0, &self.v, 0, n)
    }
}

/// A sequence's position and the options it was loaded with: the driver around an
/// [`Architecture`].
#[derive(Clone, Copy, Debug)]
pub struct Sequence {
    opts: LoadOptions,
    pos: usize,
}

impl Sequence {
    /// A new, empty sequence (`opts` checked).
    pub fn new(opts: LoadOptions) -> Result<Self> {
        opts.check()?;
        Ok(Sequence { opts, pos: 0 })
    }

    /// Positions processed since the last reset.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Context capacity in positions.
    pub fn context(&self) -> usize {
        self.opts.ctx
    }

    /// How the matmul weights are stored.
    pub fn format(&self) -> WeightFormat {
        self.opts.format
    }

    /// Forgets the sequence.
    pub fn reset<B: Backend>(&mut self, arch: &dyn Architecture<B>, b: &B) -> Result<()> {
        arch.reset_state(b)?;
        self.pos = 0;
        Ok(())
    }

    /// For timing only: continues as if `pos` positions were cached, filling the KV caches with
    /// pseudo-random keys and values (never-written host memory would be read from the shared
    /// zero page and time as free), so decode speed at a long context can be measured without
    /// prefilling it. Recurrent state has the same size at any position.
    pub fn seek_for_benchmark<B: Backend>(
        &mut self,
        arch: &dyn Architecture<B>,
        b: &B,
        pos: usize,
    ) -> Result<()> {
        let pos = pos.min(self.opts.ctx.saturating_sub(1));
        for c in arch.kv_caches() {
            c.fill_for_benchmark(b, pos)?;
        }
        self.pos = pos;
        Ok(())
    }

    /// Runs `tokens` through `arch` in chunks, continuing the sequence. Afterwards the head
    /// holds the last token's logits (`all_logits = false`), or every token's logits of the
    /// final chunk (`all_logits = true`, which needs `tokens.len() <= chunk`).
    pub fn forward<B: Backend>(
        &mut self,
        arch: &mut dyn Architecture<B>,
        b: &B,
        tokens: &[u32],
        all_logits: bool,
    ) -> Result<()> {
        let (ctx, chunk) = (self.opts.ctx, self.opts.chunk);
        check_forward(
            tokens,
            self.pos,
            ctx,
            chunk,
            arch.head().vocab(),
            all_logits,
        )?;
        for ids in tokens.chunks(chunk) {
            arch.forward_chunk(b, ids, self.pos, all_logits)?;
            self.pos += ids.len();
        }
        Ok(())
    }
}

/// `n` pseudo-random values in [-1, 1) (a cheap LCG), for benchmark caches.
fn bench_fill(n: usize) -> Vec<f32> {
    let mut x = 0x9e37_79b9u32;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// End-of-sequence ids from a config's `eos_token_id` (an int or a list).
pub(crate) fn eos_ids(v: &Option<serde_json::Value>) -> Vec<u32> {
    match v {
        Some(serde_json::Value::Number(n)) => {
            n.as_u64().map(|v| vec![v as u32]).unwrap_or_default()
        }
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_u64())
            .map(|v| v as u32)
            .collect(),
        _ => Vec::new(),
    }
}

/// The checks every decoder's `forward` makes before touching the device.
fn check_forward(
    tokens: &[u32],
    pos: usize,
    ctx: usize,
    chunk: usize,
    vocab: usize,
    all_logits: bool,
) -> Result<()> {
    let bad = |detail: String| {
        Err(EngineError::Shape {
            op: "forward",
            detail,
        })
    };
    if tokens.is_empty() {
        return bad("no tokens".into());
    }
    if pos + tokens.len() > ctx {
        return bad(format!(
            "{pos} cached + {} new tokens exceed the context of {ctx} positions",
            tokens.len()
        ));
    }
    if all_logits && tokens.len() > chunk {
        return bad(format!("all_logits needs at most {chunk} tokens"));
    }
    if let Some(bad_id) = tokens.iter().find(|&&t| t as usize >= vocab) {
        return bad(format!(
            "token id {bad_id} is outside the vocabulary of {vocab}"
        ));
    }
    Ok(())
}
