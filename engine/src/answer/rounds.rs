//! The rounds of a question, stage by stage: [`Rounds`] carries what one round hands the next
//! (the answer being built, the next search, the generation time), and each stage of
//! [`super::ask`] is one of its methods:
//!
//! 1. [`Rounds::retrieve`] searches; [`Rounds::brief`] extends the brief and stops on empty or
//!    weak retrieval ([`evidence::shortfall`]);
//! 2. [`Rounds::read_spans`] ranks the answer spans ([`reader`]), orders the round's passages
//!    by them, and stops when no span is likely to answer;
//! 3. [`Rounds::generate`] fits the prompt to the context ([`prompt::fit_grounded`]) and
//!    generates under the brief's grammar ([`Llm::generate`]);
//! 4. [`Rounds::read`] recovers the action ([`recover::parse_action`]), checks it
//!    ([`validate::check`]) and decides what follows ([`next_round`]);
//! 5. [`Rounds::conclude`] turns the action that stands into the answer.
//!
//! The refiner and ReAct protocols take over after the first brief ([`Rounds::hand_over`]).

use std::ops::ControlFlow;

use super::asks;
use super::evidence::{self, Shortfall};
use super::generation::{Llm, Spent};
use super::grammar::{self, Closers};
use super::modes::{self, ModeOutcome};
use super::naming;
use super::prompt::{self, Fitted, Room};
use super::reader::{self, Span};
use super::schema::{self, GroundedAction, Hypothesis, NextAction};
use super::spans;
use super::validate::{self, Checked};
use super::{recover, Answer, AskConfig, FinalFact, Mode, Retriever, Round, Timings};
use crate::backend::Backend;
use crate::error::Result;
use crate::generate::{now_ms, GenerateOptions};
use crate::retrieval::{Hit, Neighbours};

/// Tokens of the grounded JSON around the reader's answer (keys, the action, an id, the
/// closing brackets) kept free beside the three copies of the answer.
const FORCED_OVERHEAD: usize = 128;
/// Different readings the extractive protocol tries, best first, until the validator accepts
/// one ([`Rounds::extract`]).
const EXTRACT_TRIES: usize = 4;

/// What a checked action leads to.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// The action stands: the rounds end.
    Finish,
    /// Search again with this query, for this hypothesis.
    Search {
        /// The next round's query.
        query: String,
        /// What it looks for.
        hypothesis: Option<Hypothesis>,
    },
    /// Nothing stands after the last round: abstain for this reason.
    Abstain(String),
}

/// The next round after `action` (`ok`: it passed its checks) in a round that is or is not the
/// `last`: an answer that passed, an abstention and a clarification stand; `retrieve_more`
/// searches for its hypothesis, and an answer that failed its checks searches for the facts it
/// claimed, unless this was the last round.
pub fn next_round(action: &GroundedAction, ok: bool, question: &str, last: bool) -> Next {
    match action.next_action {
        NextAction::AnswerDirectly if ok => Next::Finish,
        NextAction::Abstain | NextAction::ClarifyUser => Next::Finish,
        NextAction::RetrieveMore if !last => {
            let kws: Vec<String> = action
                .follow_up_hypothesis
                .as_ref()
                .map(|h| h.keywords.iter().chain(&h.entities).cloned().collect())
                .unwrap_or_default();
            Next::Search {
                query: if kws.is_empty() {
                    question.to_string()
                } else {
                    format!("{} {}", question, kws.join(" "))
                },
                hypothesis: action.follow_up_hypothesis.clone(),
            }
        }
        NextAction::AnswerDirectly if !last => {
            // Failed checks: search again with what the model thought it found.
            let facts: Vec<&str> = action
                .supported_facts
                .iter()
                .map(|f| f.fact.as_str())
                .collect();
            Next::Search {
                query: format!("{} {}", question, facts.join(" ")),
                hypothesis: Some(Hypothesis {
                    intent: "verify the facts that failed their checks".into(),
                    keywords: facts.iter().map(|f| f.to_string()).collect(),
                    ..Default::default()
                }),
            }
        }
        _ => Next::Abstain(if action.next_action == NextAction::RetrieveMore {
            "more evidence was asked for after the last round".into()
        } else {
            "the answer failed its checks in the last round".into()
        }),
    }
}

