//! Tests of [`super`] (`graph.rs`).

use super::*;
use crate::retrieval::chunk::Position;
use crate::rng::Pcg32;

fn chunk(id: u32, speakers: &[&str], text: &str) -> Chunk {
    Chunk {
        id,
        story: "s".into(),
        chapter: "c".into(),
        scene: None,
        position: Position {
            ordinal: id,
            char_offset: 0,
        },
        overlap_chars: 0,
        speakers: speakers.iter().map(|s| s.to_string()).collect(),
        text: text.into(),
    }
}

#[test]
fn alias_files_tsv_and_json() {
    let tsv = "# names\n贾宝玉\t宝玉\t宝二爷\n\nAlice\t\tthe girl \n";
    let got = parse_aliases("a.tsv", tsv.as_bytes()).unwrap();
    assert_eq!(
        got,
        [
            AliasEntry {
                canonical: "贾宝玉".into(),
                aliases: vec!["宝玉".into(), "宝二爷".into()]
            },
            AliasEntry {
                canonical: "Alice".into(),
                aliases: vec!["the girl".into()]
            }
        ]
    );
    let err = parse_aliases("a.tsv", b"ok\n\tx\n").unwrap_err();
    assert!(
        matches!(err, RetrievalError::Parse { line: 2, .. }),
        "{err}"
    );
    let json = r#"{"林黛玉": ["黛玉", "颦儿"]}"#;
    assert_eq!(
        parse_aliases("a.json", json.as_bytes()).unwrap()[0].aliases,
        ["黛玉", "颦儿"]
    );
    let json = r#"[{"canonical": "Hatter", "aliases": ["the Hatter"]}, {"canonical": "Hare"}]"#;
    let got = parse_aliases("a.json", json.as_bytes()).unwrap();
    assert_eq!(got[1].aliases, Vec::<String>::new());
    for bad in [
        r#"{"a": 3}"#,
        r#"[{"aliases": []}]"#,
        r#"[{"canonical": " "}]"#,
    ] {
        let err = parse_aliases("bad.json", bad.as_bytes()).unwrap_err();
        assert!(matches!(err, RetrievalError::Document { .. }), "{err}");
    }
    assert!(parse_aliases("bin", b"\0\0").is_err());
}

#[test]
fn capitalized_names_skip_sentence_starts() {
    let text = "Then the Rabbit ran. The Rabbit stopped, and Alice followed the Rabbit.\n\
                Later Alice saw a rabbit and I'm sure I'm right, I'm told. `Curiouser!' cried Alice. The cat sat. \
                She said VERY loudly that Monday and Monday and Monday came. \
                Down went Bill. Down it went. Down again. Down, down.";
    let names = detect_names([text], 3);
    assert_eq!(names, ["Alice", "Rabbit"]);
    // "Rabbit" appears capitalized mid-sentence 3 times, lower-case once; "Down" only starts
    // sentences; "Monday" is a stopword; "Bill" occurs once.
    assert!(detect_names([text], 4).is_empty());
}

#[test]
fn lexicon_and_mentions() {
    let chunks = vec![
        chunk(0, &["Alice"], "Alice: Also, Al met the Hatter. Hatter!"),
        chunk(1, &[], "宝二爷笑道，宝玉来了。贾宝玉"),
        chunk(2, &[], "Nothing here, alice in lower case."),
    ];
    let aliases = vec![
        AliasEntry {
            canonical: "贾宝玉".into(),
            aliases: vec!["宝玉".into(), "宝二爷".into()],
        },
        AliasEntry {
            canonical: "Al".into(),
            aliases: vec![],
        },
    ];
    let config = GraphConfig {
        detect_names: false,
        ..GraphConfig::default()
    };
    let g = EntityGraph::build(&chunks, &aliases, &config).unwrap();
    let names: Vec<&str> = g.entities().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["贾宝玉", "Al", "Alice"]);
    assert_eq!(g.chunk_entities(0), [(1, 1), (2, 1)]); // "Al" once (not in "Also"), Alice once
    assert_eq!(g.chunk_entities(1), [(0, 3)]);
    assert!(g.chunk_entities(2).is_empty()); // text matching is case-sensitive
    assert_eq!(
        g.query_entities("what did alice and 宝玉 do?"),
        [(0, 1), (2, 1)]
    );
    // A question that capitalises names is matched as written: `al` in `al-hole` is a
    // word, not the name "Al"; one written all in lower case is matched ignoring case.
    assert_eq!(
        g.question_entities("Who met Alice by the al-hole?"),
        [(2, 1)]
    );
    assert_eq!(
        g.question_entities("who met alice by the al-hole?"),
        [(1, 1), (2, 1)]
    );
    assert_eq!(g.question_entities("宝玉 met Al?"), [(0, 1), (1, 1)]);
    assert_eq!(g.text_entities("alice met Al"), [(1, 1)]);
}

