//! Qwen3.5, the hybrid decoder: three of every four layers are Gated DeltaNet linear attention
//! (a fixed-size recurrent state per sequence), every fourth is gated full attention (a KV
//! cache), with f32 or LQ4 weights. Read against transformers 5's `modeling_qwen3_5.py`.
//!
//! Per layer, for a chunk of `T` tokens at positions `pos0..pos0+T` (shapes in elements;
//! `nk, dk` key heads and dim, `nv, dv` value heads and dim of the linear layers):
//! 1. `h = rms_norm(x) * (1 + w)`                                   `[T, hidden]`
//!
//! Linear-attention layer (`linear_attn.*`):
//! 2. `qkv = h Wqkv^T`, `z = h Wz^T`, `b = h Wb^T`, `a = h Wa^T`
//!    `[T, 2*nk*dk + nv*dv]`, `[T, nv*dv]`, `[T, nv]`, `[T, nv]`
//! 3. `qkv = silu(causal_depthwise_conv1d(qkv))`, continuing the layer's conv state
//!    `[K-1, conv_dim]`
//! 4. `o = gated_delta_rule(q, k, v, a, b)` on the layer's state `[nv, dk, dv]` (q, k
//!    L2-normalized; value head `h` reads key head `h / (nv/nk)`)             `[T, nv*dv]`
//! 5. `o = rms_norm(o per head) * w * silu(z)`                                `[T*nv, dv]`
//! 6. `x += o Wout^T`                                                          `[T, hidden]`
//!
//! Full-attention layer (`self_attn.*`, `nh` query heads, `kv` heads, `hd` head dim):
//! 2. `[q | gate] = h Wq^T` per head, split               `[T, nh, 2*hd]` -> `[T, nh*hd]` x2
//! 3. `k, v = h Wk^T, h Wv^T`                             `[T, kv*hd]` x2
//! 4. `q, k = rms_norm_per_head(q, k) * (1 + w)`; RoPE on the first `hd * partial_rotary_factor`
//!    dims of each head (text-only positions: the multimodal sections reduce to plain RoPE)
//! 5. `k, v` appended to the cache; `a = attention(q, cache)` causal, grouped-query
//! 6. `x += (a * sigmoid(gate)) Wo^T`
//!
//! Both: 7. `x += down(silu(gate(h2)) * up(h2))`, `h2 = rms_norm(x) * (1 + w)`;
//! then `logits = rms_norm(x) * (1 + w) W_lm^T`.
//!
//! The per-sequence state (conv + recurrent state of the linear layers, KV cache of the full
//! layers) and all activations are allocated once at load (llama2.c's run state); only the
//! full layers' part grows with the context.

use super::layers::{vector, Linear, Mlp, OutputHead, TokenEmbedding, WeightFormat};
use super::shell::{Architecture, KvCache, LoadOptions};
use crate::backend::{rope_table, Backend, BufferLen, DeltaShape, MatmulInput, RopeShape};
use crate::error::Result;
use crate::format::weights::{expect, HostTensor, WeightSource};

pub mod config;
pub use config::{Config, LayerKind, RopeParameters};

/// Matrices kept in f32 whatever the weight format: the decay and beta projections feed
/// exponentials and sigmoids that compound over the whole sequence, and at `nv` rows each they
/// are ~0.1 % of the weights. The index-builder stores them f32 too.
pub const F32_MATRICES: [&str; 2] = [
    "linear_attn.in_proj_a.weight",
    "linear_attn.in_proj_b.weight",
];

/// Maps the multimodal checkpoint's `model.language_model.*` names onto the text model's
/// `model.*` names (the vision tower and `mtp.*` are never read).
pub struct LanguageModelWeights<'a> {
    inner: &'a dyn WeightSource,
}

impl<'a> LanguageModelWeights<'a> {
    /// Wraps `inner` when it holds the multimodal layout, else returns `None`.
    pub fn detect(inner: &'a dyn WeightSource) -> Option<Self> {
        (!inner.contains("model.embed_tokens.weight")
            && inner.contains("model.language_model.embed_tokens.weight"))
        .then_some(LanguageModelWeights { inner })
    }

    fn map(name: &str) -> String {
        language_model_name(name)
    }
}

/// The multimodal checkpoint's name of a text-model tensor: `model.X` → `model.language_model.X`.
pub fn language_model_name(name: &str) -> String {
    match name.strip_prefix("model.") {
        Some(rest) => format!("model.language_model.{rest}"),
        None => name.to_string(),
    }
}

