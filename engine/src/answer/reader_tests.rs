//! Tests of the extractive reader ([`super`]).

use super::*;
use crate::answer::evidence::passage as ev;
use crate::retrieval::{parse_aliases, Bm25Index};

#[test]
fn stems_match_inflections_and_quotes_carry_the_answer() {
    for (w, st) in [
        ("dropped", "drop"),
        ("drops", "drop"),
        ("running", "run"),
        ("glasses", "glass"),
        ("curiously", "curious"),
        ("was", "was"),
        ("红楼", "红楼"),
    ] {
        assert_eq!(stem(w), st, "{w}");
    }
    let span = "She took down a jar from one of the shelves as she passed; it was labelled \
                `ORANGE MARMALADE', but to her great disappointment it was empty";
    let q = "What was written on the label of the jar she took down from a shelf?";
    let quote = quote_of(span, q, 60);
    assert!(
        span.contains(&quote) && quote.chars().count() <= 60,
        "{quote:?}"
    );
    assert!(quote.contains("MARMALADE"), "{quote:?}");
    assert_eq!(quote_of("short span here", q, 60), "short span here");
}

#[test]
fn candidates_drop_restatements_and_weigh_rare_terms() {
    let bm = Bm25Index::build(
        [
            "the rabbit ran by",
            "a watch in the pocket",
            "the rabbit took a watch",
        ],
        Default::default(),
    );
    let asked = Asked::new("What did the rabbit take out of its pocket?", &bm, None);
    assert!(asked.terms.iter().any(|(t, _)| t == "pocket"));
    assert!(!asked.terms.iter().any(|(t, _)| t == "the"));
    let e = [ev(
        "E1",
        "The rabbit. It took a watch out of its waistcoat pocket. Nothing else here today.",
    )];
    let c = candidates(&e, &asked, None, 80, 5);
    // "The rabbit." adds nothing beyond the question.
    assert!(!c.iter().any(|s| s.text == "The rabbit."), "{c:?}");
    let watch = c.iter().find(|s| s.text.contains("watch")).expect("span");
    let other = c.iter().find(|s| s.text.contains("Nothing")).expect("span");
    assert!(watch.lexical > other.lexical, "{c:?}");
    assert!(watch.lexical <= 1.0);
}

#[test]
fn who_is_answered_by_a_span_that_names_someone() {
    // The demo question over the two passages retrieval ranks first (*Alice*, chapter I):
    // the clause that restates "rabbit-hole" holds more of the question's words, but only
    // the one that names the Rabbit answers who.
    let mut e = vec![
        ev(
            "E1",
            "In another moment down went Alice after it, never once considering how in the \
             world she was to get out again. The rabbit-hole went straight on like a tunnel \
             for some way, and then dipped suddenly down,",
        ),
        ev(
            "E2",
            "but when the Rabbit actually TOOK A WATCH OUT OF ITS WAISTCOAT-POCKET, and \
             looked at it, and then hurried on, Alice started to her feet,",
        ),
    ];
    e[0].fusion_score = 1.0;
    e[1].fusion_score = 0.86;
    let bm = Bm25Index::build(
        [
            e[0].text.as_str(),
            e[1].text.as_str(),
            "a hole in the ground",
        ],
        Default::default(),
    );
    let graph = EntityGraph::build(
        &[],
        &parse_aliases("a.tsv", b"Alice\nRabbit").expect("aliases"),
        &Default::default(),
    )
    .expect("graph");
    let g = Some(&graph);
    let asked = Asked::new("Who did Alice follow down the rabbit hole?", &bm, g);
    let mut spans = candidates(&e, &asked, g, 100, 5);
    rank(&mut spans, &[], DENSE);
    assert!(spans[0].text.contains("the Rabbit"), "{:#?}", &spans[..3]);
    assert_eq!(spans[0].kind, NAME_FIT);
    assert!(spans
        .iter()
        .any(|s| s.text.starts_with("The rabbit-hole went straight on") && s.kind == 0.0));
}

