//! The question as the reader scores spans against it ([`Asked`]): its terms, the kind of
//! answer it asks for, the story's entities it names, the story's words near its own, and
//! which names in a span are someone's rather than a place's or a work's.

use std::ops::Range;

use super::asks::{holds_phrase, plain_words, quotations, wants, Wants};
use super::naming::word_before;
use super::stems::{same_stem, stem, stems};
use super::validate::FUNCTION_WORDS;
use crate::retrieval::{bm25, Bm25Index, EntityGraph, Neighbours};

/// Words by which a question frames what it asks rather than say it ("According to the
/// Queen, …", "in the story", "the narrator" for the "I" of a story told in the first
/// person, "how many …", "what kind of …"): a span need not hold them to speak of what is
/// asked.
const FRAMING_WORDS: &[&str] = &[
    "according",
    "story",
    "novel",
    "book",
    "play",
    "chapter",
    "scene",
    "act",
    "narrator",
    "many",
    "much",
    "kind",
    "sort",
];

/// English number words (lower case); digits count too. Not `one` nor `once`: English counts
/// with them less than it says "one day", "one could …" (on the four English sets the best
/// span of 5 on-story unanswerable "how old / how much" questions gave no count but `one`).
const NUMBER_WORDS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "hundred", "thousand",
    "million", "dozen", "half", "twice",
];
/// Chinese numerals (一 left out: it is in every other phrase).
const NUMBER_CHARS_ZH: &str = "二三四五六七八九十百千万两廿卅";
/// Words of six letters or more in `-ing` that are mostly not a verb's form: they do not say
/// what someone is doing ([`Wants::Doing`]).
const ING_NOUNS: &[&str] = &[
    "anything",
    "ceiling",
    "cunning",
    "darling",
    "duckling",
    "during",
    "evening",
    "everything",
    "farthing",
    "feeling",
    "lodging",
    "meaning",
    "morning",
    "nothing",
    "pudding",
    "shilling",
    "something",
    "spring",
    "stocking",
    "string",
    "wedding",
];
/// Words that give a cause, English and Chinese.
const REASON_WORDS: &[&str] = &["because", "since", "reason", "so that", "for fear"];
const REASON_WORDS_ZH: &[&str] = &["因为", "因此", "所以", "原来", "只因", "皆因", "故此"];

/// The question as the reader scores spans against it.
#[derive(Clone, Debug, PartialEq)]
pub struct Asked {
    /// Its terms with their idf ([`question_terms`]).
    pub terms: Vec<(String, f32)>,
    /// The kind of answer it asks for.
    pub wants: Wants,
    /// The story's entities it names (lexicon ids), which a name in the answer must not be.
    pub entities: Vec<u32>,
    /// The question as written (a name it gives is no answer: [`super::naming::new_names`]).
    pub question: String,
    /// For its terms, the story's words nearest to them by the index's encoder (BM25 terms,
    /// [`Asked::with_neighbours`]): a span that says `invitation` speaks of the `message`
    /// asked about.
    pub neighbours: Vec<(String, Vec<String>)>,
}

impl Asked {
    /// Reads `question` against the story's BM25 statistics and entity lexicon.
    pub fn new(question: &str, bm25: &Bm25Index, graph: Option<&EntityGraph>) -> Self {
        Asked {
            terms: question_terms(question, bm25),
            wants: wants(question),
            entities: graph.map_or_else(Vec::new, |g| {
                g.question_entities(question)
                    .iter()
                    .map(|&(e, _)| e)
                    .collect()
            }),
            question: question.to_string(),
            neighbours: Vec::new(),
        }
    }

    /// Reads, for the question's words, the story's terms that expanded them in BM25's query
    /// (`near`, [`crate::retrieval::Lexicon::neighbours`]), as its terms' [`Asked::neighbours`].
    pub fn with_neighbours(&mut self, near: &Neighbours) {
        for (word, terms) in near {
            let st = stem(&word.to_lowercase());
            if self.terms.iter().any(|(t, _)| *t == st) {
                self.neighbours
                    .push((st, terms.iter().map(|(t, _)| t.clone()).collect()));
            }
        }
    }