/// The state of a question between its rounds.
pub(crate) struct Rounds<'c> {
    cfg: &'c AskConfig,
    /// The answer being built: the checked question, every round, every passage shown.
    pub out: Answer,
    /// Generation time over every round.
    pub spent: Spent,
    /// The next round's query.
    query: String,
    /// The hypothesis the next round searches for.
    hypothesis: Option<Hypothesis>,
    /// The action that ended the rounds, with its checks.
    finished: Option<(GroundedAction, Checked)>,
    /// The reader's spans over the evidence shown so far, best first.
    spans: Vec<Span>,
    /// The question's vector, from the first search (the reader scores spans against it).
    question_vec: Option<Vec<f32>>,
    /// The story's terms that expanded the question's words in BM25's query: the reader reads
    /// them as those words ([`reader::Asked::with_neighbours`]).
    question_neighbours: Neighbours,
}

impl<'c> Rounds<'c> {
    /// Before the first round: the first search is the checked `question` itself.
    pub fn new(cfg: &'c AskConfig, question: String, grammar: bool) -> Self {
        Rounds {
            cfg,
            out: Answer {
                mode: cfg.mode,
                question: question.clone(),
                rounds: Vec::new(),
                final_action: NextAction::Abstain,
                answer: String::new(),
                facts: Vec::new(),
                abstain_reason: None,
                snippets: Vec::new(),
                grammar,
                evidence: Vec::new(),
                timings: Timings::default(),
            },
            spent: Spent::default(),
            query: question,
            hypothesis: None,
            finished: None,
            spans: Vec::new(),
            question_vec: None,
            question_neighbours: Vec::new(),
        }
    }

    /// Retrieve: searches for the round's query (the time is added to the retrieval time);
    /// each hit's text runs on into the first `brief.next_chars` characters of the next chunk
    /// of its chapter.
    pub async fn retrieve<B: Backend>(
        &mut self,
        b: &B,
        retriever: &Retriever<'_, B>,
    ) -> Result<Vec<Hit>> {
        let t0 = now_ms();
        let (mut hits, qv, near) = retriever
            .search_with_neighbours(b, &self.query, self.cfg.search_k)
            .await?;
        if self.query == self.out.question && self.question_vec.is_none() {
            self.question_vec = qv;
            self.question_neighbours = near;
        }
        // Each passage runs on into the start of the next chunk of its chapter.
        let more = self.cfg.brief.next_chars;
        for h in hits.iter_mut().filter(|_| more > 0) {
            let next = retriever.index.neighbor(h.id, 1);
            if let Some(c) = next.and_then(|n| retriever.index.chunk(n)) {
                h.text.push('\n');
                h.text.push_str(&evidence::cut_chars(c.new_text(), more));
            }
        }
        self.out.timings.retrieval_ms += now_ms() - t0;
        Ok(hits)
    }

    /// Evidence: adds `hits` to the brief and opens the round over the passages added; `None`
    /// when the evidence ends the question (the round is recorded and the answer abstains).
    /// `floor` is the weak-retrieval threshold of the first round.
    pub fn brief(&mut self, hits: &[Hit], floor: Option<f32>, round: usize) -> Option<Round> {
        let before = self.out.evidence.len();
        let added = evidence::extend(&mut self.out.evidence, hits, &self.cfg.brief);
        let mut r = Round::new(&self.query, self.out.evidence[before..].to_vec());
        r.hypothesis = self.hypothesis.take();
        match evidence::shortfall(added, hits, floor, round) {
            None => Some(r),
            Some(Shortfall { problem, reason }) => {
                r.problems.push(problem);
                self.out.rounds.push(r);
                self.out.abstain_reason = Some(reason);
                None
            }
        }
    }

