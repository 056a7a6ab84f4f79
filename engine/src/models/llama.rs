//! The Llama family and Qwen3 (Llama plus a per-head RMSNorm on q and k), in one file, with
//! f32 or LQ4 weights.
//!
//! Per layer, for a chunk of `T` tokens at positions `pos0..pos0+T` (shapes in elements):
//! 1. `h = rms_norm(x)`                                  `[T, hidden]`
//! 2. `q, k, v = h Wq^T, h Wk^T, h Wv^T`                 `[T, heads*hd]`, `[T, kv*hd]` x2
//! 3. Qwen3 only: `q, k = rms_norm_per_head(q, k)`       same shapes, norm over `hd`
//! 4. RoPE on q and k at `pos0` (rotate-half)
//! 5. `k, v` appended to the layer's cache               `[ctx, kv, hd]`
//! 6. `a = attention(q, cache)` causal, grouped-query    `[T, heads*hd]`
//! 7. `x += a Wo^T`                                      `[T, hidden]`
//! 8. `x += down(silu(gate(h2)) * up(h2))`, `h2 = rms_norm(x)`
//!
//! then `logits = rms_norm(x) W_lm^T` for the last token (or all tokens, for tests).
//! The KV cache and all activations are allocated once at load for `ctx` positions and
//! chunks of up to `chunk` tokens (llama2.c's run state).

use serde::{Deserialize, Serialize};

use super::layers::{Linear, Mlp, OutputHead, TokenEmbedding, WeightFormat};
use super::shell::{Architecture, KvCache, LoadOptions};
use crate::backend::{rope_table, Backend, MatmulInput};
use crate::error::{EngineError, Result};
use crate::format::gguf::Value;
use crate::format::weights::{expect, GgufSource, WeightSource};

/// `rope_parameters` of transformers 5.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct RopeParameters {
    /// Base frequency.
    pub rope_theta: Option<f64>,
    /// `default` is the only type implemented.
    pub rope_type: Option<String>,
}

/// Hugging Face `config.json` of `LlamaForCausalLM` / `Qwen3ForCausalLM`, in the transformers 4
/// form (`rope_theta`, `torch_dtype`) and the transformers 5 form (`rope_parameters`, `dtype`,
/// `layer_types`).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Config {
    /// `llama` or `qwen3`.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (defaults to the query heads).
    pub num_key_value_heads: Option<usize>,
    /// Head dimension (defaults to `hidden_size / num_attention_heads`).
    pub head_dim: Option<usize>,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// transformers 4: RoPE base.
    pub rope_theta: Option<f64>,
    /// transformers 5: RoPE parameters.
    pub rope_parameters: Option<RopeParameters>,
    /// transformers 4: RoPE scaling (only absent / `default` is implemented).
    pub rope_scaling: Option<serde_json::Value>,
    /// Whether the LM head is the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Attention projections with bias (not implemented).
    #[serde(default)]
    pub attention_bias: bool,
    /// MLP with bias (not implemented).
    #[serde(default)]
    pub mlp_bias: bool,
    /// Trained context length.
    pub max_position_embeddings: Option<usize>,
    /// Sliding-window attention (not implemented).
    #[serde(default)]
    pub use_sliding_window: bool,
    /// transformers 5: per-layer attention type; only `full_attention` is implemented.
    pub layer_types: Option<Vec<String>>,
    /// Activation; only `silu`.
    pub hidden_act: Option<String>,
    /// End-of-sequence id(s).
    pub eos_token_id: Option<serde_json::Value>,
}

impl Config {
    /// Parses and validates `config.json`; `source` names the file in errors.
    pub fn from_json(source: &str, text: &str) -> Result<Config> {
        let c: Config = serde_json::from_str(text).map_err(|e| EngineError::Format {
            file: source.into(),
            detail: format!("config.json: {e}"),
        })?;
        c.validate(source)?;
        Ok(c)
    }