impl WeightSource for LanguageModelWeights<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        self.inner.get(&Self::map(name))
    }
    fn contains(&self, name: &str) -> bool {
        self.inner.contains(&Self::map(name))
    }
    fn q4_parts(&self, name: &str) -> Result<Option<Vec<(usize, crate::quant::Q4Matrix)>>> {
        self.inner.q4_parts(&Self::map(name))
    }
}

/// One Gated DeltaNet layer's weights and per-sequence state.
struct GatedDeltaNet<B: Backend> {
    in_proj_qkv: Linear<B>,
    in_proj_z: Linear<B>,
    in_proj_b: Linear<B>,
    in_proj_a: Linear<B>,
    /// `[conv_dim, K]` (HF `[conv_dim, 1, K]`).
    conv1d: B::Buffer,
    dt_bias: B::Buffer,
    a_log: B::Buffer,
    norm: B::Buffer,
    out_proj: Linear<B>,
    /// `[K-1, conv_dim]`: the last inputs of the conv.
    conv_state: B::Buffer,
    /// `[nv, dk, dv]`.
    state: B::Buffer,
}

impl<B: Backend> GatedDeltaNet<B> {
    fn new(
        b: &B,
        cfg: &Config,
        src: &dyn WeightSource,
        p: &str,
        fmt: WeightFormat,
    ) -> Result<Self> {
        let h = cfg.hidden_size;
        let (nv, dv, k) = (
            cfg.linear_num_value_heads,
            cfg.linear_value_head_dim,
            cfg.linear_conv_kernel_dim,
        );
        let la = format!("{p}.linear_attn");
        let lin = |n: &str, rows: usize, cols: usize, fmt: WeightFormat| {
            Linear::new(b, src, &format!("{la}.{n}.weight"), rows, cols, fmt)
        };
        let conv_name = format!("{la}.conv1d.weight");
        let conv = expect(src, &conv_name, &[cfg.conv_dim(), 1, k])?;
        let (conv_len, state_len) = cfg.linear_state_lens();
        // in_proj_a / in_proj_b stay f32: see [`F32_MATRICES`].
        Ok(GatedDeltaNet {
            in_proj_qkv: lin("in_proj_qkv", cfg.conv_dim(), h, fmt)?,
            in_proj_z: lin("in_proj_z", cfg.value_dim(), h, fmt)?,
            in_proj_b: lin("in_proj_b", nv, h, WeightFormat::F32)?,
            in_proj_a: lin("in_proj_a", nv, h, WeightFormat::F32)?,
            conv1d: b.upload(&conv_name, &conv.data)?,
            dt_bias: vector(b, src, &format!("{la}.dt_bias"), nv)?,
            a_log: vector(b, src, &format!("{la}.A_log"), nv)?,
            norm: vector(b, src, &format!("{la}.norm.weight"), dv)?,
            out_proj: lin("out_proj", h, cfg.value_dim(), fmt)?,
            conv_state: b.alloc("conv_state", conv_len)?,
            state: b.alloc("delta_state", state_len)?,
        })
    }
}

/// One gated full-attention layer's weights and KV cache.
struct GatedAttention<B: Backend> {
    /// `[nh * 2 * hd, hidden]`: per head, query rows then gate rows.
    q_proj: Linear<B>,
    k_proj: Linear<B>,
    v_proj: Linear<B>,
    o_proj: Linear<B>,
    q_norm: B::Buffer,
    k_norm: B::Buffer,
    cache: KvCache<B>,
}

impl<B: Backend> GatedAttention<B> {
    fn new(
        b: &B,
        cfg: &Config,
        src: &dyn WeightSource,
        p: &str,
        opts: &LoadOptions,
    ) -> Result<Self> {
        let (h, hd, nh, kv) = (
            cfg.hidden_size,
            cfg.head_dim(),
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
        );
        let sa = format!("{p}.self_attn");
        let lin = |n: &str, rows: usize, cols: usize| {
            Linear::new(b, src, &format!("{sa}.{n}.weight"), rows, cols, opts.format)
        };
        Ok(GatedAttention {
            q_proj: lin("q_proj", nh * hd * 2, h)?,
            k_proj: lin("k_proj", kv * hd, h)?,
            v_proj: lin("v_proj", kv * hd, h)?,
            o_proj: lin("o_proj", h, nh * hd)?,
            q_norm: vector(b, src, &format!("{sa}.q_norm.weight"), hd)?,
            k_norm: vector(b, src, &format!("{sa}.k_norm.weight"), hd)?,
            cache: KvCache::new(b, *opts, kv, hd)?,
        })
    }
}