#[test]
fn spans_left_unembedded_cannot_come_first() {
    // Random spans: whatever cosines in [-1, 1] the embedder gives, the best span with
    // every span embedded is the best with only the spans `to_embed` asks for embedded (the
    // others at the lowest cosine of those), at the default weight and at 3 (the highest
    // measured for e5 on Chinese questions), with cosines spread as MiniLM's and as close
    // as e5's.
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as f32) / (1u64 << 31) as f32
    };
    let (mut embedded, mut rounds) = ([0usize; 4], [0usize; 4]);
    for i in 0..800 {
        let case = i % 4;
        let weight = if case < 2 { DENSE } else { 3.0 };
        let mut spans: Vec<Span> = (0..37)
            .map(|i| Span {
                lexical: next(),
                lead: next() * next(),
                kind: if next() < 0.3 { 1.0 } else { 0.0 },
                prior: next(),
                ..Span::of(i % 5, &format!("span {i}"))
            })
            .collect();
        let cos: Vec<f32> = (0..spans.len())
            .map(|_| match case % 2 {
                0 => 2.0 * next() - 1.0,
                _ => 0.85 + 0.1 * next(),
            })
            .collect();
        let mut known: Vec<Option<f32>> = vec![None; spans.len()];
        loop {
            let more = to_embed(&spans, &known, weight);
            if more.is_empty() {
                break;
            }
            rounds[case] += 1;
            for j in more {
                assert!(known[j].is_none(), "span {j} asked for twice");
                known[j] = Some(cos[j]);
            }
        }
        embedded[case] += known.iter().flatten().count();
        let low = known
            .iter()
            .flatten()
            .copied()
            .fold(f32::INFINITY, f32::min);
        let partial: Vec<f32> = known.iter().map(|c| c.unwrap_or(low)).collect();
        let mut all = spans.clone();
        rank(&mut all, &cos, weight);
        rank(&mut spans, &partial, weight);
        assert_eq!(all[0].text, spans[0].text);
    }
    // And it does leave spans out: of 37 a question (measured: 8 at the default weight,
    // 15.6 at e5's with cosines over [-1, 1], 8.01 with e5-like ones).
    for (case, &n) in embedded.iter().enumerate() {
        assert!(n < 200 * 20, "case {case}: {n} embedded");
        // Two calls at most: the first spans, then every span that could still come first.
        let r = rounds[case];
        assert!(r <= 200 * 2, "case {case}: {r} rounds");
    }
    assert!(embedded[3] < 200 * 9, "{}", embedded[3]);
}

#[test]
fn a_line_inside_a_speech_answers_who_with_its_speaker() {
    let text = "Alice: I have done thee worthy service, Told thee no lies, \
                made no mistakings, served Without grudge or grumblings. Dinah: Well.";
    let bm = Bm25Index::build([text], Default::default());
    let graph = EntityGraph::build(
        &[],
        &parse_aliases("a.tsv", b"Alice\nDinah").expect("aliases"),
        &Default::default(),
    )
    .expect("graph");
    let g = Some(&graph);
    let q = "Which character served without grumblings?";
    let asked = Asked::new(q, &bm, g);
    assert_eq!(asked.wants, Wants::Name);
    let spans = candidates(&[ev("E1", text)], &asked, g, 60, 5);
    let inside = spans
        .iter()
        .find(|s| s.text == "served Without grudge or grumblings.")
        .expect("the span inside Alice's line");
    // The speaker's label names someone the question does not: the span fits.
    assert_eq!(inside.speaker.as_deref(), Some("Alice:"));
    assert_eq!(inside.kind, NAME_FIT);
    assert_eq!(
        inside.answer(asked.wants),
        "Alice: … served Without grudge or grumblings."
    );
    // Another kind of question gets the span alone.
    assert_eq!(inside.answer(Wants::Any), inside.text);
    // A speaker the question names is no answer.
    let named = Asked::new("Who but Alice served without grumblings?", &bm, g);
    assert_eq!(named.wants, Wants::Name);
    let spans = candidates(&[ev("E1", text)], &named, g, 60, 5);
    let inside = spans
        .iter()
        .find(|s| s.text == "served Without grudge or grumblings.")
        .expect("the span");
    assert_eq!(inside.kind, 0.0);
    // A group's label is no one, even where an index built before groups were no entities
    // still holds it as an entity.
    let chorus = "All: I have done thee worthy service, Told thee no lies, \
                  made no mistakings, served Without grudge or grumblings. Dinah: Well.";
    let old = EntityGraph::build(
        &[],
        &parse_aliases("a.tsv", b"All\nDinah").expect("aliases"),
        &Default::default(),
    )
    .expect("graph");
    let bm = Bm25Index::build([chorus], Default::default());
    let asked = Asked::new(q, &bm, Some(&old));
    let spans = candidates(&[ev("E1", chorus)], &asked, Some(&old), 60, 5);
    let inside = spans
        .iter()
        .find(|s| s.text == "served Without grudge or grumblings.")
        .expect("the span inside the chorus's line");
    assert_eq!(inside.speaker.as_deref(), Some("All:"));
    assert_eq!(inside.kind, 0.0);
}

