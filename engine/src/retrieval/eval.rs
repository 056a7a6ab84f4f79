//! Retrieval evaluation: recall@1/5/10 and MRR over question sets.
//!
//! A question set is JSONL, one `{"question": "…", "gold": ["…", …]}` per line, each gold string
//! a passage (or part of one) that answers the question.
//!
//! **Relevance.** Whitespace is removed from gold strings and chunk text before comparing (line
//! wraps, `\n` between units and CJK full-width spaces then never matter; for English the chance
//! that dropping spaces creates a false match is negligible). A hit is relevant when
//!
//! 1. its text contains a gold string, or
//! 2. a gold string runs across its boundary with the next (or previous) chunk of its chapter:
//!    it occurs in the hit's text followed by the next chunk's new text (the part after the
//!    overlap, so the two read as one continuous passage) at a position that starts inside the
//!    hit and ends past it (or, for the previous chunk, starts before the hit's new text and
//!    ends inside it). Both chunks of such a pair are relevant.
//!
//! **Metrics** (per question, then averaged): recall@k is 1 when a relevant hit is among the
//! first `k` hits returned (neighbors included, in the order returned), else 0 — the usual
//! "hit rate" for questions with one answer passage; MRR is `1/(r+1)` for the first relevant hit
//! at 0-based position `r < 10`, else 0.

use serde::{Deserialize, Serialize};

use super::corpus::decode_text;
use super::corpus::DEFAULT_MAX_LINE_BYTES;
use super::error::{Result, RetrievalError};
use super::{Sources, StoryIndex, WordVectors};

/// The deepest position the metrics look at.
pub const EVAL_DEPTH: usize = 10;

/// One evaluation question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The question text.
    pub question: String,
    /// Strings of the passage(s) that answer it.
    pub gold: Vec<String>,
}

/// Reads a JSONL question set, naming the line of any malformed entry.
pub fn parse_questions(name: &str, bytes: &[u8]) -> Result<Vec<Question>> {
    let text = decode_text(name, bytes, DEFAULT_MAX_LINE_BYTES)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |detail: String| RetrievalError::Parse {
            file: name.to_string(),
            line: i + 1,
            detail,
        };
        let q: Question = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
        if q.question.trim().is_empty() {
            return Err(err("field `question` is empty".into()));
        }
        // An empty `gold` marks an unanswerable question (kept for answer evaluation; retrieval
        // metrics skip it); a blank gold string is an error.
        if q.gold.iter().any(|g| squash(g).is_empty()) {
            return Err(err("field `gold` holds a blank string".into()));
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(RetrievalError::Document {
            file: name.to_string(),
            detail: "no questions".into(),
        });
    }
    Ok(out)
}

/// `s` without any whitespace.
pub fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether chunk `id` answers one of `gold` (module docs).
pub fn is_relevant(index: &StoryIndex, id: u32, gold: &[String]) -> bool {
    let Some(chunk) = index.chunk(id) else {
        return false;
    };
    let text = squash(&chunk.text);
    let golds: Vec<String> = gold
        .iter()
        .map(|g| squash(g))
        .filter(|g| !g.is_empty())
        .collect();
    if golds.iter().any(|g| text.contains(g.as_str())) {
        return true;
    }
    // Across the boundary with the next chunk: starts in this one, ends in the next.
    if let Some(next) = index.neighbor(id, 1).and_then(|n| index.chunk(n)) {
        let joined = format!("{text}{}", squash(next.new_text()));
        if golds.iter().any(|g| crosses(&joined, g, text.len())) {
            return true;
        }
    }
    // Across the boundary with the previous chunk.
    if let Some(prev) = index.neighbor(id, -1).and_then(|p| index.chunk(p)) {
        let prev_text = squash(&prev.text);
        let joined = format!("{prev_text}{}", squash(chunk.new_text()));
        if golds.iter().any(|g| crosses(&joined, g, prev_text.len())) {
            return true;
        }
    }
    false
}

