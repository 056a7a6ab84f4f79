//! Short answers of the kind a question asks for, where a span gives one: the name that
//! answers "who …" and the quoted words that answer "what … said / written …".
//!
//! A span that answers a question asking for a name names someone the question does not, often
//! by a short form (`the Rabbit`), while the story calls them more fully elsewhere in the
//! evidence shown (`the White Rabbit`). [`name_of`] reads the span's name phrases: runs of
//! capitalised words (one space apart, none where a sentence starts, `of` between two: `Knave
//! of Hearts`) around a mention of a story entity or a capitalised word the lexicon lacks, a
//! possessive with the noun it owns (`Duchess's cook`), any other possessive `'s` left off.
//! When exactly one phrase names someone the question does not (an owned noun is someone new),
//! that is the answer's name, in its fullest form among the evidence shown: the longest phrase
//! holding the span's words, with the `the` written before it, quoted from its passage so that
//! the answer's words come from a quote ([`Short`]). A span with no new name, or two, gives
//! none, and its answer stays the span; so does a script's line (its speaker answers) and
//! Chinese text (no capitals).
//!
//! [`words_of`] gives the words a span quotes (`labelled `ORANGE MARMALADE'` → `ORANGE
//! MARMALADE`) when it holds exactly one quotation mostly of words the question lacks, closed
//! inside the span (not in Chinese, where that lost a right answer).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::asks::quotations;
use super::evidence::Evidence;
use super::prompt::has_cjk;
use super::schema::{EvidenceRef, Fact};
use super::validate::{FUNCTION_WORDS, NOT_NAMES};
use crate::retrieval::EntityGraph;

/// A short answer (a name, or quoted words), as the evidence writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Short {
    /// Its words, verbatim from its passage (a name with the `the` written before it: `the
    /// White Rabbit`).
    pub text: String,
    /// Index of that passage in the evidence shown.
    pub passage: usize,
}

impl Short {
    /// The answer: the words with their first letter capitalised (`The White Rabbit`).
    pub fn answer(&self) -> String {
        let mut c = self.text.chars();
        match c.next() {
            Some(f) => f.to_uppercase().chain(c).collect(),
            None => String::new(),
        }
    }

    /// The fact that grounds the short answer beside the span's `quote`: its words quoted
    /// from its passage of `evidence`, unless the quote already holds them.
    pub fn fact(&self, quote: &str, evidence: &[Evidence]) -> Option<Fact> {
        let e = evidence.get(self.passage)?;
        (!quote.contains(&self.text)).then(|| Fact {
            fact: self.text.clone(),
            evidence_refs: vec![EvidenceRef {
                evidence_id: e.id.clone(),
                quote: self.text.clone(),
            }],
        })
    }
}

/// The name phrases of `span` that `question` does not give (`asked`: the entities it names),
/// each with the story's entities inside it: around the story's entities and, outside a
/// script's speech (`in_line`, see [`name_of`]), around capitalised words the lexicon lacks;
/// never the speaker's label a line opens with. A name the question gives counts only when it
/// owns a noun (`the Duchess's cook`).
pub fn new_names(
    span: &str,
    question: &str,
    asked: &[u32],
    graph: &EntityGraph,
    in_line: bool,
) -> Vec<(Range<usize>, Vec<u32>)> {
    let label = match span.find(':') {
        Some(colon) if in_line && super::spans::starts_with_speaker_label(span) => colon + 1,
        _ => 0,
    };
    let mut mentions = graph.text_mentions(span);
    mentions.retain(|(_, at)| at.start >= label);
    // Name phrases around the story's entities, and around capitalised words the lexicon
    // lacks (`a Mouse swam in it`: a span naming someone the lexicon does not know names two).
    let lacked = if in_line {
        Vec::new()
    } else {
        capitalised_words(span)
    };
    let starts = mentions.iter().map(|(_, at)| at.clone()).chain(lacked);
    let mut new: Vec<(Range<usize>, Vec<u32>)> = Vec::new();
    for at in starts {
        let phrase = phrase_at(span, at);
        if new
            .iter()
            .any(|(p, _)| p.start < phrase.end && phrase.start < p.end)
        {
            continue;
        }
        let inside: Vec<u32> = mentions
            .iter()
            .filter(|(_, m)| m.start >= phrase.start && m.end <= phrase.end)
            .map(|(e, _)| *e)
            .collect();
        new.push((phrase, inside));
    }
    let q = question.to_lowercase();
    new.retain(|(p, inside)| {
        let text = &span[p.clone()];
        let given = if inside.is_empty() {
            words(text).iter().all(|w| q.contains(&w.to_lowercase()))
        } else {
            inside.iter().any(|e| asked.contains(e))
        };
        text.contains("'s ") || !given
    });
    new
}

