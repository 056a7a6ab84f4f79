//! `lorekeeper eval-retrieval`: retrieval quality on a question set (recall@1/5/10 and MRR for
//! dense / BM25 / graph / fused rankings) and query latency; `--fit` searches the fusion weights
//! (`FIT_GRID`) for the best recall@10 + MRR on the set.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::format::bundle::IndexBundle;
use lorekeeper_engine::retrieval::eval::is_relevant;
use lorekeeper_engine::retrieval::{
    evaluate, parse_questions, FusionConfig, FusionMethod, Metrics, Question, Sources, WordVectors,
};
use lorekeeper_engine::Backend;

use crate::common::{on_backend, open_index, override_fusion, BackendArg};

/// Options of `lorekeeper eval-retrieval`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder (with an index part)
    #[arg(long)]
    bundle: PathBuf,
    /// JSONL of {question, gold:[passage substring…]} (questions without gold are skipped)
    #[arg(long)]
    questions: PathBuf,
    /// Where the query embedder runs
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Fusion settings to search with instead of the bundle's (a JSON `FusionConfig`; missing
    /// fields take their defaults)
    #[arg(long)]
    fusion: Option<PathBuf>,
    /// Search without query expansion (the index's lexicon left unread), to measure what it
    /// adds
    #[arg(long)]
    no_expansion: bool,
    /// Search without the index's wide passages, to measure what they add
    #[arg(long)]
    no_wide: bool,
    /// Also evaluate every fusion weighting of the fitting grid and print the best (with
    /// `--json`, all of them)
    #[arg(long)]
    fit: bool,
    /// Also write, as JSON, each question's dense and BM25 rankings (first 100, with their
    /// scores, no neighbor expansion), the chunks that hold its gold, and every chunk's text:
    /// what fusion, a rerank or another tokenizer can be studied on outside the engine
    #[arg(long)]
    rankings: Option<PathBuf>,
}

/// The weightings `--fit` evaluates: every combination of these (for convex fusion, which
/// reads no `k`, the first `k` only).
struct FitGrid {
    dense: [f32; 6],
    sparse: [f32; 6],
    graph: [f32; 4],
    rrf_k: [f32; 4],
    /// Neighbor expansion off or on (chunks either side of a top hit).
    neighbors: [usize; 2],
    methods: [FusionMethod; 2],
}

