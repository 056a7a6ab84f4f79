//! The extractive reader: the spans of the evidence that may answer the question, ranked
//! before the model writes anything.
//!
//! A passage of 600 characters holds a dozen sentences, and a 135M-parameter model picks the
//! one that answers little better than chance. The reader cuts every passage shown into
//! answer-sized spans (windows of whole clauses, across sentence ends; [`spans_of`]), and scores
//! each by
//!
//! `score = DENSE · dense + LEXICAL · lexical + LEAD · lead`
//!
//! - `dense`: the cosine between the question and the span, with the index's own query
//!   embedder (the spans embedded as passages, packed into few forward passes);
//! - `lexical`: the share of the question's terms (stemmed), weighted by their BM25 idf in the
//!   story, that the span holds (a question is mostly written from the sentence that answers
//!   it);
//! - `lead`: the same share in the clause just before the span (the answer usually follows
//!   the words the question was written from: `… a paper label,` → `with the words …`).
//!
//! A span that adds no term beyond the question's answers nothing and is dropped. The best
//! span's score is the evidence's answer confidence: under a calibrated floor the pipeline
//! abstains, with the best passages as snippets. The grammar then lets the model choose among
//! the best spans only, and its quote, its first fact and its final answer are that span.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::evidence::Evidence;
use super::validate::FUNCTION_WORDS;
use crate::retrieval::{bm25, Bm25Index};

/// Weight of the dense cosine in a span's score: a tie-breaker. At the span level the
/// embedder favours the spans that restate the question over the one that answers it (on the
/// Alice set, re-scoring each question's kept spans: the best span held the answer for 18 of
/// 61 with weights dense 1, lead 0.5, and for 22 with dense 0.1, lead 1).
pub const DENSE: f32 = 0.1;
/// Weight of the lexical share in a span's score.
pub const LEXICAL: f32 = 1.0;
/// Weight of the lexical share of the clause before a span.
pub const LEAD: f32 = 1.0;

/// The reader's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReaderConfig {
    /// The best spans the model may choose its answer from (0: the reader is off, and the
    /// answer may be any span of the passage its first fact cites). 1, the default, leaves the
    /// choice to the reader: on the Alice set the reader's best span holds the answer more
    /// often (19 of 61) than SmolLM2-135M's own span (4 of 61).
    pub choices: usize,
    /// Abstain in the first round when the best span scores under the floor for the index's
    /// embedder kind (`none`: no embedder, lexical share only). Calibrated on the project's
    /// question sets, unanswerable questions included (README, "Abstention").
    pub floor: BTreeMap<String, f32>,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            choices: 1,
            floor: default_floor(),
        }
    }
}

/// Answer-confidence floors by embedder kind (see [`ReaderConfig::floor`]). all-MiniLM-L6-v2
/// (`bert`), on the Alice set: 0.35 sends 4 of 61 answerable questions (one with a span holding
/// the answer) and 5 of 20 unanswerable ones to the abstention; higher floors cost answerable
/// questions faster than they catch unanswerable ones (README, "Abstention"). Other kinds are
/// not calibrated yet and have no floor.
pub fn default_floor() -> BTreeMap<String, f32> {
    [("bert".to_string(), 0.35)].into_iter().collect()
}

/// A span of a passage shown that may answer the question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// `DENSE · dense + LEXICAL · lexical + LEAD · lead`.
    pub score: f32,
}