    /// Read: ranks the answer spans of every passage shown ([`reader`]), orders this round's
    /// passages by their best span (renumbering them), and ends the question in the first
    /// round when the best span scores under the reader's floor for the embedder's kind, or
    /// when the best span's cosine with the question is under its cosine floor (`None`: the
    /// round is recorded and the answer abstains, showing the best passages).
    pub async fn read_spans<B: Backend>(
        &mut self,
        b: &B,
        retriever: &Retriever<'_, B>,
        mut r: Round,
        round: usize,
    ) -> Result<Option<Round>> {
        let cfg = self.cfg;
        let t0 = now_ms();
        let question = &self.out.question;
        let graph = Some(retriever.index.graph());
        let mut asked = reader::Asked::new(question, retriever.index.bm25(), graph);
        asked.with_neighbours(&self.question_neighbours);
        let max = grammar::answer_chars(question, cfg.text_caps.answer_chars);
        let mut spans = reader::candidates(
            &self.out.evidence,
            &asked,
            graph,
            max,
            cfg.text_caps.quote_min_chars,
        );
        let kind = retriever.embedder.map_or("none", |e| e.spec.kind.as_str());
        let dense_weight = cfg.reader.dense_weight(&reader::cosine_key(kind, question));
        let dense = match retriever.embedder {
            Some(e) if !spans.is_empty() => {
                if self.question_vec.is_none() {
                    self.question_vec = Some(e.embed_query(b, question).await?);
                }
                let q = self.question_vec.as_deref().unwrap_or_default();
                // Only the spans that could still come first are embedded; the others take
                // the lowest cosine of those, and stay behind the best.
                let mut cos: Vec<Option<f32>> = vec![None; spans.len()];
                loop {
                    let next = reader::to_embed(&spans, &cos, dense_weight);
                    if next.is_empty() {
                        break;
                    }
                    let texts: Vec<&str> = next.iter().map(|&i| spans[i].text.as_str()).collect();
                    let vecs = e.embed_passages(b, &texts).await?;
                    for (&i, v) in next.iter().zip(&vecs) {
                        cos[i] = Some(v.iter().zip(q).map(|(x, y)| x * y).sum());
                    }
                    if vecs.len() < next.len() {
                        break;
                    }
                }
                let low = cos.iter().flatten().copied().fold(f32::INFINITY, f32::min);
                cos.iter().map(|c| c.unwrap_or(low)).collect()
            }
            _ => Vec::new(),
        };
        reader::rank(&mut spans, &dense, dense_weight);
        let from = self.out.evidence.len() - r.evidence.len();
        reader::reorder(&mut self.out.evidence, &mut spans, from);
        // Short answers: who → the name, what … said → the quoted words ([`naming`]). In a
        // script the speaker answers "who …" ([`Span::answer`]), not a name in the line.
        let g = retriever.index.graph();
        // A question that asks for a name as such is answered by the name in the line too,
        // or by a quoted name (`the name `W. RABBIT' engraved upon it`).
        let names = asks::names_asked(question);
        let in_line = |s: &Span| s.speaker.is_some() || spans::starts_with_speaker_label(&s.text);
        for s in spans.iter_mut() {
            s.short = match asked.wants {
                reader::Wants::Name if names || !in_line(s) => {
                    let ev = &self.out.evidence;
                    let (text, e) = (&s.text, &asked.entities);
                    let named = naming::name_of(text, s.passage, ev, question, e, g, in_line(s));
                    named.or_else(|| {
                        names
                            .then(|| naming::quoted_name(text, s.passage))
                            .flatten()
                    })
                }
                reader::Wants::Words => naming::words_of(&s.text, s.passage, question),
                _ => None,
            };
        }
        r.evidence = self.out.evidence[from..].to_vec();
        r.spans = spans.iter().take(8).cloned().collect();
        self.out.timings.retrieval_ms += now_ms() - t0;
        // The floor reads the spans' own evidence, not their passages' retrieval rank.
        let best = spans
            .iter()
            .map(|s| s.answer_score(dense_weight))
            .fold(f32::MIN, f32::max);
        let cosine = reader::ranked_cosine(&spans, !dense.is_empty());
        self.spans = spans;
        let why = if round == 1 {
            reader::shortfall(
                best,
                cosine,
                cfg.reader.floor.get(kind).copied(),
                cfg.reader
                    .cosine_floor
                    .get(&reader::cosine_key(kind, question))
                    .copied(),
            )
            .or_else(|| reader::kind_shortfall(question, asked.wants, self.spans.first()))
        } else {
            None
        };
        match why {
            Some(why) => {
                r.problems.push(why.clone());
                self.out.rounds.push(r);
                self.out.abstain_reason = Some(why);
                Ok(None)
            }
            None => Ok(Some(r)),
        }
    }

