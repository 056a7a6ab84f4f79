//! Token generation: sampling (greedy, temperature, top-k, top-p, repetition penalty) with the
//! platform-identical [`Pcg32`], stop on end-of-sequence ids and stop strings, and a streaming
//! callback. Sampling reads back only the top-k candidates and the softmax normaliser in every
//! mode: a grammar's mask, the repetition guard and the repetition penalty are applied where
//! the logits are ([`Backend::select_filtered`]).

use serde::{Deserialize, Serialize};

use crate::backend::{bit_set, penalized, Backend, LogitFilter, MAX_TOP_K};
use crate::error::{EngineError, Result};
use crate::models::Decoder;
use crate::rng::Pcg32;
use crate::tokenizer::Tokenizer;

/// Sampling settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Candidates considered (1..=64).
    pub top_k: usize,
    /// Nucleus mass in (0, 1].
    pub top_p: f32,
    /// > 1 discourages tokens already in the prompt or output (1 = off).
    pub repetition_penalty: f32,
    /// RNG seed.
    pub seed: u64,
    /// Repetition guard: a sampled token may not complete a run of this many generated tokens
    /// that the output already holds (Hugging Face's `no_repeat_ngram_size`, over the output
    /// only, so quoting the prompt is never blocked); 0 = off. When every token the grammar
    /// allows is blocked, the guard gives way.
    #[serde(default)]
    pub no_repeat_ngram: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 40,
            top_p: 1.0,
            repetition_penalty: 1.0,
            seed: 0,
            no_repeat_ngram: 0,
        }
    }
}

impl SamplingParams {
    /// Rejects settings outside their ranges.
    pub fn validate(&self) -> Result<()> {
        let bad = |d: String| {
            Err(EngineError::Shape {
                op: "sampling",
                detail: d,
            })
        };
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!("temperature {} must be >= 0", self.temperature));
        }
        if self.top_k == 0 || self.top_k > MAX_TOP_K {
            return bad(format!("top_k {} must be in 1..={MAX_TOP_K}", self.top_k));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p {} must be in (0, 1]", self.top_p));
        }
        if self.no_repeat_ngram == 1 || self.no_repeat_ngram > 64 {
            return bad(format!(
                "no_repeat_ngram {} must be 0 (off) or in 2..=64",
                self.no_repeat_ngram
            ));
        }
        if !(self.repetition_penalty >= 1.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "repetition_penalty {} must be >= 1",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// Picks a token from candidates `(id, logit)` sorted best first, given the normaliser
/// `z = sum_i exp((l_i - l_max) / T)` over the whole vocabulary.
pub fn pick(cands: &[(u32, f32)], z: f64, p: &SamplingParams, rng: &mut Pcg32) -> u32 {
    if p.temperature == 0.0 || cands.len() == 1 {
        return cands[0].0;
    }
    let max = cands[0].1;
    let inv_t = 1.0 / p.temperature as f64;
    let probs: Vec<f64> = cands
        .iter()
        .map(|c| ((c.1 - max) as f64 * inv_t).exp() / z)
        .collect();
    // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
    let mut keep = probs.len();
    let mut acc = 0.0;
    for (i, pr) in probs.iter().enumerate() {
        acc += pr;
        if acc >= p.top_p as f64 {
            keep = i + 1;
            break;
        }
    }
    let total: f64 = probs[..keep].iter().sum();
    let u = rng.next_f32() as f64 * total;
    let mut c = 0.0;
    for i in 0..keep {
        c += probs[i];
        if u < c {
            return cands[i].0;
        }
    }
    cands[keep - 1].0
}

/// Applies the repetition penalty (CTRL / Hugging Face rule) to `logits` for each distinct id in `seen`.
pub fn apply_repetition_penalty(logits: &mut [f32], seen: &[u32], penalty: f32) {
    let mut done = std::collections::HashSet::new();
    for &id in seen {
        if done.insert(id) {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = penalized(*l, penalty);
            }
        }
    }
}

