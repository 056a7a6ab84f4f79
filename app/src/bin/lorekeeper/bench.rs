//! `lorekeeper bench`: prefill and decode speed, against llama.cpp (llama-cpp-python) in the
//! same run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lorekeeper_engine::generate::{bench_decode, bench_prompt, profile_decode, profile_prefill};
use lorekeeper_engine::Backend;

use crate::common::{load, on_backend, print_profile, ModelArgs};

/// Options of `lorekeeper bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    #[arg(long, default_value_t = 128)]
    gen_tokens: usize,
    /// Python interpreter with llama-cpp-python; the peer is skipped without it
    #[arg(long)]
    llama_cpp: Option<PathBuf>,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Then profile the prefill and the decode steps: dispatches, submissions and device time
    /// per kernel (timestamps where the GPU adapter has them)
    #[arg(long)]
    profile: bool,
}

/// `lorekeeper bench`; `threads` is the CPU thread count in effect (the llama.cpp peer gets
/// the same).
pub fn run(args: Args, threads: usize) -> Result<()> {
    on_backend!(args.model.backend, |b| bench_on(b, &args, threads))
}

/// The benchmark prompt: public-domain text tokenized and cut to `n` tokens.
fn bench_on<B: Backend>(b: &B, a: &Args, threads: usize) -> Result<()> {
    let (m, n, gen) = (&a.model, a.prompt_tokens, a.gen_tokens);
    if n + gen + 1 > m.ctx {
        bail!(
            "--prompt-tokens + --gen-tokens ({}) exceed --ctx {}",
            n + gen,
            m.ctx
        );
    }
    let (mut model, tok) = load(b, m, b.prefill_chunk())?;
    let ids = bench_prompt(&tok, n)?;
    let runs = 3;
    let r = pollster::block_on(bench_decode(b, &mut model, &ids, gen, runs))?;
    let (p, d, f) = (r.prefill_tok_s, r.decode_tok_s, r.ttft_s);
    if a.profile {
        match pollster::block_on(profile_prefill(b, &mut model, &ids))? {
            Some(prof) => print_profile(&prof, ("prefill", n), 1e3 / p),
            None => eprintln!("profile: {} keeps no profile", b.describe()),
        }
        if let Some(prof) = pollster::block_on(profile_decode(b, &mut model, &ids, gen))? {
            print_profile(&prof, ("decode", gen), 1e3 / d);
        }
    }
    let peer = match a.llama_cpp.as_deref() {
        Some(py) => Some(llama_cpp_peer(py, &m.model, &ids, gen, threads)?),
        None => None,
    };
    let ours = serde_json::json!({"prefill_tok_s": p, "decode_tok_s": d, "ttft_s": f});
    let ratio = peer.as_ref().map(|q| {
        serde_json::json!({
            "prefill": p / q["prefill_tok_s"].as_f64().unwrap_or(f64::NAN),
            "decode": d / q["decode_tok_s"].as_f64().unwrap_or(f64::NAN),
        })
    });
    if a.json {
        println!(
            "{}",
            serde_json::json!({"backend": b.describe(), "prompt_tokens": n, "gen_tokens": gen, "lorekeeper": ours, "llama_cpp": peer, "ratio": ratio})
        );
    } else {
        println!(
            "model {} | prompt {n} tokens, {gen} generated, median of {runs}",
            m.model.display()
        );
        println!("| engine | prefill tok/s | decode tok/s | TTFT s |");
        println!("|---|---|---|---|");
        println!(
            "| lorekeeper ({}) | {p:.1} | {d:.1} | {f:.3} |",
            b.describe()
        );
        if let Some(q) = &peer {
            println!(
                "| llama.cpp ({threads} threads) | {:.1} | {:.1} | {:.3} |",
                q["prefill_tok_s"].as_f64().unwrap_or(f64::NAN),
                q["decode_tok_s"].as_f64().unwrap_or(f64::NAN),
                q["ttft_s"].as_f64().unwrap_or(f64::NAN)
            );
        }
        if let Some(r) = &ratio {
            println!(
                "ratio lorekeeper / llama.cpp: prefill {:.3}, decode {:.3}",
                r["prefill"].as_f64().unwrap_or(f64::NAN),
                r["decode"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}

/// Runs `scripts/bench_llamacpp.py` with the same GGUF and prompt tokens.
fn llama_cpp_peer(
    py: &Path,
    gguf: &Path,
    ids: &[u32],
    gen: usize,
    threads: usize,
) -> Result<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_llamacpp.py");
    let tokens = serde_json::to_string(ids)?;
    let out = std::process::Command::new(py)
        .arg(&script)
        .arg(gguf)
        .arg(&tokens)
        .arg(gen.to_string())
        .arg(threads.to_string())
        .output()
        .with_context(|| format!("running {} {}", py.display(), script.display()))?;
    if !out.status.success() {
        bail!(
            "llama.cpp peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("llama.cpp peer printed no JSON")?;
    Ok(v)
}
