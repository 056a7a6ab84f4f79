//! `lorekeeper bench-arch`: decode speed and per-sequence state memory of a Qwen3.5-4B-shaped
//! hybrid against a Qwen3-4B-shaped transformer, both with random LQ4 weights, on the same
//! backend in the same run, at several context lengths; and of the demo model's shape
//! (SmolLM2-135M), small enough to time long contexts on a software rasteriser.
//!
//! Shapes are the published configurations (Qwen3-4B: 36 layers, 32/8 heads of 128, MLP 9728,
//! vocabulary 151,936; Qwen3.5-4B text model: 32 layers of which every 4th is full attention
//! with 16/4 heads of 256 and an output gate, the rest Gated DeltaNet with 16 key / 32 value
//! heads of 128, MLP 9216, vocabulary 248,320; both tie the embedding). Weights are random 4-bit
//! blocks (timing does not depend on their values). A long context is reached with
//! `seek_for_benchmark`, not a prefill: it fills the caches up to that position with
//! pseudo-random keys and values, so the decode step reads what it would after a real prefill.

use anyhow::{bail, Context, Result};
use lorekeeper_engine::models::LoadOptions;
use lorekeeper_engine::models::{Decoder, ModelConfig, WeightFormat};
use lorekeeper_engine::{Backend, KvFormat};

use crate::common::{on_backend, print_profile, BackendArg};
use crate::synthetic::{SyntheticWeights, QWEN35_4B, QWEN3_4B, SMOLLM2_135M};

/// Options of `lorekeeper bench-arch`.
#[derive(clap::Args)]
pub struct Args {
    /// Context lengths to decode at (comma-separated)
    #[arg(long, default_value = "1024,8192")]
    contexts: String,
    /// Timed decode steps per context
    #[arg(long, default_value_t = 3)]
    gen_tokens: usize,
    /// Only the models whose name contains this (qwen3-4b, qwen3.5 or smollm2)
    #[arg(long)]
    only: Option<String>,
    /// Where the models run
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Print JSON rows
    #[arg(long)]
    json: bool,
    /// Then profile the decode steps: dispatches, submissions and device time per kernel
    /// (timestamps where the GPU adapter has them)
    #[arg(long)]
    profile: bool,
    /// Also time a prefill of this many tokens from position 0 (in the backend's chunks)
    #[arg(long, default_value_t = 0)]
    prefill: usize,
}

/// `lorekeeper bench-arch`.
pub fn run(args: Args) -> Result<()> {
    let contexts = parse_contexts(&args.contexts)?;
    on_backend!(args.backend, |b| bench_arch_on(
        b,
        &contexts,
        args.gen_tokens,
        args.only.as_deref(),
        (args.json, args.profile),
        args.prefill
    ))
}

/// One measurement.
#[derive(serde::Serialize)]
struct Row {
    model: &'static str,
    context: usize,
    decode_tok_s: f64,
    ms_per_token: f64,
    /// CPU milliseconds per token spent recording the step (before its readback).
    record_ms_per_token: f64,
    recurrent_state_mib: f64,
    kv_cache_mib: f64,
    state_mib: f64,
}

/// Most warm-up steps before each context's timed ones.
const WARM_STEPS: usize = 48;