/// A layer's token mixer with its state.
enum Mixer<B: Backend> {
    Linear(GatedDeltaNet<B>),
    Full(GatedAttention<B>),
}

/// One decoder layer.
struct Layer<B: Backend> {
    input_layernorm: B::Buffer,
    mixer: Mixer<B>,
    post_attention_layernorm: B::Buffer,
    mlp: Mlp<B>,
}

/// Activations for one chunk, allocated once.
struct RunState<B: Backend> {
    x: B::Buffer,
    h: B::Buffer,
    // linear attention
    qkv: B::Buffer,
    conv: B::Buffer,
    z: B::Buffer,
    a: B::Buffer,
    b: B::Buffer,
    core: B::Buffer,
    core_n: B::Buffer,
    gated: B::Buffer,
    // full attention
    q_raw: B::Buffer,
    q: B::Buffer,
    qn: B::Buffer,
    gate: B::Buffer,
    k: B::Buffer,
    kn: B::Buffer,
    v: B::Buffer,
    att: B::Buffer,
    att_g: B::Buffer,
    // shared
    o: B::Buffer,
    mlp_gate: B::Buffer,
    mlp_up: B::Buffer,
    act: B::Buffer,
    /// Zeros as long as the longer of a linear layer's two states, copied over them on reset.
    zeros: B::Buffer,
}

/// A loaded Qwen3.5 model with its run state.
pub struct Qwen35<B: Backend> {
    /// The configuration.
    pub cfg: Config,
    embed: TokenEmbedding<B>,
    layers: Vec<Layer<B>>,
    head: OutputHead<B>,
    rope: B::Buffer,
    s: RunState<B>,
}

impl<B: Backend> Qwen35<B> {
    /// Loads every weight by its HF name (shape-checked; the multimodal checkpoint's
    /// `model.language_model.*` names are mapped) and allocates the run state.
    pub fn load(b: &B, cfg: Config, src: &dyn WeightSource, opts: LoadOptions) -> Result<Self> {
        if let Some(mapped) = LanguageModelWeights::detect(src) {
            return Self::load_from(b, cfg, &mapped, opts);
        }
        Self::load_from(b, cfg, src, opts)
    }

    fn load_from(b: &B, cfg: Config, src: &dyn WeightSource, opts: LoadOptions) -> Result<Self> {
        opts.check()?;
        let (h, v, f) = (cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size);
        let fmt = opts.format;
        let (embed, lm_head) = TokenEmbedding::new(b, src, v, h, fmt, cfg.tie_word_embeddings)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for (i, kind) in cfg.layer_kinds().into_iter().enumerate() {
            let p = format!("model.layers.{i}");
            let mixer = match kind {
                LayerKind::Linear => Mixer::Linear(GatedDeltaNet::new(b, &cfg, src, &p, fmt)?),
                LayerKind::Full => Mixer::Full(GatedAttention::new(b, &cfg, src, &p, &opts)?),
            };
            layers.push(Layer {
                input_layernorm: vector(b, src, &format!("{p}.input_layernorm.weight"), h)?,
                mixer,
                post_attention_layernorm: vector(
                    b,
                    src,
                    &format!("{p}.post_attention_layernorm.weight"),
                    h,
                )?,
                mlp: Mlp::new(b, src, &p, h, f, fmt)?,
            });
        }
        let head = OutputHead::new(b, src, lm_head, (v, h), cfg.rms_norm_eps as f32, 1.0)?;
        let rope = b.upload(
            "rope",
            &rope_table(cfg.rope_theta() as f32, cfg.rot_dim(), opts.ctx),
        )?;
        let t = opts.chunk;
        let (hd, nh, kv) = (
            cfg.head_dim(),
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
        );
        let nv = cfg.linear_num_value_heads;
        let (conv_len, state_len) = cfg.linear_state_lens();
        let s = RunState {
            x: b.alloc("x", t * h)?,
            h: b.alloc("h", t * h)?,
            qkv: b.alloc("qkv", t * cfg.conv_dim())?,
            conv: b.alloc("conv", t * cfg.conv_dim())?,
            z: b.alloc("z", t * cfg.value_dim())?,
            a: b.alloc("a", t * nv)?,
            b: b.alloc("b", t * nv)?,
            core: b.alloc("core", t * cfg.value_dim())?,
            core_n: b.alloc("core_n", t * cfg.value_dim())?,
            gated: b.alloc("gated", t * cfg.value_dim())?,
            q_raw: b.alloc("q_raw", t * nh * hd * 2)?,
            q: b.alloc("q", t * nh * hd)?,
            qn: b.alloc("qn", t * nh * hd)?,
            gate: b.alloc("gate", t * nh * hd)?,
            k: b.alloc("k", t * kv * hd)?,
            kn: b.alloc("kn", t * kv * hd)?,
            v: b.alloc("v", t * kv * hd)?,
            att: b.alloc("att", t * nh * hd)?,
            att_g: b.alloc("att_g", t * nh * hd)?,
            o: b.alloc("o", t * h)?,
            mlp_gate: b.alloc("mlp_gate", t * f)?,
            mlp_up: b.alloc("mlp_up", t * f)?,
            act: b.alloc("act", t * f)?,
            zeros: b.alloc("zeros", conv_len.max(state_len))?,
        };
        Ok(Qwen35 {
            cfg,
            embed,
            layers,
            head,
            rope,
            s,
        })
    }