    /// Builds the config from a GGUF file's metadata (`llama` and `qwen3` architectures).
    pub fn from_gguf(src: &GgufSource) -> Result<Config> {
        let g = src.gguf();
        let arch = src.arch().to_string();
        let fmt = |detail: String| EngineError::Format {
            file: g.source.clone(),
            detail,
        };
        let key = |k: &str| g.get(&format!("{arch}.{k}"));
        let int = |k: &str| -> Result<usize> {
            key(k)
                .and_then(Value::as_u64)
                .map(|v| v as usize)
                .ok_or_else(|| fmt(format!("metadata {arch}.{k} is missing")))
        };
        let hidden = int("embedding_length")?;
        let heads = int("attention.head_count")?;
        let vocab = match key("vocab_size").and_then(Value::as_u64) {
            Some(v) => v as usize,
            None => g
                .get("tokenizer.ggml.tokens")
                .and_then(Value::as_array)
                .map(|a| a.len())
                .ok_or_else(|| fmt("no vocabulary size".into()))?,
        };
        let c = Config {
            model_type: arch.clone(),
            vocab_size: vocab,
            hidden_size: hidden,
            intermediate_size: int("feed_forward_length")?,
            num_hidden_layers: int("block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: key("attention.head_count_kv")
                .and_then(Value::as_u64)
                .map(|v| v as usize),
            head_dim: key("attention.key_length")
                .and_then(Value::as_u64)
                .map(|v| v as usize),
            rms_norm_eps: key("attention.layer_norm_rms_epsilon")
                .and_then(Value::as_f64)
                .unwrap_or(1e-6),
            rope_theta: Some(
                key("rope.freq_base")
                    .and_then(Value::as_f64)
                    .unwrap_or(10_000.0),
            ),
            rope_parameters: None,
            rope_scaling: key("rope.scaling.type")
                .and_then(Value::as_str)
                .map(|s| serde_json::json!({ "type": s })),
            tie_word_embeddings: g.tensor("output.weight").is_none(),
            attention_bias: g.tensor("blk.0.attn_q.bias").is_some(),
            mlp_bias: false,
            max_position_embeddings: key("context_length")
                .and_then(Value::as_u64)
                .map(|v| v as usize),
            use_sliding_window: false,
            layer_types: None,
            hidden_act: None,
            eos_token_id: g
                .get("tokenizer.ggml.eos_token_id")
                .and_then(Value::as_u64)
                .map(|v| v.into()),
        };
        c.validate(&g.source)?;
        Ok(c)
    }

    fn validate(&self, source: &str) -> Result<()> {
        let bad = |detail: String| {
            Err(EngineError::Format {
                file: source.into(),
                detail,
            })
        };
        if !matches!(self.model_type.as_str(), "llama" | "qwen3") {
            return bad(format!(
                "model_type '{}' is not supported by this model file (llama, qwen3)",
                self.model_type
            ));
        }
        if self.attention_bias || self.mlp_bias {
            return bad("attention or MLP bias is not implemented for llama/qwen3".into());
        }
        if let Some(act) = &self.hidden_act {
            if act != "silu" {
                return bad(format!("hidden_act '{act}' is not implemented (silu only)"));
            }
        }
        let rope_type = self
            .rope_parameters
            .as_ref()
            .and_then(|p| p.rope_type.clone())
            .or_else(|| {
                self.rope_scaling.as_ref().and_then(|s| {
                    s.get("rope_type")
                        .or_else(|| s.get("type"))
                        .and_then(|t| t.as_str())
                        .map(String::from)
                })
            });
        if let Some(t) = rope_type {
            if t != "default" {
                return bad(format!(
                    "RoPE scaling '{t}' is not implemented (default RoPE only)"
                ));
            }
        }
        if self.use_sliding_window {
            return bad("sliding-window attention is not implemented".into());
        }
        if let Some(lt) = &self.layer_types {
            if let Some(t) = lt.iter().find(|t| *t != "full_attention") {
                return bad(format!(
                    "layer type '{t}' is not implemented (full_attention only)"
                ));
            }
        }
        use super::shell::{check_sizes, MAX_HEADS, MAX_LAYERS, MAX_VOCAB, MAX_WIDTH};
        check_sizes(
            source,
            &[
                ("vocab_size", self.vocab_size, MAX_VOCAB),
                ("hidden_size", self.hidden_size, MAX_WIDTH),
                ("intermediate_size", self.intermediate_size, MAX_WIDTH),
                ("num_hidden_layers", self.num_hidden_layers, MAX_LAYERS),
                ("num_attention_heads", self.num_attention_heads, MAX_HEADS),
            ],
            self.rms_norm_eps,
        )?;
        let theta = self.rope_theta();
        if !(theta.is_finite() && theta > 0.0) {
            return bad(format!("rope_theta {theta} must be a positive number"));
        }
        let kv = self.kv_heads();
        if kv == 0 || !self.num_attention_heads.is_multiple_of(kv) {
            return bad(format!(
                "{} attention heads are not a multiple of {kv} key/value heads",
                self.num_attention_heads
            ));
        }
        let hd = self.head_dim();
        if hd == 0 || !hd.is_multiple_of(2) || hd > 256 {
            return bad(format!("head_dim {hd} must be even and at most 256"));
        }
        if !self.hidden_size.is_multiple_of(4) || !self.intermediate_size.is_multiple_of(4) {
            return bad("hidden and intermediate sizes must be multiples of 4".into());
        }
        Ok(())
    }

    /// Every weight the model reads: HF name and shape, in load order. The index-builder
    /// writes exactly these; `load` shape-checks each.
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, v, f) = (self.hidden_size, self.vocab_size, self.intermediate_size);
        let (hd, nq, kv) = (self.head_dim(), self.num_attention_heads, self.kv_heads());
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".into(), vec![v, h]));
        }
        for i in 0..self.num_hidden_layers {
            let p = format!("model.layers.{i}");
            out.push((format!("{p}.input_layernorm.weight"), vec![h]));
            out.push((format!("{p}.self_attn.q_proj.weight"), vec![nq * hd, h]));
            out.push((format!("{p}.self_attn.k_proj.weight"), vec![kv * hd, h]));
            out.push((format!("{p}.self_attn.v_proj.weight"), vec![kv * hd, h]));
            out.push((format!("{p}.self_attn.o_proj.weight"), vec![h, nq * hd]));
            if self.qk_norm() {
                out.push((format!("{p}.self_attn.q_norm.weight"), vec![hd]));
                out.push((format!("{p}.self_attn.k_norm.weight"), vec![hd]));
            }
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
            out.push((format!("{p}.mlp.gate_proj.weight"), vec![f, h]));
            out.push((format!("{p}.mlp.up_proj.weight"), vec![f, h]));
            out.push((format!("{p}.mlp.down_proj.weight"), vec![h, f]));
        }
        out.push(("model.norm.weight".into(), vec![h]));
        out
    }

    /// Key/value heads.
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Head dimension.
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// RoPE base frequency.
    pub fn rope_theta(&self) -> f64 {
        self.rope_parameters
            .as_ref()
            .and_then(|p| p.rope_theta)
            .or(self.rope_theta)
            .unwrap_or(10_000.0)
    }

    /// Whether q and k get a per-head RMSNorm (Qwen3).
    pub fn qk_norm(&self) -> bool {
        self.model_type == "qwen3"
    }

    /// End-of-sequence ids from the config (an int or a list).
    pub fn eos_ids(&self) -> Vec<u32> {
        super::shell::eos_ids(&self.eos_token_id)
    }
}