/// The same walk on a dense (n+m)² transition matrix, in f64.
fn dense_reference(g: &EntityGraph, seeds: &[(u32, u32)], d: f64, iters: u32) -> Vec<f64> {
    let n = g.chunk_count();
    let nodes = n + g.entities().len();
    let mut w = vec![vec![0f64; nodes]; nodes];
    for (c, links) in (0..n).map(|c| (c, g.chunk_entities(c))) {
        for &(e, m) in links {
            w[c][n + e as usize] = m as f64;
            w[n + e as usize][c] = m as f64;
        }
    }
    let total: f64 = seeds.iter().map(|s| s.1 as f64).sum();
    let mut s = vec![0f64; nodes];
    for &(e, m) in seeds {
        s[n + e as usize] += m as f64 / total;
    }
    let mut p = s.clone();
    for _ in 0..iters {
        let mut next = vec![0f64; nodes];
        let mut dangling = 0.0;
        for u in 0..nodes {
            let out: f64 = w[u].iter().sum();
            if out == 0.0 {
                dangling += p[u];
                continue;
            }
            for v in 0..nodes {
                next[v] += p[u] * w[u][v] / out;
            }
        }
        p = (0..nodes)
            .map(|v| (1.0 - d) * s[v] + d * (next[v] + dangling * s[v]))
            .collect();
    }
    p
}

#[test]
fn pagerank_matches_dense_power_iteration() {
    let mut rng = Pcg32::new(11);
    let names = ["Ana", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal"];
    let chunks: Vec<Chunk> = (0..60)
        .map(|i| {
            let text: Vec<&str> = (0..rng.range(0, 6))
                .map(|_| names[rng.range(0, 7)])
                .collect();
            chunk(i, &[], &format!("x {} y", text.join(" and ")))
        })
        .collect();
    let aliases: Vec<AliasEntry> = names
        .iter()
        .map(|n| AliasEntry {
            canonical: n.to_string(),
            aliases: vec![],
        })
        .collect();
    let g = EntityGraph::build(&chunks, &aliases, &GraphConfig::default()).unwrap();
    for (damping, iters, query) in [
        (0.85, 200, "ana and bob"),
        (0.35, 3, "Cy"),
        (0.85, 200, "Hal Hal Eve"),
    ] {
        let config = GraphConfig {
            damping,
            max_iterations: iters,
            tolerance: 0.0,
            ..GraphConfig::default()
        };
        let seeds = g.query_entities(query);
        assert!(!seeds.is_empty());
        let got = g.personalized_pagerank(&seeds, &config);
        let want = dense_reference(&g, &seeds, f64::from(damping), iters);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(*a) - b).abs() < 1e-5,
                "{query} node {i}: {a} vs {b}"
            );
        }
        let mass: f32 = got.iter().sum();
        assert!((mass - 1.0).abs() < 1e-4, "{mass}");
        // Chunk ranking agrees with the reference where scores are not tied.
        let hits = g.search(query, 10, &config);
        for w in hits.windows(2) {
            assert!(want[w[0].0 as usize] >= want[w[1].0 as usize] - 1e-6);
        }
    }
    assert!(g
        .search("nobody named", 10, &GraphConfig::default())
        .is_empty());
}

#[test]
fn direct_mentions_rank_first() {
    let chunks = vec![
        chunk(0, &[], "Ana met Bob."),
        chunk(1, &[], "Ana, Ana, Ana."),
        chunk(2, &[], "Bob alone."),
        chunk(3, &[], "Cy alone."),
    ];
    let aliases: Vec<AliasEntry> = ["Ana", "Bob", "Cy"]
        .iter()
        .map(|n| AliasEntry {
            canonical: n.to_string(),
            aliases: vec![],
        })
        .collect();
    let g = EntityGraph::build(&chunks, &aliases, &GraphConfig::default()).unwrap();
    let all = GraphConfig {
        max_entity_share: 1.0,
        ..GraphConfig::default()
    };
    let hits = g.search("ana", 10, &all);
    let order: Vec<u32> = hits.iter().map(|h| h.0).collect();
    assert_eq!(order, [1, 0, 2]); // Cy's chunk is unreachable
                                  // Ana is in half the chunks: above a 0.4 share she is no seed; Cy (1 of 4) still is.
    let strict = GraphConfig {
        max_entity_share: 0.4,
        ..GraphConfig::default()
    };
    assert!(g.search("ana", 10, &strict).is_empty());
    let cy: Vec<u32> = g
        .search("ana and cy", 10, &strict)
        .iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(cy, [3]);
}

#[test]
fn serde_round_trip_rebuilds_the_matcher() {
    let chunks = vec![chunk(0, &["Alice"], "Alice: hi")];
    let g = EntityGraph::build(&chunks, &[], &GraphConfig::default()).unwrap();
    let bytes = postcard::to_allocvec(&g).unwrap();
    let back: EntityGraph = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back.query_entities("ALICE?"), [(0, 1)]);
    let bad = GraphData {
        entities: g.entities.clone(),
        chunk_entities: vec![vec![(5, 1)]],
    };
    let bytes = postcard::to_allocvec(&bad).unwrap();
    assert!(postcard::from_bytes::<EntityGraph>(&bytes).is_err());
}

#[test]
fn a_group_of_speakers_is_no_entity() {
    let chunks = [
        chunk(0, &["Hamlet"], "Hamlet: All is not well."),
        chunk(1, &["All"], "All: Lights, lights, lights!"),
        chunk(2, &["Mar. and Ber"], "Mar. and Ber: Longer, longer."),
    ];
    let g = EntityGraph::build(&chunks, &[], &GraphConfig::default()).unwrap();
    let names: Vec<&str> = g.entities().iter().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&"Hamlet"), "{names:?}");
    assert!(
        !names.contains(&"All") && !names.contains(&"Mar. and Ber"),
        "{names:?}"
    );
    // The verse's capitalised "All" names no one.
    assert!(g.text_entities("All is not well").is_empty());
}