    /// Steps 2–6 of a linear-attention layer: `h` (the layer's normed input) in, `s.o` out.
    fn linear_attention(
        &self,
        b: &B,
        la: &GatedDeltaNet<B>,
        h: MatmulInput<'_, B::Buffer>,
        t: usize,
    ) -> Result<()> {
        let (cfg, s) = (&self.cfg, &self.s);
        let (nv, dv) = (cfg.linear_num_value_heads, cfg.linear_value_head_dim);
        // 2. projections                          [t, conv_dim], [t, nv*dv], [t, nv] x2
        let parts = [
            (&la.in_proj_qkv, &s.qkv),
            (&la.in_proj_z, &s.z),
            (&la.in_proj_b, &s.b),
            (&la.in_proj_a, &s.a),
        ];
        Linear::forward_many(b, h, &parts, t)?;
        // 3. causal depthwise conv + SiLU, continuing the conv state      [t, conv_dim]
        b.conv1d_silu(
            &s.qkv,
            &la.conv1d,
            &la.conv_state,
            &s.conv,
            t,
            cfg.conv_dim(),
            cfg.linear_conv_kernel_dim,
        )?;
        // 4. gated delta rule on the recurrent state                      [t, nv*dv]
        let shape = DeltaShape {
            tokens: t,
            k_heads: cfg.linear_num_key_heads,
            v_heads: nv,
            k_dim: cfg.linear_key_head_dim,
            v_dim: dv,
        };
        b.gated_delta_rule(
            &s.conv,
            &s.a,
            &s.b,
            &la.a_log,
            &la.dt_bias,
            &la.state,
            &s.core,
            shape,
        )?;
        // 5. gated RMSNorm per head: rms_norm(o) * w * silu(z)            [t*nv, dv]
        b.rms_norm(
            &s.core,
            &la.norm,
            &s.core_n,
            t * nv,
            dv,
            cfg.rms_norm_eps as f32,
            0.0,
        )?;
        b.silu_mul(&s.z, &s.core_n, &s.gated, t * nv * dv)?;
        // 6. o = gated Wout^T                                             [t, h]
        la.out_proj.forward(b, &s.gated, &s.o, t)
    }

