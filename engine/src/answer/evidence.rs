//! The evidence brief: retrieved passages as numbered lines `[E1] text` within a character
//! budget (ASA: top 10, 1000 characters per passage, 12000 in all; ours are configurable).
//!
//! Passage text is shown *normalised*: whitespace runs become one space, `"` becomes `'` and
//! `\` becomes `/`. Quotes are checked against, and highlighted in, this same text, so a quote
//! can be written inside a JSON string without escapes and the grammar can demand verbatim
//! substrings of exactly what the model saw.

use serde::{Deserialize, Serialize};

use crate::retrieval::Hit;

/// One passage shown to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// `E1`, `E2`, … (stable across rounds: round 2 continues the numbering).
    pub id: String,
    /// The chunk's id in the story index.
    pub chunk: u32,
    /// Chapter heading.
    pub chapter: String,
    /// Normalised text (module docs), cut to the per-passage budget.
    pub text: String,
    /// The retrieval's fused score.
    pub fusion_score: f32,
}

/// Brief size limits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BriefLimits {
    /// Passages per round.
    pub top_k: usize,
    /// Characters per passage.
    pub doc_chars: usize,
    /// Characters over all passages (every round together).
    pub total_chars: usize,
    /// Characters of the next chunk in the chapter appended to each passage (within
    /// `doc_chars`): the answer often follows the sentence a question was written from, and a
    /// chunk boundary must not cut the two apart.
    #[serde(default = "default_next_chars")]
    pub next_chars: usize,
}

fn default_next_chars() -> usize {
    200
}

/// Makes user and corpus text safe to place in a prompt: control characters become spaces
/// and chat-template markers (`<|im_start|>` and the like) are broken up so they can never be
/// read as special tokens.
pub fn defang(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    s.replace("<|", "< |").replace("|>", "| >")
}

/// Normalises passage text for the brief (module docs).
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(match c {
            '"' => '\'',
            '\\' => '/',
            c => c,
        });
    }
    // Chat-template markers broken up as the prompt shows them, so a quote is checked against
    // exactly what the model read and can never carry `<|im_end|>`.
    defang(&out)
}

/// Cuts `s` to at most `max` characters on a character boundary, and not inside a word of an
/// alphabetic script when a space lies in the second half.
pub fn cut_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let end = s.char_indices().nth(max).map(|(i, _)| i).unwrap_or(s.len());
    let head = &s[..end];
    let mid_word = head.chars().next_back().is_some_and(char::is_alphanumeric)
        && s[end..].chars().next().is_some_and(char::is_alphanumeric);
    // Inside a word: back up to the last space in the second half (CJK text has none and is
    // cut anywhere).
    match head.rfind(' ') {
        Some(sp) if mid_word && sp * 2 >= end => head[..sp].to_string(),
        _ => head.to_string(),
    }
}

/// Adds `hits` (best first) to `shown` as new evidence: chunks already shown are skipped,
/// passages are normalised and cut, and the total budget is respected. Returns how many
/// passages were added.
pub fn extend(shown: &mut Vec<Evidence>, hits: &[Hit], lim: &BriefLimits) -> usize {
    let mut used: usize = shown.iter().map(|e| e.text.chars().count()).sum();
    let mut added = 0;
    for h in hits {
        if added == lim.top_k {
            break;
        }
        if shown.iter().any(|e| e.chunk == h.id) {
            continue;
        }
        let text = cut_chars(&normalise(&h.text), lim.doc_chars);
        if text.is_empty() || shown.iter().any(|e| e.text == text) {
            continue;
        }
        let n = text.chars().count();
        if used + n > lim.total_chars {
            let room = lim.total_chars.saturating_sub(used);
            if room < 80 {
                break;
            }
            push(shown, h, cut_chars(&text, room));
            added += 1;
            break;
        }
        used += n;
        push(shown, h, text);
        added += 1;
    }
    added
}

fn push(shown: &mut Vec<Evidence>, h: &Hit, text: String) {
    let id = format!("E{}", shown.len() + 1);
    shown.push(Evidence {
        id,
        chunk: h.id,
        chapter: h.chapter.clone(),
        text,
        fusion_score: h.fusion_score,
    });
}

/// The brief as the prompt shows it: one line `[E1] (chapter) text` per passage.
pub fn render(evidence: &[Evidence]) -> String {
    let mut s = String::new();
    for e in evidence {
        s.push_str(&format!(
            "[{}] ({}) {}\n",
            e.id,
            normalise(&e.chapter),
            e.text
        ));
    }
    s
}

/// Why a round's evidence ends the question before anything is generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    /// The round's problem.
    pub problem: String,
    /// The answer's abstention reason.
    pub reason: String,
}