const FIT_GRID: FitGrid = FitGrid {
    dense: [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
    sparse: [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
    graph: [0.0, 0.1, 0.2, 0.35],
    rrf_k: [5.0, 15.0, 30.0, 60.0],
    neighbors: [0, 2],
    methods: [FusionMethod::Convex, FusionMethod::Rrf],
};

impl FitGrid {
    /// Every weighting of the grid that weighs some source, over `base`'s other settings.
    fn configs(&self, base: &FusionConfig) -> Vec<FusionConfig> {
        let mut out = Vec::new();
        for &method in &self.methods {
            let ks = match method {
                FusionMethod::Rrf => &self.rrf_k[..],
                FusionMethod::Convex => &self.rrf_k[..1],
            };
            for &dense in &self.dense {
                for &sparse in &self.sparse {
                    for &graph in &self.graph {
                        if dense + sparse + graph == 0.0 {
                            continue;
                        }
                        for &rrf_k in ks {
                            for &neighbors in &self.neighbors {
                                out.push(FusionConfig {
                                    dense,
                                    sparse,
                                    graph,
                                    rrf_k,
                                    neighbors,
                                    method,
                                    ..base.clone()
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Depth of the rankings `--rankings` writes.
const RANKINGS_DEPTH: usize = 100;

/// `--rankings`: each question's dense and BM25 rankings with scores, its gold chunks, and the
/// chunks' texts, as one JSON object `{qs: [{q, rel, dense, sparse}…], chunks: [text…]}`.
fn write_rankings(
    ix: &mut IndexBundle,
    qs: &[Question],
    vecs: Option<&[Vec<f32>]>,
    words: &[WordVectors],
    path: &std::path::Path,
) -> Result<()> {
    let cfg = ix.story.config().clone();
    let fusion = FusionConfig {
        neighbors: 0,
        candidates: RANKINGS_DEPTH,
        ..cfg.fusion.clone()
    };
    ix.story.set_search_config(fusion, cfg.graph.clone());
    let mut out = Vec::with_capacity(qs.len());
    for (i, q) in qs.iter().enumerate() {
        let v = vecs.map(|v| v[i].as_slice());
        let w = words.get(i).map_or(&[][..], Vec::as_slice);
        let dense = ix
            .story
            .search(&q.question, v, RANKINGS_DEPTH, Sources::DENSE)?;
        let sparse =
            ix.story
                .search_expanded(&q.question, v, w, RANKINGS_DEPTH, Sources::SPARSE)?;
        let rel: Vec<u32> = (0..ix.story.chunks().len() as u32)
            .filter(|&c| is_relevant(&ix.story, c, &q.gold))
            .collect();
        out.push(serde_json::json!({
            "q": q.question, "rel": rel,
            "dense": dense.iter().map(|h| (h.id, h.dense_score)).collect::<Vec<_>>(),
            "sparse": sparse.iter().map(|h| (h.id, h.sparse_score)).collect::<Vec<_>>(),
        }));
    }
    let texts: Vec<&str> = ix.story.chunks().iter().map(|c| c.text.as_str()).collect();
    let json = serde_json::json!({"qs": out, "chunks": texts});
    std::fs::write(path, serde_json::to_string(&json)?)
        .with_context(|| format!("writing {}", path.display()))?;
    ix.story.set_search_config(cfg.fusion, cfg.graph);
    Ok(())
}

/// `lorekeeper eval-retrieval`.
pub fn run(args: Args) -> Result<()> {
    on_backend!(args.backend, |b| eval_retrieval_on(b, &args))
}

fn eval_retrieval_on<B: Backend>(b: &B, a: &Args) -> Result<()> {
    let questions = a.questions.as_path();
    let mut ix = open_index(&a.bundle)?;
    if let Some(path) = &a.fusion {
        override_fusion(&mut ix.story, path)?;
    }
    if a.no_wide {
        ix.story.set_wide(None)?;
    }
    let bytes =
        std::fs::read(questions).with_context(|| format!("reading {}", questions.display()))?;
    let all = parse_questions(&questions.display().to_string(), &bytes)?;
    let qs: Vec<_> = all.into_iter().filter(|q| !q.gold.is_empty()).collect();
    if qs.is_empty() {
        bail!("{}: no question with gold passages", questions.display());
    }
    let emb = Embedder::from_index(&ix, b)?;
    let mut embed_ms = Vec::new();
    let mut words = Vec::new();
    let vecs = match &emb {
        Some(e) => {
            let mut v = Vec::with_capacity(qs.len());
            for q in &qs {
                let t = std::time::Instant::now();
                let w = if a.no_expansion {
                    Vec::new()
                } else {
                    ix.story.expansion_words(&q.question)
                };
                let (qv, wv) = pollster::block_on(e.embed_query_words(b, &q.question, &w))?;
                v.push(qv);
                words.push(wv);
                embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            Some(v)
        }
        None => None,
    };
    if let Some(path) = &a.rankings {
        write_rankings(&mut ix, &qs, vecs.as_deref(), &words, path)?;
    }
    let mut rows = Vec::new();
    let dense_bm25 = Sources {
        graph: false,
        ..Sources::ALL
    };
    let configs: [(&str, Sources); 5] = [
        ("dense", Sources::DENSE),
        ("bm25", Sources::SPARSE),
        ("graph", Sources::GRAPH),
        ("dense + bm25", dense_bm25),
        ("fused (the index's weights)", Sources::ALL),
    ];
    for (name, src) in configs {
        // Without vectors the dense rankings are empty: skip the rows that need them.
        if src.dense && vecs.is_none() && (!src.graph || !src.sparse) {
            continue;
        }
        let r = evaluate(&ix.story, &qs, vecs.as_deref(), &words, src)?;
        rows.push((name.to_string(), r.metrics));
    }
    // The same fusion without neighbor expansion (neighbors take ranks in the lists above).
    let cfg = ix.story.config().clone();
    let mut no_nb = cfg.fusion.clone();
    no_nb.neighbors = 0;
    ix.story.set_search_config(no_nb, cfg.graph.clone());
    let r = evaluate(&ix.story, &qs, vecs.as_deref(), &words, Sources::ALL)?;
    rows.push(("fused, no neighbor expansion".into(), r.metrics));
    let mut fitted: Vec<(FusionConfig, Metrics)> = Vec::new();
    if a.fit {
        for f in FIT_GRID.configs(&cfg.fusion) {
            ix.story.set_search_config(f.clone(), cfg.graph.clone());
            let r = evaluate(&ix.story, &qs, vecs.as_deref(), &words, Sources::ALL)?;
            fitted.push((f, r.metrics));
        }
        let key = |m: &Metrics| m.recall_at_10 + m.mrr;
        fitted.sort_by(|a, b| key(&b.1).total_cmp(&key(&a.1)));
    }
    ix.story.set_search_config(cfg.fusion, cfg.graph);
    // Search latency of the fused ranking (query already embedded).
    let mut search_ms = Vec::new();
    for (i, q) in qs.iter().enumerate() {
        let v = vecs.as_ref().map(|v| v[i].as_slice());
        let w = words.get(i).map_or(&[][..], Vec::as_slice);
        let t = std::time::Instant::now();
        ix.story
            .search_expanded(&q.question, v, w, 10, Sources::ALL)?;
        search_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let pct = |v: &mut Vec<f64>, p: f64| -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    let lat = serde_json::json!({
        "embed_ms_p50": pct(&mut embed_ms, 0.5), "embed_ms_p99": pct(&mut embed_ms, 0.99),
        "search_ms_p50": pct(&mut search_ms, 0.5), "search_ms_p99": pct(&mut search_ms, 0.99),
    });
    if a.json {
        let out = serde_json::json!({
            "questions": qs.len(),
            "chunks": ix.part.chunks,
            "results": rows.iter().map(|(n, m)| serde_json::json!({"sources": n, "recall_at_1": m.recall_at_1, "recall_at_5": m.recall_at_5, "recall_at_10": m.recall_at_10, "mrr": m.mrr})).collect::<Vec<_>>(),
            "latency": lat,
            "fit": fitted.iter().map(|(f, m)| serde_json::json!({"fusion": f, "recall_at_1": m.recall_at_1, "recall_at_5": m.recall_at_5, "recall_at_10": m.recall_at_10, "mrr": m.mrr})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} questions with gold passages, {} chunks\n",
            qs.len(),
            ix.part.chunks
        );
        println!("| sources | recall@1 | recall@5 | recall@10 | MRR |");
        println!("|---|---|---|---|---|");
        for (n, m) in &rows {
            println!(
                "| {n} | {:.3} | {:.3} | {:.3} | {:.3} |",
                m.recall_at_1, m.recall_at_5, m.recall_at_10, m.mrr
            );
        }
        println!(
            "\nquery embedding p50 {:.1} ms / p99 {:.1} ms; fused search p50 {:.2} ms / p99 {:.2} ms",
            lat["embed_ms_p50"].as_f64().unwrap_or(f64::NAN),
            lat["embed_ms_p99"].as_f64().unwrap_or(f64::NAN),
            lat["search_ms_p50"].as_f64().unwrap_or(f64::NAN),
            lat["search_ms_p99"].as_f64().unwrap_or(f64::NAN)
        );
        if !fitted.is_empty() {
            println!(
                "\nbest fusion weightings of {} (recall@10 + MRR):",
                fitted.len()
            );
            println!(
                "| method | dense | bm25 | graph | rrf k | neighbors | recall@1 | recall@10 | MRR |"
            );
            println!("|---|---|---|---|---|---|---|---|---|");
            for (f, m) in fitted.iter().take(5) {
                println!(
                    "| {:?} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
                    f.method,
                    f.dense,
                    f.sparse,
                    f.graph,
                    f.rrf_k,
                    f.neighbors,
                    m.recall_at_1,
                    m.recall_at_10,
                    m.mrr
                );
            }
        }
    }
    Ok(())
}
