//! Tests of the question as the reader reads it ([`super`]).

use super::*;
use crate::answer::evidence::passage as ev;
use crate::answer::reader::{candidates, kind_shortfall, Span};
use crate::retrieval::parse_aliases;

#[test]
fn questions_ask_for_kinds_and_spans_fit_them() {
    for (q, w) in [
        ("How many gardeners were painting the roses?", Wants::Number),
        ("What is the name of Alice's cat?", Wants::Name),
        ("Who took Alice to see the Mock Turtle?", Wants::Name),
        ("What does the Lory keep saying?", Wants::Words),
        ("What was written on the label?", Wants::Words),
        ("Why did Alice sneeze?", Wants::Reason),
        ("What did Alice find on the table?", Wants::Any),
        ("Which character jokes about a beggar?", Wants::Name),
        ("What animal does Alice see?", Wants::Name),
        ("Which one of the lords swims?", Wants::Name),
        ("Which two neighbours does the Cat point to?", Wants::Name),
        // An owner's possessive and a compound noun before the noun for someone.
        ("Which of Hamlet's companions fears the Ghost?", Wants::Name),
        (
            "Which of Hamlet's two old school friends admits it?",
            Wants::Name,
        ),
        // A named place or work.
        ("To which town was Koga being transferred?", Wants::Named),
        (
            "To which university town had Hamlet planned to return?",
            Wants::Named,
        ),
        ("At which restaurant was the dinner held?", Wants::Named),
        (
            "Which poem does the Caterpillar ask Alice to repeat?",
            Wants::Named,
        ),
        // After "what", an auxiliary starts the clause: no noun is asked of.
        ("What does the Queen shout about?", Wants::Words),
        ("What did the King's school friend bring?", Wants::Any),
        ("What kind of vessel were they set adrift in?", Wants::Any),
        ("What one thing did the man carry?", Wants::Any),
        ("宝玉有几个丫头？", Wants::Number),
        ("黛玉的母亲是谁？", Wants::Name),
        ("宝玉对黛玉说了什么？", Wants::Words),
        ("黛玉为什么哭？", Wants::Reason),
        // What someone is doing, before the words said.
        (
            "What was the Caterpillar doing when Alice first saw it?",
            Wants::Doing,
        ),
        (
            "When the Rabbit calls for Pat, what does Pat say he is doing?",
            Wants::Doing,
        ),
        // "how" inside a word is not "how many".
        ("Somehow, what did she eat?", Wants::Any),
    ] {
        assert_eq!(wants(q), w, "{q}");
    }
    // Quotations: Alice's backtick marks, inner apostrophes, curly and CJK marks.
    assert_eq!(
        quotations("said `I don't know,' and `DRINK ME' here"),
        ["I don't know,", "DRINK ME"]
    );
    assert_eq!(
        quotations("他道：“好妹妹。”又说「去罢"),
        ["好妹妹。", "去罢"]
    );

    let bm = Bm25Index::build(["the cat sat", "a rabbit ran"], Default::default());
    let graph = EntityGraph::build(
        &[],
        &parse_aliases("a.tsv", b"Alice\nDinah\tDinah cat").expect("aliases"),
        &Default::default(),
    )
    .expect("graph");
    let g = Some(&graph);
    let name = Asked::new("What is the name of Alice's cat?", &bm, g);
    assert!(name.fits("Dinah my dear!", g));
    // The question's own entity is no answer.
    assert!(!name.fits("said Alice to herself,", g));
    let words = Asked::new("What did the label say?", &bm, g);
    assert!(words.fits("with the words `DRINK ME' printed", g));
    // A quotation that only restates the question is no answer.
    assert!(!words.fits("`the label, say,' she read", g));
    let num = Asked::new("How many legs?", &bm, g);
    assert!(num.fits("it had forty-two legs", g) && num.fits("4 legs", g));
    assert!(num.fits("About sixteen police officers", g) && !num.fits("a teen", g));
    assert!(!num.fits("One could not find one like her, once", g));
    assert!(num.fits("他有三个丫头", g) && !num.fits("no legs at all", g));
    // A place or work: a name the question lacks, never the speaker's label of a line.
    let town = Asked::new("To which town did Alice send Dinah?", &bm, g);
    assert_eq!(town.wants, Wants::Named);
    assert!(town.fits("she went off to Nobeoka by the night train", g));
    assert!(!town.fits("Dinah went off by the night train", g));
    assert!(!town.fits("Alice: she went off by the night train", g));
    // In a script's speech only the story's entities count (verse capitalises its lines).
    assert!(!town.fits("Alice: she went off And Came back", g));
    let why = Asked::new("Why did she cry?", &bm, g);
    assert!(why.fits("because the door was shut", g) && !why.fits("the door was shut", g));
    assert!(!Asked::new("What did she find?", &bm, g).fits("a `key' and 3 cakes", g));
    // Doing: a verb in -ing the question lacks; not its own, not a noun in -ing.
    let doing = Asked::new("What was the Caterpillar doing on the mushroom?", &bm, g);
    assert!(doing.fits("quietly smoking a long hookah,", g));
    assert!(doing.fits("and discovers FERDINAND and MIRANDA playing at chess.]", g));
    assert!(!doing.fits("her eyes met those of a large caterpillar,", g));
    assert!(!doing.fits("the Caterpillar was doing nothing that morning", g));
}