    /// Does `span` name a place or work the question does not ([`Wants::Named`]): a name
    /// phrase the question lacks ([`super::naming::new_names`]), outside the speaker's label
    /// when the span lies in a script's speech (`in_line`: then only the story's entities
    /// count, as verse capitalises its lines)?
    ///
    /// A name the span shows to be someone's ([`is_someone`]: a script's
    /// speaker, someone who speaks or is spoken to, `teacher Hotta`, `Mr. Koga`) names no
    /// place or work.
    /// `before`: the words before the span in its passage (the clause [`super::spans::windows`] reads as its
    /// lead), where a name the span opens with may be shown to be someone's.
    pub fn names_new(
        &self,
        span: &str,
        before: &str,
        graph: Option<&EntityGraph>,
        in_line: bool,
    ) -> bool {
        let Some(g) = graph.filter(|_| !super::prompt::has_cjk(span)) else {
            return false;
        };
        let said = format!("{before} {span}");
        let shift = before.len() + 1;
        let names: Vec<_> =
            super::naming::new_names(span, &self.question, &self.entities, g, in_line)
                .into_iter()
                .map(|(at, inside)| {
                    let at = at.start + shift..at.end + shift;
                    let someone = is_someone(&said, at.clone(), &inside, g);
                    (at, inside, someone)
                })
                .collect();
        // Someone shown as such once is someone in each of their phrases (`Mary Ann, … Ann`).
        let people: Vec<u32> = names
            .iter()
            .filter(|(_, _, someone)| *someone)
            .flat_map(|(_, inside, _)| inside.iter().copied())
            .collect();
        names.iter().any(|(at, inside, someone)| {
            !someone
                && (inside.is_empty() || !inside.iter().all(|e| people.contains(e)))
                && !is_demonym(&said[at.clone()])
        })
    }

    /// Does `span` hold, beyond the question's own words, the kind of answer asked for?
    /// A name: an entity of the lexicon the question does not name (or, when the question
    /// asks for a name, quoted words); a number: a number word, digit or Chinese numeral;
    /// words: a quotation mostly of words the question lacks; a cause: a word that gives one.
    pub fn fits(&self, span: &str, graph: Option<&EntityGraph>) -> bool {
        let lower = span.to_lowercase();
        let quoted_new = || {
            quotations(span).iter().any(|q| {
                let t = stems(q);
                let new = t.iter().filter(|w| !self.asked(w)).count();
                !t.is_empty() && 2 * new >= t.len()
            })
        };
        match self.wants {
            Wants::Any => false,
            Wants::Number => {
                plain_words(&lower).any(|t| {
                    t.chars().any(|c| c.is_ascii_digit())
                        || NUMBER_WORDS.iter().any(|n| {
                            t.strip_prefix(n).is_some_and(|r| {
                                r.is_empty() || r.starts_with('-') || r == "ty" || r == "teen"
                            })
                        })
                }) || span.chars().any(|c| NUMBER_CHARS_ZH.contains(c))
            }
            Wants::Name => {
                graph.is_some_and(|g| {
                    g.text_entities(span)
                        .iter()
                        .any(|(e, _)| !self.entities.contains(e))
                }) || quoted_new()
            }
            Wants::Named => self.names_new(
                span,
                "",
                graph,
                super::spans::starts_with_speaker_label(span),
            ),
            Wants::Words => quoted_new(),
            Wants::Reason => holds_phrase(span, REASON_WORDS, REASON_WORDS_ZH),
            Wants::Doing => plain_words(&lower).any(|w| {
                w.len() >= 6
                    && w.ends_with("ing")
                    && !ING_NOUNS.contains(&w)
                    && !self.asked(&stem(w))
            }),
        }
    }

    /// The stems of the names the question writes (its capitalised words past the first):
    /// what a span about the same people shares with it whatever it says of them.
    pub fn name_terms(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, w) in self.question.split_whitespace().enumerate() {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            if i > 0 && w.chars().next().is_some_and(char::is_uppercase) {
                out.extend(stems(w));
            }
        }
        out
    }

    /// Its terms (with their idf) beyond its names ([`Asked::name_terms`]) and its framing
    /// words ([`FRAMING_WORDS`]): what a span must speak of to speak of what is asked
    /// ([`super::reader::Span::topic`]).
    pub fn topic_terms(&self) -> Vec<&(String, f32)> {
        let named = self.name_terms();
        self.terms
            .iter()
            .filter(|(t, _)| {
                !named.iter().any(|n| same_stem(n, t))
                    && !FRAMING_WORDS.iter().any(|f| stem(f) == *t)
            })
            .collect()
    }

    fn asked(&self, term: &str) -> bool {
        self.terms.iter().any(|(a, _)| same_stem(a, term))
    }
}

/// The question's terms, stemmed ([`stem`]), with their idf in the story (English terms the
/// story lacks get the idf of a term found once; Chinese pairs it lacks are left out),
/// function words left out.
pub fn question_terms(question: &str, bm25: &Bm25Index) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    for t in bm25::tokenize(question) {
        let st = stem(&t);
        if FUNCTION_WORDS.contains(&t.as_str()) || out.iter().any(|(u, _)| *u == st) {
            continue;
        }
        // BM25 indexes stems without stopwords: a stopword is as common as can be.
        let df = match bm25::term(t.clone()) {
            Some(term) => bm25.postings(&term).map_or(0, <[_]>::len),
            None => bm25.len(),
        };
        // A Chinese pair of characters that the story never holds is an artifact of reading
        // characters in pairs (`蟠争`, `买丫`: across the words of "薛蟠争买丫头"), not a word:
        // no span can hold it, and at the idf of a term found once it outweighed the pairs
        // that match, so the passages' retrieval prior decided every Chinese answer.
        if df == 0 && t.chars().any(bm25::is_cjk_letter) {
            continue;
        }
        let df = df.max(1);
        out.push((st, bm25.idf(df)));
    }
    out
}

