//! Grounded answers: the pipeline that turns a question into a quoted, checked answer or an
//! abstention (ASA's protocol, run on the reader's machine).
//!
//! 1. question → retrieval (dense + BM25 + graph, fused) → evidence brief `[E1] …`
//!    (weak retrieval — the best dense cosine under a calibrated threshold — abstains at once);
//! 2. the model writes `grounded_action_v1` JSON, under a per-question grammar by default
//!    ([`grammar`]), or free with ASA's truncation recovery ([`recover`]);
//! 3. every answer is checked ([`validate`]): ids exist, quotes are verbatim, key terms quoted;
//! 4. a failed check or `retrieve_more` searches again (at most `max_rounds`; a round that
//!    finds nothing new ends the loop); at the end, failure abstains with the best snippets.

pub mod eval;
pub mod evidence;
pub mod grammar;
pub mod modes;
pub mod prompt;
pub mod recover;
pub mod schema;
pub mod session;
pub mod validate;

use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::embed::Embedder;
use crate::error::{EngineError, Result};
use crate::generate::{
    generate_with, now_ms, Constraint, GenerateOptions, Generation, SamplingParams,
};
use crate::models::Decoder;
use crate::retrieval::{Sources, StoryIndex};
use crate::tokenizer::{Role, Tokenizer};
use evidence::{BriefLimits, Evidence};
use grammar::{Closers, GrammarVocab, TextCaps};
use recover::ParseOutcome;
use schema::{GroundedAction, NextAction};
use validate::{Caps, Checked};

/// The answer protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// ASA's `grounded_action_v1` JSON with verbatim quotes.
    #[default]
    Grounded,
    /// dr-tulu's refiner: `<answer>` with `<snippet id=…>claim</snippet>`.
    Refiner,
    /// ReAct: Thought / Action (search, read) / Observation / Final Answer.
    React,
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
    /// Sampling (ASA: temperature 0.2, top-p 0.9, repetition penalty 1.05).
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
            mode: Mode::Grounded,
            react_steps: 6,
            context: 10000,
            max_tokens: 1536,
            sampling: SamplingParams {
                temperature: 0.2,
                top_k: 40,
                top_p: 0.9,
                repetition_penalty: 1.05,
                seed: 0,
            },
            max_rounds: 2,
            brief: BriefLimits {
                top_k: 6,
                doc_chars: 600,
                total_chars: 6000,
            },
            search_k: 10,
            weak_dense: default_weak_dense(),
            caps: Caps::default(),
            text_caps: TextCaps::default(),
            grammar: true,
            max_question_chars: 2000,
            web_context: false,
        }
    }
}