/// The name `span` (a span of passage `passage` of `evidence`) gives beyond those `question`
/// gives (`asked`: the entities it names): `None` unless exactly one of its name phrases is
/// new (module docs).
///
/// `in_line`: the span lies in a script's speech, read when a question asks for a name as such
/// ("What is the name of Prospero's brother?" → `Antonio`): only the story's entities count
/// (verse capitalises every line's first word: `thy father Was Duke of Milan`), and not the
/// speaker's label the span may open with.
pub fn name_of(
    span: &str,
    passage: usize,
    evidence: &[Evidence],
    question: &str,
    asked: &[u32],
    graph: &EntityGraph,
    in_line: bool,
) -> Option<Short> {
    // Chinese writes no capitals: a name the lexicon lacks is not seen, and the one name it
    // knows is often not the answer (红楼梦: 2 right answers lost, none gained).
    if has_cjk(span) {
        return None;
    }
    let new = new_names(span, question, asked, graph, in_line);
    let [(phrase, inside)] = new.as_slice() else {
        return None;
    };
    let own = &span[phrase.clone()];
    let want = words(own);
    // The fullest form: the span's passage first, then the others in their order.
    let order = std::iter::once(passage).chain((0..evidence.len()).filter(|&p| p != passage));
    let mut best: Option<(usize, Short)> = None;
    for p in order {
        let Some(e) = evidence.get(p) else { continue };
        let text = e.text.as_str();
        let at: Vec<Range<usize>> = if inside.is_empty() {
            text.match_indices(own)
                .map(|(i, m)| i..i + m.len())
                .collect()
        } else {
            graph
                .text_mentions(text)
                .into_iter()
                .filter(|(entity, _)| inside.contains(entity))
                .map(|(_, at)| at)
                .collect()
        };
        for at in at {
            let r = phrase_at(text, at);
            let phrase = &text[r.clone()];
            // A fuller form holds the span's words.
            let found = words(phrase);
            if !holds_run(&found, &want) {
                continue;
            }
            let size = found.len();
            if best.as_ref().is_some_and(|(n, _)| *n >= size) {
                continue;
            }
            let start = with_article(text, r.start);
            best = Some((
                size,
                Short {
                    text: text[start..r.end].to_string(),
                    passage: p,
                },
            ));
        }
    }
    best.map(|(_, n)| n)
}

