//! Story retrieval: ingest, chunking, BM25, an entity graph, an int8 HNSW index, fusion, and a
//! serializable [`StoryIndex`] that ties them together.
//!
//! The pipeline follows ASA's recall stage, built ahead of time so a browser only embeds the
//! query and searches:
//!
//! ```text
//! (name, bytes) ──corpus::ingest──▶ Segments ──chunk::chunk_segments──▶ Chunks
//!   Chunks + vectors (from the encoder) + aliases ──StoryIndex::build──▶ StoryIndex ──to_bytes──▶ blob
//!   blob ──StoryIndex::from_bytes──▶ StoryIndex ──search(text, vector, k, sources)──▶ Hits
//! ```
//!
//! Nothing here reads files, spawns threads of its own or needs a GPU; it compiles for
//! `wasm32-unknown-unknown`. (Building the HNSW graph uses rayon's pool natively; the index is
//! built natively and only searched in the browser.)
//!
//! # The blob
//!
//! [`StoryIndex::to_bytes`] writes a 28-byte header and a postcard payload:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `LKSTORY\0` |
//! | 8..12 | format version, u32 little-endian ([`FORMAT_VERSION`]) |
//! | 12..20 | payload length, u64 little-endian |
//! | 20..28 | FNV-1a 64 checksum of the payload, u64 little-endian |
//! | 28.. | postcard: chunks, BM25 index, entity graph, dense index, configuration, lexicon, wide passages |
//!
//! [`StoryIndex::from_bytes`] checks each header field, the checksum, that postcard consumes the
//! payload exactly, and the structure of every part (postings, links and HNSW values point at
//! existing chunks). The checksum matters because the HNSW graph's links cannot be checked from
//! outside `instant-distance`: a blob that is corrupt but still decodes would otherwise reach it.

pub mod bm25;
pub mod chunk;
pub mod corpus;
pub mod dense;
pub mod error;
pub mod eval;
pub mod expand;
pub mod fusion;
pub mod graph;
pub mod script;
pub mod wide;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use bm25::{Bm25Index, Bm25Params};
pub use chunk::{chunk_segments, Chunk, ChunkConfig, Position};
pub use corpus::{ingest, CorpusFormat, IngestOptions, Segment};
pub use dense::{recall_at_k, DenseConfig, DenseIndex, RecallReport};
pub use error::{Result, RetrievalError};
pub use eval::{evaluate, parse_questions, EvalReport, Metrics, Question};
pub use expand::{
    query_words, story_words, ExpansionConfig, Lexicon, Neighbours, StoryWords, WordVectors,
};
pub use fusion::{Fused, FusionConfig, FusionMethod, SourceRank};
pub use graph::{parse_aliases, AliasEntry, Entity, EntityGraph, EntitySource, GraphConfig};
pub use wide::{WideConfig, WideLayer};

/// The blob's magic bytes.
pub const MAGIC: [u8; 8] = *b"LKSTORY\0";
/// The blob format this build writes; it also reads [`FORMAT_VERSION_NO_WIDE`],
/// [`FORMAT_VERSION_NO_LEXICON`] and [`FORMAT_VERSION_RRF`].
pub const FORMAT_VERSION: u32 = 6;
/// The blob format before the [`WideLayer`] (version 5): the same payload without the wide
/// passages, its last field, so it reads as an index without them.
pub const FORMAT_VERSION_NO_WIDE: u32 = 5;
/// The blob format before the [`Lexicon`] (version 4): the same payload without the lexicon,
/// its last field, so it reads as an index without query expansion.
pub const FORMAT_VERSION_NO_LEXICON: u32 = 4;
/// The blob format before [`FusionMethod`] (version 3): version 4's payload without the fusion
/// method, its last field, so it reads as [`FusionMethod::Rrf`], the only fusion of its time.
pub const FORMAT_VERSION_RRF: u32 = 3;
const HEADER_LEN: usize = 28;

/// Every setting of an index, serialized with it. Missing fields take their defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexConfig {
    /// Chunking (recorded; chunks are made before [`StoryIndex::build`]).
    pub chunk: ChunkConfig,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Entity lexicon and PageRank.
    pub graph: GraphConfig,
    /// HNSW parameters.
    pub dense: DenseConfig,
    /// Fusion weights and neighbor expansion.
    pub fusion: FusionConfig,
}

/// Which rankings a search fuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// The dense (embedding) ranking; used when a query vector is given.
    pub dense: bool,
    /// The BM25 ranking.
    pub sparse: bool,
    /// The entity-graph ranking.
    pub graph: bool,
}