/// Cuts `text` into spans of at most `max` characters: every window of consecutive clauses
/// (a clause ends after `.` `!` `?` `;` `,` `:` `—` or their CJK forms, with any closing quote;
/// a clause longer than `max` is cut into runs of whole words) that fits, the longest from each
/// clause on. A window may cross a sentence end: the answer is often the clause after the one
/// the question was written from. Spans are trimmed verbatim substrings of `text`, at least
/// `min` characters long, each once.
pub fn spans_of(text: &str, max: usize, min: usize) -> Vec<String> {
    windows(text, max, min)
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

/// The spans of [`spans_of`], each with the clause just before it in `text` (empty for the
/// first).
fn windows(text: &str, max: usize, min: usize) -> Vec<(String, String)> {
    let max = max.max(1);
    let units: Vec<(usize, usize)> = clauses(text)
        .into_iter()
        .flat_map(|(a, b)| runs(text, a, b, max))
        .collect();
    let len = |a: usize, b: usize| text[a..b].trim().chars().count();
    let mut out: Vec<(String, String)> = Vec::new();
    for i in 0..units.len() {
        let mut j = i;
        while j + 1 < units.len() && len(units[i].0, units[j + 1].1) <= max {
            j += 1;
        }
        let span = text[units[i].0..units[j].1].trim();
        if span.chars().count() >= min.min(max) && !out.iter().any(|(o, _)| o == span) {
            let before = i
                .checked_sub(1)
                .map_or("", |p| text[units[p].0..units[p].1].trim());
            out.push((span.to_string(), before.to_string()));
        }
        if j + 1 == units.len() {
            break;
        }
    }
    out
}

/// Byte ranges of the clauses of `text` (see [`spans_of`]), empty ones dropped.
fn clauses(text: &str) -> Vec<(usize, usize)> {
    let end = |c: char| ".!?;,:—。！？；，：、".contains(c);
    let closing = |c: char| "'\"’”)]」』）`".contains(c);
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !end(c) {
            continue;
        }
        let mut stop = i + c.len_utf8();
        while let Some(&(j, d)) = it.peek() {
            if !(closing(d) || end(d)) {
                break;
            }
            stop = j + d.len_utf8();
            it.next();
        }
        out.push((start, stop));
        start = stop;
    }
    out.push((start, text.len()));
    out.retain(|&(a, b)| !text[a..b].trim().is_empty());
    out
}

/// The clause `text[a..b]` as byte ranges of at most `max` characters each: itself when it
/// fits, else runs of whole words (a word longer than `max`, or CJK text without spaces, in
/// runs of `max` characters).
fn runs(text: &str, a: usize, b: usize, max: usize) -> Vec<(usize, usize)> {
    if text[a..b].trim().chars().count() <= max {
        return vec![(a, b)];
    }
    let mut out = Vec::new();
    let (mut start, mut count, mut last_space) = (a, 0usize, None);
    for (i, c) in text[a..b].char_indices() {
        let i = a + i;
        if count == max {
            let cut = last_space.filter(|&s| s > start).unwrap_or(i);
            out.push((start, cut));
            start = cut;
            count = text[start..i].chars().count();
            last_space = None;
        }
        if c == ' ' {
            last_space = Some(i);
        }
        count += 1;
    }
    out.push((start, b));
    out.retain(|&(x, y)| !text[x..y].trim().is_empty());
    out
}

/// A term cut to its stem for matching: `dropped` and `drops` match `drop`, `running` matches
/// `run` (English suffixes only; CJK bigrams are kept).
pub fn stem(t: &str) -> String {
    if !t.is_ascii() {
        return t.to_string();
    }
    for suf in ["ing", "ed", "es", "s", "ly"] {
        if let Some(base) = t.strip_suffix(suf) {
            if base.len() >= 3 {
                let b = base.as_bytes();
                let n = b.len();
                // A doubled final consonant (dropped → dropp → drop).
                if suf.len() > 1 && b[n - 1] == b[n - 2] && !b"aeiousl".contains(&b[n - 1]) {
                    return base[..n - 1].to_string();
                }
                return base.to_string();
            }
        }
    }
    t.to_string()
}

/// The question's terms, stemmed ([`stem`]), with their idf in the story (terms the story
/// lacks get the idf of a term found once), function words left out.
pub fn question_terms(question: &str, bm25: &Bm25Index) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    for t in bm25::tokenize(question) {
        let st = stem(&t);
        if FUNCTION_WORDS.contains(&t.as_str()) || out.iter().any(|(u, _)| *u == st) {
            continue;
        }
        let df = bm25.postings(&t).map_or(1, <[_]>::len);
        out.push((st, bm25.idf(df)));
    }
    out
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

fn stems(text: &str) -> Vec<String> {
    bm25::tokenize(text).iter().map(|t| stem(t)).collect()
}

/// Do two stems name the same word: equal, or one of four or more letters that the other
/// extends by at most two (`label` / `labell`)?
fn same_stem(a: &str, b: &str) -> bool {
    let (s, l) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    s == l || (s.is_ascii() && s.len() >= 4 && l.len() <= s.len() + 2 && l.starts_with(s))
}