/// The capitalised words of `text` ([`name_word`]) where no sentence starts, as byte ranges.
fn capitalised_words(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    let ends = text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')));
    for (i, c) in ends {
        match (start, c.is_alphanumeric() || c == '\'') {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                let w = &text[s..i];
                if w.is_ascii() && name_word(w) && !starts_sentence(text, s) {
                    out.push(s..i);
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The words `span` (of passage `passage`) quotes that answer "what … said / written …": its
/// one quotation of which at least half the words (of three or more letters, not function
/// words) are not in `question`, verbatim, without a trailing comma or colon, when a closing
/// mark ends it inside the span; `None` when it quotes none such, or several.
pub fn words_of(span: &str, passage: usize, question: &str) -> Option<Short> {
    // Chinese spans quote titles and names beside the words said (红楼梦: 1 right answer lost
    // to “通灵宝玉”, none gained).
    if has_cjk(span) {
        return None;
    }
    let q = question.to_lowercase();
    let new: Vec<&str> = quotations(span)
        .into_iter()
        .filter(|t| {
            let words: Vec<String> = t
                .split(|c: char| !c.is_alphanumeric() && c != '\'')
                .map(str::to_lowercase)
                .filter(|w| w.chars().count() >= 3 && !FUNCTION_WORDS.contains(&w.as_str()))
                .collect();
            let fresh = words.iter().filter(|w| !q.contains(w.as_str())).count();
            !words.is_empty() && 2 * fresh >= words.len()
        })
        .collect();
    // One new quotation, closed (a mark follows it inside the span); an unclosed one may be
    // the answer cut short (`Silence!' … `Rule Forty-two.`), so it counts as a second.
    let [one] = new.as_slice() else {
        return None;
    };
    if !closed_in(span, one) {
        return None;
    }
    let text = one.trim().trim_end_matches([',', ';', ':', '-']).trim_end();
    (text.chars().count() <= QUOTED_CHARS && !text.is_empty()).then(|| Short {
        text: text.to_string(),
        passage,
    })
}

/// The name `span` (of passage `passage`) quotes, for a question that asks for a name as such
/// (`a bright brass plate with the name `W. RABBIT' engraved upon it`): its one quotation closed
/// inside it, of one to five words, each capitalised; `None` otherwise.
pub fn quoted_name(span: &str, passage: usize) -> Option<Short> {
    if has_cjk(span) {
        return None;
    }
    let quoted = quotations(span);
    let [one] = quoted.as_slice() else {
        return None;
    };
    let text = one.trim().trim_end_matches([',', ';', ':', '.', '!', '?']);
    let words: Vec<&str> = text.split_whitespace().collect();
    let named = (1..=5).contains(&words.len())
        && words
            .iter()
            .all(|w| w.chars().next().is_some_and(char::is_uppercase));
    (closed_in(span, one) && named).then(|| Short {
        text: text.to_string(),
        passage,
    })
}

/// Does a closing mark end `quote` (one of [`quotations`] of `span`) inside `span`? An
/// unclosed quotation runs to the span's end.
fn closed_in(span: &str, quote: &str) -> bool {
    quote.as_ptr() as usize - span.as_ptr() as usize + quote.len() < span.len()
}

/// The longest quoted words given as the answer, the default quote cap (`Caps::quote_chars`),
/// so that a fact can quote them whole; a longer quotation (a song, a letter) is answered with
/// the span.
const QUOTED_CHARS: usize = 80;

/// Is `w` a word that may be part of a name: capitalised (an upper-case first letter, a
/// lower-case letter after it: `VERY` shouts), longer than a letter, and not a word English
/// capitalises for other reasons ([`NOT_NAMES`], [`STAGE_WORDS`], nor a contraction of one)?
fn name_word(w: &str) -> bool {
    // `I've` is `I`; `O mouse!` calls out.
    let bare = w.split('\'').next().unwrap_or(w);
    w.chars().next().is_some_and(char::is_uppercase)
        && bare.chars().count() > 1
        && w.chars().any(char::is_lowercase)
        && !NOT_NAMES.contains(&bare)
        && !STAGE_WORDS.contains(&w)
        && !function_word(bare)
}

/// Is `w` a function word ([`FUNCTION_WORDS`]) capitalised where no sentence starts, as verse
/// begins its lines (`thy father Was Duke of Milan`)? A number word is not one: it names
/// *Alice*'s gardeners (`Two`, `Five`, `Seven`).
fn function_word(w: &str) -> bool {
    let lower = w.to_lowercase();
    lower != "two" && FUNCTION_WORDS.contains(&lower.as_str())
}

/// A script's stage directions, capitalised before the names they move (`Exit Messenger`).
const STAGE_WORDS: &[&str] = &["Enter", "Exit", "Exeunt", "Re-enter", "Manet", "Aside"];

/// The word of `text` ending at byte `end` when one space parts it from `end`'s word:
/// (its start, the word).
pub(super) fn word_before(text: &str, end: usize) -> Option<(usize, &str)> {
    let before = text.get(..end)?.strip_suffix(' ')?;
    let start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '\''))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let w = &before[start..];
    (!w.is_empty()).then_some((start, w))
}

/// The word of `text` starting one space after byte `start`: (its end, the word).
fn word_after(text: &str, start: usize) -> Option<(usize, &str)> {
    let after = text.get(start..)?.strip_prefix(' ')?;
    let len = after
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '\''))
        .map_or(after.len(), |(i, _)| i);
    let w = &after[..len];
    (!w.is_empty()).then_some((start + 1 + len, w))
}

