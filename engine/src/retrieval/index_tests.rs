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

/// A version-3 blob (the payload without the fusion method and the lexicon, its last two
/// bytes here) reads with RRF and searches as the index it was written from did with RRF.
#[test]
fn version_3_blobs_read_as_rrf() {
    let mut config = small_config();
    config.fusion.method = FusionMethod::Convex;
    let index = build(config);
    let v5 = index.to_bytes().unwrap();
    assert_eq!(
        v5[v5.len() - 2..],
        [1, 0],
        "Convex is postcard's variant 1, then `None` for the lexicon"
    );
    let payload = &v5[HEADER_LEN..v5.len() - 2];
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
    // Written again, it is a version-5 blob.
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
    // Version 4: the same payload without its last byte (`None`), read without expansion.
    let mut plain_index = build(small_config());
    plain_index.set_lexicon(None).unwrap();
    let v5 = plain_index.to_bytes().unwrap();
    let mut v4 = frame(&v5[HEADER_LEN..v5.len() - 1]);
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
    assert!(msg(&bad).contains("reads versions 3 to 5"));
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
