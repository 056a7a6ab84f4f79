//! Qwen3.5's `config.json` (Hugging Face field names), its checks and the shapes it implies.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// `rope_parameters` of a Qwen3.5 config.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct RopeParameters {
    /// Base frequency.
    pub rope_theta: Option<f64>,
    /// `default` is the only type implemented.
    pub rope_type: Option<String>,
    /// Fraction of each head's dimensions that is rotated (0.25 in Qwen3.5).
    pub partial_rotary_factor: Option<f64>,
    /// Multimodal RoPE sections (equal positions for text make them plain RoPE).
    pub mrope_section: Option<Vec<usize>>,
    /// Whether the multimodal sections interleave (irrelevant for text).
    pub mrope_interleaved: Option<bool>,
}

/// Hugging Face `config.json` of `Qwen3_5ForCausalLM` (`model_type` `qwen3_5_text`), or the
/// `text_config` of `Qwen3_5ForConditionalGeneration` (`model_type` `qwen3_5`).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Config {
    /// `qwen3_5_text`.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads of the full-attention layers.
    pub num_attention_heads: usize,
    /// Key/value heads of the full-attention layers.
    pub num_key_value_heads: usize,
    /// Head dimension of the full-attention layers.
    pub head_dim: Option<usize>,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE parameters (transformers 5).
    pub rope_parameters: Option<RopeParameters>,
    /// RoPE base (older configs).
    pub rope_theta: Option<f64>,
    /// Rotated fraction (older configs).
    pub partial_rotary_factor: Option<f64>,
    /// Whether the LM head is the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Attention projections with bias (not implemented).
    #[serde(default)]
    pub attention_bias: bool,
    /// Per-layer type: `linear_attention` or `full_attention`.
    pub layer_types: Option<Vec<String>>,
    /// Every n-th layer is full attention when `layer_types` is absent (default 4).
    pub full_attention_interval: Option<usize>,
    /// Depthwise conv kernel of the linear layers.
    pub linear_conv_kernel_dim: usize,
    /// Key (and query) head dimension of the linear layers.
    pub linear_key_head_dim: usize,
    /// Key (and query) heads of the linear layers.
    pub linear_num_key_heads: usize,
    /// Value heads of the linear layers.
    pub linear_num_value_heads: usize,
    /// Value head dimension of the linear layers.
    pub linear_value_head_dim: usize,
    /// Activation; only `silu`.
    pub hidden_act: Option<String>,
    /// End-of-sequence id(s).
    pub eos_token_id: Option<serde_json::Value>,
    /// Trained context length.
    pub max_position_embeddings: Option<usize>,
}

/// A layer's token mixer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated DeltaNet linear attention.
    Linear,
    /// Gated full attention.
    Full,
}

