//! Constrained decoding for `grounded_action_v1` with `llguidance` (the Rust engine behind
//! llama.cpp's and vLLM's structured output; it builds for wasm too).
//!
//! A Lark grammar is generated per question from the evidence shown: `evidence_id` can only be
//! an id of the brief, and each `quote` is tied to its id — after `"E2"` only a verbatim span of
//! E2's text (a substring automaton over its words) fits, at most 80 characters, no leading or
//! trailing space. The caps of ASA's prompt are in the grammar (≤ 6 facts, ≤ 2 citations per
//! fact) and free-text fields have character caps. The final answer of `answer_directly` is
//! grounded by construction: it is built only from the words of the evidence shown (as written,
//! lowercased or capitalised) and a fixed list of function words ([`FUNCTION_WORDS`]), with
//! a length cap that depends on the kind of question ([`answer_chars`]); an abstention's text is
//! the fixed abstention sentence, so it can neither ramble nor loop. When the token budget runs low
//! [`GrammarConstraint`] steers to the shortest way to close the JSON, so the object always
//! closes (llguidance's `max_tokens` cuts a lexeme off instead, even inside a UTF-8 character).

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};

use super::evidence::Evidence;
use super::reader::Span;
use super::validate::{Caps, CJK_FUNCTION_CHARS, FUNCTION_WORDS};
use crate::error::{EngineError, Result};
use crate::generate::{now_ms, Constraint, Step};
use crate::tokenizer::Tokenizer;

fn gerr(e: impl std::fmt::Display) -> EngineError {
    EngineError::Grammar(e.to_string())
}

/// Character caps of the free-text fields (ASA caps only quotes; these keep an answer short
/// and its JSON inside the budget).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextCaps {
    /// A fact's text.
    pub fact_chars: usize,
    /// The final answer.
    pub answer_chars: usize,
    /// One search keyword.
    pub keyword_chars: usize,
    /// Inferred facts (0: the list stays empty).
    pub inferred_facts: usize,
    /// Evidence first: each fact opens with its citations (`evidence_refs` before `fact`), so
    /// the model copies a quote before it writes the claim, and the final answer after both.
    #[serde(default)]
    pub evidence_first: bool,
    /// Shortest quote in characters (a passage shorter than this may be quoted whole): a quote
    /// of one word grounds nothing.
    #[serde(default = "default_quote_min")]
    pub quote_min_chars: usize,
    /// The model may choose `abstain`. Off, abstention is the pipeline's decision, made from
    /// the evidence: weak retrieval abstains before generating, and an answer that fails its
    /// checks in the last round abstains with the best passages as a snippet fallback.
    #[serde(default)]
    pub model_abstains: bool,
    /// How the final answer (and, evidence first, each fact's text) is built.
    #[serde(default)]
    pub answer_style: AnswerStyle,
}

/// How a grounded final answer is built under the grammar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStyle {
    /// A verbatim span of one passage shown (the shortest quote that answers).
    #[default]
    Extractive,
    /// Words of the passages shown joined by function words ([`answer_vocabulary`]).
    Composed,
}

fn default_quote_min() -> usize {
    12
}

impl Default for TextCaps {
    fn default() -> Self {
        TextCaps {
            fact_chars: 200,
            answer_chars: 400,
            keyword_chars: 40,
            inferred_facts: 2,
            evidence_first: true,
            quote_min_chars: default_quote_min(),
            model_abstains: false,
            answer_style: AnswerStyle::Extractive,
        }
    }
}

/// The vocabulary seen by llguidance: a token trie + greedy tokenization (used only for forced
/// bytes; masks do not depend on it).
struct VocabEnv {
    trie: TokTrie,
}

impl TokenizerEnv for VocabEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }
    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

/// A model's vocabulary prepared for grammars: built once per tokenizer (~0.1–1 s at 150k
/// tokens), shared by every question.
pub struct GrammarVocab {
    factory: ParserFactory,
}