impl Sources {
    /// All three.
    pub const ALL: Sources = Sources {
        dense: true,
        sparse: true,
        graph: true,
    };
    /// Dense only.
    pub const DENSE: Sources = Sources {
        dense: true,
        sparse: false,
        graph: false,
    };
    /// BM25 only.
    pub const SPARSE: Sources = Sources {
        dense: false,
        sparse: true,
        graph: false,
    };
    /// Graph only.
    pub const GRAPH: Sources = Sources {
        dense: false,
        sparse: false,
        graph: true,
    };
}

impl Default for Sources {
    fn default() -> Self {
        Sources::ALL
    }
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// Chunk id.
    pub id: u32,
    /// The chunk's chapter, with its scene when the input names one ([`Chunk::place`]).
    pub chapter: String,
    /// The chunk's text.
    pub text: String,
    /// Weighted RRF score (discounted for neighbors; see [`fusion`]).
    pub fusion_score: f32,
    /// 0-based dense rank, if the dense ranking returned the chunk.
    pub dense_rank: Option<u32>,
    /// Cosine similarity to the query vector.
    pub dense_score: Option<f32>,
    /// 0-based BM25 rank.
    pub sparse_rank: Option<u32>,
    /// BM25 score.
    pub sparse_score: Option<f32>,
    /// 0-based graph rank.
    pub graph_rank: Option<u32>,
    /// Personalized PageRank mass.
    pub graph_score: Option<f32>,
    /// Added as a neighbor of a top hit rather than ranked on its own.
    pub neighbor: bool,
}

/// Ingests every `(name, bytes)` input and chunks all their segments.
pub fn chunk_corpus(
    inputs: &[(&str, &[u8])],
    options: &IngestOptions,
    config: &ChunkConfig,
) -> Result<Vec<Chunk>> {
    let mut segments = Vec::new();
    for (name, bytes) in inputs {
        segments.extend(ingest(name, bytes, options)?);
    }
    if segments.is_empty() {
        return Err(RetrievalError::EmptyCorpus("(no inputs)".into()));
    }
    chunk_segments(&segments, config)
}

/// A story's retrieval index: chunks, BM25, entity graph, optional dense vectors, settings.
#[derive(Debug)]
pub struct StoryIndex {
    chunks: Vec<Chunk>,
    bm25: Bm25Index,
    graph: EntityGraph,
    dense: Option<DenseIndex>,
    config: IndexConfig,
    /// The story's words with their embeddings, for query expansion ([`expand`]).
    lexicon: Option<Lexicon>,
    /// Per chunk: the previous and next chunk of its chapter.
    adjacency: Vec<[Option<u32>; 2]>,
    /// The story chunked again into wider passages, searched beside the chunks ([`wide`]).
    wide: Option<WideLayer>,
}

/// The serialized fields, borrowed for writing.
#[derive(Serialize)]
struct IndexRef<'a> {
    chunks: &'a [Chunk],
    bm25: &'a Bm25Index,
    graph: &'a EntityGraph,
    dense: Option<&'a DenseIndex>,
    config: &'a IndexConfig,
    lexicon: Option<&'a Lexicon>,
    wide: Option<&'a WideLayer>,
}

/// The serialized fields, owned for reading (same order as [`IndexRef`]).
#[derive(Deserialize)]
struct IndexOwned {
    chunks: Vec<Chunk>,
    bm25: Bm25Index,
    graph: EntityGraph,
    dense: Option<DenseIndex>,
    config: IndexConfig,
    lexicon: Option<Lexicon>,
    wide: Option<WideLayer>,
}

impl StoryIndex {
    /// Builds the index. Chunk ids must be `0..n` in order (as [`chunk_segments`] makes them);
    /// `vectors`, when given, hold one embedding per chunk in the same order.
    pub fn build(
        chunks: Vec<Chunk>,
        vectors: Option<Vec<Vec<f32>>>,
        aliases: &[AliasEntry],
        config: IndexConfig,
    ) -> Result<Self> {
        check_chunk_ids(&chunks).map_err(RetrievalError::Chunks)?;
        let dense = match vectors {
            Some(v) if v.len() != chunks.len() => {
                return Err(RetrievalError::Vectors(format!(
                    "{} vectors for {} chunks",
                    v.len(),
                    chunks.len()
                )))
            }
            Some(v) => Some(DenseIndex::build(&v, &config.dense)?),
            None => None,
        };
        let bm25 = Bm25Index::build(chunks.iter().map(|c| c.text.as_str()), config.bm25);
        let graph = EntityGraph::build(&chunks, aliases, &config.graph)?;
        let adjacency = adjacency(&chunks);
        Ok(StoryIndex {
            chunks,
            bm25,
            graph,
            dense,
            config,
            lexicon: None,
            adjacency,
            wide: None,
        })
    }

