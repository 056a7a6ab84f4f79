//! `index-builder index` end to end with the real all-MiniLM-L6-v2 (from the asset cache): a
//! small corpus is chunked, embedded, indexed and written as the bundle's index part; the
//! bundle is reopened (shards verified) and searched. Model and index parts are written in
//! either order into one bundle and each replaces only its own part. Bad input is an error that
//! names the file: an empty corpus, a binary file, invalid UTF-8, a gigantic line, an unknown
//! embedder format.

#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use index_builder::{build_index, build_model, IndexOptions, ModelOptions};
use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::format::bundle::{IndexBundle, ModelBundle, Quant};
use lorekeeper_engine::retrieval::Sources;
use lorekeeper_engine::CpuBackend;

fn minilm() -> PathBuf {
    let cache = std::env::var("LOREKEEPER_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/lorekeeper")
        });
    let d = cache.join("assets/all-minilm-l6-v2");
    assert!(
        d.join("model.safetensors").exists(),
        "{} is missing: run `python3 scripts/fetch-assets.py minilm` (test.sh does)",
        d.display()
    );
    d
}

const STORY: &str = "CHAPTER I. The Lighthouse\n\n\
The keeper of the lighthouse was an old man named Tobias, who had lived on the rock for forty years.\n\n\
Every evening Tobias climbed the ninety-nine steps and lit the great lamp with a single match.\n\n\
His only companion was a grey cat called Marlowe, who slept in the oil store.\n\n\
CHAPTER II. The Storm\n\n\
In the winter of the great storm a fishing boat called the Heron struck the reef below the tower.\n\n\
Tobias rowed out in the dark and brought back three sailors, though his own boat was smashed.\n\n\
The sailors gave him a silver compass, which he kept on the mantelpiece until he died.\n\n\
CHAPTER III. The Letter\n\n\
Years later a letter arrived from the harbour master, asking Tobias to leave the rock forever.\n\n\
He refused, and wrote back that Marlowe the cat would never forgive him.\n";

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

#[test]
fn index_search_and_parts_in_either_order() {
    let tmp = tempfile::tempdir().expect("tmp");
    let story = write(tmp.path(), "story.txt", STORY.as_bytes());
    let out = tmp.path().join("bundle");

    // Index first, then the model: both parts load afterwards. Small chunks: about one
    // paragraph each.
    let mut o = IndexOptions::new(vec![story.clone()], Some(minilm()), &out);
    o.chunk.max_chars = 120;
    o.chunk.overlap_segments = 0;
    let s = build_index(&CpuBackend, &o).expect("index");
    assert!(s.chunks >= 3 && s.dim == 384, "{s:?}");
    // Wide passages (1,000 characters: a chapter each here), BM25 only for an English story.
    assert!(s.wide_passages >= 3 && s.wide_passages < s.chunks, "{s:?}");
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen3-lora/base");
    build_model(&ModelOptions::new(&base, Quant::Q4, &out)).expect("model");
    ModelBundle::open_dir(&out).expect("model part");
    let ix = IndexBundle::open_dir(&out).expect("index part survives the model build");
    let wide = ix.story.wide().expect("wide passages in the blob");
    assert_eq!(wide.len(), s.wide_passages);
    assert!(!wide.has_vectors());

    // Search: the embedder stored in the bundle embeds the query.
    let e = Embedder::from_index(&ix, &CpuBackend)
        .expect("embedder")
        .expect("dense");
    for (q, want) in [
        ("What did the sailors give the keeper?", "silver compass"),
        ("Who was the cat?", "Marlowe"),
        ("Which boat hit the reef?", "Heron"),
    ] {
        let v = pollster::block_on(e.embed_query(&CpuBackend, q)).expect("embed");
        let hits = ix
            .story
            .search(q, Some(&v), 3, Sources::ALL)
            .expect("search");
        // Fused: among the first two. On this six-chunk story BM25 ranks "keeper" (in one
        // chunk) over "sailors" for the first question, and convex fusion keeps that margin;
        // the dense ranking below must put the answer first.
        let at = hits.iter().position(|h| h.text.contains(want));
        assert!(at.is_some_and(|p| p < 2), "{q}: {:#?}", hits);
        assert!(hits[0].dense_rank.is_some());
        let dense = ix
            .story
            .search(q, Some(&v), 1, Sources::DENSE)
            .expect("dense");
        assert!(dense[0].text.contains(want), "dense {q}: {dense:#?}");
    }
    assert_eq!(ix.story.chunks()[0].chapter, "CHAPTER I. The Lighthouse");

    // Query expansion (`retrieval::expand`): the story's words were embedded with the index,
    // so a question word the story never uses reaches BM25 through its nearest story words.
    assert!(s.lexicon_words > 40, "{s:?}");
    let q = "the mariners";
    let words = ix.story.expansion_words(q);
    assert_eq!(words, ["mariners"]);
    let (v, wv) = pollster::block_on(e.embed_query_words(&CpuBackend, q, &words)).expect("embed");
    assert_eq!(
        v,
        pollster::block_on(e.embed_query(&CpuBackend, q)).expect("q")
    );
    let plain = ix.story.search(q, None, 3, Sources::SPARSE).expect("bm25");
    assert!(plain.is_empty(), "{plain:#?}");
    let expanded = ix
        .story
        .search_expanded(q, None, &wv, 3, Sources::SPARSE)
        .expect("expanded");
    assert!(
        expanded.first().is_some_and(|h| h.text.contains("sailors")),
        "{expanded:#?}"
    );

    // Rebuilding the index replaces only the index part; the model still loads.
    let model_manifest = ModelBundle::open_dir(&out).expect("m").model().clone();
    build_index(&CpuBackend, &IndexOptions::new(vec![story], None, &out)).expect("sparse index");
    let ix = IndexBundle::open_dir(&out).expect("index");
    assert!(!ix.part.dense && Embedder::from_index(&ix, &CpuBackend).expect("e").is_none());
    let m = ModelBundle::open_dir(&out).expect("model");
    assert_eq!(m.model().tensors.len(), model_manifest.tensors.len());
    let files: Vec<String> = std::fs::read_dir(&out)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !files.iter().any(|f| f.starts_with("index-0")),
        "old index shards left: {files:?}"
    );
}

