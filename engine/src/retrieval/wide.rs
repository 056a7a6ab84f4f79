//! Wide passages: the same story chunked a second time into longer passages (1,000 characters
//! by default, [`WideConfig::max_chars`]), with their own BM25 index (and vectors where their
//! dense ranking is weighed), searched beside the story's chunks and counted for the chunks each
//! one covers.
//!
//! A question is often written from two or three sentences that a 600-character chunk cuts
//! apart, or about a chunk whose words are few and the context around it many: the chunk
//! alone matches the question weakly, and the wider passage around it matches it well. The
//! index still returns the story's own chunks (the evidence brief shows 600 characters of a
//! passage, so a wide passage would be ranked on text the model never reads); a wide passage
//! only adds, for each chunk it covers, its min-max scaled score ([`super::fusion::fuse_with`])
//! at its own weight for the dense side ([`WideConfig::dense`]) and BM25 ([`WideConfig::sparse`]).
//!
//! A wide passage covers a chunk when it holds half of the chunk's characters or more (both
//! located by [`super::Position::char_offset`] in their chapter's stream; [`covers`]): every
//! chunk is covered by one wide passage or two. A chunk covered by several takes the best score
//! of them on each side.
//!
//! Measured on the development and held-out sets (README, "Wide passages"; all-MiniLM-L6-v2
//! indexes, the default fusion, `lorekeeper eval-retrieval`), fused recall@10 / MRR without and
//! with the wide passages' BM25 ranking at 0.2: *Alice* 0.934 / 0.739 → 0.951 / 0.744, *The
//! Tempest* 0.833 / 0.600 → 0.850 / 0.600, *Hamlet* (held out) 0.729 / 0.537 → 0.746 / 0.546,
//! *Botchan* (test) 0.783 / 0.570 → 0.831 / 0.570. Stories mostly in CJK get none
//! ([`WideConfig::for_fusion`]).

use serde::{Deserialize, Serialize};

use super::bm25::{Bm25Index, Bm25Params};
use super::chunk::Chunk;
use super::dense::{DenseConfig, DenseIndex};
use super::error::{Result, RetrievalError};

/// How wide passages are cut and weighed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WideConfig {
    /// Longest wide passage in characters (the story's chunks are cut at
    /// [`super::ChunkConfig::max_chars`], 600).
    pub max_chars: usize,
    /// Weight of the wide passages' dense ranking in the fusion (the chunks' is
    /// [`super::FusionConfig::dense`]).
    pub dense: f32,
    /// Weight of the wide passages' BM25 ranking.
    pub sparse: f32,
}

impl Default for WideConfig {
    /// 1,000 characters, their BM25 ranking at weight 0.2 beside convex fusion's 0.4 / 0.6,
    /// their vectors not searched: of 23 weightings (dense 0–0.3, BM25 0–0.6) the best by
    /// recall@5 + MRR on *Alice* and *The Tempest* (the answers read the first passages), and
    /// on the held-out sets no worse than without (README, "Wide passages").
    fn default() -> Self {
        WideConfig {
            max_chars: 1000,
            dense: 0.0,
            sparse: 0.2,
        }
    }
}

impl WideConfig {
    /// The wide passages of a story fused by `method` ([`super::FusionConfig::for_story`]):
    /// the default for convex fusion; none for RRF (stories mostly in CJK). On 红楼梦
    /// (multilingual-e5-small) the wide passages' BM25 ranking alone lowered MRR (0.627 →
    /// 0.595, no neighbor expansion); with their vectors too (dense 0.8, BM25 0.2 beside the
    /// chunks' 0.8 / 1.0) recall@10 / MRR rose 0.829 / 0.624 → 0.857 / 0.631 and the answers
    /// held the gold for 25 of 70 questions instead of 23, but the reader's cosine floor
    /// abstained on 12 of the 20 unanswerable questions instead of 16 (README, "Wide
    /// passages").
    pub fn for_fusion(method: super::FusionMethod) -> Option<Self> {
        match method {
            super::FusionMethod::Convex => Some(WideConfig::default()),
            super::FusionMethod::Rrf => None,
        }
    }
}