#[test]
fn an_answer_that_stops_on_a_comma_finishes_its_sentence() {
    let text = "The executioner's argument was, that you couldn't cut off a head unless there \
                was a body. The King's argument was, that anything that had a head could be \
                beheaded, and that you weren't to talk nonsense.";
    let bm = Bm25Index::build([text], Default::default());
    let asked = Asked::new("What did the executioner argue?", &bm, None);
    let find = |spans: &[Span], t: &str| -> Span {
        spans
            .iter()
            .find(|s| s.text == t)
            .cloned()
            .unwrap_or_else(|| panic!("{t:?} not in {spans:?}"))
    };
    // A span cap of 60 characters: span and rest together within `finish_chars` of it.
    let spans = candidates(&[ev("E1", text)], &asked, None, 60, 5);
    let open = find(&spans, "The executioner's argument was,");
    assert_eq!(
        open.rest,
        " that you couldn't cut off a head unless there was a body."
    );
    assert_eq!(
        open.answer(Wants::Any),
        "The executioner's argument was, that you couldn't cut off a head unless there was a \
         body."
    );
    for s in &spans {
        let answer = s.answer(Wants::Any);
        assert!(text.contains(&answer), "{answer:?}");
        assert!(answer.chars().count() <= finish_chars(60), "{answer:?}");
    }
    // The King's sentence runs past `finish_chars`: his span takes the whole clauses that fit.
    let king = find(&spans, "The King's argument was,");
    assert_eq!(
        king.rest,
        " that anything that had a head could be beheaded,"
    );
    // The speaker's label, the span, then its rest, when a name is asked for.
    let span = Span {
        speaker: Some("Gonzalo:".into()),
        rest: " no name of magistrate.".into(),
        ..Span::of(0, "Would I admit;")
    };
    assert_eq!(
        span.answer(Wants::Name),
        "Gonzalo: … Would I admit; no name of magistrate."
    );
    assert_eq!(
        span.answer(Wants::Any),
        "Would I admit; no name of magistrate."
    );
}

#[test]
fn choices_skip_overlapping_windows_and_passages_not_shown() {
    let span = Span::of;
    let spans = [
        span(0, "and round the neck of the bottle was a paper label,"),
        span(
            0,
            "round the neck of the bottle was a paper label, with the words",
        ),
        span(2, "The Rabbit took a watch out of its pocket."),
        span(1, "with the words DRINK ME beautifully printed on it"),
        span(1, "She went on growing."),
    ];
    let c: Vec<&str> = choices(&spans, 2, 3)
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    assert_eq!(
        c,
        [
            "and round the neck of the bottle was a paper label,",
            "with the words DRINK ME beautifully printed on it",
            "She went on growing."
        ]
    );
}

#[test]
fn rank_and_reorder_put_the_best_passage_first() {
    let mut e = vec![
        ev("E1", "Nothing here at all."),
        ev("E2", "A watch it was."),
    ];
    let mut s = vec![
        Span {
            prior: 1.0,
            ..Span::of(0, "Nothing here at all.")
        },
        Span {
            lexical: 0.5,
            lead: 0.2,
            kind: 1.0,
            prior: 0.5,
            ..Span::of(1, "A watch it was.")
        },
    ];
    rank(&mut s, &[0.3, 0.4], DENSE);
    assert_eq!(s[0].text, "A watch it was.");
    // 0.2·0.4 + 0.5 + 0.2 + 0.6 from its words, + 1.2·0.5 from its passage's rank.
    assert!((s[0].answer_score(DENSE) - 1.38).abs() < 1e-6);
    assert!((s[0].score - 1.98).abs() < 1e-6);
    // Spans whose words score alike go by their passages' retrieval rank.
    let mut tie = vec![s[1].clone(), s[0].clone()];
    tie[0].prior = 0.2;
    tie[1].prior = 1.0;
    tie[0].lexical = tie[1].lexical;
    tie[0].lead = tie[1].lead;
    tie[0].kind = tie[1].kind;
    let want = tie[1].text.clone();
    rank(&mut tie, &[0.4, 0.4], DENSE);
    assert_eq!(tie[0].text, want);
    reorder(&mut e, &mut s, 0);
    assert_eq!(e[0].text, "A watch it was.");
    assert_eq!((e[0].id.as_str(), e[1].id.as_str()), ("E1", "E2"));
    assert_eq!((s[0].passage, s[1].passage), (0, 1));
}

