//! Decoder check against a transformers golden fixture (`scripts/golden/make_decoder_fixtures.py`),
//! generic over [`Backend`]: the native runner (`tests/decoder.rs`) and the browser runner
//! (`tests/web.rs`) run this same body.

use lorekeeper_engine::format::weights::{Safetensors, WeightSource};
use lorekeeper_engine::generate::{next_token, next_token_masked, SamplingParams};
use lorekeeper_engine::models::LoadOptions;
use lorekeeper_engine::models::{Decoder, ModelConfig, WeightFormat};
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{Backend, KvFormat, Tolerance};

/// f32 model vs transformers' f32 CPU forward: different summation orders only.
pub const LOGITS: Tolerance = Tolerance::new(2e-5, 1e-4);
/// The Qwen3.5 hybrid in f32 vs transformers: as [`LOGITS`], but the recurrent state of three
/// linear layers is carried over up to 70 positions, and transformers' prefill uses the chunked
/// (triangular-solve) form of the delta rule, a different summation order (measured 4.3e-5 on
/// logits up to |12|).
pub const HYBRID_LOGITS: Tolerance = Tolerance::new(1e-4, 1e-4);

fn ids(v: &serde_json::Value) -> Result<Vec<u32>, String> {
    v.as_array()
        .ok_or("expected an array of ids")?
        .iter()
        .map(|x| {
            x.as_u64()
                .map(|i| i as u32)
                .ok_or_else(|| "bad id".to_string())
        })
        .collect()
}

fn row(v: &serde_json::Value) -> Result<Vec<f64>, String> {
    v.as_array()
        .ok_or("expected a logits row")?
        .iter()
        .map(|x| x.as_f64().ok_or_else(|| "bad logit".to_string()))
        .collect()
}

/// Loads the fixture model (any architecture `config.json` names) in f32 on `b` and checks, for
/// every case: the logits of every prompt position within [`LOGITS`] (prefill in chunks of 16),
/// the greedy continuation token by token through the cache exactly; for the longest case, the
/// prompt fed one token at a time (decode steps) against the same logits; and (for case 1)
/// chunked prefill in chunks of 4 against the last position's logits.
/// Returns one report line per case.
pub async fn fixture_matches<B: Backend>(
    b: &B,
    name: &str,
    config: &str,
    weights: Vec<u8>,
    golden: &str,
) -> Result<Vec<String>, String> {
    fixture_matches_within(b, name, config, weights, golden, LOGITS).await
}

/// [`fixture_matches`] with the logits tolerance `tol`.
pub async fn fixture_matches_within<B: Backend>(
    b: &B,
    name: &str,
    config: &str,
    weights: Vec<u8>,
    golden: &str,
    tol: Tolerance,
) -> Result<Vec<String>, String> {
    let cfg = ModelConfig::from_json(name, config).map_err(|x| format!("{name}: config: {x}"))?;
    let src = Safetensors::from_shards(name, vec![("model.safetensors".into(), weights)])
        .map_err(|x| format!("{name}: weights: {x}"))?;
    source_matches(b, name, cfg, &src, WeightFormat::F32, tol, golden).await
}