/// Does a sentence start at byte `at` of `text` (nothing before it but spaces, or a sentence
/// end, a colon, an opening quote or bracket)?
fn starts_sentence(text: &str, at: usize) -> bool {
    // A closing bracket after a sentence's end (`(Which was very likely true.) Down`).
    let before = text[..at].trim_end().trim_end_matches([')', ']']);
    before
        .chars()
        .next_back()
        .is_none_or(|c| ".!?:;`\"“‘(—-".contains(c))
}

/// The name phrase around the mention `at` of `text`: capitalised words before it (one space
/// apart, none where a sentence starts) and after it (also `of` followed by one: `Knave of
/// Hearts`), a possessive `'s` cut off the end. A mention that is not an English word (a
/// Chinese name) is its own phrase.
fn phrase_at(text: &str, at: Range<usize>) -> Range<usize> {
    if !text[at.clone()].is_ascii() {
        return at;
    }
    let (mut start, mut end) = (at.start, at.end);
    while let Some((s, w)) = word_before(text, start) {
        let s = match w {
            "of" => match word_before(text, s) {
                Some((s2, w2)) if name_word(w2) => s2,
                _ => break,
            },
            _ if name_word(w) => s,
            _ => break,
        };
        if starts_sentence(text, s) {
            break;
        }
        start = s;
    }
    loop {
        match word_after(text, end) {
            Some((e, w)) if name_word(w) => end = e,
            Some((e, "of")) => match word_after(text, e) {
                Some((e2, w)) if name_word(w) => end = e2,
                _ => break,
            },
            _ => break,
        }
    }
    let rest = &text[end..];
    if rest.starts_with("'s") && !rest[2..].starts_with(|c: char| c.is_alphanumeric()) {
        end += 2;
    }
    if text[start..end].ends_with("'s") && end - 2 > start {
        // `the Duchess's cook` names the cook: the phrase takes the noun it owns.
        match word_after(text, end) {
            Some((e, w)) if owned_noun(w) => end = e,
            _ => end -= 2,
        }
    }
    start..end
}

/// Is `w` a noun a possessive name may own (`cook` in `the Duchess's cook`): a lower-case word
/// that is not a function word?
fn owned_noun(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_lowercase) && !FUNCTION_WORDS.contains(&w)
}

/// `start`, moved back over a `the ` written just before it.
fn with_article(text: &str, start: usize) -> usize {
    match word_before(text, start) {
        Some((s, "the" | "The")) => s,
        _ => start,
    }
}

/// The words of a name phrase.
fn words(phrase: &str) -> Vec<&str> {
    phrase.split(' ').filter(|w| !w.is_empty()).collect()
}

