//! Tests of [`super::StoryIndex`]: build, search, the blob.

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
        "key", "door", "garden", "rabbit", "late", "hatter", "tea", "raven", "dormouse", "treacle",
        "alice", "riddle",
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
        let near =
            |p: &Hit| !p.neighbor && (-2..=2).any(|off| index.neighbor(p.id, off) == Some(h.id));
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

/// A version-3 blob (the payload without the fusion method, the lexicon and the wide
/// passages, its last three bytes here) reads with RRF and searches as the index it was written from did with RRF.
#[test]
fn version_3_blobs_read_as_rrf() {
    let mut config = small_config();
    config.fusion.method = FusionMethod::Convex;
    let index = build(config);
    let v6 = index.to_bytes().unwrap();
    assert_eq!(
        v6[v6.len() - 3..],
        [1, 0, 0],
        "Convex is postcard's variant 1, then `None` for the lexicon and the wide passages"
    );
    let payload = &v6[HEADER_LEN..v6.len() - 3];
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
    // Written again, it is a blob of this build's version.
    let again = back.to_bytes().unwrap();
    assert_eq!(again[8..12], FORMAT_VERSION.to_le_bytes());
}

/// Word vectors of a stand-in encoder as wide as [`embed`]'s: `riddle` and `puzzle` share a
/// direction, every other word one of the 12 others.
fn word_vec(word: &str) -> Vec<f32> {
    let mut v = vec![0.0; 13];
    match word {
        "riddle" | "puzzle" => v[0] = 1.0,
        w => v[1 + w.bytes().map(usize::from).sum::<usize>() % 12] = 1.0,
    }
    v
}

fn with_lexicon(index: &mut StoryIndex) {
    let story = story_words(index.chunks().iter().map(|c| c.text.as_str()));
    let (terms, words): (Vec<String>, Vec<String>) = story.words.into_iter().unzip();
    let vecs: Vec<Vec<f32>> = words.iter().map(|w| word_vec(w)).collect();
    let lexicon = Lexicon::new(terms, &vecs, story.names, ExpansionConfig::default()).unwrap();
    index.set_lexicon(Some(lexicon)).unwrap();
}

/// A question word the story never uses finds, through the lexicon, the story's word it is
/// near (`puzzle` → `riddle`); the lexicon survives the blob, and a version-4 blob (without
/// it) reads as an index without expansion.
#[test]
fn expansion_finds_the_story_word_near_the_question_word() {
    let mut index = build(small_config());
    let q = "Who asked a puzzle?";
    let riddle = index
        .chunks()
        .iter()
        .find(|c| c.text.contains("asked a riddle"))
        .unwrap()
        .id;
    // Without the lexicon BM25 has only `ask`, in one chunk: the riddle's, by luck of wording.
    let plain = index.search("a puzzle?", None, 3, Sources::SPARSE).unwrap();
    assert!(plain.is_empty(), "{plain:?}");
    assert!(index.expansion_words(q).is_empty());
    with_lexicon(&mut index);
    let words: WordVectors = index
        .expansion_words("a puzzle?")
        .into_iter()
        .map(|w| {
            let v = word_vec(&w);
            (w, v)
        })
        .collect();
    assert_eq!(words.len(), 1, "{words:?}");
    let hits = index
        .search_expanded("a puzzle?", None, &words, 3, Sources::SPARSE)
        .unwrap();
    assert_eq!(hits.first().map(|h| h.id), Some(riddle), "{hits:?}");
    // The blob keeps the lexicon: the same hits read back.
    let bytes = index.to_bytes().unwrap();
    let back = StoryIndex::from_bytes(&bytes).unwrap();
    assert_eq!(back.lexicon(), index.lexicon());
    let again = back
        .search_expanded("a puzzle?", None, &words, 3, Sources::SPARSE)
        .unwrap();
    assert_eq!(again, hits);
    // Version 4: the same payload without its last two bytes (`None`, `None`), read without
    // expansion.
    let mut plain_index = build(small_config());
    plain_index.set_lexicon(None).unwrap();
    let v6 = plain_index.to_bytes().unwrap();
    let mut v4 = frame(&v6[HEADER_LEN..v6.len() - 2]);
    v4[8..12].copy_from_slice(&FORMAT_VERSION_NO_LEXICON.to_le_bytes());
    let old = StoryIndex::from_bytes(&v4).unwrap();
    assert!(old.lexicon().is_none());
    assert_eq!(old.chunks(), index.chunks());
    // A lexicon of another width than the dense vectors is refused, when set and when read.
    let narrow = Lexicon::new(
        vec!["riddl".into()],
        &[vec![1.0; 5]],
        vec![],
        ExpansionConfig::default(),
    )
    .unwrap();
    let err = plain_index.set_lexicon(Some(narrow.clone())).unwrap_err();
    assert!(err.to_string().contains("width 5"), "{err}");
    let payload = postcard::to_allocvec(&IndexRef {
        chunks: &index.chunks,
        bm25: &index.bm25,
        graph: &index.graph,
        dense: index.dense.as_ref(),
        config: &index.config,
        lexicon: Some(&narrow),
        wide: None,
    })
    .unwrap();
    let err = StoryIndex::from_bytes(&frame(&payload)).unwrap_err();
    assert!(
        err.to_string().contains("lexicon vectors of width 5"),
        "{err}"
    );
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
    assert!(msg(&bad).contains("reads versions 3 to 6"));
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
        lexicon: None,
        wide: None,
    })
    .unwrap();
    assert!(msg(&reseal(&payload)).contains("BM25 index covers"));
}