/// The answer-sized spans of `evidence` ([`spans_of`]: at most `max` characters, at least
/// `min`) that add a term beyond the question, each once, with its lexical share: the idf
/// weight of the `asked` terms ([`question_terms`]) it holds over their total. `dense` and
/// `score` are left for [`rank`].
pub fn candidates(
    evidence: &[Evidence],
    asked: &[(String, f32)],
    max: usize,
    min: usize,
) -> Vec<Span> {
    let total: f32 = asked.iter().map(|(_, w)| w).sum();
    let mut out: Vec<Span> = Vec::new();
    for (p, e) in evidence.iter().enumerate() {
        for (text, before) in windows(&e.text, max, min) {
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
            out.push(Span {
                passage: p,
                lexical: share(&own),
                lead: share(&stems(&before)),
                text,
                dense: 0.0,
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

/// Scores `spans` with their `dense` cosines (one per span; empty without an embedder) and
/// sorts them best first (ties keep passage order).
pub fn rank(spans: &mut [Span], dense: &[f32]) {
    for (i, s) in spans.iter_mut().enumerate() {
        s.dense = dense.get(i).copied().unwrap_or(0.0);
        s.score = DENSE * s.dense + LEXICAL * s.lexical + LEAD * s.lead;
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
mod tests {
    use super::*;

    fn ev(id: &str, text: &str) -> Evidence {
        Evidence {
            id: id.into(),
            chunk: 0,
            chapter: String::new(),
            text: text.into(),
            fusion_score: 0.0,
        }
    }

    #[test]
    fn spans_are_sentences_and_clause_windows_verbatim() {
        let t = "Alice was tired. 'Oh dear!' said the Rabbit. She ran, and she ran, and she \
                 ran until the garden, which was lovely, came in sight; then she stopped.";
        let s = spans_of(t, 40, 5);
        // Windows cross sentence ends, the longest from each clause.
        assert_eq!(s[0], "Alice was tired. 'Oh dear!'", "{s:?}");
        assert_eq!(s[1], "'Oh dear!' said the Rabbit. She ran,", "{s:?}");
        assert_eq!(
            s.last().map(String::as_str),
            Some("came in sight; then she stopped.")
        );
        for x in &s {
            assert!(t.contains(x.as_str()), "{x:?} is not verbatim");
            assert!(x.chars().count() <= 40, "{x:?}");
            assert_eq!(x.trim(), x);
        }
        assert!(s.iter().any(|x| x.contains("until the garden")), "{s:?}");
        // A clause longer than the window is cut into runs of whole words.
        let w = spans_of("one two three four five six seven eight nine ten", 14, 1);
        assert_eq!(w[0], "one two three");
        assert!(w.iter().all(|x| x.chars().count() <= 14), "{w:?}");
        // CJK sentences split at 。 and long ones into runs.
        let c = "宝玉笑道：这个妹妹我曾见过的。黛玉心中想道，好生奇怪，倒像在那里见过一般。";
        let s = spans_of(c, 10, 2);
        assert!(s
            .iter()
            .all(|x| c.contains(x.as_str()) && x.chars().count() <= 10));
        assert!(s.iter().any(|x| x.contains("好生奇怪")), "{s:?}");
    }

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
        let asked = question_terms("What did the rabbit take out of its pocket?", &bm);
        assert!(asked.iter().any(|(t, _)| t == "pocket"));
        assert!(!asked.iter().any(|(t, _)| t == "the"));
        let e = [ev(
            "E1",
            "The rabbit. It took a watch out of its waistcoat pocket. Nothing else here today.",
        )];
        let c = candidates(&e, &asked, 80, 5);
        // "The rabbit." adds nothing beyond the question.
        assert!(!c.iter().any(|s| s.text == "The rabbit."), "{c:?}");
        let watch = c.iter().find(|s| s.text.contains("watch")).expect("span");
        let other = c.iter().find(|s| s.text.contains("Nothing")).expect("span");
        assert!(watch.lexical > other.lexical, "{c:?}");
        assert!(watch.lexical <= 1.0);
    }

    #[test]
    fn choices_skip_overlapping_windows_and_passages_not_shown() {
        let span = |passage: usize, text: &str| Span {
            passage,
            text: text.into(),
            dense: 0.0,
            lexical: 0.0,
            lead: 0.0,
            score: 0.0,
        };
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
                passage: 0,
                text: "Nothing here at all.".into(),
                dense: 0.0,
                lexical: 0.0,
                lead: 0.0,
                score: 0.0,
            },
            Span {
                passage: 1,
                text: "A watch it was.".into(),
                dense: 0.0,
                lexical: 0.5,
                lead: 0.2,
                score: 0.0,
            },
        ];
        rank(&mut s, &[0.3, 0.4]);
        assert_eq!(s[0].text, "A watch it was.");
        assert!((s[0].score - 0.74).abs() < 1e-6);
        reorder(&mut e, &mut s, 0);
        assert_eq!(e[0].text, "A watch it was.");
        assert_eq!((e[0].id.as_str(), e[1].id.as_str()), ("E1", "E2"));
        assert_eq!((s[0].passage, s[1].passage), (0, 1));
    }
}