    /// The chunks, by id.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The chunk with id `id`.
    pub fn chunk(&self, id: u32) -> Option<&Chunk> {
        self.chunks.get(id as usize)
    }

    /// The settings.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Replaces the search-time settings (fusion weights, PageRank); chunking, BM25 and HNSW
    /// settings are fixed at build time and kept.
    pub fn set_search_config(&mut self, fusion: FusionConfig, graph: GraphConfig) {
        self.config.fusion = fusion;
        self.config.graph = graph;
    }

    /// The entity graph and lexicon.
    pub fn graph(&self) -> &EntityGraph {
        &self.graph
    }

    /// The BM25 index.
    pub fn bm25(&self) -> &Bm25Index {
        &self.bm25
    }

    /// The dense index, if vectors were given.
    pub fn dense(&self) -> Option<&DenseIndex> {
        self.dense.as_ref()
    }

    /// The lexicon query expansion reads, if the index has one.
    pub fn lexicon(&self) -> Option<&Lexicon> {
        self.lexicon.as_ref()
    }

    /// Sets (or, with `None`, removes) the lexicon. Its vectors must be as wide as the dense
    /// index's: query words are embedded by the same encoder as the query.
    pub fn set_lexicon(&mut self, lexicon: Option<Lexicon>) -> Result<()> {
        if let Some(l) = &lexicon {
            check_lexicon(l, self.dense.as_ref()).map_err(RetrievalError::Vectors)?;
        }
        self.lexicon = lexicon;
        Ok(())
    }

    /// The wide passages, if the index has them ([`wide`]).
    pub fn wide(&self) -> Option<&WideLayer> {
        self.wide.as_ref()
    }

    /// Sets (or, with `None`, removes) the wide passages. They must cover chunks of this index
    /// only, and their vectors be as wide as the chunks' (a wide passage is searched with the
    /// same query vector).
    pub fn set_wide(&mut self, wide: Option<WideLayer>) -> Result<()> {
        if let Some(w) = &wide {
            w.validate(self.chunks.len(), self.dense.as_ref().map(DenseIndex::dim))
                .map_err(RetrievalError::Vectors)?;
        }
        self.wide = wide;
        Ok(())
    }

    /// The words of `query` to embed for [`StoryIndex::search_expanded`]: none when the index
    /// has no lexicon or expansion is off.
    pub fn expansion_words(&self, query: &str) -> Vec<String> {
        self.lexicon
            .as_ref()
            .map_or_else(Vec::new, |l| l.query_words(query))
    }

    /// The chunk `offset` positions from chunk `id` in the same chapter (−1 previous, 1 next).
    pub fn neighbor(&self, id: u32, offset: isize) -> Option<u32> {
        let mut id = id;
        for _ in 0..offset.unsigned_abs() {
            let links = self.adjacency.get(id as usize)?;
            id = links[usize::from(offset > 0)]?;
        }
        Some(id)
    }

    /// Searches with the sources chosen: BM25 and the graph read `query_text`; the dense ranking
    /// needs `query_vec` (skipped when it is `None`). Returns the top `k` fused hits plus their
    /// neighbors, best first (see [`fusion`]). A source of weight 0 is not searched, unless it is
    /// the only one chosen: a source searched alone gives its own ranking, whatever its weight.
    pub fn search(
        &self,
        query_text: &str,
        query_vec: Option<&[f32]>,
        k: usize,
        sources: Sources,
    ) -> Result<Vec<Hit>> {
        self.search_expanded(query_text, query_vec, &[], k, sources)
    }

    /// [`StoryIndex::search`] with BM25's query expanded ([`expand`]) from `words`: the
    /// [`StoryIndex::expansion_words`] of `query_text` with their embeddings (none: no
    /// expansion).
    pub fn search_expanded(
        &self,
        query_text: &str,
        query_vec: Option<&[f32]>,
        words: &[(String, Vec<f32>)],
        k: usize,
        sources: Sources,
    ) -> Result<Vec<Hit>> {
        Ok(self
            .search_with_neighbours(query_text, query_vec, words, k, sources)?
            .0)
    }