/// Self-attention of one layer.
struct Attention<B: Backend> {
    q_proj: Linear<B>,
    k_proj: Linear<B>,
    v_proj: Linear<B>,
    o_proj: Linear<B>,
    q_norm: Option<B::Buffer>,
    k_norm: Option<B::Buffer>,
}

impl<B: Backend> Attention<B> {
    fn new(
        b: &B,
        cfg: &Config,
        src: &dyn WeightSource,
        p: &str,
        fmt: WeightFormat,
    ) -> Result<Self> {
        let (h, hd, kv) = (cfg.hidden_size, cfg.head_dim(), cfg.kv_heads());
        let nq = cfg.num_attention_heads * hd;
        let norm = |n: &str| -> Result<Option<B::Buffer>> {
            if cfg.qk_norm() {
                let t = expect(src, &format!("{p}.self_attn.{n}.weight"), &[hd])?;
                Ok(Some(b.upload(n, &t.data)?))
            } else {
                Ok(None)
            }
        };
        Ok(Attention {
            q_proj: Linear::new(b, src, &format!("{p}.self_attn.q_proj.weight"), nq, h, fmt)?,
            k_proj: Linear::new(
                b,
                src,
                &format!("{p}.self_attn.k_proj.weight"),
                kv * hd,
                h,
                fmt,
            )?,
            v_proj: Linear::new(
                b,
                src,
                &format!("{p}.self_attn.v_proj.weight"),
                kv * hd,
                h,
                fmt,
            )?,
            o_proj: Linear::new(b, src, &format!("{p}.self_attn.o_proj.weight"), h, nq, fmt)?,
            q_norm: norm("q_norm")?,
            k_norm: norm("k_norm")?,
        })
    }
}

