//! The extractive reader: the spans of the evidence that may answer the question, ranked
//! before the model writes anything.
//!
//! A passage of 600 characters holds a dozen sentences, and a 135M-parameter model picks the
//! one that answers little better than chance. The reader cuts every passage shown into
//! answer-sized spans (windows of whole clauses, across sentence ends; [`spans_of`]), and scores
//! each by
//!
//! `score = DENSE · dense + LEXICAL · lexical + LEAD · lead + KIND · kind`
//!
//! (the cosine's weight [`DENSE`] unless the config gives another for the embedder and the
//! question's language, [`ReaderConfig::dense_weight`])
//!
//! - `dense`: the cosine between the question and the span, with the index's own query
//!   embedder (the spans embedded as passages, packed into few forward passes);
//! - `lexical`: the share of the question's terms (stemmed), weighted by their BM25 idf in the
//!   story, that the span holds (a question is mostly written from the sentence that answers
//!   it);
//! - `lead`: the same share in the clause just before the span (the answer usually follows
//!   the words the question was written from: `… a paper label,` → `with the words …`);
//! - `kind`: 1 when the span holds, beyond the question's own words, the kind of answer the
//!   question asks for ([`Wants`]: a name for "who …", a number for "how many …", quoted
//!   words for "what did … say", a cause for "why …"), else 0.
//!
//! A span that adds no term beyond the question's answers nothing and is dropped; a best span
//! that holds none of the question's words beyond its names (nor a story word near one, by the
//! index's encoder) speaks of the people asked about but not of what is asked, and the reader
//! abstains ([`Span::topic`], [`kind_shortfall`]). The best
//! span's score is the evidence's answer confidence: under a configured floor the pipeline
//! abstains, with the best passages as snippets (none by default: [`default_floor`]). The
//! grammar then lets the model choose among the best spans only, and its quote, its first fact
//! and its final answer are that span.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::asked::{question_terms, Asked};
pub use super::asks::{wants, Wants};
use super::evidence::Evidence;
pub use super::spans::spans_of;
use super::spans::windows;
pub use super::stems::stem;
use super::stems::{same_stem, stems};
use super::validate::FUNCTION_WORDS;
use crate::retrieval::{bm25, EntityGraph};

/// Weight of the dense cosine in a span's score: a tie-breaker. At the span level the
/// embedder favours the spans that restate the question over the one that answers it (on the
/// Alice set, re-scoring each question's kept spans: the best span held the answer for 18 of
/// 61 with weights dense 1, lead 0.5, and for 22 with dense 0.1, lead 1). Re-scoring every
/// span of the four English sets (263 answerable questions, after "which character …" asked
/// for a name): dense 0.1 / 0.15 / 0.2 / 0.25 / 0.3 put the answer in the best span for 90 /
/// 92 / 95 / 94 / 94, on the held-out *Hamlet* and *Botchan* 36 / 37 / 39 / 38 / 37.
pub const DENSE: f32 = 0.2;
/// Weight of the lexical share in a span's score.
pub const LEXICAL: f32 = 1.0;
/// Weight of the lexical share of the clause before a span.
pub const LEAD: f32 = 1.0;
/// Weight of a span holding the kind of answer the question asks for ([`Wants`]): a kind that
/// fits outweighs half the question's terms, not all of them. On the Alice set (reader only,
/// floor off) the best span held the answer for 21 of 61 questions without it and for 25 with
/// it.
pub const KIND: f32 = 0.6;
/// A span's `kind` when the question asks for a name and the span names someone the question
/// does not (`KIND · NAME_FIT` = 1.8): a span that names no one new cannot answer "who …",
/// however many of the question's words it holds. On the four English sets (263 answerable
/// questions, re-scored) the best span held the answer equally often with a name weighing
/// 0.6, 1.0, 1.5, 2.5 or 5.0; the demo question ("Who did Alice follow down the rabbit
/// hole?") needs it: the span that restates "rabbit-hole" names no one.
pub const NAME_FIT: f32 = 3.0;
/// Weight of the span's passage's retrieval score (over the best passage's): the reader trusts
/// the ranking that chose the passages. Reader only, floor off, the best span held the answer
/// for 27 → 28 of 61 *Alice* questions and 15 → 19 of 60 *Tempest* ones (prior weights 0.2 /
/// 0.4 / 0.8 / 1.2 / 1.6: Alice 26 / 25 / 28 / 28 / 28, Tempest 18 / 17 / 19 / 19 / 20). The
/// reader's floor is applied without it ([`Span::answer_score`]), so abstention does not change.
pub const PRIOR: f32 = 1.2;