    /// Steps 2–6 of a full-attention layer: `h` (the layer's normed input) in, `s.o` out.
    fn full_attention(
        &self,
        b: &B,
        fa: &GatedAttention<B>,
        h: MatmulInput<'_, B::Buffer>,
        t: usize,
        pos0: usize,
    ) -> Result<()> {
        let (cfg, s) = (&self.cfg, &self.s);
        let (hd, nh, kv) = (
            cfg.head_dim(),
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
        );
        let eps = cfg.rms_norm_eps as f32;
        // 2–3. [q | gate] per head, k, v (one pass where the backend fuses them), q and the
        //      gate split                                   [t, nh*hd*2], [t, kv*hd] x2
        let parts = [
            (&fa.q_proj, &s.q_raw),
            (&fa.k_proj, &s.k),
            (&fa.v_proj, &s.v),
        ];
        Linear::forward_many(b, h, &parts, t)?;
        b.take_half(&s.q_raw, &s.q, t * nh, hd, 0)?;
        b.take_half(&s.q_raw, &s.gate, t * nh, hd, 1)?;
        // 4. per-head RMSNorm (1 + w), partial RoPE at pos0
        b.rms_norm(&s.q, &fa.q_norm, &s.qn, t * nh, hd, eps, 1.0)?;
        b.rms_norm(&s.k, &fa.k_norm, &s.kn, t * kv, hd, eps, 1.0)?;
        let rs = |heads| RopeShape {
            tokens: t,
            heads,
            head_dim: hd,
            rot_dim: cfg.rot_dim(),
            pos0,
        };
        b.rope(&s.qn, &self.rope, rs(nh))?;
        b.rope(&s.kn, &self.rope, rs(kv))?;
        // 5. append to the cache, causal grouped-query attention          [t, nh*hd]
        fa.cache
            .attend(b, [&s.qn, &s.kn, &s.v], &s.att, t, nh, pos0)?;
        // 6. o = (att * sigmoid(gate)) Wo^T                               [t, h]
        b.sigmoid_mul(&s.att, &s.gate, &s.att_g, t * nh * hd)?;
        fa.o_proj.forward(b, &s.att_g, &s.o, t)
    }
}

impl<B: Backend> Architecture<B> for Qwen35<B> {
    fn head(&self) -> &OutputHead<B> {
        &self.head
    }

    fn kv_caches(&self) -> Vec<&KvCache<B>> {
        self.layers
            .iter()
            .filter_map(|l| match &l.mixer {
                Mixer::Full(fa) => Some(&fa.cache),
                Mixer::Linear(_) => None,
            })
            .collect()
    }

    /// Zeroes the linear layers' conv and recurrent states.
    fn reset_state(&self, b: &B) -> Result<()> {
        for l in &self.layers {
            if let Mixer::Linear(la) = &l.mixer {
                b.copy(&self.s.zeros, 0, &la.conv_state, 0, la.conv_state.len())?;
                b.copy(&self.s.zeros, 0, &la.state, 0, la.state.len())?;
            }
        }
        Ok(())
    }