/// The wide passages of a story index (module docs).
#[derive(Debug, Serialize, Deserialize)]
pub struct WideLayer {
    config: WideConfig,
    bm25: Bm25Index,
    dense: Option<DenseIndex>,
    /// Per wide passage, the ids of the story's chunks it covers, ascending.
    covers: Vec<Vec<u32>>,
}

/// The two rankings of the wide passages, as the story's chunks they cover (best first, each
/// chunk once, at the best score of the passages that cover it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WideRankings {
    /// From the wide passages' vectors (empty without them or without a query vector).
    pub dense: Vec<(u32, f32)>,
    /// From their BM25 index.
    pub sparse: Vec<(u32, f32)>,
}

/// For each of the `wide` passages, the `chunks` it covers: those of the same story and chapter
/// with at least half their characters inside it (module docs); a chunk that no passage holds
/// half of (the two chunkings' streams can differ by a few characters where a long block is
/// split) is covered by the passage that holds most of it.
pub fn covers(wide: &[Chunk], chunks: &[Chunk]) -> Vec<Vec<u32>> {
    let span = |c: &Chunk| {
        let a = u64::from(c.position.char_offset);
        (a, a + c.text.chars().count() as u64)
    };
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); wide.len()];
    let mut by_chapter: std::collections::HashMap<(&str, &str), Vec<usize>> =
        std::collections::HashMap::new();
    for (w, c) in wide.iter().enumerate() {
        by_chapter
            .entry((c.story.as_str(), c.chapter.as_str()))
            .or_default()
            .push(w);
    }
    for c in chunks {
        let (ca, cb) = span(c);
        let Some(ws) = by_chapter.get(&(c.story.as_str(), c.chapter.as_str())) else {
            continue;
        };
        let inside: Vec<(usize, u64)> = ws
            .iter()
            .map(|&w| {
                let (wa, wb) = span(&wide[w]);
                (w, cb.min(wb).saturating_sub(ca.max(wa)))
            })
            .collect();
        let mut any = false;
        for &(w, n) in &inside {
            if cb > ca && 2 * n >= cb - ca {
                out[w].push(c.id);
                any = true;
            }
        }
        if !any {
            if let Some(&(w, n)) = inside
                .iter()
                .max_by_key(|&&(w, n)| (n, std::cmp::Reverse(w)))
            {
                if n > 0 {
                    out[w].push(c.id);
                }
            }
        }
    }
    out
}

impl WideLayer {
    /// Builds the layer over `wide` passages (chunked from the same segments as `chunks`, at
    /// `config.max_chars`), with `vectors` (one per wide passage, as wide as the chunks' own)
    /// when the index is dense.
    pub fn build(
        wide: &[Chunk],
        vectors: Option<&[Vec<f32>]>,
        chunks: &[Chunk],
        config: WideConfig,
        bm25: Bm25Params,
        dense: &DenseConfig,
    ) -> Result<Self> {
        let dense = match vectors {
            Some(v) if v.len() != wide.len() => {
                return Err(RetrievalError::Vectors(format!(
                    "{} vectors for {} wide passages",
                    v.len(),
                    wide.len()
                )))
            }
            Some(v) => Some(DenseIndex::build(v, dense)?),
            None => None,
        };
        let layer = WideLayer {
            config,
            bm25: Bm25Index::build(wide.iter().map(|c| c.text.as_str()), bm25),
            dense,
            covers: covers(wide, chunks),
        };
        layer
            .validate(chunks.len(), None)
            .map_err(RetrievalError::Chunks)?;
        Ok(layer)
    }

    /// Its settings.
    pub fn config(&self) -> &WideConfig {
        &self.config
    }

