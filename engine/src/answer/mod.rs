//! Grounded answers: the pipeline that turns a question into a quoted, checked answer or an
//! abstention (ASA's protocol, run on the reader's machine).
//!
//! 1. question → retrieval (dense + BM25 + graph, fused) → evidence brief `[E1] …`
//!    (weak retrieval — the best dense cosine under a calibrated threshold — abstains at once);
//! 2. the extractive reader ([`reader`]) ranks the answer-sized spans of the brief, puts the
//!    passages with the best spans first, and abstains when no span is likely to answer;
//! 3. the model writes `grounded_action_v1` JSON, under a per-question grammar by default
//!    ([`grammar`]: the answer is one of the reader's best spans, quoted from its passage), or
//!    free with ASA's truncation recovery ([`recover`]);
//! 4. every answer is checked ([`validate`]): ids exist, quotes are verbatim, key terms quoted;
//! 5. a failed check or `retrieve_more` searches again (at most `max_rounds`; a round that
//!    finds nothing new ends the loop); at the end, failure abstains with the best snippets.
//!
//! [`ask`] runs these stages as the methods of a small state carried from round to round
//! (`rounds.rs`), each over its own module: retrieve ([`Retriever::search`]) → evidence
//! ([`evidence::extend`], [`evidence::shortfall`]) → read ([`reader`]) → prompt ([`prompt::fit_grounded`]) →
//! constrained generation ([`Llm`], `generation.rs`) → recover and validate
//! ([`recover::parse_action`], [`validate::check`]) → next round (`rounds::next_round`). The
//! refiner and ReAct protocols ([`modes`]) take over after the first brief.

pub mod asked;
pub mod asks;
pub mod eval;
pub mod evidence;
mod generation;
pub mod grammar;
pub mod irregular;
pub mod modes;
pub mod naming;
pub mod prompt;
pub mod reader;
pub mod recover;
mod rounds;
pub mod schema;
pub mod session;
pub mod spans;
pub mod stems;
pub mod validate;

pub use generation::Llm;

use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::embed::Embedder;
use crate::error::{EngineError, Result};
use crate::generate::{now_ms, SamplingParams};
use crate::retrieval::{Hit, Neighbours, Sources, StoryIndex};
use evidence::{BriefLimits, Evidence};
use grammar::{GrammarVocab, TextCaps};
use recover::ParseOutcome;
use rounds::Rounds;
use schema::{GroundedAction, NextAction};
use validate::Caps;

/// The answer protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The measured best for the model's size ([`Mode::resolve`]): [`Mode::Extractive`] under
    /// [`EXTRACTIVE_BELOW`] parameters, [`Mode::Grounded`] from there on.
    #[default]
    Auto,
    /// ASA's `grounded_action_v1` JSON with verbatim quotes.
    Grounded,
    /// dr-tulu's refiner: `<answer>` with `<snippet id=…>claim</snippet>`.
    Refiner,
    /// ReAct: Thought / Action (search, read) / Observation / Final Answer.
    React,
    /// The reader alone: the answer is the reader's best span, quoted from its passage as the
    /// grammar would force it, checked as a model's answer is; no token is generated (the model
    /// is not run), so an answer takes the retrieval's milliseconds.
    Extractive,
}

/// Models under this many parameters answer in [`Mode::Extractive`] by default. On the
/// project's question sets, SmolLM2-135M-Instruct in [`Mode::Grounded`] wrote the reader's span
/// on every question it answered (the grammar forces it with `reader.choices: 1`): the same
/// answers as the extractive run, word for word, on all 81 *Alice* and all 70 *Tempest*
/// questions, at 8.0 and 7.8 s a question against 0.62 and 0.94 s (2 cores, CPU path; README,
/// "Extractive by default"). Larger models keep the grounded protocol, where the model's own
/// reading may do better than the reader (not measured here: no larger real weights are
/// available to this project).
pub const EXTRACTIVE_BELOW: u64 = 1_000_000_000;