/// How long a span and the rest of its sentence may be together ([`Span::rest`]): 1.5 times the
/// span `cap`. An answer that stops at "The executioner's argument was," has not said the
/// argument yet; at twice the cap, answers grew 12–18 characters longer on the English sets
/// for one more right answer (README, "Answers that finish their sentence").
pub fn finish_chars(cap: usize) -> usize {
    cap + cap / 2
}

/// The reader's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReaderConfig {
    /// The best spans the model may choose its answer from (0: the reader is off, and the
    /// answer may be any span of the passage its first fact cites). 1, the default, leaves the
    /// choice to the reader: on the Alice set the reader's best span holds the answer more
    /// often (25 of 61) than SmolLM2-135M's own span (4 of 61), and letting the model pick
    /// among 3 spans answered no more questions than the reader's first (18 of 61 each,
    /// measured before [`KIND`]).
    pub choices: usize,
    /// Abstain in the first round when the best span scores under the floor for the index's
    /// embedder kind (`none`: no embedder, lexical share only); empty by default
    /// ([`default_floor`], measured on the project's question sets, unanswerable ones
    /// included).
    pub floor: BTreeMap<String, f32>,
    /// Abstain in the first round when the best-ranked span's cosine with the question (the
    /// index's embedder) is under the floor for the embedder's kind and the question's
    /// language ([`cosine_key`]: `e5s1/zh`; [`default_cosine_floor`]).
    pub cosine_floor: BTreeMap<String, f32>,
    /// The weight of a span's cosine with the question in its score, by the index's embedder
    /// kind and the question's language ([`cosine_key`]); [`DENSE`] where none is given (none
    /// by default).
    ///
    /// e5's cosines between a question and the spans shown lie close together (红楼梦: the
    /// reader's 8 best spans mostly within 0.85–0.93; all-MiniLM-L6-v2's on the English sets
    /// over 0.2–0.7), so at [`DENSE`] they hardly move the order. On 红楼梦 (`e5s1/zh`) the
    /// weights 0.2 / 1 / 2 / 3 answered 23 / 25 / 26 / 27 of 70 answerable questions right
    /// and abstained on 16 / 14 / 12 / 11 of the 20 unanswerable ones: the spans the cosine
    /// brings forward name the thing asked about, so the abstentions by it
    /// ([`kind_shortfall`]) fall as the right answers rise, and the default stays (README, "The
    /// thing asked about").
    pub dense_weight: BTreeMap<String, f32>,
}

impl ReaderConfig {
    /// The weight of the cosine for the embedder and language `key` ([`cosine_key`]).
    pub fn dense_weight(&self, key: &str) -> f32 {
        self.dense_weight.get(key).copied().unwrap_or(DENSE)
    }
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            choices: 1,
            floor: default_floor(),
            cosine_floor: default_cosine_floor(),
            dense_weight: BTreeMap::new(),
        }
    }
}