/// Whether `needle` occurs in `hay` starting before byte `cut` and ending after it.
fn crosses(hay: &str, needle: &str, cut: usize) -> bool {
    let mut from = 0;
    while let Some(at) = hay[from..].find(needle) {
        let start = from + at;
        if start >= cut {
            return false;
        }
        if start + needle.len() > cut {
            return true;
        }
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Aggregate metrics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// Number of questions.
    pub questions: usize,
    /// Fraction with a relevant hit first.
    pub recall_at_1: f64,
    /// Fraction with a relevant hit in the first 5.
    pub recall_at_5: f64,
    /// Fraction with a relevant hit in the first 10.
    pub recall_at_10: f64,
    /// Mean reciprocal rank of the first relevant hit (0 beyond 10).
    pub mrr: f64,
}

/// Metrics from each question's 0-based position of its first relevant hit.
pub fn metrics(first_relevant: &[Option<usize>]) -> Metrics {
    let n = first_relevant.len().max(1) as f64;
    let within = |k: usize| {
        first_relevant
            .iter()
            .filter(|r| r.is_some_and(|r| r < k))
            .count() as f64
            / n
    };
    let mrr = first_relevant
        .iter()
        .map(|r| match r {
            Some(r) if *r < EVAL_DEPTH => 1.0 / (*r as f64 + 1.0),
            _ => 0.0,
        })
        .sum::<f64>()
        / n;
    Metrics {
        questions: first_relevant.len(),
        recall_at_1: within(1),
        recall_at_5: within(5),
        recall_at_10: within(10),
        mrr,
    }
}

/// One question's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuestionResult {
    /// The question.
    pub question: String,
    /// 0-based position of the first relevant hit among the first 10.
    pub first_relevant: Option<usize>,
    /// Ids of the hits returned, in order.
    pub hits: Vec<u32>,
}

/// Metrics plus per-question outcomes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// The aggregate.
    pub metrics: Metrics,
    /// Each question.
    pub per_question: Vec<QuestionResult>,
}

