//! Tests of [`super`] (`corpus.rs`).

use super::*;

fn text(name: &str, s: &str) -> Vec<Segment> {
    ingest(name, s.as_bytes(), &IngestOptions::default()).unwrap()
}

fn chapters(segs: &[Segment]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for s in segs {
        if out.last() != Some(&s.chapter.as_str()) {
            out.push(&s.chapter);
        }
    }
    out
}

#[test]
fn english_chapter_headings() {
    let src = "Front matter.\n\n\
               CHAPTER I. Down the Rabbit-Hole\n\nAlice was tired.\n\n\
               CHAPTER II.\n\nThe Pool of Tears\n\nCuriouser and curiouser.\n\n\
               Chapter 3\n\nThis paragraph has two lines\nso it is not a title.\n\n\
               Chapter One was over, said nobody.\n\n\
               chapter iv: A Caucus-Race\nRunning about.\n";
    let segs = text("books/alice.txt", src);
    assert_eq!(
        chapters(&segs),
        [
            "alice",
            "CHAPTER I. Down the Rabbit-Hole",
            "CHAPTER II. The Pool of Tears",
            "Chapter 3",
            "chapter iv: A Caucus-Race"
        ]
    );
    assert!(segs.iter().all(|s| s.story == "alice"));
    let ch3: Vec<_> = segs.iter().filter(|s| s.chapter == "Chapter 3").collect();
    assert_eq!(
        ch3[0].text,
        "This paragraph has two lines so it is not a title."
    );
    assert_eq!(ch3[1].text, "Chapter One was over, said nobody.");
}

#[test]
fn markdown_headings_pick_the_repeated_level() {
    let src = "# The Book\n\nPreface text.\n\n## Chapter A\n\nOne.\n\n### Night\n\nTwo.\n\n\
               ## Chapter B\n\nThree.\n";
    let segs = text("b.md", src);
    let got: Vec<_> = segs
        .iter()
        .map(|s| (s.chapter.as_str(), s.scene.as_deref(), s.text.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("b", None, "Preface text."),
            ("Chapter A", None, "One."),
            ("Chapter A", Some("Night"), "Two."),
            ("Chapter B", None, "Three.")
        ]
    );
    // In plain text `#` lines are text.
    assert_eq!(
        text("b.txt", "# not a heading\n")[0].text,
        "# not a heading"
    );
}

#[test]
fn chinese_headings_and_joining() {
    let src = "第一回　甄士隐梦幻识通灵　贾雨村风尘怀闺秀\n\n　　此开卷第一回也。\n作者自云。\n\n\
               第十二回\n\n王熙凤毒设相思局\n\n　　话说凤姐。\n\n第1章 开始\n正文。\n";
    let segs = text("hlm.txt", src);
    assert_eq!(
        chapters(&segs),
        [
            "第一回 甄士隐梦幻识通灵 贾雨村风尘怀闺秀",
            "第十二回 王熙凤毒设相思局",
            "第1章 开始"
        ]
    );
    assert_eq!(segs[0].text, "此开卷第一回也。作者自云。");
}