/// Span-cosine floors by embedder kind and question language (see
/// [`ReaderConfig::cosine_floor`]): 0.87 for multilingual-e5-small (`e5s1`) on Chinese
/// questions, none otherwise.
///
/// With e5 on 红楼梦 the best-ranked span's cosine (the span the answer is built from) tells
/// the unanswerable questions from the answerable ones (20 on-story unanswerable and 70
/// answerable questions: area under the curve 0.89; the closest span's cosine 0.81, the best
/// span's lexical share 0.55, its reader score 0.28). At 0.87 the reader abstains on 10 of
/// the 20 and on 3 of the 70, none of them answered right. A two-fold split of the set, each
/// half's floor chosen for at most 10 % abstentions on its answerable questions (0.876,
/// 0.879), abstained on 5 / 6 of the other half's 10 unanswerable questions and on 3 / 5 of
/// its 35 answerable ones. On English questions span cosines do not separate them, with e5
/// (*Alice* 0.49, *The Tempest* 0.42, over the reader's 8 best spans) or with
/// all-MiniLM-L6-v2 (best-ranked span: *Alice* + *The Tempest* 0.51, *Hamlet* + *Botchan*
/// 0.65), nor does any other reader or retrieval score (README, "Abstention decided by the
/// evidence").
pub fn default_cosine_floor() -> BTreeMap<String, f32> {
    [("e5s1/zh".to_string(), 0.87)].into_iter().collect()
}

/// The key of [`ReaderConfig::cosine_floor`] for an embedder `kind` and a `question`:
/// `kind/zh` when the question holds Chinese characters, else `kind/en` (the floors are
/// measured per language: an embedder's cosines sit at different heights in each).
pub fn cosine_key(kind: &str, question: &str) -> String {
    let lang = if super::prompt::has_cjk(question) {
        "zh"
    } else {
        "en"
    };
    format!("{kind}/{lang}")
}

/// Answer-confidence floors by embedder kind (see [`ReaderConfig::floor`]): none by default.
/// The floor of 0.35 once calibrated for all-MiniLM-L6-v2 (`bert`) on the Alice set cost more
/// than it caught once scripts and a held-out novel were measured (reader only, each story's
/// questions; README, "Abstention"): over Alice, *The Tempest*, *Hamlet* and *Botchan* it sent
/// 5 of 54 unanswerable questions to the abstention and 56 of 263 answerable ones (Tempest 17
/// of 60, Hamlet 24 of 59), and 4 fewer best spans held the answer. Unanswerable
/// and answerable questions' best scores overlap on every set, so no floor separates them.
pub fn default_floor() -> BTreeMap<String, f32> {
    BTreeMap::new()
}

/// Why the reader finds no answer in the passages shown, if it does not: with a score `floor`,
/// when no span could answer (`best` is `f32::MIN`) or the best span's [`Span::answer_score`]
/// is under it; with a `cosine_floor`, when the best-ranked span's cosine with the question
/// (`cosine`; `f32::MIN` when nothing was embedded, which never abstains) is under it.
pub fn shortfall(
    best: f32,
    cosine: f32,
    floor: Option<f32>,
    cosine_floor: Option<f32>,
) -> Option<String> {
    match (floor, cosine_floor) {
        (Some(_), _) if best == f32::MIN => {
            Some("no passage shown holds a span that could answer".to_string())
        }
        (Some(floor), _) if best < floor => Some(format!(
            "no span likely answers: best reader score {best:.3} < {floor:.3}"
        )),
        (_, Some(floor)) if cosine > f32::MIN && cosine < floor => Some(format!(
            "the best span is not close to the question: its cosine {cosine:.3} < {floor:.3}"
        )),
        _ => None,
    }
}