impl Mode {
    /// Every protocol, in the order the page's settings list them.
    pub const ALL: [Mode; 5] = [
        Mode::Auto,
        Mode::Grounded,
        Mode::Refiner,
        Mode::React,
        Mode::Extractive,
    ];

    /// The protocol named `name` ([`Mode::as_str`]), if any.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// The setting's name (`auto`, `grounded`, `refiner`, `react`, `extractive`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Grounded => "grounded",
            Mode::Refiner => "refiner",
            Mode::React => "react",
            Mode::Extractive => "extractive",
        }
    }

    /// The protocol a model of `parameters` weights runs: [`Mode::Auto`] picks by size
    /// ([`EXTRACTIVE_BELOW`]), or [`Mode::Grounded`] when constrained decoding is off (`grammar`
    /// false: free decoding was asked for); the others are themselves.
    pub fn resolve(self, parameters: u64, grammar: bool) -> Mode {
        match self {
            Mode::Auto if grammar && parameters < EXTRACTIVE_BELOW => Mode::Extractive,
            Mode::Auto => Mode::Grounded,
            m => m,
        }
    }
}

/// Runtime settings, with ASA's defaults where ASA has one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AskConfig {
    /// The protocol.
    pub mode: Mode,
    /// ReAct step limit.
    pub react_steps: usize,
    /// Context in tokens (ASA: 10000; capped by the model's KV cache).
    pub context: usize,
    /// Most generated tokens per round (ASA: 1536).
    pub max_tokens: usize,
    /// Sampling (ASA: temperature 0.2, top-p 0.9, repetition penalty 1.05), with the
    /// repetition guard on at 10 tokens (a looping answer is blocked as it starts its second round).
    pub sampling: SamplingParams,
    /// Retrieval rounds (ASA: 2).
    pub max_rounds: usize,
    /// Evidence brief size.
    pub brief: BriefLimits,
    /// Passages retrieved per round before the brief takes its share.
    pub search_k: usize,
    /// Weak retrieval: abstain without generating when the best dense cosine is below the
    /// threshold for the index's embedder kind (calibrated per embedder; see
    /// [`default_weak_dense`]). Fused RRF scores are rank-based and do not separate weak evidence.
    pub weak_dense: std::collections::BTreeMap<String, f32>,
    /// Citation caps (ASA's prompt).
    pub caps: Caps,
    /// Free-text token caps under the grammar.
    pub text_caps: TextCaps,
    /// The extractive reader: answer spans ranked before generation, and the answer-confidence
    /// floor under which the pipeline abstains ([`reader`]).
    pub reader: reader::ReaderConfig,
    /// Constrained decoding on (`--no-grammar` turns it off).
    pub grammar: bool,
    /// Longest question accepted, in characters.
    pub max_question_chars: usize,
    /// Web context (ASA's option; there is no web here, so it must stay off).
    pub web_context: bool,
}

impl Default for AskConfig {
    fn default() -> Self {
        AskConfig {
            mode: Mode::Auto,
            react_steps: 6,
            context: 10000,
            max_tokens: 1536,
            sampling: SamplingParams {
                temperature: 0.2,
                top_k: 40,
                top_p: 0.9,
                repetition_penalty: 1.05,
                seed: 0,
                no_repeat_ngram: 10,
            },
            max_rounds: 2,
            brief: BriefLimits {
                top_k: 6,
                doc_chars: 600,
                total_chars: 6000,
                next_chars: 200,
            },
            search_k: 10,
            weak_dense: default_weak_dense(),
            caps: Caps::default(),
            text_caps: TextCaps::default(),
            reader: reader::ReaderConfig::default(),
            grammar: true,
            max_question_chars: 2000,
            web_context: false,
        }
    }
}