/// One decoder layer and its KV cache.
struct Layer<B: Backend> {
    input_layernorm: B::Buffer,
    attn: Attention<B>,
    post_attention_layernorm: B::Buffer,
    mlp: Mlp<B>,
    cache: KvCache<B>,
}

/// Activations for one chunk, allocated once.
struct RunState<B: Backend> {
    x: B::Buffer,
    h: B::Buffer,
    q: B::Buffer,
    qn: B::Buffer,
    k: B::Buffer,
    kn: B::Buffer,
    v: B::Buffer,
    att: B::Buffer,
    o: B::Buffer,
    gate: B::Buffer,
    up: B::Buffer,
    act: B::Buffer,
}

/// A loaded Llama / Qwen3 model with its run state.
pub struct Llama<B: Backend> {
    /// The configuration.
    pub cfg: Config,
    embed: TokenEmbedding<B>,
    layers: Vec<Layer<B>>,
    head: OutputHead<B>,
    rope: B::Buffer,
    s: RunState<B>,
}

impl<B: Backend> Llama<B> {
    /// Loads every weight by its HF name (shape-checked) and allocates the run state.
    pub fn load(b: &B, cfg: Config, src: &dyn WeightSource, opts: LoadOptions) -> Result<Self> {
        opts.check()?;
        let (h, v, hd, kv) = (
            cfg.hidden_size,
            cfg.vocab_size,
            cfg.head_dim(),
            cfg.kv_heads(),
        );
        let fmt = opts.format;
        let (embed, lm_head) = TokenEmbedding::new(b, src, v, h, fmt, cfg.tie_word_embeddings)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{i}");
            let norm = |n: &str| -> Result<B::Buffer> {
                let t = expect(src, &format!("{p}.{n}.weight"), &[h])?;
                b.upload(n, &t.data)
            };
            layers.push(Layer {
                input_layernorm: norm("input_layernorm")?,
                attn: Attention::new(b, &cfg, src, &p, fmt)?,
                post_attention_layernorm: norm("post_attention_layernorm")?,
                mlp: Mlp::new(b, src, &p, h, cfg.intermediate_size, fmt)?,
                cache: KvCache::new(b, opts, kv, hd)?,
            });
        }
        let head = OutputHead::new(b, src, lm_head, (v, h), cfg.rms_norm_eps as f32, 0.0)?;
        let rope = b.upload("rope", &rope_table(cfg.rope_theta() as f32, hd, opts.ctx))?;
        let t = opts.chunk;
        let nq = cfg.num_attention_heads * hd;
        let s = RunState {
            x: b.alloc("x", t * h)?,
            h: b.alloc("h", t * h)?,
            q: b.alloc("q", t * nq)?,
            qn: b.alloc("qn", t * nq)?,
            k: b.alloc("k", t * kv * hd)?,
            kn: b.alloc("kn", t * kv * hd)?,
            v: b.alloc("v", t * kv * hd)?,
            att: b.alloc("att", t * nq)?,
            o: b.alloc("o", t * h)?,
            gate: b.alloc("gate", t * cfg.intermediate_size)?,
            up: b.alloc("up", t * cfg.intermediate_size)?,
            act: b.alloc("act", t * cfg.intermediate_size)?,
        };
        Ok(Llama {
            cfg,
            embed,
            layers,
            head,
            rope,
            s,
        })
    }
}

impl<B: Backend> Architecture<B> for Llama<B> {
    fn head(&self) -> &OutputHead<B> {
        &self.head
    }

    fn kv_caches(&self) -> Vec<&KvCache<B>> {
        self.layers.iter().map(|l| &l.cache).collect()
    }