#[test]
fn bad_corpora_and_embedders_are_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("bundle");
    let err = |files: Vec<PathBuf>, emb: Option<PathBuf>| match build_index(
        &CpuBackend,
        &IndexOptions::new(files, emb, &out),
    ) {
        Ok(_) => "<accepted>".to_string(),
        Err(e) => e.to_string(),
    };
    let empty = write(tmp.path(), "empty.txt", b"   \n\n");
    let e = err(vec![empty], None);
    assert!(e.contains("empty.txt"), "{e}");
    let binary = write(
        tmp.path(),
        "image.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0",
    );
    let e = err(vec![binary], None);
    assert!(e.contains("image.png"), "{e}");
    let bad_utf8 = write(tmp.path(), "latin1.txt", b"line one\nna\xefve line two\n");
    let e = err(vec![bad_utf8], None);
    assert!(e.contains("latin1.txt") && e.contains("line 2"), "{e}");
    let mut huge = b"start\n".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 2 << 20));
    let huge = write(tmp.path(), "huge.txt", &huge);
    let e = err(vec![huge], None);
    assert!(e.contains("huge.txt") && e.contains("line 2"), "{e}");
    let story = write(tmp.path(), "story.txt", STORY.as_bytes());
    let not_emb = write(tmp.path(), "weights.bin", b"not a model");
    let e = err(vec![story], Some(not_emb));
    assert!(
        e.contains("weights.bin") && e.contains("unknown embedder format"),
        "{e}"
    );
    assert!(
        !out.join("manifest.json").exists(),
        "a failed build committed a manifest"
    );
}

const CN_STORY: &str = "第一回 灯塔\n\n老人多比亚守着海边的灯塔，已经四十年了。\n\n每天傍晚，他爬上九十九级台阶，用一根火柴点亮大灯。\n\n\
他唯一的伙伴是一只灰猫，名叫墨罗，睡在油库里。\n\n第二回 风暴\n\n那年冬天的大风暴里，一条名叫苍鹭的渔船撞上了塔下的礁石。\n\n\
多比亚在黑夜里划船出去，救回了三个水手，自己的小船却碎了。\n\n水手们送给他一只银罗盘，他一直放在壁炉架上。\n";