/// Why the evidence cannot answer a question that asks for a kind of answer the best-ranked
/// span `best` (the one the answer is built from) does not give: a number when it asks "how
/// many …" and the span holds none; a name when it asks for a name as such
/// ([`super::asks::names_asked`]) and the span gives no short answer ([`Span::short`]: no
/// name the question lacks, or several); whatever the kind, when the span does not mention
/// the thing the question asks about ([`super::asks::focus`]: the nephew whose name is asked,
/// the legs counted, an age); and for a name as such, when the span gives no name as a name
/// ([`super::asks::gives_a_name`]: named, called, `Mr. …`); and whatever the question asks,
/// when the span, with the clause before it and the rest of its sentence, holds none of the
/// question's words beyond its names, nor a story word near one of them ([`Span::topic`]:
/// "What does the Queen of Hearts eat for breakfast?" → `came THE KING AND QUEEN OF
/// HEARTS.`). `None` when it gives what is asked, or the question asks for none of these.
///
/// On the four English sets (263 answerable and 54 on-story unanswerable questions) the
/// kind of answer the best span lacks is the one signal that tells them apart (README,
/// "Abstention by the kind of answer").
pub fn kind_shortfall(question: &str, wants: Wants, best: Option<&Span>) -> Option<String> {
    let best = best?;
    if wants == Wants::Number && best.kind <= 0.0 {
        return Some("the question asks for a number and the best span holds none".to_string());
    }
    if wants == Wants::Named && best.kind <= 0.0 {
        return Some(
            "the question asks which place or work and the best span names none".to_string(),
        );
    }
    if wants == Wants::Name && super::asks::names_asked(question) && best.short.is_none() {
        return Some(
            "the question asks for a name and the best span gives none the question lacks"
                .to_string(),
        );
    }
    let focus = super::asks::focus(question);
    let said = format!("{}{}", best.text, best.rest);
    if !focus.is_empty() && !super::asks::mentions(&said, &focus) {
        return Some(format!(
            "the best span does not mention what the question asks about ({})",
            focus.join(" / ")
        ));
    }
    if let Some(noun) = super::asks::coloured(question) {
        if super::asks::colour_of(&said, &noun) == Some(false) {
            return Some(format!(
                "the best span names a colour, but not of what the question asks about ({noun})"
            ));
        }
    }
    if wants == Wants::Name
        && super::asks::names_asked(question)
        && !super::asks::gives_a_name(&said)
    {
        return Some(
            "the question asks for a name and the best span gives none as a name (named, \
             called, Mr. …)"
                .to_string(),
        );
    }
    if best.topic <= 0.0 {
        return Some(
            "the best span speaks of what the question names but of nothing it asks".to_string(),
        );
    }
    None
}

/// The cosine with the question of the best-ranked span of `spans` (sorted by [`rank`]), the
/// one the answer is built from; `f32::MIN` when nothing was `embedded` or there is no span.
/// The floor reads it rather than the closest span's: on 红楼梦 it tells the unanswerable
/// questions better (area under the curve 0.89 against 0.81; [`default_cosine_floor`]).
pub fn ranked_cosine(spans: &[Span], embedded: bool) -> f32 {
    match spans.first() {
        Some(s) if embedded => s.dense,
        _ => f32::MIN,
    }
}

/// A span of a passage shown that may answer the question.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Index of its passage in the evidence shown.
    pub passage: usize,
    /// Its text, verbatim from the passage.
    pub text: String,
    /// Cosine with the question (0 without an embedder).
    pub dense: f32,
    /// The idf-weighted share of the question's terms it holds.
    pub lexical: f32,
    /// The same share in the clause just before it: a span that follows the words the
    /// question was written from is likely the answer (`… a paper label,` → `with the words
    /// "DRINK ME" …`).
    #[serde(default)]
    pub lead: f32,
    /// 1 when the span holds the kind of answer the question asks for ([`Wants`]), else 0;
    /// [`NAME_FIT`] for a name.
    #[serde(default)]
    pub kind: f32,
    /// The idf-weighted share of the question's terms beyond its names ([`Asked::name_terms`])
    /// that the span holds with the clause before it and the rest of its sentence, a term's
    /// nearest story words counting as the term ([`Asked::neighbours`]); 1 when the question
    /// has none. At 0 the span speaks of the people the question names but of nothing it
    /// asks, and the reader abstains ([`kind_shortfall`]).
    #[serde(default = "one")]
    pub topic: f32,
    /// Its passage's retrieval score over the best passage's (1 for the best passage).
    #[serde(default)]
    pub prior: f32,
    /// In a script, the label of the speaker whose line it lies in (`Antonio:`), when it does
    /// not open with it: for a question that asks who, the speaker is the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The words that finish its sentence when it stops on an open mark (`The executioner's
    /// argument was,` → ` that you couldn't cut off a head …`), verbatim after it in its
    /// passage; the answer gives them ([`Span::answer`]), the score does not read them.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rest: String,
    /// The short answer it gives for the kind asked ([`super::naming`]): the name, as the
    /// evidence writes it most fully, when the question asks for a name and the span names one
    /// new person (in a speaker's line, or between quotation marks, only when it asks for a
    /// name as such); the quoted words when it asks what was said or written and the span
    /// quotes one new thing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<super::naming::Short>,
    /// `w · dense + LEXICAL · lexical + LEAD · lead + KIND · kind + PRIOR · prior`, `w` the
    /// cosine's weight ([`ReaderConfig::dense_weight`], [`DENSE`] by default).
    pub score: f32,
}

