//! The answer evaluation (eval50-style summary): counts of raw JSON failures, repairs, errors,
//! abstentions, direct answers, rounds, action sequences, quote and citation validity, and
//! correctness against gold answers (contains-gold and token F1).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::schema::NextAction;
use super::Answer;

/// A question with gold answers.
#[derive(Clone, Debug, Deserialize)]
pub struct AnswerQuestion {
    /// Id in the set.
    #[serde(default)]
    pub id: String,
    /// The question.
    pub question: String,
    /// Acceptable short answers (empty for an unanswerable question).
    #[serde(default)]
    pub answers: Vec<String>,
    /// The story does not answer it: abstaining is correct.
    #[serde(default)]
    pub unanswerable: bool,
}

/// Reads a JSONL question set (`{id, question, answers, unanswerable}` per line), naming the
/// line of a malformed entry.
pub fn parse_answer_questions(name: &str, text: &str) -> Result<Vec<AnswerQuestion>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: AnswerQuestion =
            serde_json::from_str(line).map_err(|e| format!("{name}:{}: {e}", i + 1))?;
        if q.question.trim().is_empty() {
            return Err(format!("{name}:{}: empty question", i + 1));
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(format!("{name}: no questions"));
    }
    Ok(out)
}

/// Phrases that make an answer abstain-like (ASA counts ~10 such markers).
pub const ABSTAIN_MARKERS: &[&str] = &[
    "evidence is not enough",
    "not enough evidence",
    "cannot be determined",
    "does not say",
    "not mentioned",
    "unknown",
    "现有证据不足",
    "证据不足",
    "无法确认",
    "无法确定",
    "没有提到",
];

/// Is this outcome an abstention in effect: the abstain action, or an answer that says one of
/// [`ABSTAIN_MARKERS`] in its own words? A marker that the evidence shown also holds is the
/// story's word, quoted (*Hamlet*'s "… to the unknown", an answer, not a refusal).
pub fn abstain_like(a: &Answer) -> bool {
    let t = a.answer.to_lowercase();
    let quoted = |m: &str| a.evidence.iter().any(|e| e.text.to_lowercase().contains(m));
    a.final_action == NextAction::Abstain
        || ABSTAIN_MARKERS.iter().any(|m| t.contains(m) && !quoted(m))
}

/// Tokens for F1: lowercase ASCII words, and single CJK characters.
pub fn f1_tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if super::prompt::has_cjk(&c.to_string()) {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    const STOP: &[&str] = &["a", "an", "the", "of", "to", "and", "in", "was", "is", "it"];
    out.retain(|w| !STOP.contains(&w.as_str()));
    out
}

