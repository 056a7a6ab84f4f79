//! `lorekeeper`: the offline desktop build. The same engine as the web app: by default
//! (`--backend auto`) the CPU path (SIMD, `--threads N`), unless a hardware GPU measures faster;
//! `--backend gpu|cpu` forces one.
//!
//! ```text
//! lorekeeper generate --model PATH --prompt TEXT [--chat] [--max-tokens N] [--temperature T]
//!                     [--top-p P] [--seed S] [--backend auto|gpu|cpu] [--json]
//! lorekeeper bench    --model GGUF [--prompt-tokens 512] [--gen-tokens 128] [--llama-cpp PYTHON]
//! lorekeeper bench-arch [--contexts 1024,8192] [--gen-tokens 3] [--only qwen3.5|qwen3-4b|smollm2] [--backend auto|cpu|gpu]
//! lorekeeper perplexity --model PATH --text FILE [--tokens 4096] [--window 512]
//! lorekeeper search   --bundle DIR --query TEXT [--k 10] [--json]
//! lorekeeper eval-retrieval --bundle DIR --questions FILE.jsonl [--json]
//! lorekeeper ask      --bundle DIR [--mode grounded] [--no-grammar] [--json] "question"
//! lorekeeper eval     --bundle DIR --questions FILE.jsonl [--no-grammar] [--limit N] [--json]
//! ```
//! Every command: [--threads N] (CPU threads, default the physical cores).
//! PATH is a GGUF file, a Hugging Face model folder or a bundle folder.
//!
//! This file only parses the command line and dispatches: each command is a module holding its
//! arguments and its `run`; what several commands share (model and backend options, loading,
//! the backend choice, threads) is in [`common`].

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod common;

#[cfg(not(target_arch = "wasm32"))]
mod ask;
#[cfg(not(target_arch = "wasm32"))]
mod bench;
#[cfg(not(target_arch = "wasm32"))]
mod bench_arch;
#[cfg(not(target_arch = "wasm32"))]
mod eval;
#[cfg(not(target_arch = "wasm32"))]
mod eval_retrieval;
#[cfg(not(target_arch = "wasm32"))]
mod generate;
#[cfg(not(target_arch = "wasm32"))]
mod perplexity;
#[cfg(not(target_arch = "wasm32"))]
mod search;
#[cfg(not(target_arch = "wasm32"))]
mod synthetic;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lorekeeper: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The command line.
#[cfg(not(target_arch = "wasm32"))]
#[derive(clap::Parser)]
#[command(
    name = "lorekeeper",
    version,
    about = "Lorekeeper offline desktop build"
)]
struct Cli {
    /// CPU threads, 1 to 1024 [default: the physical cores]
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// The commands, in the order `--help` lists them.
#[cfg(not(target_arch = "wasm32"))]
#[derive(clap::Subcommand)]
enum Cmd {
    /// Generate a continuation (or a chat reply with --chat)
    Generate(generate::Args),
    /// Perplexity on a text: windows of --window tokens, every token after a window's first
    /// scored from its prefix (the rule scripts/perplexity_llamacpp.py applies to GGUFs)
    Perplexity(perplexity::Args),
    /// Search a bundle's story index: dense + BM25 + entity graph, fused
    Search(search::Args),
    /// Retrieval quality on a question set: recall@1/5/10 and MRR, dense / BM25 / graph / fused
    EvalRetrieval(eval_retrieval::Args),
    /// Decode speed and state memory: a Qwen3.5-4B-shaped hybrid against a Qwen3-4B-shaped
    /// transformer (random 4-bit weights), same backend, same run
    BenchArch(bench_arch::Args),
    /// Answer a question from the story: evidence, quoted facts, or an abstention
    Ask(ask::Args),
    /// Run a question set through `ask`: an eval50-style summary
    Eval(eval::Args),
    /// Prefill and decode speed, against llama.cpp (llama-cpp-python) in the same run
    Bench(bench::Args),
}

/// Parses the command line, sets the CPU thread count and runs the command.
#[cfg(not(target_arch = "wasm32"))]
fn run() -> anyhow::Result<()> {
    use clap::Parser;

    let cli = Cli::parse();
    let threads = common::set_threads(cli.threads);
    match cli.cmd {
        Cmd::Generate(args) => generate::run(args),
        Cmd::Perplexity(args) => perplexity::run(args),
        Cmd::Search(args) => search::run(args),
        Cmd::EvalRetrieval(args) => eval_retrieval::run(args),
        Cmd::BenchArch(args) => bench_arch::run(args),
        Cmd::Ask(args) => ask::run(args),
        Cmd::Eval(args) => eval::run(args),
        Cmd::Bench(args) => bench::run(args, threads),
    }
}