/// Tokens that would complete an `n`-token run already in `out` (the repetition guard):
/// for each earlier place where the last `n - 1` tokens of `out` occur, the token that
/// followed there. Empty when `n < 2` or `out` is shorter than `n - 1`.
pub fn repeat_banned(out: &[u32], n: usize) -> Vec<u32> {
    if n < 2 || out.len() < n - 1 {
        return Vec::new();
    }
    let tail = &out[out.len() - (n - 1)..];
    let mut banned = Vec::new();
    for i in 0..out.len() - (n - 1) {
        if &out[i..i + n - 1] == tail {
            let next = out[i + n - 1];
            if !banned.contains(&next) {
                banned.push(next);
            }
        }
    }
    banned
}

/// Draws the next token from the model's current logits.
pub async fn next_token<B: Backend>(
    b: &B,
    model: &Decoder<B>,
    history: &[u32],
    generated: usize,
    p: &SamplingParams,
    rng: &mut Pcg32,
) -> Result<u32> {
    next_token_filtered(b, model, history, generated, p, rng, None).await
}

/// [`next_token`] among the tokens `mask` allows (a [`Step::Sample`] bitset).
pub async fn next_token_masked<B: Backend>(
    b: &B,
    model: &Decoder<B>,
    history: &[u32],
    generated: usize,
    p: &SamplingParams,
    rng: &mut Pcg32,
    mask: &[u32],
) -> Result<u32> {
    next_token_filtered(b, model, history, generated, p, rng, Some(mask)).await
}

/// The bitset of `v` words' ids that `ids` holds.
fn bitset(ids: &[u32], v: usize) -> Vec<u32> {
    let mut w = vec![0u32; v.div_ceil(32)];
    for &id in ids.iter().filter(|&&id| (id as usize) < v) {
        w[id as usize / 32] |= 1 << (id % 32);
    }
    w
}

/// Draws the next token from the model's current logits, among the tokens `mask` allows
/// (`None`: any). The grammar's mask, the repetition guard and the repetition penalty are
/// applied where the logits are ([`Backend::select_filtered`]), so only the top-k candidates
/// and the normaliser come back, never the whole row.
async fn next_token_filtered<B: Backend>(
    b: &B,
    model: &Decoder<B>,
    history: &[u32],
    generated: usize,
    p: &SamplingParams,
    rng: &mut Pcg32,
    mask: Option<&[u32]>,
) -> Result<u32> {
    let v = model.vocab_size();
    let (buf, rows) = model.logits();
    if rows != 1 {
        return Err(EngineError::Shape {
            op: "sample",
            detail: "sampling needs the last token's logits only".into(),
        });
    }
    let k = if p.temperature == 0.0 {
        1
    } else {
        p.top_k.min(v)
    };
    let words = v.div_ceil(32);
    // The grammar's mask over this vocabulary (ids past it cleared).
    let clip = |mut w: Vec<u32>| {
        w.resize(words, 0);
        if !v.is_multiple_of(32) {
            w[words - 1] &= (1u32 << (v % 32)) - 1;
        }
        w
    };
    let mut allowed: Option<Vec<u32>> = mask.map(|m| clip(m[..m.len().min(words)].to_vec()));
    let open = |w: &[u32]| w.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    if allowed.as_deref().is_some_and(|w| open(w) == 0) {
        return Err(EngineError::Grammar(
            "the grammar allows no token of this model's vocabulary".into(),
        ));
    }
    // The repetition guard, unless it would leave nothing the grammar allows.
    let banned = repeat_banned(
        &history[history.len() - generated.min(history.len())..],
        p.no_repeat_ngram,
    );
    if !banned.is_empty() {
        let w = allowed.get_or_insert_with(|| clip(vec![u32::MAX; words]));
        let blocked: Vec<u32> = banned.into_iter().filter(|&t| mask_allows(w, t)).collect();
        if blocked.len() < open(w) {
            for t in blocked {
                w[t as usize / 32] &= !(1 << (t % 32));
            }
        }
    }
    let seen = (p.repetition_penalty != 1.0).then(|| bitset(history, v));
    let inv_t = (p.temperature > 0.0).then(|| 1.0 / p.temperature);
    let sel = if allowed.is_none() && seen.is_none() {
        b.select(buf, v, k, inv_t).await?
    } else {
        let filter = LogitFilter {
            allowed: allowed.as_deref(),
            penalized: seen.as_deref(),
            penalty: p.repetition_penalty,
        };
        b.select_filtered(buf, v, k, inv_t, &filter).await?
    };
    if sel.top.is_empty() {
        return Err(EngineError::Grammar("no allowed candidate".into()));
    }
    Ok(pick(&sel.top, sel.sum_exp.unwrap_or(1.0), p, rng))
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// An end-of-sequence token.
    Eos,
    /// A stop string appeared.
    StopString,
    /// `max_tokens` reached.
    MaxTokens,
    /// The context is full.
    Context,
    /// The callback asked to stop.
    Cancelled,
}