/// The small index with wide passages of at most 260 characters (the chunks are cut at 120),
/// their vectors at weight `dense` and their BM25 ranking at `sparse`; and the wide passages.
fn with_wide(dense: f32, sparse: f32) -> (StoryIndex, Vec<Chunk>) {
    let config = small_config();
    let mut index = build(config.clone());
    let wide = chunk_corpus(
        &[("alice.txt", STORY.as_bytes())],
        &IngestOptions::default(),
        &ChunkConfig {
            max_chars: 260,
            ..config.chunk.clone()
        },
    )
    .unwrap();
    let vectors: Vec<Vec<f32>> = wide.iter().map(|c| embed(&c.text)).collect();
    let wide_config = WideConfig {
        max_chars: 260,
        dense,
        sparse,
    };
    let layer = WideLayer::build(
        &wide,
        Some(&vectors),
        index.chunks(),
        wide_config,
        config.bm25,
        &config.dense,
    )
    .unwrap();
    index.set_wide(Some(layer)).unwrap();
    (index, wide)
}

/// Min-max scaled scores per chunk of the wide passages' `ranking`, each chunk at the best of
/// the passages covering it (0 where none of them is ranked): the reference for fusion.
fn scaled_per_chunk(index: &StoryIndex, ranking: &[(u32, f32)]) -> Vec<f32> {
    let wide = index.wide().unwrap();
    let mut best: Vec<Option<f32>> = vec![None; index.chunks().len()];
    for &(w, s) in ranking {
        for &id in wide.covered(w as usize) {
            let b = &mut best[id as usize];
            *b = Some(b.map_or(s, |b: f32| b.max(s)));
        }
    }
    let (lo, hi) = best
        .iter()
        .flatten()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &s| {
            (l.min(s), h.max(s))
        });
    best.iter()
        .map(|b| match *b {
            None => 0.0,
            Some(s) if hi > lo => (s - lo) / (hi - lo),
            Some(_) => 1.0,
        })
        .collect()
}

