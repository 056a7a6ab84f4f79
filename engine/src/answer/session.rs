//! A loaded bundle ready for questions: model, tokenizer, grammar vocabulary, story index and
//! query embedder. The desktop build opens one from a folder, the web worker from the shard
//! bytes it downloaded; both then call [`Session::ask`].

use std::collections::BTreeMap;

use super::grammar::GrammarVocab;
use super::{ask, Answer, AskConfig, Llm, Retriever};
use crate::backend::Backend;
use crate::embed::Embedder;
use crate::error::{EngineError, Result};
use crate::format::bundle::{
    BundlePart, DType, IndexBundle, Manifest, ModelBundle, ModelManifest, Quant, TensorEntry,
    MANIFEST_FILE,
};
use crate::models::LoadOptions;
use crate::models::WeightFormat;
use crate::models::{Decoder, ModelConfig};
use crate::tokenizer::Tokenizer;

/// Everything a question needs, loaded once.
pub struct Session<B: Backend> {
    /// The decoder.
    pub model: Decoder<B>,
    /// Its tokenizer.
    pub tok: Tokenizer,
    /// The grammar vocabulary (`None` when constrained decoding is off).
    pub vocab: Option<GrammarVocab>,
    /// The index part (story index, embedder weights).
    pub index: IndexBundle,
    /// The query embedder (`None` for a BM25 + graph index).
    pub embedder: Option<Embedder<B>>,
    /// Settings every question uses.
    pub cfg: AskConfig,
}

/// The model config and tokenizer of a bundle's model part.
pub fn bundle_config(bundle: &ModelBundle) -> Result<(ModelConfig, Tokenizer)> {
    let m = bundle.model();
    let src = format!("{}/{}", bundle.source, MANIFEST_FILE);
    let cfg = ModelConfig::from_json(&src, &m.config.to_string())?;
    let tok = Tokenizer::from_bundle(
        &format!("{}/{}", bundle.source, m.tokenizer.shard),
        bundle.tokenizer_json()?,
        &m.tokenizer.meta,
    )?;
    Ok((cfg, tok))
}

/// The weight format a bundle's model runs in: its blocks ([`WeightFormat::Q4`]) for a q4
/// bundle, and for a q8 one whose matrices are `q8_0` blocks; f32 otherwise (f16 is
/// dequantized at load, and so is a q8 bundle written before its matrices became `q8_0`, whose
/// 8-bit rows carry f32 scales no kernel reads).
pub fn bundle_format(m: &Manifest) -> WeightFormat {
    let blocks = |m: &ModelManifest| m.tensors.values().any(|t| t.dtype == DType::Q80);
    match m.model.as_ref() {
        Some(m) if matches!(m.quant, Quant::Q4 | Quant::Lq4) => WeightFormat::Q4,
        Some(m) if m.quant == Quant::Q8 && blocks(m) => WeightFormat::Q4,
        _ => WeightFormat::F32,
    }
}

impl<B: Backend> Session<B> {
    /// From the manifest and every shard's bytes (by file name, as the manifest names them):
    /// verifies each shard, loads the model onto `b` with a KV cache of `ctx` positions, parses
    /// the index and loads the query embedder. `source` names the bundle in errors.
    pub fn from_files(
        b: &B,
        source: &str,
        manifest: Manifest,
        mut files: BTreeMap<String, Vec<u8>>,
        cfg: AskConfig,
        ctx: usize,
    ) -> Result<Self> {
        cfg.sampling.validate()?;
        if cfg.max_tokens == 0 {
            return Err(EngineError::Question(
                "max_tokens must be at least 1".into(),
            ));
        }
        // 1. Split the shards by part; each part verifies its own.
        let index_files: BTreeMap<String, Vec<u8>> = manifest
            .shards_of(BundlePart::Index)
            .filter_map(|e| files.remove_entry(&e.file))
            .collect();
        let index = IndexBundle::new(source, manifest.clone(), index_files)?;
        let format = bundle_format(&manifest);
        // 2. The model: weights go to the backend; the shard bytes are dropped with `bundle`.
        let (model, tok) = {
            let bundle = ModelBundle::new(source, manifest, files)?;
            let (mcfg, tok) = bundle_config(&bundle)?;
            let opts = LoadOptions {
                format,
                ctx,
                chunk: b.prefill_chunk(),
                kv: None,
            };
            (Decoder::load(b, mcfg, &bundle, opts)?, tok)
        };
        // 3. Grammar vocabulary and embedder.
        let vocab = if cfg.grammar {
            Some(GrammarVocab::new(&tok, model.vocab_size())?)
        } else {
            None
        };
        let embedder = Embedder::from_index(&index, b)?;
        Ok(Session {
            model,
            tok,
            vocab,
            index,
            embedder,
            cfg,
        })
    }