    /// [`StoryIndex::search_expanded`], also returning the story's terms that expanded each of
    /// `words` ([`Lexicon::neighbours`]; none when BM25 is not searched or the index has no
    /// lexicon).
    pub fn search_with_neighbours(
        &self,
        query_text: &str,
        query_vec: Option<&[f32]>,
        words: &[(String, Vec<f32>)],
        k: usize,
        sources: Sources,
    ) -> Result<(Vec<Hit>, Neighbours)> {
        // No more hits than chunks, whatever was asked (`k` sizes the candidate lists).
        let k = k.min(self.chunks.len());
        let mut fusion = self.config.fusion.clone();
        let alone = [sources.dense, sources.sparse, sources.graph]
            .iter()
            .filter(|&&s| s)
            .count()
            == 1;
        if alone {
            (fusion.dense, fusion.sparse, fusion.graph) = (1.0, 1.0, 1.0);
        }
        let sources = Sources {
            dense: sources.dense && fusion.dense > 0.0,
            sparse: sources.sparse && fusion.sparse > 0.0,
            graph: sources.graph && fusion.graph > 0.0,
        };
        let depth = fusion.candidates.max(k).min(self.chunks.len());
        let dense = match (sources.dense, query_vec, &self.dense) {
            (true, Some(v), Some(d)) => d.search(v, depth)?,
            (true, Some(_), None) => {
                return Err(RetrievalError::Query(
                    "a query vector was given but the index has no dense vectors".into(),
                ))
            }
            _ => Vec::new(),
        };
        let mut terms = bm25::query_terms(query_text);
        let mut neighbours = Vec::new();
        if let (true, Some(l), false) = (sources.sparse, &self.lexicon, words.is_empty()) {
            neighbours = l.neighbours(&terms, words)?;
            l.add(&mut terms, &neighbours);
        }
        let sparse = if sources.sparse {
            self.bm25.search_terms(&terms, depth)
        } else {
            Vec::new()
        };
        // The wide passages count beside the chunks, never for a source searched alone.
        let wide = match &self.wide {
            Some(w) if !alone => {
                let vec = query_vec.filter(|_| sources.dense);
                let t = sources.sparse.then_some(&terms);
                let r = w.rankings(t, vec, fusion.candidates.max(k))?;
                let c = w.config();
                vec![(r.dense, c.dense), (r.sparse, c.sparse)]
            }
            _ => Vec::new(),
        };
        let more: Vec<(&[(u32, f32)], f32)> =
            wide.iter().map(|(r, w)| (r.as_slice(), *w)).collect();
        let graph = if sources.graph {
            self.graph.search(query_text, depth, &self.config.graph)
        } else {
            Vec::new()
        };
        let fused = fusion::fuse_with(&dense, &sparse, &graph, &more, &fusion);
        let selected = fusion::select(fused, k, &fusion, |id, off| self.neighbor(id, off));
        let hits = selected
            .into_iter()
            .filter_map(|f| {
                let chunk = self.chunk(f.doc)?;
                Some(Hit {
                    id: chunk.id,
                    chapter: chunk.place(),
                    text: chunk.text.clone(),
                    fusion_score: f.fusion_score,
                    dense_rank: f.dense.map(|s| s.rank),
                    dense_score: f.dense.map(|s| s.score),
                    sparse_rank: f.sparse.map(|s| s.rank),
                    sparse_score: f.sparse.map(|s| s.score),
                    graph_rank: f.graph.map(|s| s.rank),
                    graph_score: f.graph.map(|s| s.score),
                    neighbor: f.neighbor_of.is_some(),
                })
            })
            .collect();
        Ok((hits, neighbours))
    }