#[test]
fn chinese_index_with_multilingual_e5() {
    let e5 = minilm()
        .parent()
        .map(|p| p.join("multilingual-e5-small/e5-small-q4.bin"))
        .expect("assets");
    assert!(
        e5.exists(),
        "{} is missing: run `python3 scripts/fetch-assets.py e5` (test.sh does)",
        e5.display()
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let story = write(tmp.path(), "lighthouse-zh.txt", CN_STORY.as_bytes());
    let out = tmp.path().join("bundle");
    let mut o = IndexOptions::new(vec![story], Some(e5), &out);
    o.chunk.max_chars = 40;
    o.chunk.overlap_segments = 0;
    let s = build_index(&CpuBackend, &o).expect("index");
    assert!(s.chunks >= 5 && s.dim == 384, "{s:?}");
    let ix = IndexBundle::open_dir(&out).expect("index part");
    let e = Embedder::from_index(&ix, &CpuBackend)
        .expect("embedder")
        .expect("dense");
    assert_eq!(e.spec.kind, "e5s1");
    assert_eq!(ix.story.chunks()[0].chapter, "第一回 灯塔");
    // No wide passages for a story mostly in CJK (`WideConfig::for_fusion`).
    assert!(ix.story.wide().is_none() && s.wide_passages == 0, "{s:?}");
    // A story mostly in CJK keeps RRF and gets no lexicon: its BM25 terms are bigrams.
    assert!(
        s.lexicon_words == 0 && ix.story.lexicon().is_none(),
        "{s:?}"
    );
    for (q, want) in [
        ("水手们送了什么礼物？", "银罗盘"),
        ("猫叫什么名字？", "墨罗"),
    ] {
        let v = pollster::block_on(e.embed_query(&CpuBackend, q)).expect("embed");
        let dense = ix
            .story
            .search(q, Some(&v), 1, Sources::DENSE)
            .expect("dense");
        assert!(dense[0].text.contains(want), "dense {q}: {dense:#?}");
    }
}

fn text_asset(name: &str) -> Vec<u8> {
    let p = minilm().join("../texts").join(name);
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `python3 scripts/fetch-assets.py alice tempest hamlet botchan` (test.sh does)",
            p.display()
        )
    })
}

/// The Gutenberg plays of the evaluation sets read as scripts: acts are chapters, scenes are
/// scenes, every speech has the speaker a reader names (abbreviated cues spelled out from the
/// cast list); the novels stay prose.
#[test]
fn plays_from_the_asset_cache_read_as_scripts() {
    use lorekeeper_engine::retrieval::{ingest, IngestOptions, Segment};
    use std::collections::BTreeSet;
    let read = |name: &str| -> Vec<Segment> {
        ingest(name, &text_asset(name), &IngestOptions::default()).expect(name)
    };
    let speakers = |segs: &[Segment]| -> BTreeSet<String> {
        segs.iter().filter_map(|s| s.speaker.clone()).collect()
    };
    let places = |segs: &[Segment]| -> BTreeSet<(String, Option<String>)> {
        segs.iter()
            .map(|s| (s.chapter.clone(), s.scene.clone()))
            .collect()
    };

    let tempest = read("tempest_gut.txt");
    let acts: BTreeSet<&str> = tempest.iter().map(|s| s.chapter.as_str()).collect();
    assert_eq!(
        acts,
        ["ACT 1", "ACT 2", "ACT 3", "ACT 4", "ACT 5", "tempest_gut"].into()
    );
    assert_eq!(places(&tempest).len(), 10, "{:?}", places(&tempest));
    let who = speakers(&tempest);
    for name in [
        "Prospero",
        "Miranda",
        "Ariel",
        "Caliban",
        "Boatswain",
        "Gonzalo",
    ] {
        assert!(who.contains(name), "{name} not among {who:?}");
    }
    let spoken = tempest.iter().filter(|s| s.speaker.is_some()).count();
    assert!(
        spoken * 10 > tempest.len() * 7,
        "{spoken} of {}",
        tempest.len()
    );

    let hamlet = read("hamlet_gut.txt");
    let who = speakers(&hamlet);
    for name in [
        "Hamlet",
        "Horatio",
        "Bernardo",
        "Rosencrantz",
        "Guildenstern",
        "Polonius",
    ] {
        assert!(who.contains(name), "{name} not among {who:?}");
    }
    assert!(!who.contains("Hor") && !who.contains("Lords"), "{who:?}");
    assert!(places(&hamlet).len() >= 20, "{:?}", places(&hamlet));

    for novel in ["alice29.txt", "botchan.txt"] {
        assert!(speakers(&read(novel)).is_empty(), "{novel} read as a play");
    }
}