/// A plain-text play: acts, scenes, speaker cues in three shapes, stage directions.
#[test]
fn plays_have_acts_scenes_and_speakers() {
    let mut src = String::from(
        "THE STORM\n\nPERSONS.\n\nProspero, a duke.\nMiranda, his daughter.\n\n\
         ACT I.\n\nScene I. On a ship at sea.\n\n[Thunder. Enter a MASTER]\n\n",
    );
    for k in 0..12 {
        src.push_str(&format!(
            "MASTER.\nBoatswain, speech {k}!\nA second verse line.\n\n\
             Pros. Line {k} on the cue's own line.\n\n"
        ));
    }
    src.push_str("ACT II. SCENE 1. The island\n\nMIR.\nO, I have suffered.\n\n");
    src.push_str("MIR.\nWith those that I saw suffer!\n[Aside]\nA brave vessel.\n\nExeunt.\n");
    let segs = text("storm.txt", &src);
    let got: Vec<_> = segs
        .iter()
        .map(|s| {
            (
                s.chapter.as_str(),
                s.scene.as_deref(),
                s.speaker.as_deref(),
                s.text.as_str(),
            )
        })
        .collect();
    let act1 = Some("Scene I. On a ship at sea.");
    assert_eq!(got[3], ("ACT I.", act1, None, "[Thunder. Enter a MASTER]"));
    assert_eq!(
        got[4],
        (
            "ACT I.",
            act1,
            Some("Master"),
            "Boatswain, speech 0! A second verse line."
        )
    );
    assert_eq!(
        got[5],
        (
            "ACT I.",
            act1,
            Some("Prospero"),
            "Line 0 on the cue's own line."
        )
    );
    let act2 = Some("SCENE 1. The island");
    assert_eq!(
        &got[got.len() - 3..],
        [
            ("ACT II.", act2, Some("Miranda"), "O, I have suffered."),
            (
                "ACT II.",
                act2,
                Some("Miranda"),
                "With those that I saw suffer! [Aside] A brave vessel."
            ),
            ("ACT II.", act2, None, "Exeunt.")
        ]
    );
    // The cast list before the first act is text of the story.
    assert_eq!(got[2].3, "Prospero, a duke. Miranda, his daughter.");
}

#[test]
fn paragraphs_scenes_hyphens_and_script_lines() {
    let src = "  First para line one\nline two of WAISTCOAT-\nPOCKET fame.\n  Indented starts anew.\n\n\
               *   *   *\n\nAfter the break.\n\n[name=\"Paimon\"]  Let's go!\n[name=\"Traveler\"] OK.\n";
    let segs = text("s.txt", src);
    let got: Vec<_> = segs
        .iter()
        .map(|s| (s.scene.as_deref(), s.speaker.as_deref(), s.text.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                None,
                None,
                "First para line one line two of WAISTCOAT-POCKET fame."
            ),
            (None, None, "Indented starts anew."),
            (Some("2"), None, "After the break."),
            (Some("2"), Some("Paimon"), "Let's go!"),
            (Some("2"), Some("Traveler"), "OK.")
        ]
    );
}

#[test]
fn gutenberg_header_and_footer() {
    let src = "The Project Gutenberg eBook of X\nlicence blah\n\
               *** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nStory text.\n\n\
               *** END OF THE PROJECT GUTENBERG EBOOK X ***\nMore licence.\n";
    let segs = text("x.txt", src);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].text, "Story text.");
    // Without markers nothing is cut; with only a start marker the tail stays.
    assert_eq!(strip_gutenberg("a\nb\n"), "a\nb\n");
    assert_eq!(strip_gutenberg("h\n***START OF X\nbody\n"), "body\n");
    // Only licence text: empty corpus.
    let err = ingest(
        "g.txt",
        b"licence\n*** START OF X ***\n\n*** END OF X ***\nlicence\n",
        &IngestOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, RetrievalError::EmptyCorpus(ref f) if f == "g.txt"),
        "{err}"
    );
}

#[test]
fn commentary_is_stripped() {
    assert_eq!(strip_commentary("甲【批：好】乙【外【内】外】丙"), "甲乙丙");
    assert_eq!(strip_commentary("甲【未闭合"), "甲【未闭合");
    assert_eq!(strip_commentary("甲】乙"), "甲】乙");
    let opts = IngestOptions {
        strip_commentary: true,
        ..IngestOptions::default()
    };
    let segs = ingest(
        "h.txt",
        "第一回\n\n【只有批语】\n\n正文【批】。\n".as_bytes(),
        &opts,
    )
    .unwrap();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].text, "正文。");
}