/// Weak-retrieval thresholds on the best dense cosine, by embedder kind. Calibrated on the
/// project's question sets (README, "Abstention"): with all-MiniLM-L6-v2 (`bert`) the ten
/// off-topic questions of `eval/offtopic.jsonl` reach 0.00–0.33 on *Alice*, *The Tempest*,
/// *Hamlet* and *Botchan* (one exception, 0.366: "What is the capital of France?" on *Hamlet*,
/// a play that talks of France), while 11 of 263 answerable questions of those stories fell
/// under the earlier 0.40 (0.268–0.392; paraphrased script questions most) and 3 fall under
/// 0.35; multilingual-e5-small (`e5s1`) gives on-story questions 0.870 or more against
/// 0.834–0.837.
pub fn default_weak_dense() -> std::collections::BTreeMap<String, f32> {
    [("bert".to_string(), 0.35), ("e5s1".to_string(), 0.85)]
        .into_iter()
        .collect()
}

/// Where the evidence comes from.
pub struct Retriever<'a, B: Backend> {
    /// The story index.
    pub index: &'a StoryIndex,
    /// The query embedder (`None`: BM25 + graph only).
    pub embedder: Option<&'a Embedder<B>>,
}

impl<B: Backend> Retriever<'_, B> {
    /// Embeds `query` (when there is an embedder) and searches every source for `k` passages.
    pub async fn search(&self, b: &B, query: &str, k: usize) -> Result<Vec<Hit>> {
        Ok(self.search_embedded(b, query, k).await?.0)
    }

    /// [`Retriever::search`], also returning the query's vector (`None` without an embedder).
    pub async fn search_embedded(
        &self,
        b: &B,
        query: &str,
        k: usize,
    ) -> Result<(Vec<Hit>, Option<Vec<f32>>)> {
        let (hits, qv, _) = self.search_with_neighbours(b, query, k).await?;
        Ok((hits, qv))
    }

    /// [`Retriever::search_embedded`], also returning the story's terms that expanded each of
    /// the query's words in BM25's query ([`StoryIndex::search_with_neighbours`]; none without
    /// an embedder or a lexicon).
    pub async fn search_with_neighbours(
        &self,
        b: &B,
        query: &str,
        k: usize,
    ) -> Result<(Vec<Hit>, Option<Vec<f32>>, Neighbours)> {
        let (qv, words) = match self.embedder {
            Some(e) => {
                let (qv, words) = e.embed_search(b, self.index, query).await?;
                (Some(qv), words)
            }
            None => (None, Vec::new()),
        };
        let (hits, near) =
            self.index
                .search_with_neighbours(query, qv.as_deref(), &words, k, Sources::ALL)?;
        Ok((hits, qv, near))
    }

    /// The weak-retrieval threshold of `cfg` for the embedder's kind (`None`: no embedder, or
    /// none calibrated for it).
    pub fn weak_floor(&self, cfg: &AskConfig) -> Option<f32> {
        self.embedder
            .and_then(|e| cfg.weak_dense.get(&e.spec.kind).copied())
    }
}

/// One retrieval-and-answer round.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    /// What was searched.
    pub query: String,
    /// The follow-up hypothesis this round searched for (rounds after the first).
    pub hypothesis: Option<schema::Hypothesis>,
    /// Passages added this round (the model saw these plus earlier rounds').
    pub evidence: Vec<Evidence>,
    /// What the model wrote (empty when the round did not generate).
    pub raw_output: String,
    /// How the action was read from it.
    pub outcome: ParseOutcome,
    /// The action, if one was read.
    pub action: Option<GroundedAction>,
    /// Problems the checks found.
    pub problems: Vec<String>,
    /// Tokens generated.
    pub tokens: usize,
    /// The reader's best spans over the evidence shown so far, best first (at most eight).
    #[serde(default)]
    pub spans: Vec<reader::Span>,
}

impl Round {
    /// A round that searched `query` and added `evidence`, before it generates.
    pub(crate) fn new(query: &str, evidence: Vec<Evidence>) -> Round {
        Round {
            query: query.to_string(),
            hypothesis: None,
            evidence,
            raw_output: String::new(),
            outcome: ParseOutcome::Failed,
            action: None,
            problems: Vec::new(),
            tokens: 0,
            spans: Vec::new(),
        }
    }
}

