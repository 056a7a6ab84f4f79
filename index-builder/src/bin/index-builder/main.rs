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

use std::path::Path;

use anyhow::Result;
use clap::{Parser, Subcommand};
use lorekeeper_engine::answer::session::{footprint, PAGE_CONTEXT, PAGE_HEAP_LIMIT};
use lorekeeper_engine::format::bundle::{Manifest, MANIFEST_FILE};

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
    let cmd = Cli::parse().cmd;
    let (out, json) = match &cmd {
        Cmd::Model(a) => (a.out.clone(), a.json),
        Cmd::Index(a) => (a.out.clone(), a.json),
    };
    match cmd {
        Cmd::Model(args) => model::run(args)?,
        Cmd::Index(args) => index::run(args)?,
    }
    if !json {
        page_memory(&out);
    }
    Ok(())
}

/// Once a bundle has both parts: what loading it holds in a web page's memory (the check the
/// page makes before it downloads), on the CPU path and beside WebGPU.
fn page_memory(out: &Path) {
    let Ok(bytes) = std::fs::read(out.join(MANIFEST_FILE)) else {
        return;
    };
    let Ok(m) = Manifest::parse(MANIFEST_FILE, &bytes) else {
        return;
    };
    if m.model.is_none() || m.index.is_none() {
        return;
    }
    let (Ok(cpu), Ok(gpu)) = (
        footprint(&m, true, PAGE_CONTEXT),
        footprint(&m, false, PAGE_CONTEXT),
    ) else {
        return;
    };
    let mib = |b: u64| b.div_ceil(1 << 20);
    eprintln!(
        "index-builder: in a web page the bundle needs about {} MiB on the CPU path ({} MiB of shards, {} MiB of weights, {} MiB of index, {} MiB of model state), {} MiB beside WebGPU; a page holds at most {} MiB{}",
        mib(cpu.total()),
        mib(cpu.files),
        mib(cpu.weights),
        mib(cpu.index),
        mib(cpu.state),
        mib(gpu.total()),
        mib(PAGE_HEAP_LIMIT),
        if cpu.total() > PAGE_HEAP_LIMIT {
            " (too large for the page's CPU path)"
        } else {
            ""
        }
    );
}