    fn forward_chunk(&mut self, b: &B, ids: &[u32], pos0: usize, all_logits: bool) -> Result<()> {
        let cfg = &self.cfg;
        let s = &self.s;
        let t = ids.len();
        // head_dim and the KV heads are the layers' caches' own (`KvCache`).
        let (h, nh) = (cfg.hidden_size, cfg.num_attention_heads);
        let eps = cfg.rms_norm_eps as f32;
        // 0. Embedding: x [t, h].
        self.embed.forward(b, ids, &s.x)?;
        for l in &self.layers {
            // 1–2. h = rms_norm(x) [t, h], then the projections [t, nh*hd], [t, kv*hd]: one
            //      pass where the backend fuses them (the norm in the GEMV's prologue)
            let norm = |weight| MatmulInput::RmsNormed {
                x: &s.x,
                weight,
                eps,
                offset: 0.0,
                normed: &s.h,
            };
            let a = &l.attn;
            let qkv = [(&a.q_proj, &s.q), (&a.k_proj, &s.k), (&a.v_proj, &s.v)];
            Linear::forward_many(b, norm(&l.input_layernorm), &qkv, t)?;
            // 3–6. Qwen3: per-head RMSNorm of q and k (rows t*heads, dim hd), then RoPE at
            //      pos0; Llama: RoPE alone. Append k, v to the cache, then causal grouped-query
            //      attention (the norms, the rotation and the append in one pass where the
            //      backend fuses them)                                  [t, nh*hd]
            let (heads, at) = ([&s.q, &s.k, &s.v], (t, nh, pos0));
            match (&l.attn.q_norm, &l.attn.k_norm) {
                (Some(qn), Some(kn)) => {
                    let (norms, scratch) = (([qn, kn], eps), [&s.qn, &s.kn]);
                    let cache = &l.cache;
                    cache.norm_rope_attend(b, heads, norms, &self.rope, scratch, &s.att, at)?;
                }
                _ => l.cache.rope_attend(b, heads, &self.rope, &s.att, at)?,
            }
            // 7. x += att Wo^T                                     [t, h]
            l.attn.o_proj.forward_add(b, &s.att, (&s.x, &s.o), t, h)?;
            // 8. x += down(silu(gate(h2)) * up(h2))
            let scratch = [&s.gate, &s.up, &s.act, &s.o];
            l.mlp
                .add_to(b, norm(&l.post_attention_layernorm), scratch, &s.x, t)?;
        }
        // 9. final norm and LM head
        self.head.forward(b, &s.x, &s.h, t, all_logits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T4: &str = r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","vocab_size":10,
        "hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,
        "num_key_value_heads":1,"head_dim":4,"rms_norm_eps":1e-6,"rope_theta":5000000.0,
        "torch_dtype":"bfloat16","tie_word_embeddings":true,"rope_scaling":null}"#;

    #[test]
    fn config_in_both_transformers_forms() {
        let c = Config::from_json("t4", T4).expect("t4");
        assert_eq!(c.rope_theta(), 5_000_000.0);
        assert!(c.qk_norm() && c.tie_word_embeddings);
        let t5 = T4.replace(r#""rope_theta":5000000.0,"#, r#""rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"},"layer_types":["full_attention"],"#);
        let c = Config::from_json("t5", &t5).expect("t5");
        assert_eq!(c.rope_theta(), 1_000_000.0);
    }

    #[test]
    fn unsupported_options_are_refused_by_name() {
        let cases = [
            (
                T4.replace(
                    r#""rope_scaling":null"#,
                    r#""rope_scaling":{"rope_type":"yarn","factor":4.0}"#,
                ),
                "yarn",
            ),
            (
                T4.replace(
                    r#""tie_word_embeddings":true"#,
                    r#""tie_word_embeddings":true,"use_sliding_window":true"#,
                ),
                "sliding",
            ),
            (
                T4.replace(
                    r#""tie_word_embeddings":true"#,
                    r#""tie_word_embeddings":true,"attention_bias":true"#,
                ),
                "bias",
            ),
            (T4.replace("\"qwen3\"", "\"mamba\""), "mamba"),
            (
                T4.replace(r#""num_key_value_heads":1"#, r#""num_key_value_heads":3"#),
                "multiple",
            ),
            (T4.replace("1e-6", "\"x\""), "config.json"),
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
}