#[test]
fn a_place_or_work_is_named_by_no_one_who_speaks_or_is_spoken_to() {
    let bm = Bm25Index::build(["the cat sat", "a rabbit ran"], Default::default());
    let graph = EntityGraph::build(
        &[],
        &parse_aliases(
            "a.tsv",
            b"Alice\nMary Ann\nMock Turtle\nHotta\nNobeoka\nWittenberg",
        )
        .expect("aliases"),
        &Default::default(),
    )
    .expect("graph");
    let g = Some(&graph);
    let town = Asked::new("Which river runs past Alice's house?", &bm, g);
    assert_eq!(town.wants, Wants::Named);
    // Spoken to, in the span or with the clause before it.
    assert!(!town.names_new("`Why, Mary Ann, what ARE you doing out here?", "", g, false));
    assert!(!town.names_new("Mary Ann, what ARE you doing out here?", "`Why,", g, false));
    // Speaking, or given a title or a noun for someone.
    assert!(!town.names_new("said the Mock Turtle in a tone of relief", "", g, false));
    assert!(!town.names_new("the Mock Turtle went on at last", "", g, false));
    assert!(!town.names_new("one teacher Hotta of the school", "", g, false));
    // The man a name is given to.
    assert!(!town.names_new("we used to call him Tortoise", "", g, false));
    // A people's word names no place.
    assert!(!town.names_new("we learned French and music", "", g, false));
    // Places.
    assert!(town.names_new("he is going to Nobeoka in the south", "", g, false));
    assert!(town.names_new("go not to Wittenberg.", "", g, false));
    assert!(town.names_new("Wittenberg, said he, is far", "", g, false));
}

#[test]
fn a_span_that_says_nothing_asked_beyond_the_names_abstains() {
    use crate::retrieval::{ExpansionConfig, Lexicon};
    let bm = Bm25Index::build(
        [
            "the queen ate tarts",
            "an invitation came",
            "a message was read",
        ],
        Default::default(),
    );
    let q = "What does the Queen of Hearts eat for breakfast?";
    let asked = Asked::new(q, &bm, None);
    // The names are not what is asked: "Queen" and "Hearts" are left out.
    let e = [
        ev(
            "E1",
            "And last of all came THE KING AND QUEEN OF HEARTS. The Queen had breakfast in bed.",
        ),
        ev("E2", "The Queen ate six tarts."),
    ];
    let c = candidates(&e, &asked, None, 40, 5);
    let names = c.iter().find(|s| s.text.contains("KING")).expect("span");
    assert_eq!(names.topic, 0.0, "{c:?}");
    let why = kind_shortfall(q, Wants::Any, Some(names)).expect("abstains");
    assert!(why.contains("nothing it asks"), "{why}");
    let eats = c
        .iter()
        .find(|s| s.text.contains("breakfast"))
        .expect("span");
    // `breakfast` without `eat`: half of what is asked.
    assert!((eats.topic - 0.5).abs() < 0.2, "{c:?}");
    assert_eq!(kind_shortfall(q, Wants::Any, Some(eats)), None);
    // `ate` is `eat` ([`super::super::irregular`]): the other half.
    let ate = c.iter().find(|s| s.text.contains("ate six")).expect("span");
    assert!((ate.topic - 0.5).abs() < 0.2, "{c:?}");
    // The clause before the span counts with it.
    let e = [ev("E1", "At breakfast, the Queen ate six tarts")];
    let c = candidates(&e, &asked, None, 20, 5);
    let tarts = c
        .iter()
        .find(|s| !s.text.contains("breakfast"))
        .expect("span");
    assert!(tarts.topic > 0.0, "{c:?}");

    // Words that frame a question ("according to …", "the narrator") are not what it asks:
    // a question of names and framing asks nothing a span must repeat.
    let q = "According to the Queen, what is the Mock Turtle?";
    let asked = Asked::new(q, &bm, None);
    let e = [ev(
        "E1",
        "`It is the thing Mock Turtle Soup is made from,' said the Queen.",
    )];
    let c = candidates(&e, &asked, None, 80, 5);
    assert!(!c.is_empty() && c.iter().all(|s| s.topic == 1.0), "{c:?}");
    // "How many …" asks for a count of children, not for "many".
    let q = "How many children does the Queen of Hearts have?";
    let asked = Asked::new(q, &bm, None);
    let e = [ev(
        "E1",
        "There was a sound of many footsteps. First came ten soldiers carrying clubs;",
    )];
    let c = candidates(&e, &asked, None, 80, 5);
    assert!(!c.is_empty() && c.iter().all(|s| s.topic == 0.0), "{c:?}");

    // A story word near a question's word, by the index's encoder, counts as that word.
    let q = "What message does the Footman deliver?";
    let mut asked = Asked::new(q, &bm, None);
    let e = [ev(
        "E1",
        "For the Duchess. An invitation from the Queen to play croquet.",
    )];
    let c = candidates(&e, &asked, None, 80, 5);
    assert!(c.iter().all(|s| s.topic == 0.0), "{c:?}");
    let unit = |i: usize| -> Vec<f32> { (0..4).map(|j| f32::from(u8::from(i == j))).collect() };
    let lexicon = Lexicon::new(
        vec!["invit".into(), "croquet".into(), "duchess".into()],
        &[unit(0), unit(1), unit(2)],
        Vec::new(),
        ExpansionConfig::default(),
    )
    .expect("lexicon");
    // "message" lies near "invitation", "deliver" near nothing.
    let near = [0.9f32, 0.1, 0.0, 0.42];
    let n = near.iter().map(|x| x * x).sum::<f32>().sqrt();
    let words = vec![
        ("message".to_string(), near.iter().map(|x| x / n).collect()),
        ("deliver".to_string(), unit(3)),
    ];
    let near = lexicon
        .neighbours(&Default::default(), &words)
        .expect("neighbours");
    asked.with_neighbours(&near);
    assert_eq!(asked.neighbours.len(), 2);
    assert_eq!(asked.neighbours[0].1, ["invit"]);
    assert!(asked.neighbours[1].1.is_empty());
    let c = candidates(&e, &asked, None, 80, 5);
    let s = c
        .iter()
        .find(|s| s.text.contains("invitation"))
        .expect("span");
    assert!(s.topic > 0.0 && s.topic < 1.0, "{c:?}");
    // A vector of another width is an error, not a guess.
    assert!(lexicon
        .neighbours(&Default::default(), &[("message".into(), vec![1.0; 3])])
        .is_err());
}

