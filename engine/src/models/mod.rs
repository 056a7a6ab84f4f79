//! Model architectures, one file each (candle style): `Config` deserialized with Hugging Face's
//! own field names, one struct per sub-layer with `new` and `forward`, weights addressed by HF
//! tensor names and shape-checked at load.
//!
//! - [`layers`]: the sub-layers decoders share (linear, MLP, embedding, output head);
//! - [`shell`]: what every decoder shares around its layers (options, position, chunked
//!   forward, KV caches);
//! - [`llama`] (Llama / Qwen3), [`qwen3_5`] (the Qwen3.5 hybrid): each only what is its own;
//! - [`bert`]: the sentence encoders (MiniLM, e5);
//! - this file: [`ModelConfig`] and [`Decoder`], which pick the architecture a config names.

pub mod bert;
pub mod layers;
pub mod llama;
pub mod qwen3_5;
pub mod shell;

use crate::backend::Backend;
use crate::error::{EngineError, Result};
use crate::format::weights::WeightSource;
use shell::{Architecture, Sequence};

pub use layers::{Linear, Mlp, OutputHead, TokenEmbedding, WeightFormat, GEMV_MAX_ROWS};
pub use shell::LoadOptions;

/// A decoder's `config.json`, by architecture (serialized as the config itself).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
pub enum ModelConfig {
    /// Llama / Qwen3.
    Llama(llama::Config),
    /// Qwen3.5 (hybrid).
    Qwen35(qwen3_5::Config),
}

impl ModelConfig {
    /// Parses a `config.json`, choosing the model file by `model_type` (or the nested
    /// `text_config.model_type`); `source` names the file in errors.
    pub fn from_json(source: &str, text: &str) -> Result<ModelConfig> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| EngineError::Format {
            file: source.into(),
            detail: format!("config.json: {e}"),
        })?;
        let ty = v
            .get("model_type")
            .and_then(|t| t.as_str())
            .unwrap_or_default();
        match ty {
            "qwen3_5" | "qwen3_5_text" => Ok(ModelConfig::Qwen35(qwen3_5::Config::from_json(
                source, text,
            )?)),
            _ => Ok(ModelConfig::Llama(llama::Config::from_json(source, text)?)),
        }
    }

    /// `model_type` (the bundle's architecture).
    pub fn model_type(&self) -> &str {
        match self {
            ModelConfig::Llama(c) => &c.model_type,
            ModelConfig::Qwen35(c) => &c.model_type,
        }
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        match self {
            ModelConfig::Llama(c) => c.vocab_size,
            ModelConfig::Qwen35(c) => c.vocab_size,
        }
    }

    /// End-of-sequence ids.
    pub fn eos_ids(&self) -> Vec<u32> {
        match self {
            ModelConfig::Llama(c) => c.eos_ids(),
            ModelConfig::Qwen35(c) => c.eos_ids(),
        }
    }

    /// Every weight the architecture reads (HF names and shapes).
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        match self {
            ModelConfig::Llama(c) => c.tensor_shapes(),
            ModelConfig::Qwen35(c) => c.tensor_shapes(),
        }
    }

    /// Bytes of one sequence's state at `ctx` positions, f32: `(fixed-size recurrent state of
    /// linear-attention layers, KV cache of attention layers)`.
    pub fn state_bytes(&self, ctx: usize) -> (u64, u64) {
        match self {
            ModelConfig::Llama(c) => (
                0,
                // u64 throughout: on wasm32 the product overflows usize for large models.
                [c.num_hidden_layers, 2, ctx, c.kv_heads(), c.head_dim()]
                    .iter()
                    .fold(4u64, |a, &x| a.saturating_mul(x as u64)),
            ),
            ModelConfig::Qwen35(c) => c.state_bytes(ctx),
        }
    }
}

/// The architecture behind a [`Decoder`].
enum Model<B: Backend> {
    Llama(llama::Llama<B>),
    Qwen35(qwen3_5::Qwen35<B>),
}

impl<B: Backend> Model<B> {
    fn arch(&self) -> &dyn Architecture<B> {
        match self {
            Model::Llama(m) => m,
            Model::Qwen35(m) => m,
        }
    }

    fn arch_mut(&mut self) -> &mut dyn Architecture<B> {
        match self {
            Model::Llama(m) => m,
            Model::Qwen35(m) => m,
        }
    }
}

/// A loaded decoder of any supported architecture in its shell, with one interface for
/// generation.
pub struct Decoder<B: Backend> {
    model: Model<B>,
    seq: Sequence,
    /// Weights the architecture holds (every tensor of [`ModelConfig::tensor_shapes`]).
    parameters: u64,
}

impl<B: Backend> Decoder<B> {
    /// Loads the architecture `cfg` names (every weight shape-checked) and allocates its run
    /// state for `opts`.
    pub fn load(
        b: &B,
        cfg: ModelConfig,
        src: &dyn WeightSource,
        opts: LoadOptions,
    ) -> Result<Self> {
        let seq = Sequence::new(opts)?;
        let parameters = cfg
            .tensor_shapes()
            .iter()
            .map(|(_, shape)| shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64)))
            .fold(0u64, u64::saturating_add);
        let model = match cfg {
            ModelConfig::Llama(c) => Model::Llama(llama::Llama::load(b, c, src, opts)?),
            ModelConfig::Qwen35(c) => Model::Qwen35(qwen3_5::Qwen35::load(b, c, src, opts)?),
        };
        Ok(Decoder {
            model,
            seq,
            parameters,
        })
    }

    /// Which architecture was loaded: `llama` (Llama / Qwen3) or `qwen3_5`.
    pub fn architecture(&self) -> &'static str {
        match self.model {
            Model::Llama(_) => "llama",
            Model::Qwen35(_) => "qwen3_5",
        }
    }

    /// Vocabulary size (logit row length).
    pub fn vocab_size(&self) -> usize {
        self.model.arch().head().vocab()
    }

    /// Weights the model holds (tied embeddings counted once).
    pub fn parameters(&self) -> u64 {
        self.parameters
    }

    /// Positions processed since the last reset.
    pub fn position(&self) -> usize {
        self.seq.position()
    }

    /// Context capacity in positions.
    pub fn context(&self) -> usize {
        self.seq.context()
    }

    /// How the matmul weights are stored.
    pub fn format(&self) -> WeightFormat {
        self.seq.format()
    }

    /// Forgets the sequence (zeroes recurrent state).
    pub fn reset(&mut self, b: &B) -> Result<()> {
        self.seq.reset(self.model.arch(), b)
    }

    /// For timing only: see [`Sequence::seek_for_benchmark`].
    pub fn seek_for_benchmark(&mut self, b: &B, pos: usize) -> Result<()> {
        self.seq.seek_for_benchmark(self.model.arch(), b, pos)
    }

    /// Runs `tokens`, continuing the sequence (see [`Sequence::forward`]).
    pub fn forward(&mut self, b: &B, tokens: &[u32], all_logits: bool) -> Result<()> {
        self.seq
            .forward(self.model.arch_mut(), b, tokens, all_logits)
    }

    /// The logits buffer: `[rows, vocab]` with `rows` from the last forward.
    pub fn logits(&self) -> (&B::Buffer, usize) {
        self.model.arch().head().logits()
    }

    /// Reads the logits of the last forward back to the host.
    pub async fn read_logits(&self, b: &B) -> Result<Vec<f32>> {
        let (buf, rows) = self.logits();
        b.read(buf, 0, rows * self.vocab_size()).await
    }
}