/// What a decoding constraint (a grammar) allows next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Sample among these tokens: bit `id % 32` of word `id / 32` set means allowed.
    Sample(Vec<u32>),
    /// These tokens are forced (the grammar admits nothing else); they are fed in one pass.
    Force(Vec<u32>),
    /// The constraint is complete: stop.
    Stop,
}

/// A decoding constraint: asked before each step, told every token taken.
pub trait Constraint {
    /// The next step, with `remaining` tokens left in the budget (a constraint may start
    /// closing its structure when the budget runs low).
    fn step(&mut self, remaining: usize) -> Result<Step>;
    /// `id` was taken.
    fn commit(&mut self, id: u32) -> Result<()>;
}

/// Is `id` allowed by a `Step::Sample` mask?
pub fn mask_allows(mask: &[u32], id: u32) -> bool {
    bit_set(mask, id as usize)
}

/// Generation settings.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Most new tokens.
    pub max_tokens: usize,
    /// Sampling.
    pub sampling: SamplingParams,
    /// Extra stop strings (EOS ids come from the tokenizer).
    pub stop: Vec<String>,
}

/// What a generation produced.
#[derive(Clone, Debug, Serialize)]
pub struct Generation {
    /// New token ids (EOS excluded).
    pub tokens: Vec<u32>,
    /// Their text, cut before a stop string.
    pub text: String,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Prefill seconds.
    pub prefill_s: f64,
    /// Decode seconds.
    pub decode_s: f64,
    /// Why it stopped.
    pub stop_reason: StopReason,
}

/// Milliseconds from a monotonic clock on every target (for durations only: the origin is
/// arbitrary). In the browser, `performance.now()` of the window or worker (0.1 ms resolution
/// where Date.now() has 1 ms), `Date.now()` where there is none.
pub fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsCast;
        let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok();
        let now = perf
            .as_ref()
            .and_then(|p| js_sys::Reflect::get(p, &"now".into()).ok())
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match (perf, now) {
            (Some(p), Some(f)) => f
                .call0(&p)
                .ok()
                .and_then(|v| v.as_f64())
                .unwrap_or_else(js_sys::Date::now),
            _ => js_sys::Date::now(),
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static T0: OnceLock<std::time::Instant> = OnceLock::new();
        T0.get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3
    }
}

/// Prefills `prompt` (after resetting the cache) and generates. `on_text` receives each new
/// piece of text as soon as it is complete UTF-8 and returns `false` to stop.
pub async fn generate<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    tok: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    generate_with(b, model, tok, prompt, opts, None, on_text).await
}