#[test]
fn a_surname_asks_for_a_name_and_calling_out_names_no_one() {
    use super::super::asks::gives_a_name;
    assert_eq!(wants("What is Alice's surname?"), Wants::Name);
    assert!(gives_a_name("a brass plate with the name `W. RABBIT'"));
    assert!(gives_a_name("they call him Porcupine"));
    assert!(gives_a_name("one Antonio, call'd the Duke"));
    assert!(gives_a_name("a man known as Red Shirt"));
    assert!(gives_a_name("Mr. Koga"));
    // "call out / after / for" is another verb.
    assert!(!gives_a_name(
        "the White Rabbit blew three blasts on the trumpet, and called out, `First witness!'"
    ));
    assert!(!gives_a_name("the Queen called for the executioner"));
    assert!(!gives_a_name("she called after it"));
}

#[test]
fn a_colour_must_be_said_of_the_thing_asked() {
    use super::super::asks::{colour_of, coloured};
    assert_eq!(
        coloured("What colour is Alice's dress?"),
        Some(stem("dress"))
    );
    assert_eq!(
        coloured("What colour was the Ghost's beard, as Horatio describes it to Hamlet?")
            .as_deref(),
        Some("beard")
    );
    assert_eq!(coloured("What colour are the roses?"), Some(stem("roses")));
    assert_eq!(
        coloured("What colour is the hair of Miranda?").as_deref(),
        Some("hair")
    );
    assert_eq!(coloured("What did the Hatter say?"), None);
    // Said of it, within three words; said of something else five words on; not mentioned.
    assert_eq!(
        colour_of("Hamlet: His beard was grizzled,--no?", "beard"),
        Some(true)
    );
    assert_eq!(
        colour_of(
            "splendidly dressed, with a pair of white kid gloves in one hand",
            "dress"
        ),
        Some(false)
    );
    assert_eq!(colour_of("A sable silver'd.", "beard"), None);
    let q = "What colour is Alice's dress?";
    let mut best = Span::of(
        0,
        "It was the White Rabbit returning, splendidly dressed, with a pair of white kid gloves",
    );
    best.kind = 1.0;
    let why = kind_shortfall(q, Wants::Any, Some(&best)).expect("abstains");
    assert!(why.contains("colour"), "{why}");
    best.text = "Alice wore a blue dress that day".into();
    assert_eq!(kind_shortfall(q, Wants::Any, Some(&best)), None);
}

/// A Chinese question's pairs of characters that the story never holds (read across its
/// words: `蟠争`, `争买`, `买丫`) are no terms of it, so they do not shrink the share of the
/// pairs a span can hold; an English word the story lacks stays, at the idf of a term found
/// once.
#[test]
fn chinese_pairs_the_story_never_holds_are_no_terms() {
    let bm = Bm25Index::build(
        ["薛蟠打死了冯渊", "那丫头是英莲", "the cat sat"],
        Default::default(),
    );
    let terms: Vec<String> = super::question_terms("薛蟠争买丫头", &bm)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(terms, ["薛蟠", "丫头"]);
    let en = super::question_terms("the cat and the dog", &bm);
    assert!(en.iter().any(|(t, _)| t == "dog"), "{en:?}");
}
