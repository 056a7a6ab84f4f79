//! Text embedders for retrieval: a tokenizer, an encoder and the model's query/passage
//! conventions. The index-builder embeds passages with it; the page and `lorekeeper search`
//! embed queries with the very same code.

use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::error::{EngineError, Result};
use crate::models::bert::{Bert, BertConfig};
use crate::models::WeightFormat;
use crate::weights::WeightSource;

/// How an embedder treats queries and passages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedderSpec {
    /// Model family (`bert`).
    pub kind: String,
    /// Prepended to queries (multilingual-e5: `query: `).
    #[serde(default)]
    pub query_prefix: String,
    /// Prepended to passages (multilingual-e5: `passage: `).
    #[serde(default)]
    pub passage_prefix: String,
    /// Longest input in tokens, specials included (longer text is truncated).
    pub max_tokens: usize,
    /// Embedding width.
    pub dim: usize,
}

/// A loaded embedder.
pub struct Embedder<B: Backend> {
    model: Bert<B>,
    tok: tokenizers::Tokenizer,
    /// Its conventions.
    pub spec: EmbedderSpec,
}

fn tok_err(source: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Format {
        file: source.into(),
        detail: format!("tokenizer: {e}"),
    }
}

impl<B: Backend> Embedder<B> {
    /// From a BERT config, `tokenizer.json` and weights. The tokenizer's own padding is turned
    /// off and truncation set to `max_tokens`.
    pub fn new(
        b: &B,
        source: &str,
        cfg: BertConfig,
        tokenizer_json: &[u8],
        src: &dyn WeightSource,
        mut spec: EmbedderSpec,
    ) -> Result<Self> {
        let mut tok =
            tokenizers::Tokenizer::from_bytes(tokenizer_json).map_err(|e| tok_err(source, e))?;
        tok.with_padding(None);
        tok.with_truncation(Some(tokenizers::TruncationParams {
            max_length: spec.max_tokens,
            ..Default::default()
        }))
        .map_err(|e| tok_err(source, e))?;
        spec.dim = cfg.hidden_size;
        let model = Bert::load(b, cfg, src, WeightFormat::F32, spec.max_tokens)?;
        Ok(Embedder { model, tok, spec })
    }

    /// A sentence-transformers folder (`config.json`, `model.safetensors`, `tokenizer.json`) with
    /// mean pooling and normalization (all-MiniLM-L6-v2), inputs truncated to 256 tokens.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(b: &B, dir: &std::path::Path) -> Result<Self> {
        let read = |f: &str| {
            let p = dir.join(f);
            std::fs::read(&p).map_err(|e| EngineError::Io {
                path: p.display().to_string(),
                detail: e.to_string(),
            })
        };
        let cfg_path = dir.join("config.json").display().to_string();
        let text = String::from_utf8(read("config.json")?).map_err(|_| EngineError::Format {
            file: cfg_path.clone(),
            detail: "not UTF-8".into(),
        })?;
        let cfg = BertConfig::from_json(&cfg_path, &text)?;
        let src = crate::weights::Safetensors::open_dir(dir)?;
        let spec = EmbedderSpec {
            kind: "bert".into(),
            max_tokens: 256.min(cfg.max_position_embeddings),
            ..Default::default()
        };
        Self::new(
            b,
            &dir.join("tokenizer.json").display().to_string(),
            cfg,
            &read("tokenizer.json")?,
            &src,
            spec,
        )
    }

    /// Token ids (with the model's special tokens, truncated).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tok
            .encode(text, true)
            .map_err(|e| tok_err("tokenizer", e))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Embeds a passage (with the passage prefix).
    pub async fn embed_passage(&self, b: &B, text: &str) -> Result<Vec<f32>> {
        let ids = self.tokenize(&format!("{}{text}", self.spec.passage_prefix))?;
        self.model.embed(b, &ids).await
    }

    /// Embeds a query (with the query prefix).
    pub async fn embed_query(&self, b: &B, text: &str) -> Result<Vec<f32>> {
        let ids = self.tokenize(&format!("{}{text}", self.spec.query_prefix))?;
        self.model.embed(b, &ids).await
    }

    /// The encoder.
    pub fn model(&self) -> &Bert<B> {
        &self.model
    }
}