impl GrammarVocab {
    /// From the tokenizer; `n_vocab` is the model's logit width (may exceed the tokenizer's
    /// vocabulary: those ids are never allowed). Added tokens are marked special so no grammar
    /// text can produce them.
    pub fn new(tok: &Tokenizer, n_vocab: usize) -> Result<Self> {
        let mut words = vec![Vec::new(); n_vocab.max(tok.vocab_size())];
        for (i, (bytes, special)) in tok.token_bytes()?.into_iter().enumerate() {
            words[i] = if special {
                let mut v = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                v.extend_from_slice(&bytes);
                v
            } else {
                bytes
            };
        }
        let eos = tok.eos_ids();
        let Some(&first) = eos.first() else {
            return Err(gerr("the tokenizer has no end-of-sequence id"));
        };
        let info = TokRxInfo::new(words.len() as u32, first);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(eos);
        let env: TokEnv = Arc::new(VocabEnv { trie });
        let mut factory = ParserFactory::new_simple(&env).map_err(gerr)?;
        factory.set_stderr_log_level(0);
        // Ten passages of 1000 characters need more lexer precomputation than the default.
        factory.limits_mut().initial_lexer_fuel = 20_000_000;
        Ok(GrammarVocab { factory })
    }

    /// A constraint for one answer under `grammar` (Lark).
    pub fn constraint(&self, grammar: &str) -> Result<GrammarConstraint> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(grammar.to_string()))
            .map_err(gerr)?;
        Ok(GrammarConstraint {
            matcher: Matcher::new(Ok(parser)),
            trie: self.factory.tok_env().tok_trie().clone(),
            reserve: 64,
            closers: Closers::JSON,
            mask_ms: Vec::new(),
        })
    }
}

/// A JSON string literal of `s` for a Lark grammar (Lark literals use JSON escapes).
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The words of an evidence text as substring chunks: runs of letters/digits, runs of spaces
/// and single other characters (CJK, punctuation), each JSON-escaped.
fn chunks(text: &str) -> Vec<String> {
    let class = |c: char| {
        if c.is_whitespace() {
            1
        } else if c.is_ascii_alphanumeric() || (c.is_alphabetic() && (c as u32) < 0x2E80) {
            2
        } else {
            0
        }
    };
    let mut out: Vec<String> = Vec::new();
    let mut prev = 0;
    for c in text.chars() {
        let esc = serde_json::to_string(&c.to_string()).unwrap_or_default();
        let esc = esc.get(1..esc.len().saturating_sub(1)).unwrap_or("");
        let k = class(c);
        match out.last_mut() {
            Some(last) if k != 0 && k == prev => last.push_str(esc),
            _ => out.push(esc.to_string()),
        }
        prev = k;
    }
    out
}

/// Answer length cap for `question`, in characters: a short answer (100) for who / what /
/// where / when / which / how many, a longer one (200) for why / how / describe questions.
pub fn answer_chars(question: &str, cap: usize) -> usize {
    let q = question.trim_start().to_lowercase();
    let long = [
        "why",
        "how ",
        "describe",
        "explain",
        "what happen",
        "in what way",
    ]
    .iter()
    .any(|w| q.starts_with(w) && !q.starts_with("how many") && !q.starts_with("how much"))
        || ["为什么", "为何", "怎么", "如何", "怎样"]
            .iter()
            .any(|w| q.contains(w));
    // Chinese answers keep the same caps: halved, the reader's best span held the answer for
    // 11 of the 70 answerable 红楼梦 questions instead of 19 (README, "Measured").
    cap.min(if long { 200 } else { 100 })
}

/// The words a grounded final answer may be built from: every word of `evidence` (runs of
/// letters and digits as written, lowercased and capitalised), the [`FUNCTION_WORDS`]; and
/// every CJK character of the evidence with the [`CJK_FUNCTION_CHARS`].
pub fn answer_vocabulary(evidence: &[Evidence]) -> (Vec<String>, Vec<char>) {
    let mut words = std::collections::BTreeSet::new();
    let mut cjk = std::collections::BTreeSet::new();
    for w in FUNCTION_WORDS {
        words.insert(w.to_string());
        words.insert(capitalise(w));
    }
    cjk.extend(CJK_FUNCTION_CHARS.chars());
    for e in evidence {
        for w in e.text.split(|c: char| !word_char(c)) {
            if w.is_empty() {
                continue;
            }
            words.insert(w.to_string());
            words.insert(w.to_lowercase());
            words.insert(capitalise(&w.to_lowercase()));
        }
        cjk.extend(
            e.text
                .chars()
                .filter(|&c| super::prompt::has_cjk(&c.to_string())),
        );
    }
    (words.into_iter().collect(), cjk.into_iter().collect())
}

/// A letter or digit of an alphabetic script (CJK ideographs are characters of their own).
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || (c.is_alphanumeric() && (c as u32) < 0x2E80)
}

fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The grounded final answer as a Lark lexeme: words of [`answer_vocabulary`] separated by
/// spaces and light punctuation, CJK characters with or without separators, an optional final
/// full stop, at most `chars` characters.
fn grounded_answer_lexeme(evidence: &[Evidence], chars: usize) -> String {
    let (words, cjk) = answer_vocabulary(evidence);
    // Longest first, so the regex engine's alternation is unambiguous to read.
    let mut words = words;
    words.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    let w = format!("(?:{})", words.join("|"));
    // CJK characters may also follow anything without a separator.
    let (item, cjk_next) = if cjk.is_empty() {
        (w, String::new())
    } else {
        let c: String = cjk.iter().collect();
        (format!("(?:{w}|[{c}])"), format!("|[{c}]"))
    };
    let sep = "(?:[ ,;:'-]|，|、){1,2}";
    format!(
        "/{item}(?:{sep}{item}{cjk_next})*[.!?。！？]?/ & /.{{1,{}}}/",
        chars.max(1)
    )
}

/// The Lark grammar of `grounded_action_v1` for this evidence and `question` (module docs).
/// With the reader's `choices` (extractive and evidence first), an answer is one of those
/// spans: its first fact quotes the span from its passage ([`super::reader::quote_of`]), states
/// that quote as the fact, and gives the span as the final answer.
pub fn build_grammar(
    evidence: &[Evidence],
    caps: &Caps,
    text: &TextCaps,
    question: &str,
    choices: &[&Span],
) -> Result<String> {
    let q = |s: &str| lit(s);
    let mut g = String::from("%llguidance {}\n");
    let facts_more = caps.facts.saturating_sub(1);
    let mut starts = vec!["abstain", "retrieve"];
    if !evidence.is_empty() && caps.facts > 0 && caps.refs_per_fact > 0 {
        starts.insert(0, "answer");
        if !text.model_abstains {
            starts.retain(|s| *s != "abstain");
        }
        let inferred = if text.inferred_facts > 0 {
            format!(
                "(inf (\",\" inf){{0,{}}})?",
                text.inferred_facts.saturating_sub(1)
            )
        } else {
            String::new()
        };
        let tied = text.evidence_first && text.answer_style == AnswerStyle::Extractive;
        let choices: Vec<&&Span> = choices
            .iter()
            .filter(|s| s.passage < evidence.len() && !s.text.trim().is_empty())
            .collect();
        // A tied answer branch: its first fact opens with the citation `first_ref`, states
        // `fact`, and the final answer gives `said` after any further facts.
        // `named` is a second fact forced after the first (the short answer's words quoted from
        // their passage: [`super::naming::Short::fact`]), or empty.
        let tied_branch = |name: &str, first_ref: &str, fact: &str, named: &str, said: &str| {
            let more = facts_more.saturating_sub(usize::from(!named.is_empty()));
            format!(
                "{name}: {} {} {first_ref} ({} ref){{0,{}}} {} {fact} {} {named} ({} fact){{0,{more}}} {} {inferred} {} {said} {}\n",
                q("{\"next_action\":\"answer_directly\",\"supported_facts\":["),
                q("{\"evidence_refs\":["),
                q(","),
                caps.refs_per_fact.saturating_sub(1),
                q("],\"fact\":\""),
                q("\"}"),
                q(","),
                q("],\"inferred_facts\":["),
                q("],\"final_answer\":\""),
                q("\"}"),
            )
        };
        if tied && !choices.is_empty() {
            // The reader's spans: each branch quotes its span from its passage, states the
            // quote as its fact (so every key term of the fact is in its quote, when the span is
            // longer than a quote may be) and gives the span as the final answer.
            let alts: Vec<String> = (0..choices.len()).map(|j| format!("answer_s{j}")).collect();
            g += &format!("answer: {}\n", alts.join(" | "));
            let wants = super::reader::wants(question);
            // A citation of `quote` in passage `id`, as fixed text.
            let cite = |id: &str, quote: &str| {
                format!(
                    "{} {} {}",
                    q(&format!("{{\"evidence_id\":\"{id}\",\"quote\":\"")),
                    q(quote),
                    q("\"}"),
                )
            };
            for (j, s) in choices.iter().enumerate() {
                let quote = super::reader::quote_of(&s.text, question, caps.quote_chars);
                let first_ref = cite(&evidence[s.passage].id, &quote);
                // The final answer as the extractive protocol writes it ([`Span::answer`]: a
                // script's speaker before the span when the question asks who).
                let answer = s.answer(wants);
                let named = s.short_answer(wants).and_then(|n| n.fact(&quote, evidence));
                let named = named.map_or_else(String::new, |f| {
                    let r = &f.evidence_refs[0];
                    format!(
                        "{} {} {} {} {}",
                        q(",{\"evidence_refs\":["),
                        cite(&r.evidence_id, &r.quote),
                        q("],\"fact\":\""),
                        q(&f.fact),
                        q("\"}"),
                    )
                });
                let id = format!("answer_s{j}");
                g += &tied_branch(&id, &first_ref, &q(&quote), &named, &q(&answer));
            }
        } else if tied {
            // The passage the first fact cites first is the one its text and the final answer
            // are spans of: one branch per passage, chosen by that first evidence id.
            let alts: Vec<String> = (0..evidence.len()).map(|i| format!("answer_{i}")).collect();
            g += &format!("answer: {}\n", alts.join(" | "));
            for i in 0..evidence.len() {
                g += &tied_branch(
                    &format!("answer_{i}"),
                    &format!("ref_{i}"),
                    &format!("A{i}"),
                    "",
                    &format!("A{i}"),
                );
            }
        } else {
            g += &format!(
                "answer: {} fact ({} fact){{0,{facts_more}}} {} {inferred} {} GROUNDED {}\n",
                q("{\"next_action\":\"answer_directly\",\"supported_facts\":["),
                q(","),
                q("],\"inferred_facts\":["),
                q("],\"final_answer\":\""),
                q("\"}"),
            );
        }
        g += &format!("inf: {} FACT {}\n", q("\""), q("\""));
        let chars = answer_chars(question, text.answer_chars);
        match text.answer_style {
            AnswerStyle::Composed => {
                g += &format!("GROUNDED: {}\n", grounded_answer_lexeme(evidence, chars));
            }
            AnswerStyle::Extractive => {
                let alts: Vec<String> = (0..evidence.len()).map(|i| format!("A{i}")).collect();
                g += &format!("GROUNDED: {}\n", alts.join(" | "));
                let inner = chars.saturating_sub(2);
                for (i, e) in evidence.iter().enumerate() {
                    let spec = serde_json::json!({ "substring_chunks": chunks(&e.text) });
                    g += &format!("A{i}: %regex {spec} & /\\S(.{{0,{inner}}}\\S)?/\n");
                }
            }
        }
        g += &if text.evidence_first {
            format!(
                "fact: {} ref ({} ref){{0,{}}} {} GROUNDED {}\n",
                q("{\"evidence_refs\":["),
                q(","),
                caps.refs_per_fact.saturating_sub(1),
                q("],\"fact\":\""),
                q("\"}"),
            )
        } else {
            format!(
                "fact: {} FACT {} ref ({} ref){{0,{}}} {}\n",
                q("{\"fact\":\""),
                q("\",\"evidence_refs\":["),
                q(","),
                caps.refs_per_fact.saturating_sub(1),
                q("]}"),
            )
        };
        let alts: Vec<String> = (0..evidence.len()).map(|i| format!("ref_{i}")).collect();
        g += &format!("ref: {}\n", alts.join(" | "));
        let max_inner = caps.quote_chars.saturating_sub(2);
        for (i, e) in evidence.iter().enumerate() {
            if !e.id.chars().all(|c| c.is_ascii_alphanumeric()) || e.id.is_empty() {
                return Err(gerr(format!("evidence id {:?} is not alphanumeric", e.id)));
            }
            let ch = chunks(&e.text);
            if ch.is_empty() {
                return Err(gerr(format!("evidence {} has no text", e.id)));
            }
            let spec = serde_json::json!({ "substring_chunks": ch });
            g += &format!(
                "ref_{i}: {} Q{i} {}\n",
                q(&format!("{{\"evidence_id\":\"{}\",\"quote\":\"", e.id)),
                q("\"}"),
            );
            // At least `quote_min_chars` (or the whole passage when it is shorter), at most
            // `quote_chars`, no space at either end.
            let min_inner = text
                .quote_min_chars
                .min(e.text.trim().chars().count())
                .saturating_sub(2)
                .min(max_inner);
            let body = if text.quote_min_chars <= 1 || e.text.trim().chars().count() < 2 {
                format!("\\S(.{{0,{max_inner}}}\\S)?")
            } else {
                format!("\\S.{{{min_inner},{max_inner}}}\\S")
            };
            g += &format!("Q{i}: %regex {spec} & /{body}/\n");
        }
    }
    g = g.replacen(
        "%llguidance {}\n",
        &format!("%llguidance {{}}\nstart: {}\n", starts.join(" | ")),
        1,
    );
    g += &format!(
        "abstain: {}\n",
        q(&format!(
            "{{\"next_action\":\"abstain\",\"final_answer\":{}}}",
            lit(super::prompt::abstain_text(question))
        ))
    );
    g += &format!(
        "retrieve: {} kw ({} kw){{0,5}} {}\n",
        q("{\"next_action\":\"retrieve_more\",\"follow_up_hypothesis\":{\"keywords\":["),
        q(","),
        q("]}}")
    );
    g += &format!("kw: {} KEYWORD {}\n", q("\""), q("\""));
    let free = |n: usize| format!("/[^\"\\\\\\x00-\\x1F]{{1,{}}}/", n.max(1));
    g += &format!("FACT: {}\n", free(text.fact_chars));
    g += &format!("KEYWORD: {}\n", free(text.keyword_chars));
    Ok(g)
}