/// With wide passages, a chunk's fused score is its own plus the weight times the min-max
/// scaled best BM25 score of the wide passages that cover it; a source searched alone reads no
/// wide passage; the layer survives the blob, and a version-5 blob (without it) reads as an
/// index without wide passages.
#[test]
fn wide_passages_add_their_scores_to_the_chunks_they_cover() {
    let (mut index, wide) = with_wide(0.0, 0.6);
    let mut plain = build(small_config());
    let n = index.chunks().len();
    assert!(wide.len() > 1 && wide.len() < n, "{} of {n}", wide.len());
    let q = "What did the Dormouse tell about the treacle well and the three sisters?";
    let v = embed(q);
    let mut cfg = index.config().fusion.clone();
    cfg.neighbors = 0;
    let graph = index.config().graph.clone();
    plain.set_search_config(cfg.clone(), graph.clone());
    index.set_search_config(cfg.clone(), graph.clone());
    let base = plain.search(q, Some(&v), n, Sources::ALL).unwrap();
    let hits = index.search(q, Some(&v), n, Sources::ALL).unwrap();
    let reference = Bm25Index::build(wide.iter().map(|c| c.text.as_str()), index.config().bm25);
    let sparse = scaled_per_chunk(&index, &reference.search(q, wide.len()));
    let mut lifted = 0;
    for h in &hits {
        let own = base
            .iter()
            .find(|b| b.id == h.id)
            .map_or(0.0, |b| b.fusion_score);
        let want = own + 0.6 * sparse[h.id as usize];
        assert!(
            (h.fusion_score - want).abs() < 1e-5,
            "chunk {}: {} against {want}",
            h.id,
            h.fusion_score
        );
        lifted += usize::from(h.fusion_score > own + 1e-6);
    }
    assert!(lifted > 1, "{hits:?}");
    // The wide passages' vectors count when weighed: the scores move again.
    let (mut dense, _) = with_wide(0.5, 0.6);
    dense.set_search_config(cfg.clone(), graph.clone());
    let moved = dense.search(q, Some(&v), n, Sources::ALL).unwrap();
    assert!(moved.iter().any(|m| hits
        .iter()
        .any(|h| h.id == m.id && h.fusion_score < m.fusion_score - 1e-3)));
    // A source searched alone gives its own ranking.
    for sources in [Sources::DENSE, Sources::SPARSE] {
        assert_eq!(
            index.search(q, Some(&v), 3, sources).unwrap(),
            plain.search(q, Some(&v), 3, sources).unwrap()
        );
    }
    // The blob keeps the wide passages: the same hits read back.
    let mut back = StoryIndex::from_bytes(&index.to_bytes().unwrap()).unwrap();
    assert_eq!(back.wide().map(WideLayer::len), Some(wide.len()));
    back.set_search_config(cfg, graph);
    assert_eq!(back.search(q, Some(&v), n, Sources::ALL).unwrap(), hits);
    // Version 5: the payload without its last byte (`None`), read without wide passages.
    let v6 = plain.to_bytes().unwrap();
    let mut v5 = frame(&v6[HEADER_LEN..v6.len() - 1]);
    v5[8..12].copy_from_slice(&FORMAT_VERSION_NO_WIDE.to_le_bytes());
    let old = StoryIndex::from_bytes(&v5).unwrap();
    assert!(old.wide().is_none());
    assert_eq!(old.chunks(), index.chunks());
}

/// Wide passages that name a chunk the index lacks, or carry vectors of another width, are
/// refused when set and when read.
#[test]
fn wide_passages_are_checked_against_the_index() {
    let (index, _) = with_wide(0.3, 0.2);
    let mut other = build(IndexConfig {
        chunk: ChunkConfig {
            max_chars: 400,
            overlap_segments: 1,
        },
        ..small_config()
    });
    assert!(other.chunks().len() < index.chunks().len());
    let bytes = index.to_bytes().unwrap();
    let mut back = StoryIndex::from_bytes(&bytes).unwrap();
    let layer = back.wide.take().unwrap();
    let err = other.set_wide(Some(layer)).unwrap_err();
    assert!(err.to_string().contains("covers chunk"), "{err}");
    let payload = postcard::to_allocvec(&IndexRef {
        chunks: &other.chunks,
        bm25: &other.bm25,
        graph: &other.graph,
        dense: other.dense.as_ref(),
        config: &other.config,
        lexicon: None,
        wide: index.wide(),
    })
    .unwrap();
    let err = StoryIndex::from_bytes(&frame(&payload)).unwrap_err();
    assert!(err.to_string().contains("wide passage"), "{err}");
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
    let err = chunk_corpus(&[], &IngestOptions::default(), &ChunkConfig::default()).unwrap_err();
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