/// Verbs of speech that stand beside the name of who speaks (`said the Mock Turtle`, `Alice
/// replied`).
const SPEECH_VERBS: &[&str] = &[
    "said",
    "says",
    "say",
    "asked",
    "asks",
    "replied",
    "replies",
    "cried",
    "cries",
    "answered",
    "answers",
    "shouted",
    "exclaimed",
    "whispered",
    "thought",
    "added",
    "continued",
    "began",
    "remarked",
    "muttered",
    "interrupted",
    "repeated",
    "went",
];
/// Titles and nouns for someone that stand before a name (`Mr. Koga`, `teacher Hotta`), and
/// the man a name is given to (`we used to call him Tortoise`).
const SOMEONE_BEFORE: &[&str] = &[
    "mr",
    "mrs",
    "miss",
    "dr",
    "mister",
    "madam",
    "sir",
    "professor",
    "teacher",
    "master",
    "brother",
    "sister",
    "uncle",
    "aunt",
    "father",
    "mother",
    "friend",
    "dear",
    "poor",
    "him",
];

/// Does `span` show the name at `at` (a phrase of [`super::naming::new_names`], holding the story's entities
/// `inside`) to be someone's, not a place's or a work's? A script's speaker is someone (the
/// lexicon says so: [`crate::retrieval::EntitySource::Speaker`]); in the span, so is a name a
/// verb of speech stands beside (`said the Mock Turtle`, `Alice replied`), one a title or a
/// noun for someone comes before (`Mr. Koga`, `teacher Hotta`), and one spoken to: between
/// commas at the start of a quotation (`` `Why, Mary Ann, what ARE you doing'' ``).
pub fn is_someone(span: &str, at: Range<usize>, inside: &[u32], graph: &EntityGraph) -> bool {
    if inside.iter().any(|&e| {
        graph
            .entities()
            .get(e as usize)
            .is_some_and(|x| x.source == crate::retrieval::EntitySource::Speaker)
    }) {
        return true;
    }
    // The capitalised words just before the phrase are the rest of the name (`Mary` where a
    // span opened at `Mary Ann` and only `Ann` was read as a name).
    let mut start = at.start;
    while let Some((s, w)) = word_before(span, start) {
        if !(w.chars().next().is_some_and(char::is_uppercase) && w.chars().any(char::is_lowercase))
        {
            break;
        }
        if SOMEONE_BEFORE.contains(&w.to_lowercase().trim_end_matches('.')) {
            return true;
        }
        start = s;
    }
    let (Some(before), Some(after)) = (span.get(..start), span.get(at.end..)) else {
        return false;
    };
    let lower = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let mut back = before.split_whitespace().rev().map(lower);
    let last = back.next().unwrap_or_default();
    let last = if last == "the" {
        back.next().unwrap_or_default()
    } else {
        last
    };
    let next = after
        .split_whitespace()
        .next()
        .map(lower)
        .unwrap_or_default();
    if SPEECH_VERBS.contains(&last.as_str())
        || SOMEONE_BEFORE.contains(&last.as_str())
        || SPEECH_VERBS.contains(&next.as_str())
    {
        return true;
    }
    // Spoken to: a comma or a mark after the name, and before it the opening of a quotation
    // with at most one word between (`` `Why, `` `` `Pat, ``).
    let addressed_after = after.trim_start().starts_with([',', '!', '?']);
    let opening = before.rfind(['`', '"', '“', '‘']);
    addressed_after
        && opening.is_some_and(|o| {
            let between = &before[o + 1..];
            between.split_whitespace().count() <= 1
                && (between.trim().is_empty() || between.trim_end().ends_with(','))
        })
}

/// Words for a people or a language, capitalised as names are (`French and music`, `the
/// Danish march`), that name no place or work alone.
const DEMONYMS: &[&str] = &[
    "English",
    "French",
    "Latin",
    "Greek",
    "German",
    "Spanish",
    "Italian",
    "Dutch",
    "Danish",
    "Dane",
    "Danes",
    "Norwegian",
    "Swedish",
    "Polish",
    "Russian",
    "Scottish",
    "Irish",
    "Welsh",
    "British",
    "European",
    "African",
    "American",
    "Indian",
    "Japanese",
    "Chinese",
    "Neapolitan",
    "Roman",
    "Hebrew",
    "Arabic",
    "Turkish",
];

/// Is `name` (a name phrase, the `the` before it included) one word for a people or a
/// language ([`DEMONYMS`])?
pub fn is_demonym(name: &str) -> bool {
    let name = name.trim();
    let name = name
        .strip_prefix("the ")
        .or_else(|| name.strip_prefix("The "))
        .unwrap_or(name);
    let name = name.strip_suffix("'s").unwrap_or(name);
    DEMONYMS.contains(&name)
}

#[cfg(test)]
#[path = "asked_tests.rs"]
mod tests;