    /// Reads a bundle folder (`manifest.json` and every shard) and loads it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(b: &B, dir: &std::path::Path, cfg: AskConfig, ctx: usize) -> Result<Self> {
        let (manifest, files) = crate::format::bundle::read_dir_part(dir, None)?;
        Self::from_files(b, &dir.display().to_string(), manifest, files, cfg, ctx)
    }

    /// Answers one question with the session's settings; `on_text` streams the model's raw
    /// output and stops generation when it returns `false`.
    pub async fn ask(
        &mut self,
        b: &B,
        question: &str,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<Answer> {
        let r = Retriever {
            index: &self.index.story,
            embedder: self.embedder.as_ref(),
        };
        let llm = Llm::new(b, &mut self.model, &self.tok, self.vocab.as_ref());
        ask(llm, &r, question, &self.cfg, on_text).await
    }
}

/// KV-cache positions of a session in the web page (prompt + answer); ASA's 10000-token
/// context is capped here.
pub const PAGE_CONTEXT: usize = 4096;
/// What a page's engine may hold: wasm32 addresses 4 GiB (the threaded build's shared memory
/// declares that maximum too), less room for the code, stacks and the allocator's own use.
pub const PAGE_HEAP_LIMIT: u64 = (4 << 30) - (256 << 20);

/// What loading a bundle holds in host memory at its peak, by kind, in bytes. The page checks
/// it against the wasm heap before it downloads anything ([`Footprint::check`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Every shard's bytes: downloaded (or read) whole and held until the session is built.
    pub files: u64,
    /// Weights resident in host memory once loaded: the model and the query embedder on the
    /// CPU path (LQ4 matrices as stored, everything else dequantized to f32); none on a GPU,
    /// which keeps them in its own memory.
    pub weights: u64,
    /// The parsed story index (vectors, graph, BM25 postings), counted as its blob's size again.
    pub index: u64,
    /// The decoder's state for the session's context (KV cache and recurrent state, f32) on
    /// the CPU path; none on a GPU.
    pub state: u64,
}

impl Footprint {
    /// The peak: everything above at once (the shards are dropped only after the weights are
    /// built from them).
    pub fn total(&self) -> u64 {
        self.files
            .saturating_add(self.weights)
            .saturating_add(self.index)
            .saturating_add(self.state)
    }

    /// `Ok` when [`Footprint::total`] fits in `limit` bytes; otherwise an error that says what
    /// the bundle needs, by kind, against the limit, and what to do instead. `source` names the
    /// bundle.
    pub fn check(&self, source: &str, limit: u64) -> Result<()> {
        if self.total() <= limit {
            return Ok(());
        }
        let mib = |b: u64| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64);
        Err(EngineError::Format {
            file: source.to_string(),
            detail: format!(
                "loading this bundle needs about {} of memory ({} of shards, {} of weights, {} of index, {} of model state) but this page can hold at most {}; nothing was downloaded. Build a smaller bundle (index-builder model --quant q4, or a smaller model), or run it with the desktop build, lorekeeper",
                mib(self.total()),
                mib(self.files),
                mib(self.weights),
                mib(self.index),
                mib(self.state),
                mib(limit)
            ),
        })
    }
}