/// A checked fact of the final answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FinalFact {
    /// The claim.
    pub fact: String,
    /// Its citations.
    pub refs: Vec<validate::RefCheck>,
    /// All citations verified and key terms quoted.
    pub verified: bool,
}

/// Time spent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Query embedding + search, ms.
    pub retrieval_ms: f64,
    /// Prompt processing, s.
    pub prefill_s: f64,
    /// Generation, s.
    pub decode_s: f64,
    /// Grammar mask computations.
    pub masks: usize,
    /// Mean ms per mask.
    pub mask_ms_mean: f64,
    /// Worst ms per mask.
    pub mask_ms_max: f64,
    /// Whole question, s.
    pub total_s: f64,
}

/// The outcome of a question.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Answer {
    /// The protocol used.
    pub mode: Mode,
    /// The question as received (trimmed).
    pub question: String,
    /// Every round.
    pub rounds: Vec<Round>,
    /// The action that stands.
    pub final_action: NextAction,
    /// Text for the user.
    pub answer: String,
    /// Checked facts (answers only).
    pub facts: Vec<FinalFact>,
    /// Why the pipeline abstained on its own (weak retrieval, failed checks), if it did.
    pub abstain_reason: Option<String>,
    /// Best evidence shown with an abstention.
    pub snippets: Vec<Evidence>,
    /// Constrained decoding was on.
    pub grammar: bool,
    /// Every passage shown, by id.
    pub evidence: Vec<Evidence>,
    /// Time spent.
    pub timings: Timings,
}

impl Answer {
    /// Did the raw output of any round fail to parse as written (before any repair)?
    pub fn raw_json_failures(&self) -> usize {
        self.rounds
            .iter()
            .filter(|r| !r.raw_output.is_empty() && r.outcome != ParseOutcome::Parsed)
            .count()
    }
    /// Rounds whose action was recovered from broken JSON.
    pub fn repaired(&self) -> usize {
        self.rounds
            .iter()
            .filter(|r| r.outcome == ParseOutcome::Recovered)
            .count()
    }
    /// The actions in order, e.g. `retrieve_more>answer_directly`.
    pub fn action_sequence(&self) -> String {
        let mut v: Vec<&str> = self
            .rounds
            .iter()
            .filter(|r| !r.raw_output.is_empty())
            .map(|r| {
                r.action
                    .as_ref()
                    .map(|a| a.next_action.as_str())
                    .unwrap_or("unparsed")
            })
            .collect();
        if self.abstain_reason.is_some() {
            v.push("abstain*");
        }
        v.join(">")
    }
}

/// Checks the question: trimmed, non-empty, not over the limit.
pub fn check_question(q: &str, max_chars: usize) -> Result<String> {
    let q = prompt::defang(q).replace('\n', " ");
    let q = q.trim();
    if q.is_empty() {
        return Err(EngineError::Question("the question is empty".into()));
    }
    let n = q.chars().count();
    if n > max_chars {
        return Err(EngineError::Question(format!(
            "the question has {n} characters; the limit is {max_chars}"
        )));
    }
    Ok(q.to_string())
}

/// Admits a question under `cfg`: no web context, a question within its limits ([`check_question`]),
/// and the grammar `vocab` only when constrained decoding is on (an error when it is on without
/// one). Returns the checked question and the vocabulary to decode with.
pub fn admit<'v>(
    question: &str,
    cfg: &AskConfig,
    vocab: Option<&'v GrammarVocab>,
) -> Result<(String, Option<&'v GrammarVocab>)> {
    if cfg.web_context {
        return Err(EngineError::Question(
            "web_context is on, but Lorekeeper runs offline: there is no web to search".into(),
        ));
    }
    let question = check_question(question, cfg.max_question_chars)?;
    let vocab = match (cfg.grammar, vocab) {
        (true, None) => {
            return Err(EngineError::Grammar(
                "constrained decoding is on but no grammar vocabulary was given".into(),
            ))
        }
        (g, v) => v.filter(|_| g),
    };
    Ok((question, vocab))
}