#[test]
fn abstains_when_the_best_span_is_not_close_enough_to_the_question() {
    let none = f32::MIN;
    // The defaults: a cosine floor for e5 on Chinese questions only; no score floor.
    let cfg = ReaderConfig::default();
    let floor = |kind: &str, q: &str| cfg.cosine_floor.get(&cosine_key(kind, q)).copied();
    assert_eq!(floor("e5s1", "薛宝钗的父亲叫什么名字？"), Some(0.87));
    assert_eq!(floor("e5s1", "What is the name of Alice's sister?"), None);
    assert_eq!(floor("bert", "What is the name of Alice's sister?"), None);
    assert_eq!(floor("bert", "薛宝钗的父亲叫什么名字？"), None);
    assert!(cfg.floor.is_empty());
    // Under the cosine floor: abstain, naming both figures.
    let why = shortfall(1.4, 0.869, None, Some(0.87)).expect("abstains");
    assert!(why.contains("0.869") && why.contains("0.870"), "{why}");
    // At or over it, or with nothing embedded (no embedder), or no floor: no abstention.
    assert_eq!(shortfall(1.4, 0.87, None, Some(0.87)), None);
    assert_eq!(shortfall(1.4, 0.93, None, Some(0.87)), None);
    assert_eq!(shortfall(1.4, none, None, Some(0.87)), None);
    assert_eq!(shortfall(0.1, 0.2, None, None), None);
    // The score floor comes first, and an empty reading abstains under it.
    let why = shortfall(0.3, 0.95, Some(0.35), Some(0.87)).expect("abstains");
    assert!(why.contains("reader score 0.300"), "{why}");
    assert!(shortfall(none, none, Some(0.35), None)
        .expect("abstains")
        .contains("no passage shown holds a span"));
    // The floor reads the best-ranked span's cosine, not the closest span's: a span that
    // restates the question ranks first on its words and is far from it in meaning.
    let mut spans = vec![Span::of(0, "close in meaning"), Span::of(0, "ranked first")];
    spans[1].lexical = 1.0;
    rank(&mut spans, &[0.95, 0.80], DENSE);
    assert_eq!(spans[0].text, "ranked first");
    assert_eq!(ranked_cosine(&spans, true), 0.80);
    assert!(shortfall(
        spans[0].answer_score(DENSE),
        ranked_cosine(&spans, true),
        None,
        Some(0.87)
    )
    .is_some());
    assert_eq!(ranked_cosine(&spans, false), none);
    assert_eq!(ranked_cosine(&[], true), none);
    // A config written before the cosine floor existed reads with the default.
    let old: ReaderConfig = serde_json::from_str(r#"{"choices": 1, "floor": {}}"#).expect("config");
    assert_eq!(old.cosine_floor, default_cosine_floor());
}

#[test]
fn abstains_when_the_best_span_lacks_the_kind_of_answer_asked_for() {
    use super::super::asks::names_asked;
    use super::super::naming::Short;
    // A name as such is asked for by its word, in English, and not by "who …".
    assert!(names_asked("What is the name of Alice's sister?"));
    assert!(names_asked("What is the Hatter's real name?"));
    assert!(names_asked("What is Alice's surname?"));
    assert!(!names_asked(
        "Who tells Hamlet of a land worth nothing except its name?"
    ));
    assert!(!names_asked("Who did Alice follow?"));
    assert!(!names_asked(
        "Whose name does the White Rabbit call out as the next witness?"
    ));
    assert!(!names_asked(
        "In the last act, who reads out the name on the letter?"
    ));
    // A relative "whom" or "whose" after the question word does not ask who.
    assert!(names_asked(
        "What is the name of the King of Tunis whom Claribel married?"
    ));
    assert!(!names_asked("宝玉的丫头叫什么名字？"));
    assert!(!names_asked("What did the Hatter say?"));

    let q = "How many legs does the Caterpillar have?";
    let mut best = Span::of(0, "a caterpillar with sixteen legs");
    best.kind = 1.0;
    assert_eq!(kind_shortfall(q, Wants::Number, Some(&best)), None);
    // A number, but not of legs.
    best.text = "it was exactly three inches high".into();
    let why = kind_shortfall(q, Wants::Number, Some(&best)).expect("abstains");
    assert!(why.contains("asks about (leg)"), "{why}");
    best.kind = 0.0;
    best.text = "said the Caterpillar angrily".into();
    let why = kind_shortfall(q, Wants::Number, Some(&best)).expect("abstains");
    assert!(why.contains("number"), "{why}");
    assert_eq!(kind_shortfall(q, Wants::Number, None), None);

    let q = "What is the name of Alice's sister?";
    let mut best = Span::of(0, "said Alice, and she told her sister, called");
    best.kind = NAME_FIT;
    let why = kind_shortfall(q, Wants::Name, Some(&best)).expect("abstains");
    assert!(why.contains("gives none the question lacks"), "{why}");
    best.short = Some(Short {
        text: "Dinah".into(),
        passage: 0,
    });
    best.rest = " Dinah,".into();
    assert_eq!(kind_shortfall(q, Wants::Name, Some(&best)), None);
    // A name the span gives, but not as a name: it names someone, not the sister's name.
    best.text = "said Alice, and she told her sister of Dinah,".into();
    best.rest.clear();
    let why = kind_shortfall(q, Wants::Name, Some(&best)).expect("abstains");
    assert!(why.contains("none as a name"), "{why}");
    // Given as a name, by the name word, a verb of naming or a title.
    for said in [
        "her sister, whose name was Dinah,",
        "her sister, christened Dinah,",
        "her sister, Miss Dinah,",
    ] {
        best.text = said.into();
        assert_eq!(kind_shortfall(q, Wants::Name, Some(&best)), None, "{said}");
    }
    // `miss` the verb is no title.
    best.text = "her sister would miss Dinah,".into();
    let why = kind_shortfall(q, Wants::Name, Some(&best)).expect("abstains");
    assert!(why.contains("none as a name"), "{why}");
    best.text = "said Alice, and she told her sister, called Dinah,".into();
    // A name, but the span does not say whose brother it is.
    let q = "What is the name of Alice's brother?";
    let why = kind_shortfall(q, Wants::Name, Some(&best)).expect("abstains");
    assert!(why.contains("asks about (brother)"), "{why}");
    best.rest = " and her brother Bill".into();
    assert_eq!(kind_shortfall(q, Wants::Name, Some(&best)), None);
    best.rest.clear();
    // "Who …" is answered by a span that names someone without a short answer (a speaker).
    best.short = None;
    assert_eq!(
        kind_shortfall("Who ran past her?", Wants::Name, Some(&best)),
        None
    );
    // Other kinds are not checked here.
    assert_eq!(
        kind_shortfall("Why did she cry?", Wants::Reason, Some(&best)),
        None
    );
}

#[test]
fn the_thing_asked_about_is_read_from_the_question() {
    use super::super::asks::{focus, mentions};
    let f = |q: &str| focus(q).join(" / ");
    // The head of the phrase after "the name of": past the owner, before the clause.
    assert_eq!(
        f("What is the name of Kiyo's nephew, the court clerk she goes to live with?"),
        "nephew"
    );
    assert_eq!(
        f("What was the name of old King Hamlet's father?"),
        "father"
    );
    assert_eq!(
        f("What was the name of Ophelia and Laertes's mother?"),
        "mother"
    );
    assert_eq!(f("What is the name of the cat and the dog?"), "cat");
    assert_eq!(
        f("What is the name of the town or village where she lives?"),
        "villag"
    );
    assert_eq!(
        f("What is the first name of Red Shirt's younger brother?"),
        "brother"
    );
    assert_eq!(
        f("What was the name of the captain of the pirate ship that took Hamlet prisoner?"),
        "captain"
    );
    assert_eq!(
        f("What is the real surname of the mathematics teacher the narrator calls Porcupine?"),
        "teacher"
    );
    assert_eq!(
        f("What is the name of the poison Claudius put into the cup?"),
        "poison"
    );
    assert_eq!(
        f("What was the name of the steamer that took the narrator to Shikoku?"),
        "steamer"
    );
    // The owner's own name, and "who …", ask about no other thing.
    assert_eq!(f("What is the Hatter's real name?"), "");
    assert_eq!(f("Who gave the name to the island?"), "");
    // Counts: the noun counted, except nouns for people (often counted under other words).
    assert_eq!(f("How many legs does the Caterpillar have?"), "leg");
    assert_eq!(f("How many bowls of tempura did he eat?"), "bowl");
    assert_eq!(f("How many people are on the island?"), "");
    assert_eq!(f("How many dancers performed the sword dance?"), "");
    // Sums of money: a unit of money; "how much" of anything else names no thing.
    assert_eq!(
        f("How much money did Kiyo send?"),
        "yen / sen / rin / ryo / crown / ducat / pound / shill / penni / penc / farth / guinea / \
         sovereign / dollar / cent / franc / mark / florin / groat / talent / rupe / coin / £ / \
         € / ¥"
    );
    assert_eq!(f("How much of the cake did Alice eat?"), "");
    // Ages.
    assert_eq!(f("How old is Prospero?"), "year / old / age / month");
    assert_eq!(f("甄士隐的女儿当时几岁？"), "岁");
    // Chinese: the noun before 叫什么名字 / 姓什么, after the last 的 and a demonstrative.
    assert_eq!(f("王熙凤的母亲叫什么名字？"), "母亲");
    assert_eq!(f("拐走英莲的那个拐子叫什么名字？"), "拐子");
    assert_eq!(f("花自芳的妻子姓什么？"), "妻子");
    assert_eq!(f("袭人本名叫什么？"), "");

    let brother = focus("What is the name of the narrator's older brother?");
    assert!(mentions(
        "My brother was to be seen studying English hard,",
        &brother
    ));
    assert!(mentions("his brothers' shop", &brother));
    assert!(!mentions("while I had to remain in Tokyo", &brother));
    let colour = focus("What colour was the Ghost's beard?");
    assert!(mentions("His beard was grizzled,--no?", &colour));
    assert!(mentions("A sable silver'd.", &colour));
    assert!(!mentions(
        "Hail, many-colour'd messenger, that ne'er",
        &colour
    ));
    // A sum of money is given in a unit of money; "how much" of anything else asks for none.
    let rent = focus("How much rent did Red Shirt pay for his house?");
    assert!(mentions("It was nine yen and fifty sen a month,", &rent));
    assert!(mentions("three thousand crowns in annual fee;", &rent));
    assert!(mentions("it cost me £3", &rent));
    assert!(mentions("for two shillings and a farthing", &rent));
    assert!(mentions("a shilling", &rent));
    assert!(!mentions(
        "I started for his house at about 4 o'clock.",
        &rent
    ));
    assert!(!mentions(
        "In thee there is not half an hour of life;",
        &rent
    ));
    assert!(focus("How much did Alice drink from the bottle?").is_empty());
    let best = Span::of(0, "I started for his house at about 4 o'clock.");
    let why = kind_shortfall(
        "How much is Red Shirt paid each month?",
        Wants::Number,
        Some(&Span { kind: 1.0, ..best }),
    );
    assert!(why.is_some_and(|w| w.contains("does not mention")));
    let legs = focus("How many legs does it have?");
    assert!(mentions("one leg", &legs) && mentions("its legs", &legs));
    assert!(!mentions("it was exactly three inches high", &legs));
    assert!(mentions(
        "今日才知是他的母亲",
        &focus("王熙凤的母亲叫什么名字？")
    ));
    assert!(!mentions(
        "王夫人哭着贾珠的名字",
        &focus("王熙凤的母亲叫什么名字？")
    ));
}

#[test]
fn the_cosine_weighs_what_the_config_gives_for_its_embedder_and_language() {
    let mut cfg = ReaderConfig::default();
    assert_eq!(
        cfg.dense_weight(&cosine_key("e5s1", "袭人本名叫什么？")),
        DENSE
    );
    cfg = serde_json::from_str(r#"{"dense_weight": {"e5s1/zh": 3.0}}"#).expect("config");
    let zh = cfg.dense_weight(&cosine_key("e5s1", "袭人本名叫什么？"));
    assert_eq!(zh, 3.0);
    assert_eq!(cfg.dense_weight(&cosine_key("e5s1", "Who is she?")), DENSE);
    assert_eq!(
        cfg.dense_weight(&cosine_key("minilm", "袭人本名叫什么？")),
        DENSE
    );
    // e5's cosines lie close together: 0.03 apart decides against a lexical share 0.02
    // higher only when the cosine weighs e5's weight.
    let spans = || {
        vec![
            Span {
                lexical: 0.186,
                ..Span::of(0, "袭人道：“连一家子也不知来历")
            },
            Span {
                lexical: 0.163,
                ..Span::of(0, "本名珍珠。")
            },
        ]
    };
    let mut s = spans();
    rank(&mut s, &[0.860, 0.894], DENSE);
    assert_eq!(s[0].text, "袭人道：“连一家子也不知来历");
    let mut s = spans();
    rank(&mut s, &[0.860, 0.894], zh);
    assert_eq!(s[0].text, "本名珍珠。");
}