/// Host bytes of one tensor once loaded: blocks (LQ4, lq4h, q8_0, and q5, which the page's
/// `simd128` runs as it is) as stored when the weights stay blocks, f32 otherwise (f16 and
/// f32-scaled q8 are dequantized at load).
fn resident_bytes(t: &TensorEntry, keep_lq4: bool) -> u64 {
    if keep_lq4 && t.dtype.q4_layout().is_some() {
        t.parts.iter().fold(0u64, |a, p| a.saturating_add(p.length))
    } else {
        let (rows, cols) = t.matrix_dims();
        4u64.saturating_mul(rows as u64).saturating_mul(cols as u64)
    }
}

/// The host memory [`Session::from_files`] takes for `manifest` with a KV cache of `ctx`
/// positions: `host_weights` when the weights live in host memory (the CPU path), not on a GPU.
/// Computed from the manifest alone, before any shard is downloaded; saturating, so a manifest
/// with absurd sizes gives a huge footprint, never an overflow.
pub fn footprint(manifest: &Manifest, host_weights: bool, ctx: usize) -> Result<Footprint> {
    let files = manifest
        .shards
        .iter()
        .fold(0u64, |a, s| a.saturating_add(s.bytes));
    let index = manifest
        .index
        .as_ref()
        .and_then(|ix| manifest.shard(&ix.blob))
        .map_or(0, |s| s.bytes);
    let (mut weights, mut state) = (0u64, 0u64);
    if host_weights {
        if let Some(m) = &manifest.model {
            let keep = bundle_format(manifest) == WeightFormat::Q4;
            for t in m.tensors.values() {
                weights = weights.saturating_add(resident_bytes(t, keep));
            }
            let cfg = ModelConfig::from_json(MANIFEST_FILE, &m.config.to_string())?;
            let (recurrent, kv) = cfg.state_bytes(ctx);
            state = recurrent.saturating_add(kv);
        }
        if let Some(e) = manifest.index.as_ref().and_then(|ix| ix.embedder.as_ref()) {
            for t in e.tensors.values() {
                weights = weights.saturating_add(resident_bytes(t, false));
            }
            if let Some(s) = e.e5s1.as_deref().and_then(|f| manifest.shard(f)) {
                weights = weights.saturating_add(s.bytes);
            }
        }
    }
    Ok(Footprint {
        files,
        weights,
        index,
        state,
    })
}

/// Pulls the `final_answer` string out of `grounded_action_v1` JSON as it streams, so a reader
/// sees the answer appear while the model writes it (the desktop build and the page share it).
#[derive(Clone, Debug, Default)]
pub struct AnswerStream {
    raw: String,
    shown: usize,
}

impl AnswerStream {
    /// Adds a piece of raw output; returns the answer text that became complete with it.
    pub fn push(&mut self, piece: &str) -> &str {
        if piece.contains("{\"next_action\"") {
            // A new round starts its object.
            self.raw.clear();
            self.shown = 0;
        }
        self.raw.push_str(piece);
        const KEY: &str = "\"final_answer\":\"";
        let Some(at) = self.raw.find(KEY) else {
            return "";
        };
        let body = &self.raw[at + KEY.len()..];
        let end = body.find('"').unwrap_or(body.len());
        if end > self.shown && body.is_char_boundary(self.shown) && body.is_char_boundary(end) {
            let from = self.shown;
            self.shown = end;
            return &body[from..end];
        }
        ""
    }

    /// Bytes of answer text shown so far in this round.
    pub fn shown(&self) -> usize {
        self.shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_stream_shows_only_the_final_answer() {
        let mut s = AnswerStream::default();
        let pieces = [
            "{\"next_action\":\"answer_directly\",\"supported_facts\":[],",
            "\"final_answer\":\"The ",
            "Hatter",
            " did.\"}",
        ];
        let shown: Vec<String> = pieces.iter().map(|p| s.push(p).to_string()).collect();
        assert_eq!(shown.concat(), "The Hatter did.");
        assert_eq!(shown[0], "");
        // A second round starts over.
        assert_eq!(
            s.push("{\"next_action\":\"abstain\",\"final_answer\":\"No"),
            "No"
        );
        assert_eq!(s.shown(), 2);
    }
}
