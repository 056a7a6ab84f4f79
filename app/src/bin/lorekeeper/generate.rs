//! `lorekeeper generate`: a continuation of a prompt (or a chat reply with `--chat`), streamed
//! or printed as one JSON object.

use std::io::Write;

use anyhow::{bail, Result};
use lorekeeper_engine::generate::{generate, GenerateOptions, SamplingParams};
use lorekeeper_engine::tokenizer::Role;
use lorekeeper_engine::Backend;

use crate::common::{load, on_backend, ModelArgs};

/// Options of `lorekeeper generate`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt as a user turn in the model's chat template
    #[arg(long)]
    chat: bool,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// 0 = greedy
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Repetition guard: no run of this many generated tokens twice (0 = off)
    #[arg(long, default_value_t = 0)]
    no_repeat_ngram: usize,
    /// Print one JSON object instead of streaming text
    #[arg(long)]
    json: bool,
}

/// `lorekeeper generate`.
pub fn run(args: Args) -> Result<()> {
    if args.prompt.trim().is_empty() {
        bail!("--prompt is empty");
    }
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        sampling: SamplingParams {
            temperature: args.temperature,
            top_k: args.top_k,
            top_p: args.top_p,
            repetition_penalty: args.repetition_penalty,
            seed: args.seed,
            no_repeat_ngram: args.no_repeat_ngram,
        },
        stop: Vec::new(),
    };
    opts.sampling.validate()?;
    on_backend!(args.model.backend, |b| generate_on(b, &args, &opts))
}

fn generate_on<B: Backend>(b: &B, a: &Args, o: &GenerateOptions) -> Result<()> {
    let json = a.json;
    let (mut model, tok) = load(b, &a.model, 64)?;
    let text = if a.chat {
        tok.chat.render(&[(Role::User, a.prompt.clone())])
    } else {
        a.prompt.clone()
    };
    let ids = tok.encode(&text)?;
    let mut stdout = std::io::stdout();
    let g = pollster::block_on(generate(b, &mut model, &tok, &ids, o, |piece| {
        if !json {
            let _ = stdout.write_all(piece.as_bytes());
            let _ = stdout.flush();
        }
        true
    }))?;
    let decode_tok_s = if g.decode_s > 0.0 {
        (g.tokens.len().saturating_sub(1)) as f64 / g.decode_s
    } else {
        0.0
    };
    if json {
        let v = serde_json::json!({
            "tokens": g.tokens,
            "text": g.text,
            "prompt_tokens": g.prompt_tokens,
            "prefill_tok_s": g.prompt_tokens as f64 / g.prefill_s.max(1e-9),
            "decode_tok_s": decode_tok_s,
            "stop_reason": g.stop_reason,
        });
        println!("{v}");
    } else {
        println!();
        eprintln!(
            "[{} prompt tokens, {:.1} tok/s prefill; {} tokens, {:.1} tok/s decode; stop: {:?}]",
            g.prompt_tokens,
            g.prompt_tokens as f64 / g.prefill_s.max(1e-9),
            g.tokens.len(),
            decode_tok_s,
            g.stop_reason
        );
    }
    Ok(())
}
