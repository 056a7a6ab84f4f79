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
//! | 28.. | postcard: chunks, BM25 index, entity graph, dense index, configuration |
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
pub mod fusion;
pub mod graph;
pub mod script;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use bm25::{Bm25Index, Bm25Params};
pub use chunk::{chunk_segments, Chunk, ChunkConfig, Position};
pub use corpus::{ingest, CorpusFormat, IngestOptions, Segment};
pub use dense::{recall_at_k, DenseConfig, DenseIndex, RecallReport};
pub use error::{Result, RetrievalError};
pub use eval::{evaluate, parse_questions, EvalReport, Metrics, Question};
pub use fusion::{Fused, FusionConfig, FusionMethod, SourceRank};
pub use graph::{parse_aliases, AliasEntry, Entity, EntityGraph, EntitySource, GraphConfig};

/// The blob's magic bytes.
pub const MAGIC: [u8; 8] = *b"LKSTORY\0";
/// The blob format this build writes; it also reads [`FORMAT_VERSION_RRF`].
pub const FORMAT_VERSION: u32 = 4;
/// The blob format before [`FusionMethod`] (version 3): the same payload without the fusion
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
    /// Per chunk: the previous and next chunk of its chapter.
    adjacency: Vec<[Option<u32>; 2]>,
}

/// The serialized fields, borrowed for writing.
#[derive(Serialize)]
struct IndexRef<'a> {
    chunks: &'a [Chunk],
    bm25: &'a Bm25Index,
    graph: &'a EntityGraph,
    dense: Option<&'a DenseIndex>,
    config: &'a IndexConfig,
}