/// The evidence stage's gate: a round that `added` no passage ends the question, and so does a
/// first round whose best dense cosine among `hits` is under the weak-retrieval `floor` (when
/// the embedder has one and any hit has a dense score).
pub fn shortfall(
    added: usize,
    hits: &[Hit],
    floor: Option<f32>,
    round: usize,
) -> Option<Shortfall> {
    if added == 0 {
        return Some(Shortfall {
            problem: "retrieval found no new passage".into(),
            reason: if round == 1 {
                "retrieval found no passage".into()
            } else {
                "the follow-up search found nothing new".into()
            },
        });
    }
    let best = hits
        .iter()
        .filter_map(|h| h.dense_score)
        .fold(f32::MIN, f32::max);
    match floor {
        Some(floor) if round == 1 && best > f32::MIN && best < floor => {
            let why = format!("weak retrieval: best dense cosine {best:.3} < {floor:.3}");
            Some(Shortfall {
                problem: why.clone(),
                reason: why,
            })
        }
        _ => None,
    }
}

/// A passage `id` with `text` (no chunk, chapter or score), for the reader's tests.
#[cfg(test)]
pub(crate) fn passage(id: &str, text: &str) -> Evidence {
    Evidence {
        id: id.into(),
        chunk: 0,
        chapter: String::new(),
        text: text.into(),
        fusion_score: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: u32, text: &str) -> Hit {
        Hit {
            id,
            chapter: "CHAPTER I".into(),
            text: text.into(),
            fusion_score: 0.03,
            dense_rank: None,
            dense_score: None,
            sparse_rank: None,
            sparse_score: None,
            graph_rank: None,
            graph_score: None,
            neighbor: false,
        }
    }

    #[test]
    fn normalises_whitespace_quotes_and_backslashes() {
        assert_eq!(
            normalise("  `Oh,\n\n  my \"ears\"\\ and\twhiskers!'  "),
            "`Oh, my 'ears'/ and whiskers!'"
        );
        assert_eq!(normalise("宝玉\n笑道：“好妹妹。”"), "宝玉 笑道：“好妹妹。”");
    }

    #[test]
    fn cuts_on_word_boundaries_and_char_boundaries() {
        let s = "alpha beta gamma delta";
        assert_eq!(cut_chars(s, 100), s);
        assert_eq!(cut_chars(s, 19), "alpha beta gamma");
        assert_eq!(cut_chars("红楼梦第一回", 3), "红楼梦");
    }

    #[test]
    fn extend_numbers_dedupes_and_respects_budgets() {
        let lim = BriefLimits {
            next_chars: 0,
            top_k: 2,
            doc_chars: 10,
            total_chars: 1000,
        };
        let mut shown = Vec::new();
        let hits = [
            hit(5, "one two three four"),
            hit(5, "dup"),
            hit(7, "x y"),
            hit(9, "z"),
        ];
        assert_eq!(extend(&mut shown, &hits, &lim), 2);
        assert_eq!(shown[0].id, "E1");
        assert_eq!(shown[0].text, "one two");
        assert_eq!((shown[1].id.as_str(), shown[1].chunk), ("E2", 7));
        // A second round continues the numbering and skips what was shown.
        assert_eq!(extend(&mut shown, &hits, &lim), 1);
        assert_eq!((shown[2].id.as_str(), shown[2].chunk), ("E3", 9));
        assert_eq!(extend(&mut shown, &hits, &lim), 0);
        let tight = BriefLimits {
            next_chars: 0,
            top_k: 10,
            doc_chars: 1000,
            total_chars: 100,
        };
        let mut shown = Vec::new();
        let long = "word ".repeat(60);
        extend(&mut shown, &[hit(1, &long), hit(2, &long)], &tight);
        let total: usize = shown.iter().map(|e| e.text.chars().count()).sum();
        assert!(total <= 100, "{total}");
        assert_eq!(
            render(&shown[..1])
                .lines()
                .next()
                .map(|l| l.starts_with("[E1] (CHAPTER I) word")),
            Some(true)
        );
    }

    #[test]
    fn shortfall_stops_on_nothing_new_and_on_weak_first_rounds() {
        let scored = |s: f32| Hit {
            dense_score: Some(s),
            ..hit(1, "x")
        };
        let none = shortfall(0, &[], None, 1).expect("nothing found");
        assert_eq!(none.reason, "retrieval found no passage");
        assert_eq!(none.problem, "retrieval found no new passage");
        assert_eq!(
            shortfall(0, &[], None, 2).map(|s| s.reason),
            Some("the follow-up search found nothing new".to_string())
        );
        let weak = shortfall(1, &[scored(0.2), scored(0.3)], Some(0.4), 1).expect("weak");
        assert_eq!(
            weak.reason,
            "weak retrieval: best dense cosine 0.300 < 0.400"
        );
        assert_eq!(weak.problem, weak.reason);
        // Strong enough, a later round, no threshold, or no dense score: go on.
        assert_eq!(
            shortfall(1, &[scored(0.2), scored(0.5)], Some(0.4), 1),
            None
        );
        assert_eq!(shortfall(1, &[scored(0.2)], Some(0.4), 2), None);
        assert_eq!(shortfall(1, &[scored(0.2)], None, 1), None);
        assert_eq!(shortfall(1, &[hit(1, "x")], Some(0.4), 1), None);
    }
}