/// Refuses an empty prompt, and one of `tokens` that fills a `context`-position cache.
fn check_prompt(tokens: usize, context: usize) -> Result<()> {
    if tokens == 0 {
        return Err(EngineError::Shape {
            op: "generate",
            detail: "the prompt is empty".into(),
        });
    }
    if tokens >= context {
        return Err(EngineError::Shape {
            op: "generate",
            detail: format!("the prompt has {tokens} tokens but the context holds {context}"),
        });
    }
    Ok(())
}

/// [`generate`] under an optional decoding [`Constraint`]: each step samples only among the
/// tokens it allows (its mask applied on the device, `k` candidates read back), forced runs
/// are fed in one forward pass, and generation ends when the constraint is complete.
pub async fn generate_with<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    tok: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    mut constraint: Option<&mut dyn Constraint>,
    mut on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    opts.sampling.validate()?;
    check_prompt(prompt.len(), model.context())?;
    let mut rng = Pcg32::new(opts.sampling.seed);
    model.reset(b)?;
    let t0 = now_ms();
    model.forward(b, prompt, false)?;
    b.submit()?;
    let mut history: Vec<u32> = prompt.to_vec();
    let mut out: Vec<u32> = Vec::new();
    let mut text = String::new();
    let mut emitted = 0usize;
    let mut first = true;
    let mut t1 = t0;
    let mut reason = StopReason::MaxTokens;
    while out.len() < opts.max_tokens {
        // Tokens taken this step: one sampled (its logits read back, so every op queued before
        // it has finished), or a forced run (no readback).
        let mut sampled = true;
        let ids: Vec<u32> = match constraint.as_deref_mut() {
            None => {
                vec![next_token(b, model, &history, out.len(), &opts.sampling, &mut rng).await?]
            }
            Some(c) => match c.step(opts.max_tokens - out.len())? {
                Step::Stop => {
                    reason = StopReason::Eos;
                    break;
                }
                Step::Force(f) if !f.is_empty() => {
                    sampled = false;
                    let room = opts.max_tokens - out.len();
                    f[..f.len().min(room)].to_vec()
                }
                Step::Force(_) => {
                    return Err(EngineError::Grammar("an empty forced run".into()));
                }
                Step::Sample(mask) => {
                    let id = next_token_masked(
                        b,
                        model,
                        &history,
                        out.len(),
                        &opts.sampling,
                        &mut rng,
                        &mask,
                    )
                    .await?;
                    vec![id]
                }
            },
        };
        // Prefill ends with the first token the model chose: stamped after a readback, so
        // work a GPU still had queued is counted where it belongs (a forced run first would
        // otherwise stamp it before the prompt was processed).
        if first && sampled {
            t1 = now_ms();
            first = false;
        }
        if ids.len() == 1 && tok.is_eos(ids[0]) {
            reason = StopReason::Eos;
            break;
        }
        if let Some(c) = constraint.as_deref_mut() {
            for &id in &ids {
                c.commit(id)?;
            }
        }
        out.extend_from_slice(&ids);
        history.extend_from_slice(&ids);
        text = tok.decode(&out)?;
        if let Some(cut) = opts.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
            text.truncate(cut);
            if cut > emitted {
                on_text(&text[emitted..]);
            }
            emitted = text.len();
            reason = StopReason::StopString;
            break;
        }
        // Emit only complete characters (a token may end inside a UTF-8 sequence).
        if !text.ends_with('\u{FFFD}') && text.len() > emitted && text.is_char_boundary(emitted) {
            let keep_going = on_text(&text[emitted..]);
            emitted = text.len();
            if !keep_going {
                reason = StopReason::Cancelled;
                break;
            }
        }
        if out.len() == opts.max_tokens {
            break;
        }
        if model.position() + ids.len() > model.context() {
            reason = StopReason::Context;
            break;
        }
        model.forward(b, &ids, false)?;
        // The device runs the step while the constraint computes its next mask.
        b.submit()?;
    }
    if emitted < text.len() && text.is_char_boundary(emitted) {
        on_text(&text[emitted..]);
    }
    let t2 = now_ms();
    if first {
        // Nothing was sampled (forced tokens only, or none): all of it was prompt work.
        t1 = t2;
    }
    Ok(Generation {
        tokens: out,
        text,
        prompt_tokens: prompt.len(),
        prefill_s: (t1 - t0) / 1e3,
        decode_s: (t2 - t1) / 1e3,
        stop_reason: reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_and_nucleus() {
        let p = SamplingParams::default();
        let mut rng = Pcg32::new(1);
        let c = [(7, 3.0), (2, 1.0), (9, 0.5)];
        assert_eq!(pick(&c, 1.2, &p, &mut rng), 7);
        // top_p tiny: only the best survives whatever the draw.
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 0.01,
            ..Default::default()
        };
        for _ in 0..20 {
            assert_eq!(pick(&c, 1.2, &p, &mut rng), 7);
        }
        // Full nucleus at high temperature: every candidate shows up.
        let p = SamplingParams {
            temperature: 5.0,
            top_p: 1.0,
            ..Default::default()
        };
        let z: f64 = c.iter().map(|x| ((x.1 - 3.0) as f64 / 5.0).exp()).sum();
        let seen: std::collections::HashSet<u32> =
            (0..200).map(|_| pick(&c, z, &p, &mut rng)).collect();
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn prompts_must_be_non_empty_and_leave_room() {
        let detail = |r: Result<()>| match r {
            Err(EngineError::Shape { op, detail }) => format!("{op}: {detail}"),
            other => format!("{other:?}"),
        };
        assert_eq!(detail(check_prompt(0, 8)), "generate: the prompt is empty");
        assert_eq!(
            detail(check_prompt(8, 8)),
            "generate: the prompt has 8 tokens but the context holds 8"
        );
        assert!(check_prompt(7, 8).is_ok());
    }

    #[test]
    fn the_repetition_guard_blocks_the_token_that_closes_a_repeat() {
        // "a b c a b" with n = 3: "a b" was followed by "c", so "c" is blocked.
        assert_eq!(repeat_banned(&[1, 2, 3, 1, 2], 3), vec![3]);
        // Every earlier follower of the tail is blocked, once each.
        assert_eq!(
            repeat_banned(&[1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2], 3),
            vec![3, 4]
        );
        assert!(repeat_banned(&[1, 2, 3, 4], 3).is_empty());
        assert!(repeat_banned(&[1, 1], 0).is_empty());
        assert!(repeat_banned(&[1], 3).is_empty());
        // n = 2: no token may follow the last one as it did before.
        assert_eq!(repeat_banned(&[5, 6, 5], 2), vec![6]);
        let bad = SamplingParams {
            no_repeat_ngram: 1,
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn penalty_and_validation() {
        let mut l = vec![2.0, -2.0, 1.0];
        apply_repetition_penalty(&mut l, &[0, 1, 0], 2.0);
        assert_eq!(l, vec![1.0, -4.0, 1.0]);
        let bad = SamplingParams {
            top_k: 0,
            ..Default::default()
        };
        assert!(bad.validate().is_err());
        let bad = SamplingParams {
            top_p: 1.5,
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }
}

/// The benchmark prompt: `n` tokens of the opening of *Alice* (repeated, then cut), the same in
/// `lorekeeper bench`, the page's decode benchmark and the peers they are compared with.
pub fn bench_prompt(tok: &Tokenizer, n: usize) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    while ids.len() < n {
        let piece = tok.encode(BENCH_TEXT)?;
        if piece.is_empty() {
            return Err(EngineError::Question(
                "the benchmark text encodes to no tokens".into(),
            ));
        }
        ids.extend(piece);
    }
    ids.truncate(n);
    Ok(ids)
}

/// The text [`bench_prompt`] repeats.
pub const BENCH_TEXT: &str = "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, 'and what is the use of a book,' thought Alice 'without pictures or conversations?' ";

/// Prefill and decode speed of one model on one backend, medians of the runs.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct DecodeBench {
    /// Prompt tokens per second (prefill, then the first greedy token read).
    pub prefill_tok_s: f64,
    /// Generated tokens per second after the first (each one decoded and read greedily).
    pub decode_tok_s: f64,
    /// Seconds to the first token.
    pub ttft_s: f64,
}

/// Times prefill of `ids` and `gen` greedy decode steps, `runs` times after a short warm-up
/// (pipelines compiled, weights touched); every figure is stamped after the work it times has
/// been read back.
pub async fn bench_decode<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    ids: &[u32],
    gen: usize,
    runs: usize,
) -> Result<DecodeBench> {
    let v = model.vocab_size();
    let n = ids.len();
    if n == 0 {
        return Err(EngineError::Question(
            "the benchmark prompt is empty".into(),
        ));
    }
    model.reset(b)?;
    model.forward(b, &ids[..n.min(8)], false)?;
    greedy(b, model, v).await?;
    let (mut prefill, mut decode, mut ttft) = (vec![], vec![], vec![]);
    for _ in 0..runs.max(1) {
        model.reset(b)?;
        let t0 = now_ms();
        model.forward(b, ids, false)?;
        let mut t = greedy(b, model, v).await?;
        let t1 = now_ms();
        for _ in 0..gen {
            model.forward(b, &[t], false)?;
            t = greedy(b, model, v).await?;
        }
        let t2 = now_ms();
        prefill.push(n as f64 / ((t1 - t0) / 1e3));
        ttft.push((t1 - t0) / 1e3);
        decode.push(gen as f64 / ((t2 - t1) / 1e3));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    Ok(DecodeBench {
        prefill_tok_s: med(&mut prefill),
        decode_tok_s: med(&mut decode),
        ttft_s: med(&mut ttft),
    })
}

/// A profile of the prefill of `ids` and the readback of its last logits (see
/// [`Backend::start_profile`]); `None` where the backend keeps none.
pub async fn profile_prefill<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    ids: &[u32],
) -> Result<Option<crate::backend::Profile>> {
    if ids.is_empty() {
        return Err(EngineError::Question(
            "the benchmark prompt is empty".into(),
        ));
    }
    model.reset(b)?;
    b.start_profile();
    model.forward(b, ids, false)?;
    greedy(b, model, model.vocab_size()).await?;
    if cfg!(target_arch = "wasm32") {
        b.read(model.logits().0, 0, 1).await?;
    }
    Ok(b.take_profile())
}

/// A profile of `gen` greedy decode steps after `ids` (see [`Backend::start_profile`]);
/// `None` where the backend keeps none.
pub async fn profile_decode<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    ids: &[u32],
    gen: usize,
) -> Result<Option<crate::backend::Profile>> {
    let v = model.vocab_size();
    if ids.is_empty() {
        return Err(EngineError::Question(
            "the benchmark prompt is empty".into(),
        ));
    }
    model.reset(b)?;
    model.forward(b, ids, false)?;
    let mut t = greedy(b, model, v).await?;
    b.start_profile();
    for _ in 0..gen {
        model.forward(b, &[t], false)?;
        t = greedy(b, model, v).await?;
    }
    // In the page the last submissions' timestamps arrive with a later readback.
    if cfg!(target_arch = "wasm32") {
        b.read(model.logits().0, 0, 1).await?;
    }
    Ok(b.take_profile())
}

/// The greedy token of the model's last logits row.
async fn greedy<B: Backend>(b: &B, model: &Decoder<B>, v: usize) -> Result<u32> {
    let s = b.select(model.logits().0, v, 1, None).await?;
    s.top
        .first()
        .map(|c| c.0)
        .ok_or_else(|| EngineError::Question("no logits to pick from".into()))
}