/// Answers `question` from the story (module docs) with the model side `llm`, whose grammar
/// vocabulary is needed when `cfg.grammar` is on; `on_text` streams the model's raw output of
/// each round.
pub async fn ask<B: Backend>(
    mut llm: Llm<'_, B>,
    retriever: &Retriever<'_, B>,
    question: &str,
    cfg: &AskConfig,
    mut on_text: impl FnMut(&str) -> bool,
) -> Result<Answer> {
    let t_start = now_ms();
    let (question, vocab) = admit(question, cfg, llm.vocab)?;
    llm.vocab = vocab;
    let resolved = AskConfig {
        mode: cfg.mode.resolve(llm.model.parameters(), cfg.grammar),
        ..cfg.clone()
    };
    let cfg = &resolved;
    let mut run = Rounds::new(cfg, question, vocab.is_some());
    let rounds = cfg.max_rounds.max(1);
    for round in 1..=rounds {
        // 1. Retrieve and extend the brief (no new passage, or weak retrieval, abstains).
        let hits = run.retrieve(llm.backend, retriever).await?;
        let Some(r) = run.brief(&hits, retriever.weak_floor(cfg), round) else {
            break;
        };
        // 2. Read: rank the answer spans, put the best passages first, abstain when no span
        //    is likely to answer.
        let Some(mut r) = run.read_spans(llm.backend, retriever, r, round).await? else {
            break;
        };
        // The reader alone: its best span is the answer, checked as a model's would be.
        if cfg.mode == Mode::Extractive {
            let shown = run.extract(&mut r);
            if run.read(r, shown, round == rounds).is_break() {
                break;
            }
            continue;
        }
        // The refiner and ReAct protocols take over from the first brief.
        if cfg.mode != Mode::Grounded {
            run.hand_over(&mut llm, retriever, r, &mut on_text).await?;
            return Ok(run.finish(t_start));
        }
        // 3. Prompt (dropping the last passages if the context cannot hold them) and generate.
        let shown = run.generate(&mut llm, &mut r, &mut on_text).await?;
        // 4. Read and check; an action that stands ends the rounds, others search again.
        if run.read(r, shown, round == rounds).is_break() {
            break;
        }
    }
    // 5. The final action.
    run.conclude();
    Ok(run.finish(t_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_mode_is_extractive_for_small_models_under_the_grammar() {
        let small = 134_515_008; // SmolLM2-135M
        assert_eq!(Mode::Auto.resolve(small, true), Mode::Extractive);
        assert_eq!(Mode::Auto.resolve(small, false), Mode::Grounded);
        assert_eq!(Mode::Auto.resolve(EXTRACTIVE_BELOW, true), Mode::Grounded);
        assert_eq!(Mode::Auto.resolve(4_000_000_000, true), Mode::Grounded);
        for m in [Mode::Grounded, Mode::Refiner, Mode::React, Mode::Extractive] {
            assert_eq!(m.resolve(small, true), m);
            assert_eq!(m.resolve(u64::MAX, false), m);
        }
        assert_eq!(AskConfig::default().mode, Mode::Auto);
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.as_str()), Some(m));
        }
        assert_eq!(Mode::from_name("nope"), None);
    }

    #[test]
    fn admit_checks_the_question_and_the_grammar_setting() {
        let msg = |r: Result<(String, Option<&GrammarVocab>)>| match r {
            Err(e) => e.to_string(),
            Ok((q, v)) => format!("ok {q:?} {}", v.is_some()),
        };
        let cfg = AskConfig::default();
        let web = AskConfig {
            web_context: true,
            ..AskConfig::default()
        };
        assert!(msg(admit("Who?", &web, None)).contains("there is no web to search"));
        // The question is checked before the grammar setting.
        assert!(msg(admit("  \n ", &cfg, None)).contains("the question is empty"));
        assert!(msg(admit("Who?", &cfg, None)).contains("no grammar vocabulary was given"));
        let free = AskConfig {
            grammar: false,
            ..AskConfig::default()
        };
        assert_eq!(
            msg(admit(" Who\nran? ", &free, None)),
            "ok \"Who ran?\" false"
        );
    }
}