/// Runs the benchmark; prints a Markdown table (or JSON) with Qwen3.5 / Qwen3 ratios.
fn bench_arch_on<B: Backend>(
    b: &B,
    contexts: &[usize],
    gen: usize,
    only: Option<&str>,
    (json, profile): (bool, bool),
    prefill: usize,
) -> Result<()> {
    if contexts.is_empty() || gen == 0 {
        bail!("--contexts and --gen-tokens must be non-empty / positive");
    }
    // The warm-up step, the timed steps and (with --profile) as many profiled ones.
    let steps = if profile { 2 * gen } else { gen };
    let max_ctx =
        (contexts.iter().copied().max().unwrap_or(0) + steps + WARM_STEPS + 2).max(prefill + 1);
    let mut rows = Vec::new();
    for (label, text) in [
        ("Qwen3-4B shape", QWEN3_4B),
        ("Qwen3.5-4B shape", QWEN35_4B),
        ("SmolLM2-135M shape", SMOLLM2_135M),
    ] {
        if only.is_some_and(|o| !label.to_lowercase().contains(&o.to_lowercase())) {
            continue;
        }
        let cfg = ModelConfig::from_json(label, text)?;
        let src = SyntheticWeights::new(&cfg);
        let t0 = std::time::Instant::now();
        let opts = LoadOptions {
            format: WeightFormat::Q4,
            ctx: max_ctx,
            chunk: if prefill > 0 { b.prefill_chunk() } else { 1 },
            kv: None,
        };
        let mut m = Decoder::load(b, cfg.clone(), &src, opts)
            .with_context(|| format!("loading the {label} model"))?;
        eprintln!("{label}: loaded in {:.1} s", t0.elapsed().as_secs_f64());
        let v = m.vocab_size();
        if prefill > 0 {
            // Twice (the first compiles the prefill's pipelines), the second timed to its
            // last logits read back.
            let ids: Vec<u32> = (0..prefill).map(|i| ((i * 7919 + 11) % v) as u32).collect();
            let mut secs = 0.0;
            for _ in 0..2 {
                m.reset(b)?;
                let t = std::time::Instant::now();
                m.forward(b, &ids, false)?;
                pollster::block_on(b.select(m.logits().0, v, 1, None))?;
                secs = t.elapsed().as_secs_f64();
            }
            println!(
                "{label}: prefill of {prefill} tokens {:.2} tok/s ({secs:.2} s), {}",
                prefill as f64 / secs,
                b.describe()
            );
        }
        for &c in contexts {
            m.reset(b)?;
            m.seek_for_benchmark(b, c)?;
            // Warm-up steps (pipelines, caches, and a GPU's clocks, which fall while the
            // model loads on the CPU): two, and more up to half a second, then `gen` timed
            // steps, each read back.
            let warm = std::time::Instant::now();
            for i in 0..WARM_STEPS {
                if i >= 2 && warm.elapsed().as_secs_f64() > 0.5 {
                    break;
                }
                m.forward(b, &[1], false)?;
                pollster::block_on(b.select(m.logits().0, v, 1, None))?;
            }
            let t = std::time::Instant::now();
            let mut tok = 1u32;
            let mut record = std::time::Duration::ZERO;
            for _ in 0..gen {
                let r = std::time::Instant::now();
                m.forward(b, &[tok], false)?;
                record += r.elapsed();
                tok = pollster::block_on(b.select(m.logits().0, v, 1, None))?.top[0].0;
            }
            let s = t.elapsed().as_secs_f64();
            if profile {
                b.start_profile();
                for _ in 0..gen {
                    m.forward(b, &[tok], false)?;
                    tok = pollster::block_on(b.select(m.logits().0, v, 1, None))?.top[0].0;
                }
                match b.take_profile() {
                    Some(p) => {
                        println!("{label} @ {c}, {}:", b.describe());
                        print_profile(&p, ("decode", gen), s * 1e3 / gen as f64);
                    }
                    None => eprintln!("profile: {} keeps no profile", b.describe()),
                }
            }
            // state_bytes counts an f32 cache; the backend's own format may be f16.
            let (rec, kv32) = cfg.state_bytes(c);
            let kv = match b.kv_format() {
                KvFormat::F32 => kv32,
                KvFormat::F16 => kv32 / 2,
            };
            let mib = |x: u64| x as f64 / (1u64 << 20) as f64;
            let row = Row {
                model: label,
                context: c,
                decode_tok_s: gen as f64 / s,
                ms_per_token: s * 1e3 / gen as f64,
                record_ms_per_token: record.as_secs_f64() * 1e3 / gen as f64,
                recurrent_state_mib: mib(rec),
                kv_cache_mib: mib(kv),
                state_mib: mib(rec + kv),
            };
            eprintln!(
                "{label} @ {c}: {:.3} tok/s, state {:.1} MiB",
                row.decode_tok_s, row.state_mib
            );
            rows.push(row);
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("backend: {}", b.describe());
    println!(
        "| model | context | decode tok/s | ms/token | of it recording (CPU) | recurrent state | KV cache ({:?}) | state total |",
        b.kv_format()
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.3} | {:.1} | {:.1} | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            r.model,
            r.context,
            r.decode_tok_s,
            r.ms_per_token,
            r.record_ms_per_token,
            r.recurrent_state_mib,
            r.kv_cache_mib,
            r.state_mib
        );
    }
    for &c in contexts {
        let find = |m: &str| {
            rows.iter()
                .find(|r| r.context == c && r.model.starts_with(m))
        };
        if let (Some(q3), Some(q35)) = (find("Qwen3-4B"), find("Qwen3.5")) {
            println!(
                "context {c}: Qwen3.5 / Qwen3 decode speed {:.2}x, state memory {:.2}x",
                q35.decode_tok_s / q3.decode_tok_s,
                q35.state_mib / q3.state_mib
            );
        }
    }
    Ok(())
}

/// Parses `1024,8192`.
fn parse_contexts(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .with_context(|| format!("--contexts: '{x}' is not a number"))
        })
        .collect()
}