    /// Number of wide passages.
    pub fn len(&self) -> usize {
        self.covers.len()
    }

    /// Whether it has no passage.
    pub fn is_empty(&self) -> bool {
        self.covers.is_empty()
    }

    /// Whether its passages have vectors (their dense ranking is searched).
    pub fn has_vectors(&self) -> bool {
        self.dense.is_some()
    }

    /// The chunks wide passage `w` covers.
    pub fn covered(&self, w: usize) -> &[u32] {
        self.covers.get(w).map_or(&[], Vec::as_slice)
    }

    /// Checks a deserialized layer against an index of `chunks` chunks whose vectors are `dim`
    /// wide (`None`: no dense index, or not to be compared): BM25 and vectors cover every wide
    /// passage, and every covered id names a chunk.
    pub(crate) fn validate(
        &self,
        chunks: usize,
        dim: Option<usize>,
    ) -> std::result::Result<(), String> {
        let n = self.covers.len();
        self.bm25
            .validate(n)
            .map_err(|e| format!("wide passages: {e}"))?;
        if let Some(d) = &self.dense {
            d.validate(n).map_err(|e| format!("wide passages: {e}"))?;
            if let Some(dim) = dim.filter(|&dim| dim != d.dim()) {
                return Err(format!(
                    "wide passages: vectors of width {}, the chunks' are {dim}",
                    d.dim()
                ));
            }
        }
        for (w, ids) in self.covers.iter().enumerate() {
            if let Some(id) = ids.iter().find(|&&id| id as usize >= chunks) {
                return Err(format!(
                    "wide passage {w} covers chunk {id}, the index has {chunks} chunks"
                ));
            }
        }
        Ok(())
    }

    /// The wide passages' rankings for BM25 `terms` and `query_vec`, each read `depth` deep,
    /// as the chunks they cover ([`WideRankings`]). A side of weight 0, or without its query,
    /// is not searched.
    pub fn rankings(
        &self,
        terms: Option<&std::collections::BTreeMap<String, f32>>,
        query_vec: Option<&[f32]>,
        depth: usize,
    ) -> Result<WideRankings> {
        let depth = depth.min(self.len());
        let dense = match (query_vec, &self.dense) {
            (Some(v), Some(d)) if self.config.dense > 0.0 => d.search(v, depth)?,
            _ => Vec::new(),
        };
        let sparse = match terms {
            Some(t) if self.config.sparse > 0.0 => self.bm25.search_terms(t, depth),
            _ => Vec::new(),
        };
        Ok(WideRankings {
            dense: self.to_chunks(&dense),
            sparse: self.to_chunks(&sparse),
        })
    }