/// How a constraint finishes when the token budget runs low: among the tokens the grammar
/// allows, the one with the most bytes from `first` wins (a backslash counts against it), then
/// the most from `then`, then the shortest. Each protocol names the bytes that close it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closers {
    /// Bytes that end the innermost open piece (a JSON string's quote, a tag's `<`, a newline).
    pub first: &'static [u8],
    /// Bytes that close what encloses it (`]}` in JSON, `/>` of closing tags).
    pub then: &'static [u8],
}

impl Closers {
    /// `grounded_action_v1` JSON: end the string, then close arrays and objects.
    pub const JSON: Closers = Closers {
        first: b"\"",
        then: b"]}",
    };
}

/// One answer's grammar state, driving [`crate::generate::generate_with`].
pub struct GrammarConstraint {
    matcher: Matcher,
    trie: TokTrie,
    /// When fewer tokens than this remain, steer to the shortest close.
    pub reserve: usize,
    /// What closing steers towards.
    pub closers: Closers,
    /// Milliseconds spent computing each mask.
    pub mask_ms: Vec<f64>,
}

impl GrammarConstraint {
    fn err(&self, e: impl std::fmt::Display) -> EngineError {
        match self.matcher.get_error() {
            Some(m) => gerr(format!("{e} ({m})")),
            None => gerr(e),
        }
    }
}