impl Span {
    /// A span of passage `passage` with `text`, every score 0 (tests set the ones they read).
    #[cfg(test)]
    pub(crate) fn of(passage: usize, text: &str) -> Span {
        Span {
            passage,
            text: text.into(),
            topic: 1.0,
            ..Span::default()
        }
    }

    /// How likely the span answers, from its own words: the score without the passage's
    /// retrieval prior (what the reader's floor is compared with).
    pub fn answer_score(&self, dense_weight: f32) -> f32 {
        dense_weight * self.dense + LEXICAL * self.lexical + LEAD * self.lead + KIND * self.kind
    }

    /// The span as the answer to a question that asks for `wants`: the span with the rest of
    /// its sentence ([`Span::rest`]), after the speaker's label and an ellipsis when a name is
    /// asked for and the span lies in a speaker's line (`Antonio: … twenty consciences`); when
    /// the span gives a short answer of the kind asked ([`Span::short`]), that (`The White
    /// Rabbit`, `ORANGE MARMALADE`; a further fact quotes it when the span's quote does not).
    pub fn answer(&self, wants: Wants) -> String {
        if let Some(short) = self.short_answer(wants) {
            return short.answer();
        }
        match (&self.speaker, wants) {
            (Some(who), Wants::Name) if !crate::retrieval::script::is_group(who) => {
                format!("{who} … {}{}", self.text, self.rest)
            }
            _ => format!("{}{}", self.text, self.rest),
        }
    }

    /// The short answer the span answers with when the question asks for `wants`
    /// ([`Span::short`]). In a speaker's line the speaker answers who, and a name is read
    /// only when the question asks for a name as such ([`super::asks::names_asked`]: "What is
    /// the name of Prospero's brother?" → `Antonio`).
    pub fn short_answer(&self, wants: Wants) -> Option<&super::naming::Short> {
        match (&self.speaker, wants) {
            (_, Wants::Name) | (None, Wants::Words) => self.short.as_ref(),
            _ => None,
        }
    }
}

fn one() -> f32 {
    1.0
}

/// Does a span (its stemmed terms) add a term beyond the question's (a word of three or more
/// letters that is not a function word, or a CJK bigram)?
fn adds_terms(span: &[String], asked: &[(String, f32)]) -> bool {
    span.iter().any(|t| {
        let cjk = t.chars().any(|c| super::prompt::has_cjk(&c.to_string()));
        (cjk || t.chars().count() >= 3)
            && !FUNCTION_WORDS.contains(&t.as_str())
            && !asked.iter().any(|(a, _)| same_stem(a, t))
    })
}