/// Runs every question through [`StoryIndex::search`] with `sources` (asking for 10 hits) and
/// scores the results. `query_vecs`, when given, holds one query embedding per question.
pub fn evaluate(
    index: &StoryIndex,
    questions: &[Question],
    query_vecs: Option<&[Vec<f32>]>,
    query_words: &[WordVectors],
    sources: Sources,
) -> Result<EvalReport> {
    if let Some(v) = query_vecs {
        if v.len() != questions.len() {
            return Err(RetrievalError::Vectors(format!(
                "{} query vectors for {} questions",
                v.len(),
                questions.len()
            )));
        }
    }
    if !query_words.is_empty() && query_words.len() != questions.len() {
        return Err(RetrievalError::Vectors(format!(
            "word vectors for {} questions, {} questions",
            query_words.len(),
            questions.len()
        )));
    }
    let mut per_question = Vec::with_capacity(questions.len());
    for (i, q) in questions.iter().enumerate() {
        if q.gold.is_empty() {
            continue;
        }
        let vec = query_vecs.map(|v| v[i].as_slice());
        let words = query_words.get(i).map_or(&[][..], Vec::as_slice);
        let hits = index.search_expanded(&q.question, vec, words, EVAL_DEPTH, sources)?;
        let ids: Vec<u32> = hits.iter().map(|h| h.id).collect();
        let first_relevant = ids
            .iter()
            .take(EVAL_DEPTH)
            .position(|&id| is_relevant(index, id, &q.gold));
        per_question.push(QuestionResult {
            question: q.question.clone(),
            first_relevant,
            hits: ids,
        });
    }
    let firsts: Vec<Option<usize>> = per_question.iter().map(|q| q.first_relevant).collect();
    Ok(EvalReport {
        metrics: metrics(&firsts),
        per_question,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::{chunk_corpus, ChunkConfig, IndexConfig, IngestOptions};

    #[test]
    fn metrics_by_hand() {
        let m = metrics(&[Some(0), Some(3), None, Some(7), Some(12)]);
        assert_eq!(m.questions, 5);
        assert!((m.recall_at_1 - 0.2).abs() < 1e-12);
        assert!((m.recall_at_5 - 0.4).abs() < 1e-12);
        assert!((m.recall_at_10 - 0.6).abs() < 1e-12);
        assert!((m.mrr - (1.0 + 0.25 + 0.125) / 5.0).abs() < 1e-12);
        let empty = metrics(&[]);
        assert_eq!((empty.questions, empty.mrr), (0, 0.0));
    }

    #[test]
    fn crossing_needs_both_sides() {
        assert!(crosses("abcdef", "cd", 3));
        assert!(!crosses("abcdef", "ab", 3));
        assert!(!crosses("abcdef", "de", 3));
        assert!(crosses("xyxy|xy", "y|x", 4));
        assert!(crosses("甲乙丙丁", "乙丙", "甲乙".len()));
    }

    fn index() -> StoryIndex {
        // Paragraphs of ~50 characters, chunks of at most 60: one paragraph per chunk, no overlap.
        let text = "Chapter 1\n\nThe first paragraph talks about a silver spoon.\n\n\
                    The second paragraph mentions a  wooden\nbox by the door.\n\n\
                    The third paragraph describes the garden gate.\n";
        let config = ChunkConfig {
            max_chars: 60,
            overlap_segments: 0,
        };
        let chunks = chunk_corpus(
            &[("t.txt", text.as_bytes())],
            &IngestOptions::default(),
            &config,
        )
        .unwrap();
        assert_eq!(chunks.len(), 3);
        StoryIndex::build(chunks, None, &[], IndexConfig::default()).unwrap()
    }

    #[test]
    fn relevance_ignores_whitespace_and_spans_boundaries() {
        let index = index();
        let g = |s: &str| vec![s.to_string()];
        assert!(is_relevant(&index, 0, &g("silver   spoon")));
        assert!(is_relevant(&index, 1, &g("a wooden box")));
        assert!(!is_relevant(&index, 0, &g("wooden box")));
        // "spoon. The second" spans chunks 0 and 1: both count, chunk 2 does not.
        let across = g("silver spoon. The second paragraph");
        assert!(is_relevant(&index, 0, &across));
        assert!(is_relevant(&index, 1, &across));
        assert!(!is_relevant(&index, 2, &across));
        assert!(!is_relevant(&index, 9, &across));
    }

    #[test]
    fn evaluate_scores_rankings() {
        let index = index();
        let questions = parse_questions(
            "q.jsonl",
            br#"{"question": "silver spoon", "gold": ["about a silver spoon"]}
{"question": "garden gate", "gold": ["the garden gate"]}

{"question": "unicorn", "gold": ["no such text"]}
"#,
        )
        .unwrap();
        let report = evaluate(&index, &questions, None, &[], Sources::SPARSE).unwrap();
        let firsts: Vec<Option<usize>> = report
            .per_question
            .iter()
            .map(|q| q.first_relevant)
            .collect();
        assert_eq!(firsts, [Some(0), Some(0), None]);
        assert!((report.metrics.recall_at_1 - 2.0 / 3.0).abs() < 1e-12);
        assert!((report.metrics.mrr - 2.0 / 3.0).abs() < 1e-12);
        assert!(evaluate(&index, &questions, Some(&[]), &[], Sources::ALL).is_err());
    }

    #[test]
    fn question_files_report_bad_lines() {
        let cases: [(&[u8], &str); 4] = [
            (
                b"{\"question\": \"a\", \"gold\": [\"x\"]}\n{\"question\": \"b\"}\n",
                "line 2",
            ),
            (b"{\"question\": \"a\", \"gold\": [\" \"]}\n", "line 1"),
            (b"{\"question\": \" \", \"gold\": [\"x\"]}\n", "line 1"),
            (b"\n\n", "no questions"),
        ];
        for (src, want) in cases {
            let err = parse_questions("q.jsonl", src).unwrap_err().to_string();
            assert!(err.contains(want) && err.contains("q.jsonl"), "{err}");
        }
    }
}