/// Does `found` hold `want` as a run of consecutive words?
fn holds_run(found: &[&str], want: &[&str]) -> bool {
    !want.is_empty() && found.windows(want.len()).any(|w| w == want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::chunk::Position;
    use crate::retrieval::{AliasEntry, Chunk, GraphConfig};

    fn ev(text: &str) -> Evidence {
        Evidence {
            id: "E1".into(),
            chunk: 0,
            chapter: String::new(),
            text: text.into(),
            fusion_score: 1.0,
        }
    }

    /// A lexicon of these names only (alias file, no detection).
    fn graph(names: &[&str], aliased: &[(&str, &str)]) -> EntityGraph {
        let chunk = Chunk {
            id: 0,
            story: "s".into(),
            chapter: "c".into(),
            scene: None,
            position: Position {
                ordinal: 0,
                char_offset: 0,
            },
            overlap_chars: 0,
            speakers: Vec::new(),
            text: "x".into(),
        };
        let aliases: Vec<AliasEntry> = names
            .iter()
            .map(|n| AliasEntry {
                canonical: n.to_string(),
                aliases: Vec::new(),
            })
            .chain(aliased.iter().map(|(n, a)| AliasEntry {
                canonical: n.to_string(),
                aliases: vec![a.to_string()],
            }))
            .collect();
        let config = GraphConfig {
            detect_names: false,
            ..GraphConfig::default()
        };
        EntityGraph::build(&[chunk], &aliases, &config).unwrap()
    }

    fn id(g: &EntityGraph, name: &str) -> u32 {
        g.entities().iter().position(|e| e.name == name).unwrap() as u32
    }

    #[test]
    fn the_quoted_words_answer_what_was_written() {
        let q = "What was written on the label of the jar?";
        let span = "it was labelled `ORANGE MARMALADE', but to her great disappointment";
        assert_eq!(
            words_of(span, 2, q),
            Some(Short {
                text: "ORANGE MARMALADE".into(),
                passage: 2
            })
        );
        // A trailing comma is cut; a quotation of the question's own words answers nothing.
        let span = "`Off with her head,' said the Queen; `the jar,' said Alice.";
        let got = words_of(span, 0, q).map(|s| s.answer());
        assert_eq!(got, Some("Off with her head".into()));
        // Two new quotations, an unclosed one (alone or after a closed one), a long one: none.
        assert_eq!(
            words_of("`Two hours,' and `No more tea,' he said.", 0, q),
            None
        );
        assert_eq!(
            words_of("and she said `Curiouser and curiouser", 0, q),
            None
        );
        assert_eq!(words_of("`Silence!' and read `Rule Forty-two.", 0, q), None);
        // Chinese: none.
        assert_eq!(
            words_of("上面镌着“通灵宝玉”四字。", 0, "玉上刻着什么？"),
            None
        );
        let long = format!("`{}' he sang.", "twinkle twinkle little bat ".repeat(4));
        assert_eq!(words_of(&long, 0, q), None);
    }

    #[test]
    fn the_fullest_form_in_the_evidence_names_the_answer() {
        let g = graph(
            &["Alice", "Rabbit", "King", "Hearts", "Dinah"],
            &[("贾宝玉", "宝玉")],
        );
        let alice = [id(&g, "Alice")];
        let evidence = [
            ev("but when the Rabbit actually TOOK A WATCH OUT OF ITS WAISTCOAT-POCKET, and looked at it"),
            ev("Alice recognised the White Rabbit: it was talking in a hurried nervous manner"),
        ];
        let span = evidence[0].text.as_str();
        let q = "Who did Alice follow down the rabbit hole?";
        let named = name_of(span, 0, &evidence, q, &alice, &g, false).unwrap();
        assert_eq!(
            named,
            Short {
                text: "the White Rabbit".into(),
                passage: 1
            }
        );
        assert_eq!(named.answer(), "The White Rabbit");
        // `of` joins a name (`King of Hearts`); a possessive owning no noun is cut; a
        // sentence's first word is no part of a name.
        let evidence = [ev(
            "It was the King of Hearts's. Then King said no, said Dinah.",
        )];
        let rabbit_asked = [id(&g, "Rabbit")];
        let q = "Whose was it?";
        let span = "It was the King of Hearts's.";
        assert_eq!(
            name_of(span, 0, &evidence, q, &rabbit_asked, &g, false).map(|n| n.text),
            Some("the King of Hearts".into())
        );
        assert_eq!(phrase_at("Then King said", 5..9), 5..9);
        for w in ["I've", "O", "VERY", "Enter", "The", "Was", "Be"] {
            assert!(!name_word(w), "{w}");
        }
        // Two new names: none is the answer.
        let span = "Then King said no, said Dinah.";
        assert_eq!(
            name_of(span, 0, &evidence, q, &rabbit_asked, &g, false),
            None
        );
        // The question's own names answer nothing.
        let asked = [id(&g, "King"), id(&g, "Hearts")];
        assert_eq!(
            name_of(
                "It was the King of Hearts's.",
                0,
                &evidence,
                q,
                &asked,
                &g,
                false
            ),
            None
        );
        // A possessive owns its noun, and the owner may be the question's: the span then names
        // two, and gives no name.
        let evidence = [ev(
            "said the King. The next witness was the Duchess's cook.",
        )];
        let duchess = graph(&["King", "Duchess"], &[]);
        let asked = [id(&duchess, "Duchess")];
        let span = evidence[0].text.as_str();
        let q = "Which character from the Duchess's kitchen is a witness?";
        assert_eq!(
            name_of(span, 0, &evidence, q, &asked, &duchess, false),
            None
        );
        let span = "The next witness was the Duchess's cook.";
        assert_eq!(
            name_of(span, 0, &evidence, q, &asked, &duchess, false).map(|n| n.answer()),
            Some("The Duchess's cook".into())
        );
        // A capitalised word the lexicon lacks names someone too.
        let evidence = [ev(
            "Alice cried so much that she made a pool, and a Mouse swam in it.",
        )];
        let span = evidence[0].text.as_str();
        let (q, q2) = ("Who swam in the pool?", "Who swam in Alice's pool?");
        assert_eq!(name_of(span, 0, &evidence, q, &[], &g, false), None);
        let n = name_of(span, 0, &evidence, q2, &alice, &g, false);
        assert_eq!(n.map(|n| n.answer()), Some("Mouse".into()));
        // Chinese: no name (the lexicon's are not enough to tell the new one).
        let evidence = [ev("宝玉听了，便走来。"), ev("却说贾宝玉回至房中。")];
        let n = name_of(&evidence[0].text, 0, &evidence, "谁走来？", &[], &g, false);
        assert_eq!(n, None);
    }

    #[test]
    fn a_name_asked_for_is_read_in_a_line_and_in_quotation_marks() {
        let g = graph(&["Prospero", "Antonio", "Milan"], &[]);
        let prospero = [id(&g, "Prospero")];
        let q = "What is the name of Prospero's brother?";
        // In a speech: the entity the question lacks, not the speaker's label nor a verse
        // line's capital.
        let line =
            "Prospero: My brother, and thy uncle, call'd Antonio-- that a brother should Be so";
        let evidence = [ev(line)];
        let n = name_of(line, 0, &evidence, q, &prospero, &g, true);
        assert_eq!(n.map(|n| n.answer()), Some("Antonio".into()));
        let line = "Antonio: thy father Was Duke of Milan";
        let evidence = [ev(line)];
        assert_eq!(
            name_of(line, 0, &evidence, q, &prospero, &g, true).map(|n| n.text),
            Some("Duke of Milan".into())
        );
        // Outside a line the label is a name too: two names, none given.
        assert_eq!(name_of(line, 0, &evidence, q, &prospero, &g, false), None);
        assert_eq!(
            name_of(
                "Antonio: a brother should be so",
                0,
                &evidence,
                q,
                &prospero,
                &g,
                true
            ),
            None
        );
        // A quoted name: one closed quotation of capitalised words.
        let plate = "a bright brass plate with the name `W. RABBIT' engraved upon it.";
        assert_eq!(
            quoted_name(plate, 3),
            Some(Short {
                text: "W. RABBIT".into(),
                passage: 3
            })
        );
        for none in [
            "`Oh, I've had such a curious dream!' said Alice,",
            "the name `W. RABBIT' and `Bill' here.",
            "the name `W. RABBIT",
            "`One Two Three Four Five Six' he said.",
            "上面写着“通灵宝玉”四字。",
        ] {
            assert_eq!(quoted_name(none, 0), None, "{none}");
        }
    }
}