/// The answer-sized spans of `evidence` ([`spans_of`]: at most `max` characters, at least
/// `min`) that add a term beyond the question, each once, with its lexical share (the idf
/// weight of the question's terms it holds over their total), its lead and its kind
/// ([`Asked::fits`], names from `graph`). `dense` and `score` are left for [`rank`].
pub fn candidates(
    evidence: &[Evidence],
    question: &Asked,
    graph: Option<&EntityGraph>,
    max: usize,
    min: usize,
) -> Vec<Span> {
    let asked = &question.terms;
    let total: f32 = asked.iter().map(|(_, w)| w).sum();
    let topic_terms = question.topic_terms();
    let topic_total: f32 = topic_terms.iter().map(|(_, w)| w).sum();
    let mut out: Vec<Span> = Vec::new();
    let best = evidence
        .iter()
        .map(|e| e.fusion_score)
        .fold(0.0f32, f32::max);
    for (p, e) in evidence.iter().enumerate() {
        let prior = if best > 0.0 {
            e.fusion_score / best
        } else {
            0.0
        };
        for w in windows(&e.text, max, min, finish_chars(max)) {
            let text = w.text;
            let own = stems(&text);
            if !adds_terms(&own, asked) || out.iter().any(|o| o.text == text) {
                continue;
            }
            let share = |terms: &[String]| -> f32 {
                let got: f32 = asked
                    .iter()
                    .filter(|(t, _)| terms.iter().any(|o| same_stem(o, t)))
                    .map(|(_, w)| w)
                    .sum();
                if total > 0.0 {
                    got / total
                } else {
                    0.0
                }
            };
            // Who speaks a line answers "who says …": the label counts with the span, unless it
            // names a group (an index built before groups were no entities still holds them).
            // A place or work is named in the line, never by its label.
            let fits = match question.wants {
                Wants::Named => {
                    let in_line =
                        w.speaker.is_some() || super::spans::starts_with_speaker_label(&text);
                    question.names_new(&text, &w.before, graph, in_line)
                }
                Wants::Name => {
                    question.fits(&text, graph)
                        || w.speaker.as_ref().is_some_and(|l| {
                            !crate::retrieval::script::is_group(l) && question.fits(l, graph)
                        })
                }
                _ => question.fits(&text, graph),
            };
            let kind = match (fits, question.wants) {
                (false, _) => 0.0,
                (true, Wants::Name | Wants::Named) => NAME_FIT,
                (true, _) => 1.0,
            };
            let topic = {
                let said = format!("{} {text} {}", w.before, w.rest);
                let around: Vec<String> = stems(&said);
                let terms: Vec<String> = bm25::tokenize(&said)
                    .into_iter()
                    .filter_map(bm25::term)
                    .collect();
                let near = |t: &str| {
                    question
                        .neighbours
                        .iter()
                        .filter(|(q, _)| q == t)
                        .any(|(_, n)| n.iter().any(|x| terms.contains(x)))
                };
                let got: f32 = topic_terms
                    .iter()
                    .filter(|(t, _)| around.iter().any(|o| same_stem(o, t)) || near(t))
                    .map(|(_, w)| w)
                    .sum();
                if topic_total > 0.0 {
                    got / topic_total
                } else {
                    1.0
                }
            };
            out.push(Span {
                passage: p,
                topic,
                lexical: share(&own),
                lead: share(&stems(&w.before)),
                kind,
                speaker: w.speaker,
                rest: w.rest,
                short: None,
                text,
                dense: 0.0,
                prior,
                score: 0.0,
            });
        }
    }
    out
}

/// The quote that grounds `span` as an answer to `question`: the span itself when it has at
/// most `max` characters, else its window of at most `max` characters ([`spans_of`]) with the
/// most answer terms the question lacks (the first such window on a tie), so the quote
/// supports the answer rather than restating the question.
pub fn quote_of(span: &str, question: &str, max: usize) -> String {
    if span.chars().count() <= max {
        return span.to_string();
    }
    let asked = super::validate::answer_terms(question);
    let novel = |w: &str| {
        super::validate::answer_terms(w)
            .iter()
            .filter(|t| !asked.contains(t))
            .count()
    };
    let mut best: Option<(usize, String)> = None;
    for w in spans_of(span, max, 1) {
        let n = novel(&w);
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, w));
        }
    }
    best.map_or_else(|| span.chars().take(max).collect(), |(_, w)| w)
}

/// How many spans the embedder scores first ([`to_embed`]): the best by their score without
/// the cosine.
pub const EMBED_FIRST: usize = 8;

