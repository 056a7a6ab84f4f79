//! `index-builder`: builds Lorekeeper bundles.
//!
//! ```text
//! index-builder model --base PATH [--lora DIR] [--quant q4|q8|f16|f32] --out BUNDLE_DIR [--json]
//! index-builder index --corpus PATH… --embedder PATH --out BUNDLE_DIR [--json]
//! ```
//!
//! This file only parses the command line and dispatches: each command is a module holding its
//! arguments and its `run`, a thin layer over the `index_builder` library.

mod index;
mod model;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// The command line.
#[derive(Parser)]
#[command(
    name = "index-builder",
    version,
    about = "Builds Lorekeeper bundles: model weights and story index"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The commands, in the order `--help` lists them.
#[derive(Subcommand)]
enum Cmd {
    /// Import a model (Hugging Face folder or GGUF), merge a PEFT LoRA adapter, quantize, and
    /// write (or replace) the bundle's model part
    Model(model::Args),
    /// Ingest a story corpus, chunk and embed it, and write (or replace) the bundle's story
    /// index: int8 HNSW + BM25 (words and CJK bigrams) + entity graph, with the query embedder
    Index(index::Args),
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("index-builder: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Parses the command line and runs the command.
fn run() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Model(args) => model::run(args),
        Cmd::Index(args) => index::run(args),
    }
}