#[test]
fn bad_bytes_are_errors_with_file_and_line() {
    let opts = IngestOptions::default();
    let err = ingest("a.txt", b"ok\nfine\nbad \xff here\n", &opts).unwrap_err();
    assert!(
        matches!(err, RetrievalError::InvalidUtf8 { ref file, line: 3, byte: 12 } if file == "a.txt"),
        "{err}"
    );
    assert!(err.to_string().contains("a.txt: line 3"), "{err}");

    let err = ingest("b.bin", b"text\0more", &opts).unwrap_err();
    assert!(
        matches!(err, RetrievalError::Binary { ref file, .. } if file == "b.bin"),
        "{err}"
    );
    let noisy: Vec<u8> = (0..200u8)
        .map(|i| if i % 5 == 0 { 0x01 } else { b'a' })
        .collect();
    let err = ingest("c.dat", &noisy, &opts).unwrap_err();
    assert!(matches!(err, RetrievalError::Binary { .. }), "{err}");
    // A few control characters (form feeds, an escape) are still text.
    let mut mostly: Vec<u8> = vec![b'a'; 200];
    mostly[10] = 0x1b;
    mostly[20] = 0x0c;
    assert!(ingest("d.txt", &mostly, &opts).is_ok());

    let small = IngestOptions {
        max_line_bytes: 10,
        ..IngestOptions::default()
    };
    let err = ingest("e.txt", b"short\nthis line is too long\n", &small).unwrap_err();
    assert!(
        matches!(
            err,
            RetrievalError::LineTooLong {
                line: 2,
                bytes: 21,
                limit: 10,
                ..
            }
        ),
        "{err}"
    );
    let huge = vec![b'x'; DEFAULT_MAX_LINE_BYTES + 1];
    let err = ingest("f.txt", &huge, &opts).unwrap_err();
    assert!(
        matches!(err, RetrievalError::LineTooLong { line: 1, .. }),
        "{err}"
    );

    for empty in [&b""[..], b"  \n\n\t\n", b"\xef\xbb\xbf"] {
        let err = ingest("g.txt", empty, &opts).unwrap_err();
        assert!(matches!(err, RetrievalError::EmptyCorpus(_)), "{err}");
    }
}

#[test]
fn jsonl_records() {
    let src = r#"{"story":"S","chapter":"1","scene":"gate","speaker":"Paimon","text":" Hi  there "}

{"chapter":2,"text":"Narration.","speaker":null}
{"chapter":"2","text":"   "}
"#;
    let segs = text("script.jsonl", src);
    assert_eq!(
        segs,
        [
            Segment {
                story: "S".into(),
                chapter: "1".into(),
                scene: Some("gate".into()),
                speaker: Some("Paimon".into()),
                text: "Hi there".into()
            },
            Segment {
                story: "script".into(),
                chapter: "2".into(),
                scene: None,
                speaker: None,
                text: "Narration.".into()
            }
        ]
    );
}

#[test]
fn jsonl_errors_name_the_line_and_field() {
    let cases: [(&str, usize, &str); 5] = [
        (
            "{\"chapter\":\"1\",\"text\":\"a\"}\n{oops\n",
            2,
            "invalid JSON",
        ),
        ("[1,2]\n", 1, "expected a JSON object"),
        ("\n{\"chapter\":\"1\"}\n", 2, "missing field `text`"),
        ("{\"text\":\"a\"}\n", 1, "missing field `chapter`"),
        ("{\"chapter\":[1],\"text\":\"a\"}\n", 1, "field `chapter`"),
    ];
    for (src, line, what) in cases {
        let err = ingest("x.jsonl", src.as_bytes(), &IngestOptions::default()).unwrap_err();
        match &err {
            RetrievalError::Parse {
                file,
                line: l,
                detail,
            } => {
                assert_eq!((file.as_str(), *l), ("x.jsonl", line), "{err}");
                assert!(detail.contains(what), "{err}");
            }
            other => panic!("expected a parse error, got {other}"),
        }
    }
}

#[test]
fn formats_from_names() {
    assert_eq!(CorpusFormat::from_name("a/b.JSONL"), CorpusFormat::Jsonl);
    assert_eq!(CorpusFormat::from_name("notes.md"), CorpusFormat::Markdown);
    assert_eq!(CorpusFormat::from_name("README"), CorpusFormat::Text);
    assert_eq!(file_stem("dir/x.y.txt"), "x.y");
    assert_eq!(file_stem(".hidden"), ".hidden");
}