/// The serialized fields, owned for reading (same order as [`IndexRef`]).
#[derive(Deserialize)]
struct IndexOwned {
    chunks: Vec<Chunk>,
    bm25: Bm25Index,
    graph: EntityGraph,
    dense: Option<DenseIndex>,
    config: IndexConfig,
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
            adjacency,
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
        let sparse = if sources.sparse {
            self.bm25.search(query_text, depth)
        } else {
            Vec::new()
        };
        let graph = if sources.graph {
            self.graph.search(query_text, depth, &self.config.graph)
        } else {
            Vec::new()
        };
        let fused = fusion::fuse(&dense, &sparse, &graph, &fusion);
        let selected = fusion::select(fused, k, &fusion, |id, off| self.neighbor(id, off));
        Ok(selected
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
            .collect())
    }

    /// Serializes the index into a blob (module docs).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let payload = postcard::to_allocvec(&IndexRef {
            chunks: &self.chunks,
            bm25: &self.bm25,
            graph: &self.graph,
            dense: self.dense.as_ref(),
            config: &self.config,
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
        if version != FORMAT_VERSION && version != FORMAT_VERSION_RRF {
            return Err(blob(format!(
                "format version {version}, this build reads versions {FORMAT_VERSION_RRF} and \
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
        // Version 3 lacks the fusion method at the very end: append postcard's encoding of
        // `FusionMethod::Rrf` (variant 0, one byte).
        let upgraded;
        let payload = if version == FORMAT_VERSION_RRF {
            upgraded = [payload, &[0u8]].concat();
            upgraded.as_slice()
        } else {
            payload
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
        let adjacency = adjacency(&data.chunks);
        Ok(StoryIndex {
            chunks: data.chunks,
            bm25: data.bm25,
            graph: data.graph,
            dense: data.dense,
            config: data.config,
            adjacency,
        })
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
mod tests {
    use super::*;
    use crate::rng::Pcg32;

    const STORY: &str = "CHAPTER I. The Garden\n\n\
        Alice found a tiny golden key on the glass table. The key opened a little door.\n\n\
        Behind the door lay the loveliest garden, and Alice longed to walk among the flowers.\n\n\
        [name=\"Rabbit\"] Oh my ears and whiskers, how late it's getting!\n\n\
        CHAPTER II. The Tea Party\n\n\
        The Hatter poured tea for the Dormouse, who slept. The Hatter asked a riddle.\n\n\
        Why is a raven like a writing-desk? Alice could not guess, and the Hatter did not know.\n\n\
        The Dormouse woke and told a story about three sisters who lived in a treacle well.\n";

    /// Bag-of-words vectors over a fixed vocabulary: a stand-in encoder for tests.
    fn embed(text: &str) -> Vec<f32> {
        const VOCAB: [&str; 12] = [
            "key", "door", "garden", "rabbit", "late", "hatter", "tea", "raven", "dormouse",
            "treacle", "alice", "riddle",
        ];
        let terms = bm25::tokenize(text);
        let mut v: Vec<f32> = VOCAB
            .iter()
            .map(|w| terms.iter().filter(|t| t == w).count() as f32)
            .collect();
        v.push(0.05);
        v
    }

    fn build(config: IndexConfig) -> StoryIndex {
        let chunks = chunk_corpus(
            &[("alice.txt", STORY.as_bytes())],
            &IngestOptions::default(),
            &config.chunk,
        )
        .unwrap();
        let vectors = chunks.iter().map(|c| embed(&c.text)).collect();
        StoryIndex::build(chunks, Some(vectors), &[], config).unwrap()
    }

    fn small_config() -> IndexConfig {
        IndexConfig {
            chunk: ChunkConfig {
                max_chars: 120,
                overlap_segments: 1,
            },
            // A handful of chunks: every name is in a large share of them.
            graph: GraphConfig {
                max_entity_share: 1.0,
                ..GraphConfig::default()
            },
            ..IndexConfig::default()
        }
    }

    /// A `k` from a message or a command line, however large, asks for no more than the
    /// index holds (it sized the candidate lists before).
    #[test]
    fn search_bounds_k_by_the_index() {
        let index = build(small_config());
        let q = "Who poured tea for the Dormouse?";
        for sources in [
            Sources::ALL,
            Sources::DENSE,
            Sources::SPARSE,
            Sources::GRAPH,
        ] {
            let hits = index
                .search(q, Some(&embed(q)), usize::MAX, sources)
                .expect("search");
            assert!(hits.len() <= index.chunks().len(), "{}", hits.len());
        }
    }

    #[test]
    fn search_fuses_all_sources() {
        let index = build(small_config());
        assert!(index.chunks().len() >= 4);
        let q = "Who poured tea for the Dormouse?";
        let hits = index.search(q, Some(&embed(q)), 3, Sources::ALL).unwrap();
        assert!(hits[0].text.contains("poured tea"), "{hits:#?}");
        assert_eq!(hits[0].chapter, "CHAPTER II. The Tea Party");
        assert!(hits[0].dense_rank.is_some() && hits[0].sparse_rank.is_some());
        assert!(hits
            .windows(2)
            .all(|w| w[0].fusion_score >= w[1].fusion_score));
        // "Hatter" is a recurring capitalized name, so the graph ranks its chunks.
        assert!(index.graph().entities().iter().any(|e| e.name == "Hatter"));
        let graph_only = index.search("the hatter", None, 5, Sources::GRAPH).unwrap();
        assert!(!graph_only.is_empty());
        let first = graph_only.iter().find(|h| !h.neighbor).unwrap();
        assert!(first.text.contains("Hatter") && first.graph_rank == Some(0));
        // Neighbors are marked and sit within two chunks of a top hit of their chapter.
        for h in hits.iter().filter(|h| h.neighbor) {
            let near = |p: &Hit| {
                !p.neighbor && (-2..=2).any(|off| index.neighbor(p.id, off) == Some(h.id))
            };
            assert!(hits.iter().any(near), "{h:?}");
        }
        let json = serde_json::to_value(&hits[0]).unwrap();
        for key in [
            "id",
            "chapter",
            "text",
            "fusion_score",
            "dense_rank",
            "sparse_rank",
            "graph_rank",
            "neighbor",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
    }

    #[test]
    fn sources_can_be_switched_off() {
        let index = build(small_config());
        let q = "golden key";
        let sparse = index
            .search(q, Some(&embed(q)), 2, Sources::SPARSE)
            .unwrap();
        assert!(sparse
            .iter()
            .all(|h| h.dense_rank.is_none() && h.graph_rank.is_none()));
        let dense = index.search(q, Some(&embed(q)), 2, Sources::DENSE).unwrap();
        assert!(dense.iter().all(|h| h.sparse_rank.is_none()));
        assert!(dense[0].text.contains("key"));
        // Without a vector the dense source is skipped; a wrong-sized one is an error.
        assert!(index.search(q, None, 2, Sources::DENSE).unwrap().is_empty());
        assert!(index.search(q, Some(&[1.0, 2.0]), 2, Sources::ALL).is_err());
        let no_dense = {
            let chunks = index.chunks().to_vec();
            StoryIndex::build(chunks, None, &[], small_config()).unwrap()
        };
        let err = no_dense
            .search(q, Some(&embed(q)), 2, Sources::ALL)
            .unwrap_err();
        assert!(err.to_string().contains("no dense vectors"), "{err}");
        assert!(!no_dense
            .search(q, None, 2, Sources::ALL)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn neighbors_follow_chapter_order() {
        let index = build(small_config());
        for c in index.chunks() {
            if let Some(next) = index.neighbor(c.id, 1) {
                let n = index.chunk(next).unwrap();
                assert_eq!(
                    (n.chapter.as_str(), n.position.ordinal),
                    (c.chapter.as_str(), c.position.ordinal + 1)
                );
                assert_eq!(index.neighbor(next, -1), Some(c.id));
            }
        }
        let last_of_first = index
            .chunks()
            .iter()
            .rfind(|c| c.chapter.starts_with("CHAPTER I."))
            .unwrap();
        assert_eq!(index.neighbor(last_of_first.id, 1), None);
        assert_eq!(index.neighbor(0, 0), Some(0));
    }

    #[test]
    fn blob_round_trip() {
        let index = build(small_config());
        let bytes = index.to_bytes().unwrap();
        let back = StoryIndex::from_bytes(&bytes).unwrap();
        assert_eq!(back.chunks(), index.chunks());
        assert_eq!(back.config(), index.config());
        let q = "Why is a raven like a writing-desk";
        let a = index.search(q, Some(&embed(q)), 4, Sources::ALL).unwrap();
        let b = back.search(q, Some(&embed(q)), 4, Sources::ALL).unwrap();
        assert_eq!(a, b);
        assert_eq!(back.to_bytes().unwrap(), bytes);
    }

    /// A version-3 blob (the payload without the fusion method, its last byte here) reads
    /// with RRF and searches as the index it was written from did with RRF.
    #[test]
    fn version_3_blobs_read_as_rrf() {
        let mut config = small_config();
        config.fusion.method = FusionMethod::Convex;
        let index = build(config);
        let v4 = index.to_bytes().unwrap();
        assert_eq!(
            *v4.last().unwrap(),
            1,
            "Convex is postcard's variant 1, the last byte"
        );
        let payload = &v4[HEADER_LEN..v4.len() - 1];
        let mut v3 = frame(payload);
        v3[8..12].copy_from_slice(&FORMAT_VERSION_RRF.to_le_bytes());
        let back = StoryIndex::from_bytes(&v3).unwrap();
        assert_eq!(back.config().fusion.method, FusionMethod::Rrf);
        assert_eq!(back.chunks(), index.chunks());
        let mut rrf = index.config().clone();
        rrf.fusion.method = FusionMethod::Rrf;
        let mut index = index;
        index.set_search_config(rrf.fusion.clone(), rrf.graph.clone());
        let q = "Why is a raven like a writing-desk";
        let a = index.search(q, Some(&embed(q)), 4, Sources::ALL).unwrap();
        let b = back.search(q, Some(&embed(q)), 4, Sources::ALL).unwrap();
        assert_eq!(a, b);
        // Written again, it is a version-4 blob.
        let again = back.to_bytes().unwrap();
        assert_eq!(again[8..12], FORMAT_VERSION.to_le_bytes());
    }

    #[test]
    fn corrupt_blobs_are_errors_not_panics() {
        let index = build(small_config());
        let bytes = index.to_bytes().unwrap();
        // Every truncation.
        for len in 0..bytes.len() {
            let err = StoryIndex::from_bytes(&bytes[..len]).unwrap_err();
            assert!(matches!(err, RetrievalError::Blob(_)), "{err}");
        }
        let msg = |b: &[u8]| StoryIndex::from_bytes(b).unwrap_err().to_string();
        assert!(msg(&bytes[..10]).contains("truncated"));
        assert!(msg(&bytes[..bytes.len() - 1]).contains("announces"));
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(msg(&bad).contains("not a Lorekeeper story index"));
        let mut bad = bytes.clone();
        bad[8] = 9;
        assert!(msg(&bad).contains("format version 9"));
        assert!(msg(&bad).contains("reads versions 3 and 4"));
        // Flipped bits anywhere in the payload: the checksum catches them.
        let mut rng = Pcg32::new(1);
        for _ in 0..200 {
            let mut bad = bytes.clone();
            let at = rng.range(HEADER_LEN, bad.len() - 1);
            bad[at] ^= 1 << rng.range(0, 7);
            assert!(msg(&bad).contains("checksum"));
        }
        // A payload that checks out but does not decode, or decodes to an inconsistent index.
        let reseal = |payload: &[u8]| {
            let mut out = bytes[..12].to_vec();
            out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
            out.extend_from_slice(&fnv1a64(payload).to_le_bytes());
            out.extend_from_slice(payload);
            out
        };
        assert!(msg(&reseal(&[0xff; 40])).contains("does not decode"));
        let mut extra = bytes[HEADER_LEN..].to_vec();
        extra.push(0);
        assert!(msg(&reseal(&extra)).contains("left after"));
        let mut chunks = index.chunks().to_vec();
        chunks.pop();
        let payload = postcard::to_allocvec(&IndexRef {
            chunks: &chunks,
            bm25: &index.bm25,
            graph: &index.graph,
            dense: index.dense.as_ref(),
            config: &index.config,
        })
        .unwrap();
        assert!(msg(&reseal(&payload)).contains("BM25 index covers"));
    }

    #[test]
    fn build_checks_its_inputs() {
        let mut chunks = chunk_corpus(
            &[("a.txt", STORY.as_bytes())],
            &IngestOptions::default(),
            &ChunkConfig::default(),
        )
        .unwrap();
        let err = StoryIndex::build(
            chunks.clone(),
            Some(vec![vec![1.0]]),
            &[],
            IndexConfig::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("1 vectors for"), "{err}");
        chunks[0].id = 5;
        let err = StoryIndex::build(chunks, None, &[], IndexConfig::default()).unwrap_err();
        assert!(err.to_string().contains("position 0 has id 5"), "{err}");
        let err =
            chunk_corpus(&[], &IngestOptions::default(), &ChunkConfig::default()).unwrap_err();
        assert!(matches!(err, RetrievalError::EmptyCorpus(_)));
        // An empty index is valid and finds nothing.
        let empty = StoryIndex::build(Vec::new(), None, &[], IndexConfig::default()).unwrap();
        assert!(empty
            .search("anything", None, 5, Sources::ALL)
            .unwrap()
            .is_empty());
        let back = StoryIndex::from_bytes(&empty.to_bytes().unwrap()).unwrap();
        assert!(back.chunks().is_empty());
    }

    #[test]
    fn config_reads_partial_json() {
        let config: IndexConfig = serde_json::from_str(r#"{"fusion": {"graph": 0.5}}"#).unwrap();
        assert_eq!(config.fusion.graph, 0.5);
        assert_eq!(config.fusion.rrf_k, 5.0);
        assert_eq!(config.chunk.max_chars, 600);
    }
}