    /// A ranking of wide passages as the chunks they cover: each chunk at the best score of the
    /// passages covering it, best first (ties to the lower chunk id).
    fn to_chunks(&self, ranking: &[(u32, f32)]) -> Vec<(u32, f32)> {
        let mut best: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
        for &(w, score) in ranking {
            for &id in self.covered(w as usize) {
                let s = best.entry(id).or_insert(score);
                *s = s.max(score);
            }
        }
        let mut out: Vec<(u32, f32)> = best.into_iter().collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::{chunk_corpus, IngestOptions};

    /// Two chapters of prose, paragraphs of uneven length (no multiple of either width).
    fn story() -> String {
        let mut s = String::new();
        for ch in 1..=2 {
            s.push_str(&format!("CHAPTER {ch}. The Part\n\n"));
            for p in 0..9 {
                let words: Vec<String> = (0..(7 + 5 * p % 13))
                    .map(|w| format!("w{ch}x{p}y{w}"))
                    .collect();
                s.push_str(&format!("{}.\n\n", words.join(" ")));
            }
        }
        s
    }

    fn chunk(max_chars: usize) -> Vec<Chunk> {
        let config = crate::retrieval::ChunkConfig {
            max_chars,
            overlap_segments: 1,
        };
        chunk_corpus(
            &[("s.txt", story().as_bytes())],
            &IngestOptions::default(),
            &config,
        )
        .unwrap()
    }

    /// Every chunk is covered, only by wide passages of its chapter that hold half its
    /// characters or more (its text is then mostly theirs: its words are theirs).
    #[test]
    fn a_wide_passage_covers_the_chunks_it_holds_half_of() {
        let (chunks, wide) = (chunk(97), chunk(233));
        assert!(
            chunks.len() > wide.len() && wide.len() > 2,
            "{} {}",
            chunks.len(),
            wide.len()
        );
        let held_by = covers(&wide, &chunks);
        let mut covered = vec![0; chunks.len()];
        for (w, ids) in held_by.iter().enumerate() {
            assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
            for &id in ids {
                covered[id as usize] += 1;
                let c = &chunks[id as usize];
                assert_eq!(c.chapter, wide[w].chapter);
                let words: Vec<&str> = c.text.split_whitespace().collect();
                let held = words.iter().filter(|x| wide[w].text.contains(*x)).count();
                assert!(2 * held >= words.len(), "chunk {id} in passage {w}");
            }
        }
        assert!(covered.iter().all(|&n| (1..=2).contains(&n)), "{covered:?}");
        // A chunk no passage holds half of (here one a third of which lies past its chapter's
        // last wide passage) goes to the one that holds most of it.
        let mut shifted = chunks.clone();
        let ch = shifted[1].chapter.clone();
        let len = shifted[1].text.chars().count() as u32;
        let (last, end) = wide
            .iter()
            .enumerate()
            .filter(|(_, w)| w.chapter == ch)
            .map(|(i, w)| (i, w.position.char_offset + w.text.chars().count() as u32))
            .max_by_key(|&(_, e)| e)
            .unwrap();
        shifted[1].position.char_offset = end - len / 3;
        let c = covers(&wide, &shifted);
        let holders: Vec<usize> = (0..wide.len()).filter(|&w| c[w].contains(&1)).collect();
        assert_eq!(holders, [last]);
    }

    /// The rankings are the chunks covered, each at the best score of its passages, and the
    /// deserialized layer is checked against the index it is read with.
    #[test]
    fn rankings_map_passages_to_the_chunks_they_cover() {
        let (chunks, wide) = (chunk(97), chunk(233));
        let config = WideConfig {
            max_chars: 233,
            dense: 0.0,
            sparse: 1.0,
        };
        let layer = WideLayer::build(
            &wide,
            None,
            &chunks,
            config,
            Bm25Params::default(),
            &DenseConfig::default(),
        )
        .unwrap();
        let q = "w1x3y2 w2x5y4";
        let terms = super::super::bm25::query_terms(q);
        let r = layer.rankings(Some(&terms), None, 50).unwrap();
        assert!(r.dense.is_empty());
        let own = Bm25Index::build(wide.iter().map(|c| c.text.as_str()), Bm25Params::default())
            .search(q, 50);
        assert!(own.len() >= 2);
        for &(id, score) in &r.sparse {
            let best = own
                .iter()
                .filter(|(w, _)| layer.covered(*w as usize).contains(&id))
                .map(|&(_, s)| s)
                .fold(f32::MIN, f32::max);
            assert_eq!(score, best, "chunk {id}");
        }
        assert!(r.sparse.windows(2).all(|p| p[0].1 >= p[1].1));
        assert!(layer.validate(chunks.len(), None).is_ok());
        let err = layer.validate(3, None).unwrap_err();
        assert!(err.contains("covers chunk"), "{err}");
        let vectors = vec![vec![0.5f32; 4]; wide.len() - 1];
        let err = WideLayer::build(
            &wide,
            Some(&vectors),
            &chunks,
            WideConfig::default(),
            Bm25Params::default(),
            &DenseConfig::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("wide passages"), "{err}");
    }
}
