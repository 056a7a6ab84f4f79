//! `lorekeeper search`: search a bundle's story index (dense + BM25 + entity graph, fused).

use std::path::PathBuf;

use anyhow::{bail, Result};
use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::retrieval::Sources;
use lorekeeper_engine::Backend;

use crate::common::{on_backend, open_index, BackendArg};

/// Options of `lorekeeper search`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder (with an index part)
    #[arg(long)]
    bundle: PathBuf,
    /// The query
    #[arg(long)]
    query: String,
    /// Hits to return
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Where the query embedder runs
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Print JSON: [{id, chapter, text, fusion_score, dense_rank, sparse_rank, graph_rank}…]
    #[arg(long)]
    json: bool,
}

/// `lorekeeper search`.
pub fn run(args: Args) -> Result<()> {
    if args.query.trim().is_empty() {
        bail!("--query is empty");
    }
    if args.k == 0 || args.k > 100 {
        bail!("--k must be in 1..=100");
    }
    on_backend!(args.backend, |b| search_on(b, &args))
}

fn search_on<B: Backend>(b: &B, a: &Args) -> Result<()> {
    let (query, k) = (a.query.as_str(), a.k);
    let ix = open_index(&a.bundle)?;
    let emb = Embedder::from_index(&ix, b)?;
    let t0 = std::time::Instant::now();
    let (qv, words) = match &emb {
        Some(e) => {
            let (qv, words) = pollster::block_on(e.embed_search(b, &ix.story, query))?;
            (Some(qv), words)
        }
        None => (None, Vec::new()),
    };
    let t1 = std::time::Instant::now();
    // Neighbor expansion may add chunks next to the top hits; they compete on their
    // discounted fusion score and the best k are shown.
    let mut hits = ix
        .story
        .search_expanded(query, qv.as_deref(), &words, k, Sources::ALL)?;
    hits.truncate(k);
    let t2 = std::time::Instant::now();
    if a.json {
        let out: Vec<serde_json::Value> = hits
            .iter()
            .map(|h| {
                serde_json::json!({
                    "id": h.id, "chapter": h.chapter, "text": h.text,
                    "fusion_score": h.fusion_score, "dense_rank": h.dense_rank,
                    "sparse_rank": h.sparse_rank, "graph_rank": h.graph_rank,
                    "dense_score": h.dense_score, "sparse_score": h.sparse_score,
                    "graph_score": h.graph_score, "neighbor": h.neighbor,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (i, h) in hits.iter().enumerate() {
            let rank = |r: Option<u32>| r.map(|r| (r + 1).to_string()).unwrap_or("-".into());
            println!(
                "{:>2}. [{}] {} fusion {:.4} (dense {}, bm25 {}, graph {}){}",
                i + 1,
                h.id,
                h.chapter,
                h.fusion_score,
                rank(h.dense_rank),
                rank(h.sparse_rank),
                rank(h.graph_rank),
                if h.neighbor { ", neighbor" } else { "" }
            );
            println!("    {}", h.text.replace('\n', " "));
        }
        eprintln!(
            "[embed {:.1} ms, search {:.2} ms]",
            (t1 - t0).as_secs_f64() * 1e3,
            (t2 - t1).as_secs_f64() * 1e3
        );
    }
    Ok(())
}
