//! Tests of the rounds of a question ([`super`]).

use super::*;
use crate::answer::recover::ParseOutcome;
use crate::answer::schema::{EvidenceRef, Fact};

const QUESTION: &str = "What did the Rabbit take out of its pocket?";

fn hit(id: u32, text: &str, dense: Option<f32>) -> Hit {
    Hit {
        id,
        chapter: "CHAPTER I".into(),
        text: text.into(),
        fusion_score: 0.03,
        dense_rank: None,
        dense_score: dense,
        sparse_rank: None,
        sparse_score: None,
        graph_rank: None,
        graph_score: None,
        neighbor: false,
    }
}

fn rabbit() -> Hit {
    hit(
        3,
        "the Rabbit actually took a watch out of its waistcoat-pocket, and looked at it",
        Some(0.6),
    )
}

fn action(next_action: NextAction) -> GroundedAction {
    GroundedAction {
        next_action,
        ..GroundedAction::abstain("")
    }
}

#[test]
fn next_round_follows_the_action() {
    let mut more = action(NextAction::RetrieveMore);
    assert_eq!(
        next_round(&more, true, QUESTION, false),
        Next::Search {
            query: QUESTION.into(),
            hypothesis: None
        }
    );
    let h = Hypothesis {
        keywords: vec!["watch".into()],
        entities: vec!["White Rabbit".into()],
        ..Hypothesis::default()
    };
    more.follow_up_hypothesis = Some(h.clone());
    assert_eq!(
        next_round(&more, true, QUESTION, false),
        Next::Search {
            query: format!("{QUESTION} watch White Rabbit"),
            hypothesis: Some(h)
        }
    );
    assert_eq!(
        next_round(&more, true, QUESTION, true),
        Next::Abstain("more evidence was asked for after the last round".into())
    );
    // An answer that failed its checks searches for the facts it claimed.
    let mut answer = action(NextAction::AnswerDirectly);
    answer.supported_facts = vec![Fact {
        fact: "a watch".into(),
        evidence_refs: Vec::new(),
    }];
    match next_round(&answer, false, QUESTION, false) {
        Next::Search { query, hypothesis } => {
            assert_eq!(query, format!("{QUESTION} a watch"));
            let h = hypothesis.expect("a hypothesis");
            assert_eq!(h.keywords, vec!["a watch".to_string()]);
            assert_eq!(h.intent, "verify the facts that failed their checks");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        next_round(&answer, false, QUESTION, true),
        Next::Abstain("the answer failed its checks in the last round".into())
    );
    assert_eq!(next_round(&answer, true, QUESTION, false), Next::Finish);
    for a in [NextAction::Abstain, NextAction::ClarifyUser] {
        assert_eq!(next_round(&action(a), false, QUESTION, false), Next::Finish);
    }
}

#[test]
fn a_checked_answer_ends_the_rounds() {
    let cfg = AskConfig::default();
    let mut run = Rounds::new(&cfg, QUESTION.into(), true);
    let mut r = run.brief(&[rabbit()], Some(0.4), 1).expect("a brief");
    assert_eq!((r.query.as_str(), r.evidence.len()), (QUESTION, 1));
    let answer = GroundedAction {
        next_action: NextAction::AnswerDirectly,
        supported_facts: vec![Fact {
            fact: "The Rabbit took a watch out of its pocket.".into(),
            evidence_refs: vec![EvidenceRef {
                evidence_id: "E1".into(),
                quote: "took a watch out of its waistcoat-pocket".into(),
            }],
        }],
        final_answer: "A watch.".into(),
        ..GroundedAction::abstain("")
    };
    r.raw_output = serde_json::to_string(&answer).expect("json");
    assert!(run.read(r, 1, false).is_break());
    run.conclude();
    let a = run.finish(0.0);
    assert_eq!(a.final_action, NextAction::AnswerDirectly);
    assert_eq!(a.answer, "A watch.");
    assert_eq!((a.facts.len(), a.facts[0].verified), (1, true));
    assert_eq!(a.rounds[0].outcome, ParseOutcome::Parsed);
    assert!(
        a.rounds[0].problems.is_empty(),
        "{:?}",
        a.rounds[0].problems
    );
    assert_eq!((a.abstain_reason, a.snippets.len()), (None, 0));
    assert!(a.grammar);
}

#[test]
fn retrieve_more_carries_its_search_to_the_next_round() {
    let cfg = AskConfig::default();
    let mut run = Rounds::new(&cfg, QUESTION.into(), false);
    let mut r = run.brief(&[rabbit()], None, 1).expect("a brief");
    r.raw_output =
        r#"{"next_action":"retrieve_more","follow_up_hypothesis":{"keywords":["clock"]}}"#.into();
    assert!(run.read(r, 1, false).is_continue());
    let more = hit(
        4,
        "down, down, down, would the fall never come to an end",
        None,
    );
    let mut r = run
        .brief(&[rabbit(), more], None, 2)
        .expect("a second brief");
    assert_eq!(r.query, format!("{QUESTION} clock"));
    assert_eq!(
        r.hypothesis.as_ref().map(|h| h.keywords.clone()),
        Some(vec!["clock".into()])
    );
    assert_eq!(r.evidence.len(), 1);
    assert_eq!(r.evidence[0].id, "E2");
    // Unreadable output in the last round: the question abstains with the best snippets.
    r.raw_output = "I think it was a watch".into();
    assert!(run.read(r, 2, true).is_continue());
    run.conclude();
    let a = run.finish(0.0);
    assert_eq!(a.final_action, NextAction::Abstain);
    assert_eq!(a.answer, prompt::abstain_text(QUESTION));
    assert_eq!(
        a.abstain_reason.as_deref(),
        Some("no valid answer in the last round")
    );
    assert_eq!(a.snippets.len(), 2);
    assert_eq!(a.rounds[1].outcome, ParseOutcome::Failed);
    assert_eq!(a.action_sequence(), "retrieve_more>unparsed>abstain*");
}

#[test]
fn extraction_takes_the_best_reading_the_checks_accept() {
    let cfg = AskConfig::default();
    let mut run = Rounds::new(&cfg, QUESTION.into(), true);
    let text = "What did the Rabbit take out of its pocket? A gold watch, of course.";
    let mut r = run
        .brief(&[hit(3, text, Some(0.6))], Some(0.4), 1)
        .expect("a brief");
    let span = |t: &str, score: f32| Span {
        prior: 1.0,
        score,
        ..Span::of(0, t)
    };
    // The reader's best span restates the question: its quote would be refused.
    let restating = span("What did the Rabbit take out of its pocket?", 2.0);
    run.spans = vec![restating.clone(), span("A gold watch, of course.", 1.0)];
    run.extract(&mut r);
    let (a, _) = recover::parse_action(&r.raw_output);
    let a = a.expect("an action");
    assert_eq!(a.final_answer, "A gold watch, of course.");
    assert!(run.read(r, 1, false).is_break());
    // With no other reading, the best one stands and is refused as before.
    let mut run = Rounds::new(&cfg, QUESTION.into(), true);
    let mut r = run
        .brief(&[hit(3, text, Some(0.6))], Some(0.4), 1)
        .expect("a brief");
    run.spans = vec![restating];
    run.extract(&mut r);
    let (a, _) = recover::parse_action(&r.raw_output);
    assert_eq!(
        a.expect("an action").final_answer,
        "What did the Rabbit take out of its pocket?"
    );
    assert!(run.read(r, 1, false).is_continue());
    // No span at all: search again with the question as it is (once, not doubled).
    let mut run = Rounds::new(&cfg, QUESTION.into(), true);
    let mut r = run
        .brief(&[hit(3, text, Some(0.6))], Some(0.4), 1)
        .expect("a brief");
    run.spans.clear();
    run.extract(&mut r);
    let (a, _) = recover::parse_action(&r.raw_output);
    assert_eq!(a.expect("an action").next_action, NextAction::RetrieveMore);
    assert!(run.read(r, 1, false).is_continue());
    assert_eq!(run.query, QUESTION);
}

#[test]
fn extraction_finishes_the_sentence_unless_the_checks_refuse_it() {
    let cfg = AskConfig::default();
    let question = "What does the Caterpillar say about the mushroom?";
    let text = "It crawled away, remarking as it went, `One side will make you grow \
                taller, and the other side will make you grow shorter.' Alice looked at it.";
    let span = |rest: &str| Span {
        prior: 1.0,
        score: 1.0,
        rest: rest.into(),
        ..Span::of(
            0,
            "remarking as it went, `One side will make you grow taller,",
        )
    };
    let answer = |text: &str, s: Span| {
        let mut run = Rounds::new(&cfg, question.into(), true);
        let mut r = run
            .brief(&[hit(3, text, Some(0.6))], Some(0.4), 1)
            .expect("a brief");
        run.spans = vec![s];
        run.extract(&mut r);
        let (a, _) = recover::parse_action(&r.raw_output);
        a.expect("an action").final_answer
    };
    // The rest finishes the sentence the span leaves open…
    let rest = " and the other side will make you grow shorter.'";
    assert!(text.contains(&format!("{}{rest}", span("").text)));
    let finished = answer(text, span(rest));
    // …but the story repeats four words in it, which the checks read as a loop: the span
    // is given without its rest rather than passed over.
    assert!(validate::repeated_span(&format!("{}{rest}", span("").text)).is_some());
    assert_eq!(finished, span("").text);
    // A rest the checks accept is given with the span.
    let clean = " and the other shorter.'";
    assert_eq!(
        answer(&text.replace(rest, clean), span(clean)),
        format!("{}{clean}", span("").text)
    );
}

#[test]
fn weak_or_empty_retrieval_abstains_before_generating() {
    let cfg = AskConfig::default();
    let mut run = Rounds::new(&cfg, QUESTION.into(), true);
    let weak = hit(3, "an unrelated passage about croquet", Some(0.1));
    assert!(run.brief(&[weak], Some(0.4), 1).is_none());
    assert!(run.brief(&[], Some(0.4), 2).is_none());
    run.conclude();
    let a = run.finish(0.0);
    assert_eq!(a.rounds.len(), 2);
    assert_eq!(
        a.rounds[0].problems,
        vec!["weak retrieval: best dense cosine 0.100 < 0.400".to_string()]
    );
    assert_eq!(
        a.abstain_reason.as_deref(),
        Some("the follow-up search found nothing new")
    );
    assert_eq!((a.final_action, a.snippets.len()), (NextAction::Abstain, 1));
}