/// Weak-retrieval thresholds on the best dense cosine, by embedder kind. Calibrated on the
/// project's question sets (README, "Abstention"): all-MiniLM-L6-v2 (`bert`) gives on-story
/// questions a best cosine of 0.456 or more and off-topic ones 0.08–0.32; multilingual-e5-small
/// (`e5s1`) 0.870 or more against 0.834–0.837.
pub fn default_weak_dense() -> std::collections::BTreeMap<String, f32> {
    [("bert".to_string(), 0.40), ("e5s1".to_string(), 0.85)]
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

/// Generates from `ids`, under `grammar` (its vocabulary, the Lark text, how it closes) when one
/// is given; the mask times are added to `mask_ms`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn generate_under<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    tok: &Tokenizer,
    grammar: Option<(&GrammarVocab, &str, Closers)>,
    ids: &[u32],
    opts: &GenerateOptions,
    mask_ms: &mut Vec<f64>,
    on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    let mut gc = match grammar {
        Some((v, g, closers)) => {
            let mut c = v.constraint(g)?;
            c.closers = closers;
            Some(c)
        }
        None => None,
    };
    let gen = generate_with(
        b,
        model,
        tok,
        ids,
        opts,
        gc.as_mut().map(|g| g as &mut dyn Constraint),
        on_text,
    )
    .await?;
    if let Some(g) = &gc {
        mask_ms.extend_from_slice(&g.mask_ms);
    }
    Ok(gen)
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

/// Answers `question` from the story (module docs). `vocab` is needed when `cfg.grammar` is
/// on; `on_text` streams the model's raw output of each round.
#[allow(clippy::too_many_arguments)]
pub async fn ask<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    tok: &Tokenizer,
    vocab: Option<&GrammarVocab>,
    retriever: &Retriever<'_, B>,
    question: &str,
    cfg: &AskConfig,
    mut on_text: impl FnMut(&str) -> bool,
) -> Result<Answer> {
    let t_start = now_ms();
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
    let mut out = Answer {
        mode: cfg.mode,
        question: question.clone(),
        rounds: Vec::new(),
        final_action: NextAction::Abstain,
        answer: String::new(),
        facts: Vec::new(),
        abstain_reason: None,
        snippets: Vec::new(),
        grammar: vocab.is_some(),
        evidence: Vec::new(),
        timings: Timings::default(),
    };
    let mut mask_ms: Vec<f64> = Vec::new();
    let mut query = question.clone();
    let mut hypothesis: Option<schema::Hypothesis> = None;
    let mut finished: Option<(GroundedAction, Checked)> = None;
    for round in 1..=cfg.max_rounds.max(1) {
        // 1. Retrieve and extend the brief.
        let t0 = now_ms();
        let qv = match retriever.embedder {
            Some(e) => Some(e.embed_query(b, &query).await?),
            None => None,
        };
        let hits = retriever
            .index
            .search(&query, qv.as_deref(), cfg.search_k, Sources::ALL)?;
        out.timings.retrieval_ms += now_ms() - t0;
        let before = out.evidence.len();
        let added = evidence::extend(&mut out.evidence, &hits, &cfg.brief);
        let mut r = Round {
            query: query.clone(),
            hypothesis: hypothesis.take(),
            evidence: out.evidence[before..].to_vec(),
            raw_output: String::new(),
            outcome: ParseOutcome::Failed,
            action: None,
            problems: Vec::new(),
            tokens: 0,
        };
        if added == 0 {
            r.problems.push("retrieval found no new passage".into());
            out.rounds.push(r);
            out.abstain_reason = Some(if round == 1 {
                "retrieval found no passage".into()
            } else {
                "the follow-up search found nothing new".into()
            });
            break;
        }
        let best = hits
            .iter()
            .filter_map(|h| h.dense_score)
            .fold(f32::MIN, f32::max);
        let floor = retriever
            .embedder
            .and_then(|e| cfg.weak_dense.get(&e.spec.kind).copied());
        if let (true, Some(floor)) = (round == 1 && best > f32::MIN, floor) {
            if best < floor {
                let why = format!("weak retrieval: best dense cosine {best:.3} < {floor:.3}");
                r.problems.push(why.clone());
                out.rounds.push(r);
                out.abstain_reason = Some(why);
                break;
            }
        }
        // The refiner and ReAct protocols take over from the first brief.
        if cfg.mode != Mode::Grounded {
            let mo = if cfg.mode == Mode::Refiner {
                modes::refiner(
                    b,
                    model,
                    tok,
                    vocab,
                    &question,
                    &out.evidence,
                    cfg,
                    &mut on_text,
                )
                .await?
            } else {
                modes::react(
                    b,
                    model,
                    tok,
                    vocab,
                    retriever,
                    &question,
                    &mut out.evidence,
                    cfg,
                    &mut on_text,
                )
                .await?
            };
            out.rounds = mo.rounds;
            if let Some(first) = out.rounds.first_mut() {
                let mut ev = r.evidence.clone();
                ev.extend(std::mem::take(&mut first.evidence));
                first.evidence = ev;
                first.query = format!("{} | {}", r.query, first.query);
            }
            out.final_action = mo.final_action;
            out.answer = mo.answer;
            out.facts = mo.facts;
            out.abstain_reason = mo.abstain_reason;
            if out.final_action == NextAction::Abstain {
                out.snippets = out.evidence.iter().take(2).cloned().collect();
            }
            out.timings.prefill_s = mo.prefill_s;
            out.timings.decode_s = mo.decode_s;
            out.timings.masks = mo.mask_ms.len();
            if !mo.mask_ms.is_empty() {
                out.timings.mask_ms_mean = mo.mask_ms.iter().sum::<f64>() / mo.mask_ms.len() as f64;
                out.timings.mask_ms_max = mo.mask_ms.iter().cloned().fold(0.0, f64::max);
            }
            out.timings.total_s = (now_ms() - t_start) / 1e3;
            return Ok(out);
        }
        // 2. Prompt (dropping the last passages if the context cannot hold them) and generate.
        let budget = cfg.context.min(model.context());
        let mut shown = out.evidence.len();
        let ids = loop {
            let user = prompt::user_turn(&out.evidence[..shown], &question);
            let mut text = tok.chat.render(&[
                (Role::System, prompt::GROUNDED_SYSTEM.to_string()),
                (Role::User, user),
            ]);
            if vocab.is_none() {
                text.push('{');
            }
            let ids = tok.encode(&text)?;
            if ids.len() + cfg.max_tokens.min(256) <= budget || shown <= 1 {
                break ids;
            }
            shown -= 1;
        };
        if ids.len() + 16 > budget {
            return Err(EngineError::Question(format!(
                "the prompt needs {} tokens but the context holds {budget}",
                ids.len()
            )));
        }
        let max_tokens = cfg.max_tokens.min(budget - ids.len());
        let opts = GenerateOptions {
            max_tokens,
            sampling: cfg.sampling.clone(),
            stop: Vec::new(),
        };
        let g = match vocab {
            Some(v) => Some((
                v,
                grammar::build_grammar(&out.evidence[..shown], &cfg.caps, &cfg.text_caps)?,
            )),
            None => None,
        };
        let gen = generate_under(
            b,
            model,
            tok,
            g.as_ref().map(|(v, g)| (*v, g.as_str(), Closers::JSON)),
            &ids,
            &opts,
            &mut mask_ms,
            &mut on_text,
        )
        .await?;
        out.timings.prefill_s += gen.prefill_s;
        out.timings.decode_s += gen.decode_s;
        r.raw_output = if vocab.is_none() {
            format!("{{{}", gen.text)
        } else {
            gen.text.clone()
        };
        r.tokens = gen.tokens.len();
        // 3. Read and check.
        let (action, outcome) = recover::parse_action(&r.raw_output);
        r.outcome = outcome;
        let last = round == cfg.max_rounds.max(1);
        let Some(action) = action else {
            r.problems
                .push("the output is not a grounded_action_v1 object".into());
            out.rounds.push(r);
            if last {
                out.abstain_reason = Some("no valid answer in the last round".into());
            }
            continue;
        };
        let checked = validate::check(&action, &out.evidence[..shown], &cfg.caps);
        r.problems = checked.problems.clone();
        r.action = Some(action.clone());
        out.rounds.push(r);
        match action.next_action {
            NextAction::AnswerDirectly if checked.ok() => {
                finished = Some((action, checked));
                break;
            }
            NextAction::Abstain | NextAction::ClarifyUser => {
                finished = Some((action, checked));
                break;
            }
            NextAction::RetrieveMore if !last => {
                let kws: Vec<String> = action
                    .follow_up_hypothesis
                    .as_ref()
                    .map(|h| h.keywords.iter().chain(&h.entities).cloned().collect())
                    .unwrap_or_default();
                query = if kws.is_empty() {
                    question.clone()
                } else {
                    format!("{} {}", question, kws.join(" "))
                };
                hypothesis = action.follow_up_hypothesis.clone();
            }
            NextAction::AnswerDirectly if !last => {
                // Failed checks: search again with what the model thought it found.
                let facts: Vec<&str> = action
                    .supported_facts
                    .iter()
                    .map(|f| f.fact.as_str())
                    .collect();
                query = format!("{} {}", question, facts.join(" "));
                hypothesis = Some(schema::Hypothesis {
                    intent: "verify the facts that failed their checks".into(),
                    keywords: facts.iter().map(|f| f.to_string()).collect(),
                    ..Default::default()
                });
            }
            _ => {
                out.abstain_reason = Some(if action.next_action == NextAction::RetrieveMore {
                    "more evidence was asked for after the last round".into()
                } else {
                    "the answer failed its checks in the last round".into()
                });
            }
        }
    }
    // 4. The final action.
    match finished {
        Some((action, checked)) => {
            out.final_action = action.next_action;
            out.answer = match action.next_action {
                NextAction::ClarifyUser => {
                    action.clarification_question.clone().unwrap_or_default()
                }
                _ => action.final_answer.clone(),
            };
            if out.answer.trim().is_empty() && action.next_action == NextAction::Abstain {
                out.answer = prompt::abstain_text(&question).into();
            }
            out.facts = checked
                .facts
                .into_iter()
                .map(|f| FinalFact {
                    fact: f.fact,
                    refs: f.refs,
                    verified: f.verified,
                })
                .collect();
            if action.next_action == NextAction::Abstain {
                out.snippets = out.evidence.iter().take(2).cloned().collect();
            }
        }
        None => {
            out.final_action = NextAction::Abstain;
            out.answer = prompt::abstain_text(&question).into();
            out.snippets = out.evidence.iter().take(2).cloned().collect();
            if out.abstain_reason.is_none() {
                out.abstain_reason = Some("no checked answer".into());
            }
        }
    }
    out.timings.masks = mask_ms.len();
    if !mask_ms.is_empty() {
        out.timings.mask_ms_mean = mask_ms.iter().sum::<f64>() / mask_ms.len() as f64;
        out.timings.mask_ms_max = mask_ms.iter().cloned().fold(0.0, f64::max);
    }
    out.timings.total_s = (now_ms() - t_start) / 1e3;
    Ok(out)
}