    fn forward_chunk(&mut self, b: &B, ids: &[u32], pos0: usize, all_logits: bool) -> Result<()> {
        let cfg = &self.cfg;
        let s = &self.s;
        let t = ids.len();
        let h = cfg.hidden_size;
        let eps = cfg.rms_norm_eps as f32;
        // 0. Embedding: x [t, h].
        self.embed.forward(b, ids, &s.x)?;
        for l in &self.layers {
            // 1. h = rms_norm(x) * (1 + w) [t, h]: a pass of its own, or the prologue of the
            //    projections' GEMV where the backend fuses them
            let norm = |weight| MatmulInput::RmsNormed {
                x: &s.x,
                weight,
                eps,
                offset: 1.0,
                normed: &s.h,
            };
            let hn = norm(&l.input_layernorm);
            match &l.mixer {
                Mixer::Linear(la) => self.linear_attention(b, la, hn, t)?,
                Mixer::Full(fa) => self.full_attention(b, fa, hn, t, pos0)?,
            }
            b.add_assign(&s.x, &s.o, t * h)?;
            // 7. x += down(silu(gate(h2)) * up(h2)), h2 = rms_norm(x) * (1 + w)
            let scratch = [&s.mlp_gate, &s.mlp_up, &s.act, &s.o];
            l.mlp
                .add_to(b, norm(&l.post_attention_layernorm), scratch, &s.x, t)?;
        }
        // 8. final norm and LM head
        self.head.forward(b, &s.x, &s.h, t, all_logits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{"model_type":"qwen3_5_text","vocab_size":256,"hidden_size":64,
        "intermediate_size":128,"num_hidden_layers":4,"num_attention_heads":4,
        "num_key_value_heads":2,"head_dim":32,"rms_norm_eps":1e-6,
        "rope_parameters":{"rope_type":"default","rope_theta":1000000.0,"partial_rotary_factor":0.25},
        "tie_word_embeddings":true,"linear_conv_kernel_dim":4,"linear_key_head_dim":16,
        "linear_num_key_heads":2,"linear_num_value_heads":4,"linear_value_head_dim":16,
        "layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],
        "eos_token_id":2}"#;

    #[test]
    fn text_and_multimodal_configs() {
        let c = Config::from_json("t", TEXT).expect("text");
        assert_eq!(c.rot_dim(), 8);
        assert_eq!(c.conv_dim(), 2 * 32 + 64);
        assert_eq!(
            c.layer_kinds(),
            [
                LayerKind::Linear,
                LayerKind::Linear,
                LayerKind::Linear,
                LayerKind::Full
            ]
        );
        let inner = TEXT.replace(r#""tie_word_embeddings":true,"#, "");
        let mm = format!(
            r#"{{"model_type":"qwen3_5","architectures":["Qwen3_5ForConditionalGeneration"],
            "tie_word_embeddings":true,"text_config":{inner},"vision_config":{{"depth":2}}}}"#
        );
        let m = Config::from_json("mm", &mm).expect("multimodal");
        assert!(m.tie_word_embeddings);
        assert_eq!(m.eos_ids(), [2]);
        // Without layer_types every 4th layer is full attention.
        let no_types = TEXT.replace(
            r#""layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],"#,
            r#""full_attention_interval":2,"#,
        );
        let n = Config::from_json("n", &no_types).expect("interval");
        assert_eq!(n.layer_kinds()[1], LayerKind::Full);
        assert_eq!(n.layer_kinds()[0], LayerKind::Linear);
    }

    #[test]
    fn unsupported_configs_are_refused_by_name() {
        let cases = [
            (
                TEXT.replace(
                    r#""linear_key_head_dim":16"#,
                    r#""linear_key_head_dim":192"#,
                ),
                "linear_key_head_dim",
            ),
            (
                TEXT.replace(
                    r#""linear_num_value_heads":4"#,
                    r#""linear_num_value_heads":3"#,
                ),
                "value heads",
            ),
            (
                TEXT.replace(
                    r#""linear_conv_kernel_dim":4"#,
                    r#""linear_conv_kernel_dim":12"#,
                ),
                "linear_conv_kernel_dim",
            ),
            (
                TEXT.replace(r#""rope_type":"default""#, r#""rope_type":"yarn""#),
                "yarn",
            ),
            (
                TEXT.replace(r#""full_attention"]"#, r#""sliding_attention"]"#),
                "sliding_attention",
            ),
            (
                TEXT.replace(r#""num_hidden_layers":4"#, r#""num_hidden_layers":5"#),
                "layer_types",
            ),
            (
                TEXT.replace(
                    r#""partial_rotary_factor":0.25"#,
                    r#""partial_rotary_factor":0.01"#,
                ),
                "partial_rotary_factor",
            ),
            (
                TEXT.replace(r#""linear_value_head_dim":16,"#, ""),
                "linear_value_head_dim",
            ),
        ];
        for (json, needle) in cases {
            let e = Config::from_json("cfg.json", &json)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.contains(needle) && e.contains("cfg.json"),
                "{needle}: {e}"
            );
        }
    }

    #[test]
    fn state_size_of_the_4b_shape_does_not_grow_with_the_context() {
        let c = Config::from_json(
            "4b",
            &TEXT
                .replace(r#""hidden_size":64"#, r#""hidden_size":2560"#)
                .replace(r#""num_hidden_layers":4"#, r#""num_hidden_layers":32"#)
                .replace(r#""linear_key_head_dim":16"#, r#""linear_key_head_dim":128"#)
                .replace(r#""linear_value_head_dim":16"#, r#""linear_value_head_dim":128"#)
                .replace(r#""linear_num_key_heads":2"#, r#""linear_num_key_heads":16"#)
                .replace(r#""linear_num_value_heads":4"#, r#""linear_num_value_heads":32"#)
                .replace(r#""num_attention_heads":4"#, r#""num_attention_heads":16"#)
                .replace(r#""num_key_value_heads":2"#, r#""num_key_value_heads":4"#)
                .replace(r#""head_dim":32"#, r#""head_dim":256"#)
                .replace(
                    r#""layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],"#,
                    "",
                ),
        )
        .expect("4b");
        let (lin1, kv1) = c.state_bytes(1024);
        let (lin8, kv8) = c.state_bytes(8192);
        assert_eq!(lin1, lin8);
        // 24 linear layers x (3 x 8192 conv + 32 x 128 x 128 state) x 4 bytes.
        assert_eq!(lin1, 24 * (3 * 8192 + 32 * 128 * 128) * 4);
        // 8 full layers x 2 x ctx x 4 heads x 256 x 4 bytes.
        assert_eq!(kv8, 8 * 2 * 8192 * 4 * 256 * 4);
        assert_eq!(kv8, 8 * kv1);
    }
}