/// Token F1 between an answer and one gold answer (SQuAD's rule, with CJK characters as tokens).
pub fn token_f1(answer: &str, gold: &str) -> f64 {
    let (a, g) = (f1_tokens(answer), f1_tokens(gold));
    if a.is_empty() || g.is_empty() {
        return if a == g { 1.0 } else { 0.0 };
    }
    let mut pool: BTreeMap<&str, i32> = BTreeMap::new();
    for t in &g {
        *pool.entry(t).or_default() += 1;
    }
    let mut common = 0;
    for t in &a {
        if let Some(n) = pool.get_mut(t.as_str()) {
            if *n > 0 {
                *n -= 1;
                common += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / a.len() as f64;
    let r = common as f64 / g.len() as f64;
    2.0 * p * r / (p + r)
}

/// Does the answer contain one of the gold answers (case-insensitive, whitespace ignored)?
pub fn contains_gold(answer: &str, golds: &[String]) -> bool {
    let a = super::validate::squash(&answer.to_lowercase());
    golds
        .iter()
        .any(|g| !g.trim().is_empty() && a.contains(&super::validate::squash(&g.to_lowercase())))
}

/// One question's outcome in the report.
#[derive(Clone, Debug, Serialize)]
pub struct EvalItem {
    /// Question id.
    pub id: String,
    /// Final action, or `error`.
    pub final_action: String,
    /// Actions in order.
    pub actions: String,
    /// The answer text (or the error).
    pub answer: String,
    /// Contains a gold answer.
    pub contains_gold: bool,
    /// Best token F1 over the gold answers.
    pub f1: f64,
    /// Seconds.
    pub seconds: f64,
    /// Ids of the passages shown over all rounds.
    pub evidence_ids: Vec<String>,
    /// The final answer's citations, `id: quote`.
    pub quotes: Vec<String>,
    /// Content words of the answer that no passage shown contains (empty for an abstention).
    pub unsupported_terms: Vec<String>,
    /// A span the answer repeats, if any.
    pub repeated_span: Option<String>,
    /// A passage shown contains a gold answer (answerable questions).
    pub gold_in_evidence: bool,
    /// Rank (from 1) of the reader's first span that contains a gold answer, among the spans
    /// kept with the first round (answerable questions).
    pub gold_span_rank: Option<usize>,
    /// The reader's best spans of the first round: `score dense lexical lead Eid: text`.
    pub spans: Vec<String>,
    /// Why the pipeline abstained on its own (weak retrieval, a reader floor, failed checks),
    /// if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abstain_reason: Option<String>,
}

/// The summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EvalSummary {
    /// Questions run.
    pub count: usize,
    /// Rounds whose raw output did not parse as written (before any repair).
    pub raw_json_failures: usize,
    /// Rounds whose action was recovered from broken output.
    pub repaired: usize,
    /// Questions that ended in an error.
    pub errors: usize,
    /// Abstain action or abstain-like answer.
    pub abstain_like: usize,
    /// Final `answer_directly`.
    pub direct_answers: usize,
    /// Final `clarify_user`.
    pub clarify: usize,
    /// Questions by number of rounds run.
    pub rounds: BTreeMap<usize, usize>,
    /// Questions by action sequence.
    pub action_sequences: BTreeMap<String, usize>,
    /// Citations written (all rounds).
    pub quotes: usize,
    /// Citations whose quote is a verbatim span of the cited passage.
    pub quotes_verified: usize,
    /// Citations whose id names a passage shown.
    pub citations_valid: usize,
    /// Answerable questions.
    pub answerable: usize,
    /// Answerable questions whose final answer contains a gold answer.
    pub contains_gold: usize,
    /// Mean best token F1 over answerable questions.
    pub mean_f1: f64,
    /// Unanswerable questions.
    pub unanswerable: usize,
    /// Unanswerable questions that ended abstain-like.
    pub unanswerable_abstained: usize,
    /// Answerable questions that ended abstain-like.
    pub answerable_abstained: usize,
    /// Answers (not abstentions) with a content word that no passage shown contains.
    pub unsupported_answers: usize,
    /// Answers (not abstentions) that repeat a span of four or more words.
    pub looping_answers: usize,
    /// Answerable questions with a gold answer in a passage shown (what retrieval allowed).
    pub gold_in_evidence: usize,
    /// Answerable questions whose reader's best span contains a gold answer.
    pub gold_in_best_span: usize,
    /// Mean seconds per question.
    pub avg_seconds: f64,
    /// Mean ms per grammar mask.
    pub mask_ms_mean: f64,
    /// Worst ms for one grammar mask.
    pub mask_ms_max: f64,
    /// Resident memory of the process in MiB after the first question and after the last
    /// (the soak's check: no growth beyond the first question's allocations; `None` where the
    /// platform does not report it).
    pub resident_mib: Option<[f64; 2]>,
    /// Resident memory in MiB after the last question of each pass over the set (`eval
    /// --repeat`): a leak grows it pass after pass; empty where the platform does not report it.
    pub resident_mib_per_pass: Vec<f64>,
    /// Per question.
    pub items: Vec<EvalItem>,
}

impl EvalSummary {
    /// Adds one question's outcome (`Err`: the pipeline failed with that message).
    pub fn add(&mut self, q: &AnswerQuestion, outcome: Result<&Answer, String>, seconds: f64) {
        self.count += 1;
        let answerable = !q.unanswerable && !q.answers.is_empty();
        if answerable {
            self.answerable += 1;
        } else {
            self.unanswerable += 1;
        }
        let mut item = EvalItem {
            id: q.id.clone(),
            final_action: "error".into(),
            actions: String::new(),
            answer: String::new(),
            contains_gold: false,
            f1: 0.0,
            seconds,
            evidence_ids: Vec::new(),
            quotes: Vec::new(),
            unsupported_terms: Vec::new(),
            repeated_span: None,
            gold_in_evidence: false,
            gold_span_rank: None,
            spans: Vec::new(),
            abstain_reason: None,
        };
        match outcome {
            Err(e) => {
                self.errors += 1;
                item.answer = e;
            }
            Ok(a) => {
                self.raw_json_failures += a.raw_json_failures();
                self.repaired += a.repaired();
                *self.rounds.entry(a.rounds.len()).or_default() += 1;
                item.actions = a.action_sequence();
                item.abstain_reason = a.abstain_reason.clone();
                *self
                    .action_sequences
                    .entry(item.actions.clone())
                    .or_default() += 1;
                for r in &a.rounds {
                    let Some(act) = &r.action else { continue };
                    let shown = &a.evidence;
                    for f in &act.supported_facts {
                        for rf in &f.evidence_refs {
                            self.quotes += 1;
                            let ev = shown.iter().find(|e| e.id == rf.evidence_id);
                            if ev.is_some() {
                                self.citations_valid += 1;
                            }
                            if ev.is_some_and(|e| super::validate::quote_in(&rf.quote, &e.text)) {
                                self.quotes_verified += 1;
                            }
                        }
                    }
                }
                let abst = abstain_like(a);
                if abst {
                    self.abstain_like += 1;
                    if answerable {
                        self.answerable_abstained += 1;
                    } else {
                        self.unanswerable_abstained += 1;
                    }
                } else {
                    let shown: String = a
                        .evidence
                        .iter()
                        .map(|e| e.text.to_lowercase())
                        .collect::<Vec<_>>()
                        .join(" ");
                    item.unsupported_terms = super::validate::answer_terms(&a.answer)
                        .into_iter()
                        .filter(|t| !shown.contains(t.as_str()))
                        .collect();
                    item.repeated_span = super::validate::repeated_span(&a.answer);
                    self.unsupported_answers += usize::from(!item.unsupported_terms.is_empty());
                    self.looping_answers += usize::from(item.repeated_span.is_some());
                }
                item.evidence_ids = a.evidence.iter().map(|e| e.id.clone()).collect();
                if let Some(r) = a.rounds.first() {
                    item.spans = r
                        .spans
                        .iter()
                        .map(|s| {
                            let id = a.evidence.get(s.passage).map_or("?", |e| e.id.as_str());
                            format!(
                                "{:.3} {:.3} {:.3} {:.3} {id}: {}",
                                s.score, s.dense, s.lexical, s.lead, s.text
                            )
                        })
                        .collect();
                    if answerable {
                        item.gold_span_rank = r
                            .spans
                            .iter()
                            .position(|s| contains_gold(&s.text, &q.answers))
                            .map(|i| i + 1);
                    }
                }
                if answerable {
                    item.gold_in_evidence = a
                        .evidence
                        .iter()
                        .any(|e| contains_gold(&e.text, &q.answers));
                    self.gold_in_evidence += usize::from(item.gold_in_evidence);
                    self.gold_in_best_span += usize::from(item.gold_span_rank == Some(1));
                }
                item.quotes = a
                    .facts
                    .iter()
                    .flat_map(|f| &f.refs)
                    .map(|r| format!("{}: {}", r.evidence_id, r.quote))
                    .collect();
                match a.final_action {
                    NextAction::AnswerDirectly => self.direct_answers += 1,
                    NextAction::ClarifyUser => self.clarify += 1,
                    _ => {}
                }
                if answerable && !abst {
                    item.contains_gold = contains_gold(&a.answer, &q.answers);
                    item.f1 = q
                        .answers
                        .iter()
                        .map(|g| token_f1(&a.answer, g))
                        .fold(0.0, f64::max);
                }
                if item.contains_gold {
                    self.contains_gold += 1;
                }
                self.mask_ms_max = self.mask_ms_max.max(a.timings.mask_ms_max);
                self.mask_ms_mean += a.timings.mask_ms_mean * a.timings.masks as f64;
                self.avg_seconds += a.timings.total_s;
                item.final_action = a.final_action.as_str().into();
                item.answer = a.answer.clone();
                if !answerable {
                    item.contains_gold = abst;
                }
            }
        }
        if answerable {
            self.mean_f1 += item.f1;
        }
        self.items.push(item);
    }

    /// Turns sums into means; `masks` is the number of grammar masks over the run.
    pub fn finish(&mut self, masks: usize) {
        let ok = (self.count - self.errors).max(1) as f64;
        self.avg_seconds /= ok;
        self.mean_f1 /= self.answerable.max(1) as f64;
        self.mask_ms_mean /= masks.max(1) as f64;
    }

    /// The summary as a Markdown table.
    pub fn markdown(&self) -> String {
        let pct = |n: usize, d: usize| {
            if d == 0 {
                "-".to_string()
            } else {
                format!("{n}/{d} ({:.0} %)", 100.0 * n as f64 / d as f64)
            }
        };
        let mut s = String::from("| metric | value |\n|---|---|\n");
        let mut row = |k: &str, v: String| s.push_str(&format!("| {k} | {v} |\n"));
        row("questions", self.count.to_string());
        row(
            "raw JSON failures (before repair)",
            self.raw_json_failures.to_string(),
        );
        row(
            "repaired (recovered from broken JSON)",
            self.repaired.to_string(),
        );
        row("errors", self.errors.to_string());
        row("abstain-like", self.abstain_like.to_string());
        row("direct answers", self.direct_answers.to_string());
        row("clarify", self.clarify.to_string());
        row(
            "rounds",
            self.rounds
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        row(
            "action sequences",
            self.action_sequences
                .iter()
                .map(|(k, v)| format!("{k} ×{v}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        row("quote validity", pct(self.quotes_verified, self.quotes));
        row("citation validity", pct(self.citations_valid, self.quotes));
        row(
            "answer contains gold",
            pct(self.contains_gold, self.answerable),
        );
        row("mean token F1", format!("{:.3}", self.mean_f1));
        row(
            "abstain-like on answerable",
            pct(self.answerable_abstained, self.answerable),
        );
        row(
            "unanswerable abstained",
            pct(self.unanswerable_abstained, self.unanswerable),
        );
        let answers = self.count - self.errors - self.abstain_like;
        row(
            "unsupported answers (a content word no passage shown has)",
            pct(self.unsupported_answers, answers),
        );
        row(
            "answers with a repeated span",
            pct(self.looping_answers, answers),
        );
        row("avg latency", format!("{:.1} s", self.avg_seconds));
        if let Some([first, last]) = self.resident_mib {
            row(
                "resident memory after the first / last question",
                format!("{first:.1} / {last:.1} MiB"),
            );
        }
        if self.resident_mib_per_pass.len() > 1 {
            let passes: Vec<String> = self
                .resident_mib_per_pass
                .iter()
                .map(|m| format!("{m:.1}"))
                .collect();
            row(
                "resident memory after each pass",
                format!("{} MiB", passes.join(" / ")),
            );
        }
        row(
            "grammar mask",
            format!(
                "mean {:.3} ms, max {:.2} ms",
                self.mask_ms_mean, self.mask_ms_max
            ),
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_and_contains() {
        assert!((token_f1("The White Rabbit", "white rabbit") - 1.0).abs() < 1e-12);
        // answer {rabbit, with, watch} vs gold {white, rabbit}: P 1/3, R 1/2.
        assert!((token_f1("a rabbit with a watch", "White Rabbit") - 0.4).abs() < 1e-12);
        assert_eq!(token_f1("", "rabbit"), 0.0);
        assert!((token_f1("英莲", "英莲") - 1.0).abs() < 1e-12);
        assert!((token_f1("名叫英莲", "英莲") - 2.0 / 3.0).abs() < 1e-12);
        assert!(contains_gold(
            "It was ORANGE  marmalade.",
            &["orange marmalade".into()]
        ));
        assert!(!contains_gold(
            "jam",
            &["orange marmalade".into(), " ".into()]
        ));
    }

    #[test]
    fn question_sets_parse_with_line_numbers() {
        let ok = "{\"id\":\"a\",\"question\":\"Who?\",\"answers\":[\"x\"]}\n\n{\"question\":\"Why?\",\"unanswerable\":true}\n";
        let qs = parse_answer_questions("q.jsonl", ok).expect("parses");
        assert_eq!(qs.len(), 2);
        assert!(qs[1].unanswerable);
        let bad = "{\"question\":\"Who?\"}\n{\"question\":3}\n";
        let e = parse_answer_questions("q.jsonl", bad).expect_err("line 2");
        assert!(e.starts_with("q.jsonl:2:"), "{e}");
        assert!(parse_answer_questions("q.jsonl", "{\"question\":\" \"}").is_err());
        assert!(parse_answer_questions("q.jsonl", "\n").is_err());
    }

    #[test]
    fn an_abstention_is_recorded_with_its_reason() {
        let q = AnswerQuestion {
            id: "hlm-u1".into(),
            question: "薛宝钗的父亲叫什么名字？".into(),
            answers: Vec::new(),
            unanswerable: true,
        };
        let why = "the best span is not close to the question: its cosine 0.869 < 0.870";
        let a = Answer {
            mode: crate::answer::Mode::Extractive,
            question: q.question.clone(),
            rounds: Vec::new(),
            final_action: NextAction::Abstain,
            answer: "The passages do not say.".into(),
            facts: Vec::new(),
            abstain_reason: Some(why.into()),
            snippets: Vec::new(),
            grammar: false,
            evidence: Vec::new(),
            timings: Default::default(),
        };
        let mut sum = EvalSummary::default();
        sum.add(&q, Ok(&a), 0.5);
        assert_eq!(sum.unanswerable_abstained, 1);
        assert_eq!(sum.items[0].abstain_reason.as_deref(), Some(why));
        let json = serde_json::to_value(&sum).expect("json");
        assert_eq!(json["items"][0]["abstain_reason"], why);
        // An answer carries no reason, and the field is left out of its JSON.
        let answered = Answer {
            final_action: NextAction::AnswerDirectly,
            answer: "薛蟠".into(),
            abstain_reason: None,
            ..a
        };
        sum.add(&q, Ok(&answered), 0.5);
        let json = serde_json::to_value(&sum).expect("json");
        assert!(json["items"][1].get("abstain_reason").is_none());
    }

    #[test]
    fn a_marker_quoted_from_the_evidence_is_not_an_abstention() {
        let shown = |text: &str| crate::answer::evidence::Evidence {
            id: "E1".into(),
            chunk: 0,
            chapter: String::new(),
            text: text.into(),
            fusion_score: 1.0,
        };
        let a = |answer: &str, evidence: &str| Answer {
            mode: crate::answer::Mode::Extractive,
            question: "What does he fear?".into(),
            rounds: Vec::new(),
            final_action: NextAction::AnswerDirectly,
            answer: answer.into(),
            facts: Vec::new(),
            abstain_reason: None,
            snippets: Vec::new(),
            grammar: true,
            evidence: vec![shown(evidence)],
            timings: Default::default(),
        };
        let quoting =
            "The undiscover'd country, from whose bourn No traveller returns; Unknown to all.";
        assert!(!abstain_like(&a("Unknown to all.", quoting)));
        // The same words where the evidence lacks them are the answer refusing.
        assert!(abstain_like(&a(
            "That is unknown.",
            "The undiscover'd country."
        )));
        assert!(abstain_like(&a(
            "The story does not say.",
            "He says nothing of it."
        )));
        let abstained = Answer {
            final_action: NextAction::Abstain,
            ..a("Unknown to all.", quoting)
        };
        assert!(abstain_like(&abstained));
    }

    #[test]
    fn soak_memory_is_reported_per_pass() {
        let mut sum = EvalSummary {
            resident_mib: Some([339.0, 351.0]),
            resident_mib_per_pass: vec![340.0],
            ..EvalSummary::default()
        };
        let md = sum.markdown();
        assert!(md.contains("339.0 / 351.0 MiB"), "{md}");
        assert!(!md.contains("after each pass"), "one pass: no row\n{md}");
        sum.resident_mib_per_pass = vec![340.0, 350.5, 351.0];
        assert!(sum.markdown().contains("340.0 / 350.5 / 351.0 MiB"));
        let json = serde_json::to_value(&sum).expect("json");
        assert_eq!(json["resident_mib_per_pass"][2], 351.0);
    }
}