    /// Serializes the index into a blob (module docs).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let payload = postcard::to_allocvec(&IndexRef {
            chunks: &self.chunks,
            bm25: &self.bm25,
            graph: &self.graph,
            dense: self.dense.as_ref(),
            config: &self.config,
            lexicon: self.lexicon.as_ref(),
            wide: self.wide.as_ref(),
        })
        .map_err(|e| RetrievalError::Blob(format!("cannot serialize: {e}")))?;
        Ok(frame(&payload))
    }

    /// Reads a blob written by [`StoryIndex::to_bytes`], checking it (module docs).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let blob = |m: String| RetrievalError::Blob(m);
        if bytes.len() < HEADER_LEN {
            return Err(blob(format!(
                "truncated: {} bytes, the header alone needs {HEADER_LEN}",
                bytes.len()
            )));
        }
        if bytes[..8] != MAGIC {
            return Err(blob(format!(
                "not a Lorekeeper story index (magic {:02x?}, expected {:02x?})",
                &bytes[..8],
                MAGIC
            )));
        }
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut v = [0u8; 4];
        v.copy_from_slice(&bytes[8..12]);
        let version = u32::from_le_bytes(v);
        if !(FORMAT_VERSION_RRF..=FORMAT_VERSION).contains(&version) {
            return Err(blob(format!(
                "format version {version}, this build reads versions {FORMAT_VERSION_RRF} to \
                 {FORMAT_VERSION}"
            )));
        }
        let (len, checksum) = (word(12), word(20));
        let payload = &bytes[HEADER_LEN..];
        if payload.len() as u64 != len {
            return Err(blob(format!(
                "the header announces a {len}-byte payload, {} bytes follow (truncated or padded)",
                payload.len()
            )));
        }
        if fnv1a64(payload) != checksum {
            return Err(blob("checksum mismatch: the payload is corrupt".into()));
        }
        // Older versions lack the last fields: append postcard's encodings of what they mean,
        // `None` for the wide passages (version 5), `None` for the lexicon before them
        // (version 4) and `FusionMethod::Rrf` before it (version 3), one zero byte each.
        let missing: &[u8] = match version {
            FORMAT_VERSION_RRF => &[0, 0, 0],
            FORMAT_VERSION_NO_LEXICON => &[0, 0],
            FORMAT_VERSION_NO_WIDE => &[0],
            _ => &[],
        };
        let upgraded;
        let payload = if missing.is_empty() {
            payload
        } else {
            upgraded = [payload, missing].concat();
            upgraded.as_slice()
        };
        let (data, rest): (IndexOwned, &[u8]) = postcard::take_from_bytes(payload)
            .map_err(|e| blob(format!("the payload does not decode: {e}")))?;
        if !rest.is_empty() {
            return Err(blob(format!("{} bytes left after the payload", rest.len())));
        }
        let n = data.chunks.len();
        check_chunk_ids(&data.chunks).map_err(blob)?;
        data.bm25.validate(n).map_err(blob)?;
        if data.graph.chunk_count() != n {
            return Err(blob(format!(
                "the entity graph covers {} chunks, the index has {n}",
                data.graph.chunk_count()
            )));
        }
        if let Some(d) = &data.dense {
            d.validate(n).map_err(blob)?;
        }
        if let Some(l) = &data.lexicon {
            check_lexicon(l, data.dense.as_ref()).map_err(blob)?;
        }
        if let Some(w) = &data.wide {
            w.validate(n, data.dense.as_ref().map(DenseIndex::dim))
                .map_err(blob)?;
        }
        let adjacency = adjacency(&data.chunks);
        Ok(StoryIndex {
            chunks: data.chunks,
            bm25: data.bm25,
            graph: data.graph,
            dense: data.dense,
            config: data.config,
            lexicon: data.lexicon,
            adjacency,
            wide: data.wide,
        })
    }
}

/// A lexicon's structure, and that its vectors are as wide as the dense index's.
fn check_lexicon(l: &Lexicon, dense: Option<&DenseIndex>) -> std::result::Result<(), String> {
    l.validate()?;
    match dense {
        Some(d) if d.dim() != l.dim() => Err(format!(
            "lexicon vectors of width {}, the dense index's are {}",
            l.dim(),
            d.dim()
        )),
        _ => Ok(()),
    }
}

fn check_chunk_ids(chunks: &[Chunk]) -> std::result::Result<(), String> {
    match chunks.iter().enumerate().find(|(i, c)| c.id as usize != *i) {
        Some((i, c)) => Err(format!(
            "chunk ids must be 0..n in order; the chunk at position {i} has id {}",
            c.id
        )),
        None => Ok(()),
    }
}

/// Previous and next chunk of each chunk within its (story, chapter), by ordinal.
fn adjacency(chunks: &[Chunk]) -> Vec<[Option<u32>; 2]> {
    let mut chapters: HashMap<(&str, &str), Vec<(u32, u32)>> = HashMap::new();
    for c in chunks {
        chapters
            .entry((c.story.as_str(), c.chapter.as_str()))
            .or_default()
            .push((c.position.ordinal, c.id));
    }
    let mut out = vec![[None, None]; chunks.len()];
    for list in chapters.values_mut() {
        list.sort_unstable();
        for w in list.windows(2) {
            out[w[0].1 as usize][1] = Some(w[1].1);
            out[w[1].1 as usize][0] = Some(w[0].1);
        }
    }
    out
}

/// A blob around `payload`: magic, format version, length and checksum, then the payload. The
/// fuzz targets frame mutated payloads with it so that they reach the payload's own checks.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a64(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// FNV-1a, 64 bits.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
