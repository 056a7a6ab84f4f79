//! `lorekeeper perplexity`: perplexity on a text, in windows of `--window` tokens, every token
//! after a window's first scored from its prefix (the rule scripts/perplexity_llamacpp.py
//! applies to GGUFs).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use lorekeeper_engine::Backend;

use crate::common::{load, on_backend, ModelArgs};

/// Tokens per forward pass.
const CHUNK: usize = 64;

/// Options of `lorekeeper perplexity`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// UTF-8 text file
    #[arg(long)]
    text: PathBuf,
    /// Tokens taken from the start of the text
    #[arg(long, default_value_t = 4096)]
    tokens: usize,
    /// Window length in tokens
    #[arg(long, default_value_t = 512)]
    window: usize,
    /// Also write the token ids as JSON (for the llama.cpp peer)
    #[arg(long)]
    dump_tokens: Option<PathBuf>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

/// `lorekeeper perplexity`.
pub fn run(args: Args) -> Result<()> {
    if args.window < 2 || args.tokens < 2 {
        bail!("--window and --tokens must be at least 2");
    }
    on_backend!(args.model.backend, |b| perplexity_on(b, &args))
}

fn perplexity_on<B: Backend>(b: &B, a: &Args) -> Result<()> {
    let (m, text, window) = (&a.model, a.text.as_path(), a.window);
    let bytes = std::fs::read(text).with_context(|| format!("reading {}", text.display()))?;
    let text_s = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 (first bad byte at offset {})",
            text.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    let (mut model, tok) = load(b, m, CHUNK)?;
    let mut ids = tok.encode(&text_s)?;
    ids.truncate(a.tokens);
    if ids.len() < 2 {
        bail!("{}: fewer than 2 tokens", text.display());
    }
    if let Some(p) = a.dump_tokens.as_deref() {
        std::fs::write(p, serde_json::to_vec(&ids)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if window > model.context() {
        bail!("--window {window} exceeds --ctx {}", model.context());
    }
    let vocab = model.vocab_size();
    let t0 = std::time::Instant::now();
    let (mut nll, mut count) = (0f64, 0usize);
    for w in ids.chunks(window).filter(|w| w.len() >= 2) {
        model.reset(b)?;
        for (ci, piece) in w.chunks(CHUNK).enumerate() {
            model.forward(b, piece, true)?;
            let logits = pollster::block_on(model.read_logits(b))?;
            for (i, row) in logits.chunks(vocab).enumerate() {
                let at = ci * CHUNK + i;
                let Some(&next) = w.get(at + 1) else { break };
                let mx = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)) as f64;
                let lse = mx + row.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln();
                nll += lse - row[next as usize] as f64;
                count += 1;
            }
        }
    }
    let mean = nll / count as f64;
    let out = serde_json::json!({
        "model": m.model.display().to_string(),
        "weights": format!("{:?}", model.format()),
        "tokens_scored": count,
        "window": window,
        "nll": mean,
        "ppl": mean.exp(),
        "seconds": t0.elapsed().as_secs_f64(),
    });
    if a.json {
        println!("{out}");
    } else {
        println!(
            "perplexity {:.4} (mean NLL {mean:.5}) over {count} tokens in windows of {window}, {:.1} s",
            mean.exp(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