/// [`fixture_matches`] for any weight source (a bundle) and storage format, with the logits
/// tolerance `tol` (LQ4 weights are compared with a looser one; greedy tokens must still agree).
pub async fn source_matches<B: Backend>(
    b: &B,
    name: &str,
    cfg: ModelConfig,
    src: &dyn WeightSource,
    format: WeightFormat,
    tol: Tolerance,
    golden: &str,
) -> Result<Vec<String>, String> {
    let who = b.describe();
    let e = |what: &str| {
        let who = who.clone();
        let what = what.to_string();
        move |err: lorekeeper_engine::EngineError| format!("[{who}] {name}: {what}: {err}")
    };
    let golden: serde_json::Value =
        serde_json::from_str(golden).map_err(|x| format!("{name}: golden.json: {x}"))?;
    let opts = LoadOptions {
        format,
        ctx: 128,
        chunk: 16,
        // An f32 cache: the comparison is exact to f32 rounding (the f16 cache is checked
        // op by op in the kernel suite and end to end against llama.cpp's, also f16).
        kv: Some(KvFormat::F32),
    };
    let mut model = Decoder::load(b, cfg.clone(), src, opts).map_err(e("load"))?;
    let vocab = cfg.vocab_size();
    let cases = golden["cases"].as_array().ok_or("no cases")?;
    let mut lines = Vec::new();
    let longest = (0..cases.len())
        .max_by_key(|&i| cases[i]["prompt"].as_array().map_or(0, |a| a.len()))
        .unwrap_or(0);
    for (ci, case) in cases.iter().enumerate() {
        let prompt = ids(&case["prompt"])?;
        let mut want = Vec::with_capacity(prompt.len() * vocab);
        for r in case["logits"].as_array().ok_or("no logits")? {
            want.extend(row(r)?);
        }
        // Every position's logits, prefilled in chunks of `opts.chunk`.
        model.reset(b).map_err(e("reset"))?;
        let mut got = Vec::with_capacity(want.len());
        for piece in prompt.chunks(opts.chunk) {
            model.forward(b, piece, true).map_err(e("forward"))?;
            got.extend(model.read_logits(b).await.map_err(e("read"))?);
        }
        let err = tol
            .check(&want, &got)
            .map_err(|m| format!("[{who}] {name} case {ci}: logits {m}"))?;
        model.reset(b).map_err(e("reset"))?;
        model.forward(b, &prompt, false).map_err(e("prefill"))?;
        let want_greedy = ids(&case["greedy"])?;
        let mut rng = Pcg32::new(0);
        let mut seq = prompt.clone();
        for (step, &w) in want_greedy.iter().enumerate() {
            let t = next_token(b, &model, &seq, step, &SamplingParams::default(), &mut rng)
                .await
                .map_err(e("sample"))?;
            if t != w {
                return Err(format!(
                    "[{who}] {name} case {ci}: greedy token {step} is {t}, transformers chose {w} (top-2 gap there {})",
                    case["greedy_top2_gap"][step]
                ));
            }
            seq.push(t);
            model.forward(b, &[t], false).map_err(e("decode"))?;
        }
        if ci == 0 {
            lines.push(masked_steps(b, &mut model, &prompt, &who, name).await?);
        }
        lines.push(format!(
            "[{who}] {name} case {ci}: {} positions, max abs logit err {err:.2e} within {tol}; {} greedy tokens equal",
            prompt.len(),
            want_greedy.len()
        ));
        if ci == longest {
            // Decode steps (one token per forward) give the prefill's logits at every position.
            model.reset(b).map_err(e("reset"))?;
            let mut stepped = Vec::with_capacity(want.len());
            for &t in &prompt {
                model.forward(b, &[t], false).map_err(e("step"))?;
                stepped.extend(model.read_logits(b).await.map_err(e("read"))?);
            }
            let err = tol
                .check(&want, &stepped)
                .map_err(|m| format!("[{who}] {name} case {ci}: step-by-step decode {m}"))?;
            lines.push(format!(
                "[{who}] {name} case {ci}: {} single-token steps equal the prefill (max abs err {err:.2e})",
                prompt.len()
            ));
        }
    }
    // Chunked prefill (chunks of 4) against the golden last-position logits.
    let case = &cases[1];
    let prompt = ids(&case["prompt"])?;
    let mut small =
        Decoder::load(b, cfg, src, LoadOptions { chunk: 4, ..opts }).map_err(e("load"))?;
    small.forward(b, &prompt, false).map_err(e("chunked"))?;
    let got = small.read_logits(b).await.map_err(e("read"))?;
    let rows = case["logits"].as_array().ok_or("no logits")?;
    let last = row(&rows[rows.len() - 1])?;
    tol.check(&last, &got)
        .map_err(|m| format!("[{who}] {name}: chunked prefill {m}"))?;
    lines.push(format!(
        "[{who}] {name}: chunked prefill (chunks of 4) matches"
    ));
    Ok(lines)
}

/// Sampling under a grammar's mask with the repetition penalty, applied where the logits are:
/// 8 greedy steps, each among a different 40 % of the vocabulary (every id past it set in the
/// mask's last word, to be ignored) with penalty 2 (exact on every backend) on the tokens
/// seen, against the same rule applied on the host to the logits read back.
async fn masked_steps<B: Backend>(
    b: &B,
    model: &mut Decoder<B>,
    prompt: &[u32],
    who: &str,
    name: &str,
) -> Result<String, String> {
    let e =
        |what: &'static str| move |err: lorekeeper_engine::EngineError| format!("{what}: {err}");
    let v = model.vocab_size();
    let p = SamplingParams {
        repetition_penalty: 2.0,
        ..SamplingParams::default()
    };
    model.reset(b).map_err(e("reset"))?;
    model.forward(b, prompt, false).map_err(e("prefill"))?;
    let mut seq = prompt.to_vec();
    let mut rng = Pcg32::new(0);
    for step in 0..8usize {
        let words = v.div_ceil(32) + 1;
        let mask: Vec<u32> = (0..words * 32)
            .collect::<Vec<_>>()
            .chunks(32)
            .map(|c| {
                c.iter().fold(0u32, |w, &id| {
                    let on = id >= v || (id * 7 + step * 3) % 5 < 2;
                    w | (on as u32) << (id % 32)
                })
            })
            .collect();
        let logits = model.read_logits(b).await.map_err(e("read"))?;
        let last = &logits[logits.len() - v..];
        let want = (0..v)
            .filter(|&id| (id * 7 + step * 3) % 5 < 2)
            .map(|id| {
                let l = last[id];
                let l = match seq.contains(&(id as u32)) {
                    true if l > 0.0 => l / 2.0,
                    true => l * 2.0,
                    false => l,
                };
                (id as u32, l)
            })
            .fold(None, |best: Option<(u32, f32)>, c| match best {
                Some(bst) if bst.1 >= c.1 => Some(bst),
                _ => Some(c),
            })
            .ok_or("no allowed token")?
            .0;
        let got = next_token_masked(b, model, &seq, step, &p, &mut rng, &mask)
            .await
            .map_err(e("sample"))?;
        if got != want {
            return Err(format!(
                "[{who}] {name}: masked step {step} chose {got}, the host's rule {want}"
            ));
        }
        seq.push(got);
        model.forward(b, &[got], false).map_err(e("decode"))?;
    }
    Ok(format!(
        "[{who}] {name}: 8 masked steps with the penalty equal the host's rule"
    ))
}