impl Constraint for GrammarConstraint {
    fn step(&mut self, remaining: usize) -> Result<Step> {
        if self.matcher.is_stopped() {
            return Ok(Step::Stop);
        }
        // Bytes the grammar forces (`{"next_action":"`, `","evidence_refs":[` …) are fed in one
        // pass rather than sampled token by token.
        let ff = self.matcher.compute_ff_bytes();
        if !ff.is_empty() {
            let ids = self.trie.greedy_tokenize(&ff);
            if !ids.is_empty() {
                return Ok(Step::Force(ids));
            }
        }
        let closing = remaining <= self.reserve;
        let t0 = now_ms();
        let mask = self.matcher.compute_mask().map_err(|e| self.err(e))?;
        self.mask_ms.push(now_ms() - t0);
        if mask.is_zero() {
            return Err(self.err("the grammar allows no next token"));
        }
        if closing {
            // Prefer tokens that end the open piece, then close what encloses it, then the
            // shortest.
            let (trie, cl) = (&self.trie, self.closers);
            let score = |t: u32| {
                let b = trie.token(t);
                let n = |set: &[u8]| b.iter().filter(|c| set.contains(c)).count() as i64;
                (n(cl.first) - 2 * n(b"\\"), n(cl.then), -(b.len() as i64))
            };
            let best = mask.to_list().into_iter().max_by_key(|&t| score(t));
            return match best {
                Some(t) => Ok(Step::Force(vec![t])),
                None => Err(self.err("the grammar allows no next token")),
            };
        }
        Ok(Step::Sample(mask.as_slice().to_vec()))
    }

    fn commit(&mut self, id: u32) -> Result<()> {
        if self.trie.eos_tokens().contains(&id) {
            return Ok(());
        }
        self.matcher.consume_token(id).map_err(|e| self.err(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::answer_chars;

    #[test]
    fn answer_caps_by_question_kind_and_script() {
        assert_eq!(answer_chars("Who did Alice follow?", 400), 100);
        assert_eq!(answer_chars("Why did Alice sneeze?", 400), 200);
        assert_eq!(answer_chars("How many legs?", 400), 100);
        assert_eq!(answer_chars("尤三姐是怎样死的？", 400), 200);
        assert_eq!(answer_chars("黛玉的母亲是谁？", 400), 100);
        // The configured cap wins when it is smaller.
        assert_eq!(answer_chars("Why did Alice sneeze?", 60), 60);
    }
}