/// Which of `spans` the embedder must still score, given the cosines known so far (`cos`, one
/// per span, `None` where not embedded) and the weight of the cosine: with none known, the
/// [`EMBED_FIRST`] best by their score without the cosine; then every span not embedded
/// whose score without the cosine, plus `dense_weight` (a cosine is at most 1), reaches the
/// best full score known. Embedding them until none is left (two calls at most: a later
/// call could only add spans the one before had already asked for), the best span is the
/// one that every span embedded gives, whatever the cosines; the others take the lowest
/// cosine known, and stay behind it. Before, every span within `2 · dense_weight` of the
/// best without the cosine was embedded (per question: *Alice* 12 of 94 spans, *The
/// Tempest* 31 of 133, 红楼梦 78 of 312); a question now takes 0.06 s instead of 0.16 on *The
/// Tempest* and 0.36 s instead of 3.6 on 红楼梦 (README, "The thing asked about").
pub fn to_embed(spans: &[Span], cos: &[Option<f32>], dense_weight: f32) -> Vec<usize> {
    let plain: Vec<f32> = spans
        .iter()
        .map(|s| s.answer_score(0.0) + PRIOR * s.prior)
        .collect();
    let known = |i: usize| cos.get(i).copied().flatten();
    let best = (0..spans.len())
        .filter_map(|i| known(i).map(|c| plain[i] + dense_weight * c))
        .fold(f32::MIN, f32::max);
    if best == f32::MIN {
        let mut order: Vec<usize> = (0..spans.len()).collect();
        order.sort_by(|&a, &b| plain[b].total_cmp(&plain[a]));
        order.truncate(EMBED_FIRST);
        order.sort_unstable();
        return order;
    }
    (0..spans.len())
        .filter(|&i| known(i).is_none() && plain[i] + dense_weight >= best)
        .collect()
}

/// Scores `spans` with their `dense` cosines (one per span; empty without an embedder), each
/// weighing `dense_weight` ([`ReaderConfig::dense_weight`]), and sorts them best first (ties
/// keep passage order).
pub fn rank(spans: &mut [Span], dense: &[f32], dense_weight: f32) {
    for (i, s) in spans.iter_mut().enumerate() {
        s.dense = dense.get(i).copied().unwrap_or(0.0);
        s.score = s.answer_score(dense_weight) + PRIOR * s.prior;
    }
    spans.sort_by(|a, b| b.score.total_cmp(&a.score));
}

/// The `k` best spans among the first `shown` passages that the model may choose from, each
/// one a different reading: a span sharing more than half its words with a better one (an
/// overlapping window of the same sentences) is left out.
pub fn choices(spans: &[Span], shown: usize, k: usize) -> Vec<&Span> {
    let words =
        |t: &str| -> std::collections::BTreeSet<String> { bm25::tokenize(t).into_iter().collect() };
    let mut out: Vec<(&Span, std::collections::BTreeSet<String>)> = Vec::new();
    for s in spans.iter().filter(|s| s.passage < shown) {
        if out.len() == k {
            break;
        }
        let w = words(&s.text);
        let overlaps = out.iter().any(|(_, o)| {
            let common = w.intersection(o).count();
            2 * common > w.len().min(o.len())
        });
        if !overlaps {
            out.push((s, w));
        }
    }
    out.into_iter().map(|(s, _)| s).collect()
}

/// Orders the passages of `evidence` from `from` on by their best span (passages with no span
/// keep their order after the others), renumbers them `E{from+1}…`, and points `spans` at the
/// new order. Earlier passages (shown in earlier rounds) keep their place and ids.
pub fn reorder(evidence: &mut [Evidence], spans: &mut [Span], from: usize) {
    let n = evidence.len();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for s in spans.iter().filter(|s| s.passage >= from && s.passage < n) {
        if !order.contains(&s.passage) {
            order.push(s.passage);
        }
    }
    let rest: Vec<usize> = (from..n).filter(|p| !order.contains(p)).collect();
    order.extend(rest);
    let old: Vec<Evidence> = evidence.to_vec();
    let mut at: Vec<usize> = (0..n).collect();
    for (k, &p) in order.iter().enumerate() {
        evidence[from + k] = old[p].clone();
        evidence[from + k].id = format!("E{}", from + k + 1);
        at[p] = from + k;
    }
    for s in spans.iter_mut().filter(|s| s.passage < n) {
        s.passage = at[s.passage];
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
