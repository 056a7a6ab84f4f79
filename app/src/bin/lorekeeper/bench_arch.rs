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
use lorekeeper_engine::format::weights::{HostTensor, WeightSource};
use lorekeeper_engine::models::LoadOptions;
use lorekeeper_engine::models::{Decoder, ModelConfig, WeightFormat};
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{Backend, KvFormat, Q4Matrix};

use crate::common::{on_backend, print_profile, BackendArg};

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
}

/// `lorekeeper bench-arch`.
pub fn run(args: Args) -> Result<()> {
    let contexts = parse_contexts(&args.contexts)?;
    on_backend!(args.backend, |b| bench_arch_on(
        b,
        &contexts,
        args.gen_tokens,
        args.only.as_deref(),
        args.json,
        args.profile
    ))
}

/// Qwen3-4B's `config.json` (the parts the model file reads).
pub const QWEN3_4B: &str = r#"{"model_type":"qwen3","vocab_size":151936,"hidden_size":2560,
"intermediate_size":9728,"num_hidden_layers":36,"num_attention_heads":32,"num_key_value_heads":8,
"head_dim":128,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,
"max_position_embeddings":40960,"hidden_act":"silu"}"#;

/// SmolLM2-135M-Instruct's `config.json` (the parts the model file reads): the demo bundle's
/// model, small enough to time on a software rasteriser at long contexts.
pub const SMOLLM2_135M: &str = r#"{"model_type":"llama","vocab_size":49152,"hidden_size":576,
"intermediate_size":1536,"num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,
"head_dim":64,"rms_norm_eps":1e-5,"rope_theta":100000.0,"tie_word_embeddings":true,
"max_position_embeddings":8192,"hidden_act":"silu"}"#;

/// Qwen3.5-4B's text `config.json` (the parts the model file reads).
pub const QWEN35_4B: &str = r#"{"model_type":"qwen3_5_text","vocab_size":248320,"hidden_size":2560,
"intermediate_size":9216,"num_hidden_layers":32,"num_attention_heads":16,"num_key_value_heads":4,
"head_dim":256,"rms_norm_eps":1e-6,"rope_parameters":{"rope_type":"default","rope_theta":10000000.0,
"partial_rotary_factor":0.25},"tie_word_embeddings":true,"full_attention_interval":4,
"linear_conv_kernel_dim":4,"linear_key_head_dim":128,"linear_num_key_heads":16,
"linear_num_value_heads":32,"linear_value_head_dim":128,"hidden_act":"silu"}"#;

/// Random weights for every tensor a config names: LQ4 row blocks for matrices (a random
/// 256-row template repeated, blocks of at most 64 MiB so a GPU binding holds each), f32 for
/// the rest.
struct SyntheticWeights {
    shapes: std::collections::HashMap<String, Vec<usize>>,
}

impl SyntheticWeights {
    fn new(cfg: &ModelConfig) -> Self {
        SyntheticWeights {
            shapes: cfg.tensor_shapes().into_iter().collect(),
        }
    }

    fn seed(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    }
}

impl WeightSource for SyntheticWeights {
    fn describe(&self) -> String {
        "synthetic weights".into()
    }

    fn contains(&self, name: &str) -> bool {
        self.shapes.contains_key(name)
    }

    fn get(&self, name: &str) -> lorekeeper_engine::Result<Option<HostTensor>> {
        let Some(shape) = self.shapes.get(name) else {
            return Ok(None);
        };
        let n: usize = shape.iter().product();
        let mut rng = Pcg32::new(Self::seed(name));
        let data = if name.ends_with("A_log") {
            (0..n).map(|_| rng.uniform(1.0, 16.0).ln()).collect()
        } else if shape.len() == 1 {
            rng.normal_vec(n, 0.05)
        } else {
            rng.normal_vec(n, 0.02)
        };
        Ok(Some(HostTensor {
            shape: shape.clone(),
            data,
        }))
    }

    fn q4_parts(&self, name: &str) -> lorekeeper_engine::Result<Option<Vec<(usize, Q4Matrix)>>> {
        let Some(&[rows, cols]) = self.shapes.get(name).map(Vec::as_slice) else {
            return Ok(None);
        };
        if !cols.is_multiple_of(32) {
            return Ok(None);
        }
        let mut rng = Pcg32::new(Self::seed(name));
        let t_rows = rows.min(256);
        let template =
            Q4Matrix::quantize(name, t_rows, cols, &rng.normal_vec(t_rows * cols, 0.02))?;
        let bytes_per_row = template.data.len() * 4 / t_rows;
        let block_rows = ((64usize << 20) / bytes_per_row).max(t_rows) / t_rows * t_rows;
        let mut parts = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + block_rows).min(rows);
            let mut pieces = Vec::new();
            let mut r = r0;
            while r < r1 {
                let take = (r1 - r).min(t_rows);
                pieces.push(if take == t_rows {
                    template.clone()
                } else {
                    Q4Matrix::quantize(name, take, cols, &rng.normal_vec(take * cols, 0.02))?
                });
                r += take;
            }
            parts.push((r0, Q4Matrix::concat_rows(name, &pieces)?));
            r0 = r1;
        }
        Ok(Some(parts))
    }
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
    json: bool,
    profile: bool,
) -> Result<()> {
    if contexts.is_empty() || gen == 0 {
        bail!("--contexts and --gen-tokens must be non-empty / positive");
    }
    // The warm-up step, the timed steps and (with --profile) as many profiled ones.
    let steps = if profile { 2 * gen } else { gen };
    let max_ctx = contexts.iter().copied().max().unwrap_or(0) + steps + WARM_STEPS + 2;
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
            chunk: 1,
            kv: None,
        };
        let mut m = Decoder::load(b, cfg.clone(), &src, opts)
            .with_context(|| format!("loading the {label} model"))?;
        eprintln!("{label}: loaded in {:.1} s", t0.elapsed().as_secs_f64());
        let v = m.vocab_size();
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
                        print_profile(&p, gen, s * 1e3 / gen as f64);
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