impl Config {
    /// Parses and validates a `config.json`: the text model's, or the multimodal one's
    /// `text_config` (its top-level `tie_word_embeddings` applies when the text part has none).
    pub fn from_json(source: &str, text: &str) -> Result<Config> {
        let bad = |detail: String| EngineError::Format {
            file: source.into(),
            detail,
        };
        let mut v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("config.json: {e}")))?;
        if let Some(mut tc) = v.get("text_config").cloned() {
            if let (Some(o), Some(tie)) = (tc.as_object_mut(), v.get("tie_word_embeddings")) {
                o.entry("tie_word_embeddings").or_insert(tie.clone());
            }
            if let (Some(o), Some(eos)) = (tc.as_object_mut(), v.get("eos_token_id")) {
                o.entry("eos_token_id").or_insert(eos.clone());
            }
            v = tc;
        }
        let c: Config = serde_json::from_value(v).map_err(|e| bad(format!("config.json: {e}")))?;
        c.validate(source)?;
        Ok(c)
    }

    pub(super) fn validate(&self, source: &str) -> Result<()> {
        let bad = |detail: String| {
            Err(EngineError::Format {
                file: source.into(),
                detail,
            })
        };
        if !matches!(self.model_type.as_str(), "qwen3_5_text" | "qwen3_5") {
            return bad(format!(
                "model_type '{}' is not supported by the Qwen3.5 model file",
                self.model_type
            ));
        }
        if self.attention_bias {
            return bad("attention bias is not implemented for qwen3_5".into());
        }
        if let Some(act) = &self.hidden_act {
            if act != "silu" {
                return bad(format!("hidden_act '{act}' is not implemented (silu only)"));
            }
        }
        if let Some(t) = self
            .rope_parameters
            .as_ref()
            .and_then(|p| p.rope_type.as_ref())
        {
            if t != "default" {
                return bad(format!("RoPE type '{t}' is not implemented (default only)"));
            }
        }
        use crate::models::shell::{check_sizes, MAX_HEADS, MAX_LAYERS, MAX_VOCAB, MAX_WIDTH};
        check_sizes(
            source,
            &[
                ("vocab_size", self.vocab_size, MAX_VOCAB),
                ("hidden_size", self.hidden_size, MAX_WIDTH),
                ("intermediate_size", self.intermediate_size, MAX_WIDTH),
                ("num_hidden_layers", self.num_hidden_layers, MAX_LAYERS),
                ("num_attention_heads", self.num_attention_heads, MAX_HEADS),
                ("linear_num_key_heads", self.linear_num_key_heads, MAX_HEADS),
                (
                    "linear_num_value_heads",
                    self.linear_num_value_heads,
                    MAX_HEADS,
                ),
                (
                    "linear_value_head_dim",
                    self.linear_value_head_dim,
                    MAX_HEADS,
                ),
            ],
            self.rms_norm_eps,
        )?;
        let types = self.layer_types_raw();
        if types.len() != self.num_hidden_layers {
            return bad(format!(
                "layer_types lists {} layers, num_hidden_layers is {}",
                types.len(),
                self.num_hidden_layers
            ));
        }
        if let Some(t) = types
            .iter()
            .find(|t| !matches!(t.as_str(), "linear_attention" | "full_attention"))
        {
            return bad(format!(
                "layer type '{t}' is not implemented (linear_attention, full_attention)"
            ));
        }
        let (nh, kv) = (self.num_attention_heads, self.num_key_value_heads);
        if kv == 0 || !nh.is_multiple_of(kv) {
            return bad(format!(
                "{nh} attention heads are not a multiple of {kv} key/value heads"
            ));
        }
        let hd = self.head_dim();
        if hd == 0 || !hd.is_multiple_of(2) || hd > 256 {
            return bad(format!("head_dim {hd} must be even and at most 256"));
        }
        let rot = self.rot_dim();
        if rot == 0 || !rot.is_multiple_of(2) || rot > hd {
            return bad(format!(
                "partial_rotary_factor {} gives {rot} rotated dimensions of {hd}; need an even number in 2..={hd}",
                self.partial_rotary()
            ));
        }
        let (nk, nv) = (self.linear_num_key_heads, self.linear_num_value_heads);
        if nk == 0 || nv == 0 || !nv.is_multiple_of(nk) {
            return bad(format!(
                "{nv} linear value heads are not a positive multiple of {nk} key heads"
            ));
        }
        let max_dk = crate::backend::MAX_DELTA_K_DIM;
        if self.linear_key_head_dim == 0 || self.linear_key_head_dim > max_dk {
            return bad(format!(
                "linear_key_head_dim {} is not in 1..={max_dk} (the delta-rule kernel's register state)",
                self.linear_key_head_dim
            ));
        }
        if self.linear_value_head_dim == 0 {
            return bad("linear_value_head_dim is 0".into());
        }
        let max_k = crate::backend::MAX_CONV_KERNEL;
        if !(2..=max_k).contains(&self.linear_conv_kernel_dim) {
            return bad(format!(
                "linear_conv_kernel_dim {} is not in 2..={max_k}",
                self.linear_conv_kernel_dim
            ));
        }
        if !self.hidden_size.is_multiple_of(4) || !self.intermediate_size.is_multiple_of(4) {
            return bad("hidden and intermediate sizes must be multiples of 4".into());
        }
        Ok(())
    }

    fn layer_types_raw(&self) -> Vec<String> {
        match &self.layer_types {
            Some(t) => t.clone(),
            None => {
                let n = self.full_attention_interval.unwrap_or(4).max(1);
                (0..self.num_hidden_layers)
                    .map(|i| {
                        if (i + 1) % n == 0 {
                            "full_attention".to_string()
                        } else {
                            "linear_attention".to_string()
                        }
                    })
                    .collect()
            }
        }
    }

    /// Each layer's mixer.
    pub fn layer_kinds(&self) -> Vec<LayerKind> {
        self.layer_types_raw()
            .iter()
            .map(|t| {
                if t == "full_attention" {
                    LayerKind::Full
                } else {
                    LayerKind::Linear
                }
            })
            .collect()
    }

    /// Head dimension of the full-attention layers.
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    fn partial_rotary(&self) -> f64 {
        self.rope_parameters
            .as_ref()
            .and_then(|p| p.partial_rotary_factor)
            .or(self.partial_rotary_factor)
            .unwrap_or(1.0)
    }

    /// Rotated dimensions per head: `int(head_dim * partial_rotary_factor)`.
    pub fn rot_dim(&self) -> usize {
        (self.head_dim() as f64 * self.partial_rotary()) as usize
    }

    /// RoPE base frequency.
    pub fn rope_theta(&self) -> f64 {
        self.rope_parameters
            .as_ref()
            .and_then(|p| p.rope_theta)
            .or(self.rope_theta)
            .unwrap_or(10_000.0)
    }

    /// Query/key width of the linear layers, `nk * dk`.
    pub fn key_dim(&self) -> usize {
        self.linear_num_key_heads * self.linear_key_head_dim
    }

    /// Value width of the linear layers, `nv * dv`.
    pub fn value_dim(&self) -> usize {
        self.linear_num_value_heads * self.linear_value_head_dim
    }

    /// Channels of the depthwise conv: `2 * key_dim + value_dim`.
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// End-of-sequence ids from the config (an int or a list).
    pub fn eos_ids(&self) -> Vec<u32> {
        crate::models::shell::eos_ids(&self.eos_token_id)
    }

    /// Every weight the model reads: HF name (text-model naming) and shape, in load order.
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, v, f) = (self.hidden_size, self.vocab_size, self.intermediate_size);
        let (hd, nh, kv) = (
            self.head_dim(),
            self.num_attention_heads,
            self.num_key_value_heads,
        );
        let (nv, dv) = (self.linear_num_value_heads, self.linear_value_head_dim);
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".into(), vec![v, h]));
        }
        for (i, kind) in self.layer_kinds().into_iter().enumerate() {
            let p = format!("model.layers.{i}");
            out.push((format!("{p}.input_layernorm.weight"), vec![h]));
            match kind {
                LayerKind::Linear => {
                    let la = format!("{p}.linear_attn");
                    out.push((format!("{la}.in_proj_qkv.weight"), vec![self.conv_dim(), h]));
                    out.push((format!("{la}.in_proj_z.weight"), vec![self.value_dim(), h]));
                    out.push((format!("{la}.in_proj_b.weight"), vec![nv, h]));
                    out.push((format!("{la}.in_proj_a.weight"), vec![nv, h]));
                    out.push((
                        format!("{la}.conv1d.weight"),
                        vec![self.conv_dim(), 1, self.linear_conv_kernel_dim],
                    ));
                    out.push((format!("{la}.dt_bias"), vec![nv]));
                    out.push((format!("{la}.A_log"), vec![nv]));
                    out.push((format!("{la}.norm.weight"), vec![dv]));
                    out.push((format!("{la}.out_proj.weight"), vec![h, self.value_dim()]));
                }
                LayerKind::Full => {
                    let sa = format!("{p}.self_attn");
                    out.push((format!("{sa}.q_proj.weight"), vec![nh * hd * 2, h]));
                    out.push((format!("{sa}.k_proj.weight"), vec![kv * hd, h]));
                    out.push((format!("{sa}.v_proj.weight"), vec![kv * hd, h]));
                    out.push((format!("{sa}.o_proj.weight"), vec![h, nh * hd]));
                    out.push((format!("{sa}.q_norm.weight"), vec![hd]));
                    out.push((format!("{sa}.k_norm.weight"), vec![hd]));
                }
            }
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
            out.push((format!("{p}.mlp.gate_proj.weight"), vec![f, h]));
            out.push((format!("{p}.mlp.up_proj.weight"), vec![f, h]));
            out.push((format!("{p}.mlp.down_proj.weight"), vec![h, f]));
        }
        out.push(("model.norm.weight".into(), vec![h]));
        out
    }

    /// Elements of one linear layer's per-sequence state: `(conv state [K-1, conv_dim],
    /// recurrent state [nv, dk, dv])`.
    pub fn linear_state_lens(&self) -> (usize, usize) {
        (
            (self.linear_conv_kernel_dim - 1) * self.conv_dim(),
            self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim,
        )
    }

    /// Bytes of one sequence's state at `ctx` positions: `(linear layers' conv + recurrent
    /// state, which does not grow with the context; full layers' KV cache)`, f32.
    pub fn state_bytes(&self, ctx: usize) -> (u64, u64) {
        let kinds = self.layer_kinds();
        let lin = kinds.iter().filter(|k| **k == LayerKind::Linear).count() as u64;
        let full = kinds.len() as u64 - lin;
        let (conv, rec) = self.linear_state_lens();
        let per_lin = (conv + rec) as u64;
        let per_full = 2 * ctx as u64 * self.num_key_value_heads as u64 * self.head_dim() as u64;
        (4 * lin * per_lin, 4 * full * per_full)
    }
}