    /// Prompt and constrained generation: the grounded prompt over as many passages as the
    /// context holds, generated under the grammar of those passages; the output goes to `r`.
    /// Returns how many passages the prompt showed.
    pub async fn generate<B: Backend>(
        &mut self,
        llm: &mut Llm<'_, B>,
        r: &mut Round,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<usize> {
        let cfg = self.cfg;
        // The reader's answer is written up to three times (quote, fact, final answer) and
        // cannot be cut short: the room kept free must hold it, or the output stops before
        // its JSON closes (a 200-character Chinese span is about 300 SmolLM2 tokens). The
        // final answer is the longest of the three (the span with the rest of its sentence).
        let wants = reader::wants(&self.out.question);
        let mut forced = 0;
        for s in reader::choices(&self.spans, usize::MAX, cfg.reader.choices) {
            forced = forced.max(llm.tok.encode(&s.answer(wants))?.len());
        }
        let room = Room {
            budget: cfg.context.min(llm.model.context()),
            reserve: cfg.max_tokens.min(256).max(FORCED_OVERHEAD + 3 * forced),
            open_brace: llm.vocab.is_none(),
            evidence_first: cfg.text_caps.evidence_first,
        };
        let Fitted { ids, shown } =
            prompt::fit_grounded(llm.tok, &self.out.evidence, &self.out.question, &room)?;
        let opts = GenerateOptions {
            max_tokens: cfg.max_tokens.min(room.budget - ids.len()),
            sampling: cfg.sampling.clone(),
            stop: Vec::new(),
        };
        let g = match llm.vocab {
            Some(_) => {
                let choices = reader::choices(&self.spans, shown, cfg.reader.choices);
                Some(grammar::build_grammar(
                    &self.out.evidence[..shown],
                    &cfg.caps,
                    &cfg.text_caps,
                    &self.out.question,
                    &choices,
                )?)
            }
            None => None,
        };
        let grammar = g.as_deref().map(|g| (g, Closers::JSON));
        let gen = llm
            .generate(&ids, &opts, grammar, &mut self.spent, on_text)
            .await?;
        r.raw_output = if llm.vocab.is_none() {
            format!("{{{}", gen.text)
        } else {
            gen.text
        };
        r.tokens = gen.tokens.len();
        Ok(shown)
    }

    /// Extractive mode: the round's output is the action the grammar forces with the reader's
    /// best span (`choices: 1`): one fact, the span quoted from its passage ([`reader::quote_of`])
    /// with the quote as the fact, and the span as the final answer ([`Span::answer`]); when
    /// the validator refuses that answer, the next best reading it accepts; `retrieve_more` with
    /// the question as it is when no passage holds a span. Returns how many passages were shown
    /// (all of them).
    pub fn extract(&self, r: &mut Round) -> usize {
        let shown = self.out.evidence.len();
        let question = &self.out.question;
        let wants = reader::wants(question);
        let answer_with = |s: &reader::Span| {
            let quote = reader::quote_of(&s.text, question, self.cfg.caps.quote_chars);
            let evidence_id = self.out.evidence[s.passage].id.clone();
            let mut facts = vec![schema::Fact {
                fact: quote.clone(),
                evidence_refs: vec![schema::EvidenceRef { evidence_id, quote }],
            }];
            let short = s.short_answer(wants);
            facts.extend(short.and_then(|n| n.fact(&facts[0].fact, &self.out.evidence)));
            GroundedAction {
                next_action: NextAction::AnswerDirectly,
                supported_facts: facts,
                final_answer: s.answer(wants),
                ..GroundedAction::abstain("")
            }
        };
        // The best span whose answer the validator accepts (a span whose quote only repeats
        // the question is refused, and would be again in the next round), among the
        // `EXTRACT_TRIES` best different readings, each with the rest of its sentence and
        // then without it (a sentence the story itself repeats words in reads as a loop to
        // the checks: "One side will make you grow taller, and the other side will make you
        // grow shorter"); else the best, refused as it is.
        let choices = reader::choices(&self.spans, shown, EXTRACT_TRIES);
        let accepted = choices
            .iter()
            .flat_map(|s| {
                let bare = (!s.rest.is_empty()).then(|| reader::Span {
                    rest: String::new(),
                    ..(*s).clone()
                });
                [Some(answer_with(s)), bare.as_ref().map(answer_with)]
            })
            .flatten()
            .find(|a| {
                validate::check(a, &self.out.evidence[..shown], &self.cfg.caps, question).ok()
            });
        let action = match accepted.or_else(|| choices.first().map(|s| answer_with(s))) {
            Some(a) => a,
            // No keywords: the next query is the question itself, not the question twice.
            None => GroundedAction {
                next_action: NextAction::RetrieveMore,
                follow_up_hypothesis: Some(Hypothesis {
                    intent: "no passage shown holds a span to answer with".into(),
                    ..Hypothesis::default()
                }),
                ..GroundedAction::abstain("")
            },
        };
        r.raw_output = serde_json::to_string(&action).unwrap_or_default();
        shown
    }

    /// Read and check the round's output against the `shown` passages, record the round, and
    /// decide what follows: `Break` when an action stands.
    pub fn read(&mut self, mut r: Round, shown: usize, last: bool) -> ControlFlow<()> {
        let (action, outcome) = recover::parse_action(&r.raw_output);
        r.outcome = outcome;
        let Some(action) = action else {
            r.problems
                .push("the output is not a grounded_action_v1 object".into());
            self.out.rounds.push(r);
            if last {
                self.out.abstain_reason = Some("no valid answer in the last round".into());
            }
            return ControlFlow::Continue(());
        };
        let checked = validate::check(
            &action,
            &self.out.evidence[..shown],
            &self.cfg.caps,
            &self.out.question,
        );
        r.problems = checked.problems.clone();
        r.action = Some(action.clone());
        self.out.rounds.push(r);
        match next_round(&action, checked.ok(), &self.out.question, last) {
            Next::Finish => {
                self.finished = Some((action, checked));
                ControlFlow::Break(())
            }
            Next::Search { query, hypothesis } => {
                self.query = query;
                self.hypothesis = hypothesis;
                ControlFlow::Continue(())
            }
            Next::Abstain(why) => {
                self.out.abstain_reason = Some(why);
                ControlFlow::Continue(())
            }
        }
    }

    /// The final action: the one that stood, or an abstention with the best snippets.
    pub fn conclude(&mut self) {
        let out = &mut self.out;
        match self.finished.take() {
            Some((action, checked)) => {
                out.final_action = action.next_action;
                out.answer = match action.next_action {
                    NextAction::ClarifyUser => {
                        action.clarification_question.clone().unwrap_or_default()
                    }
                    _ => action.final_answer.clone(),
                };
                if out.answer.trim().is_empty() && action.next_action == NextAction::Abstain {
                    out.answer = prompt::abstain_text(&out.question).into();
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
                out.answer = prompt::abstain_text(&out.question).into();
                out.snippets = out.evidence.iter().take(2).cloned().collect();
                if out.abstain_reason.is_none() {
                    out.abstain_reason = Some("no checked answer".into());
                }
            }
        }
    }

    /// The refiner or ReAct protocol takes over from the `first` round's brief; its outcome
    /// becomes the answer.
    pub async fn hand_over<B: Backend>(
        &mut self,
        llm: &mut Llm<'_, B>,
        retriever: &Retriever<'_, B>,
        first: Round,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<()> {
        let (question, shown) = (&self.out.question, &mut self.out.evidence);
        let mo = if self.cfg.mode == Mode::Refiner {
            modes::refiner(llm, question, shown, self.cfg, on_text).await?
        } else {
            modes::react(llm, retriever, question, shown, self.cfg, on_text).await?
        };
        self.adopt(first, mo);
        Ok(())
    }

    /// Takes a protocol's outcome as the answer; its first step is shown with the `first`
    /// round's query and brief.
    fn adopt(&mut self, first: Round, mo: ModeOutcome) {
        let out = &mut self.out;
        out.rounds = mo.rounds;
        if let Some(step) = out.rounds.first_mut() {
            let mut ev = first.evidence;
            ev.extend(std::mem::take(&mut step.evidence));
            step.evidence = ev;
            step.query = format!("{} | {}", first.query, step.query);
        }
        out.final_action = mo.final_action;
        out.answer = mo.answer;
        out.facts = mo.facts;
        out.abstain_reason = mo.abstain_reason;
        if out.final_action == NextAction::Abstain {
            out.snippets = out.evidence.iter().take(2).cloned().collect();
        }
        self.spent = mo.spent;
    }

    /// The answer, with the generation figures and the whole time since `t_start` (ms).
    pub fn finish(mut self, t_start: f64) -> Answer {
        self.spent.write(&mut self.out.timings);
        self.out.timings.total_s = (now_ms() - t_start) / 1e3;
        self.out
    }
}

#[cfg(test)]
#[path = "rounds_tests.rs"]
mod tests;
