//! `lorekeeper`: the offline desktop build. The same engine as the web app: by default
//! (`--backend auto`) the CPU path (SIMD, `--threads N`), unless a hardware GPU measures faster;
//! `--backend gpu|cpu` forces one.
//!
//! ```text
//! lorekeeper generate --model PATH --prompt TEXT [--chat] [--max-tokens N] [--temperature T]
//!                     [--top-p P] [--seed S] [--backend auto|gpu|cpu] [--json]
//! lorekeeper bench    --model GGUF [--prompt-tokens 512] [--gen-tokens 128] [--llama-cpp PYTHON]
//! lorekeeper bench-arch [--contexts 1024,8192] [--gen-tokens 3] [--only qwen3.5] [--backend auto|cpu|gpu]
//! lorekeeper perplexity --model PATH --text FILE [--tokens 4096] [--window 512]
//! lorekeeper search   --bundle DIR --query TEXT [--k 10] [--json]
//! lorekeeper eval-retrieval --bundle DIR --questions FILE.jsonl [--json]
//! lorekeeper ask      --bundle DIR [--mode grounded] [--no-grammar] [--json] "question"
//! lorekeeper eval     --bundle DIR --questions FILE.jsonl [--no-grammar] [--limit N] [--json]
//! ```
//! Every command: [--threads N] (CPU threads, default the physical cores).
//! PATH is a GGUF file, a Hugging Face model folder or a bundle folder.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
#[path = "lorekeeper/ask_cmd.rs"]
mod ask_cmd;
#[cfg(not(target_arch = "wasm32"))]
#[path = "lorekeeper/bench_arch.rs"]
mod bench_arch;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match native::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lorekeeper: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::io::Write;
    use std::path::{Path, PathBuf};

    use anyhow::{bail, Context, Result};
    use clap::{Parser, Subcommand, ValueEnum};
    use lorekeeper_engine::bundle::IndexBundle;
    use lorekeeper_engine::choose;
    use lorekeeper_engine::cpu::pool as cpu_pool;
    use lorekeeper_engine::generate::{
        bench_decode, bench_prompt, generate, GenerateOptions, SamplingParams,
    };
    use lorekeeper_engine::loader;
    use lorekeeper_engine::models::Decoder;
    use lorekeeper_engine::models::WeightFormat;
    use lorekeeper_engine::retrieval::{evaluate, parse_questions, Sources};
    use lorekeeper_engine::tokenizer::{Role, Tokenizer};
    use lorekeeper_engine::{Backend, CpuBackend, GpuContext, Requirements};

    #[derive(Parser)]
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

    #[derive(Clone, Copy, ValueEnum)]
    enum BackendArg {
        /// The CPU path unless a hardware GPU measures faster (software adapters never win)
        Auto,
        /// The GPU adapter wgpu picks (WGSL kernels)
        Gpu,
        /// The CPU path (SIMD integer dot products, threads)
        Cpu,
    }

    #[derive(Clone, Copy, ValueEnum)]
    enum WeightsArg {
        /// f32 (exact dequantization of the source)
        F32,
        /// LQ4 4-bit, quantized at load
        Q4,
    }

    #[derive(clap::Args)]
    struct ModelArgs {
        /// GGUF file, Hugging Face model folder or Lorekeeper bundle folder
        #[arg(long)]
        model: PathBuf,
        /// Where to run
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// How to store matmul weights on the device [default: q4 for a q4 bundle or a 4-bit GGUF, else f32]
        #[arg(long, value_enum)]
        weights: Option<WeightsArg>,
        /// KV-cache capacity in tokens
        #[arg(long, default_value_t = 4096)]
        ctx: usize,
    }

    #[derive(Subcommand)]
    enum Cmd {
        /// Generate a continuation (or a chat reply with --chat)
        Generate {
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
            /// Print one JSON object instead of streaming text
            #[arg(long)]
            json: bool,
        },
        /// Perplexity on a text: windows of --window tokens, every token after a window's first
        /// scored from its prefix (the rule scripts/perplexity_llamacpp.py applies to GGUFs)
        Perplexity {
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
        },
        /// Search a bundle's story index: dense + BM25 + entity graph, fused
        Search {
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
        },
        /// Retrieval quality on a question set: recall@1/5/10 and MRR, dense / BM25 / graph / fused
        EvalRetrieval {
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
        },
        /// Decode speed and state memory: a Qwen3.5-4B-shaped hybrid against a Qwen3-4B-shaped
        /// transformer (random 4-bit weights), same backend, same run
        BenchArch {
            /// Context lengths to decode at (comma-separated)
            #[arg(long, default_value = "1024,8192")]
            contexts: String,
            /// Timed decode steps per context
            #[arg(long, default_value_t = 3)]
            gen_tokens: usize,
            /// Only the model whose name contains this (qwen3-4b or qwen3.5)
            #[arg(long)]
            only: Option<String>,
            /// Where the models run
            #[arg(long, value_enum, default_value = "auto")]
            backend: BackendArg,
            /// Print JSON rows
            #[arg(long)]
            json: bool,
        },
        /// Answer a question from the story: evidence, quoted facts, or an abstention
        Ask {
            #[command(flatten)]
            args: crate::ask_cmd::AskArgs,
            /// Where the model runs
            #[arg(long, value_enum, default_value = "auto")]
            backend: BackendArg,
            /// Print the whole outcome as JSON
            #[arg(long)]
            json: bool,
            /// The question
            question: String,
        },
        /// Run a question set through `ask`: an eval50-style summary
        Eval {
            #[command(flatten)]
            args: crate::ask_cmd::AskArgs,
            /// JSONL of {id, question, answers:[…], unanswerable}
            #[arg(long)]
            questions: PathBuf,
            /// Only the first N questions
            #[arg(long)]
            limit: Option<usize>,
            /// Where the model runs
            #[arg(long, value_enum, default_value = "auto")]
            backend: BackendArg,
            /// Print JSON (summary + per question)
            #[arg(long)]
            json: bool,
        },
        /// Prefill and decode speed, against llama.cpp (llama-cpp-python) in the same run
        Bench {
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
        },
    }

    /// Runs `$body` with `$b` bound to the chosen backend (both implement the same op set).
    macro_rules! on_backend {
        ($which:expr, |$b:ident| $body:expr) => {
            match $which {
                BackendArg::Cpu => {
                    let $b = &CpuBackend;
                    $body
                }
                BackendArg::Gpu => {
                    let ctx = GpuContext::new_blocking(Requirements::default())?;
                    eprintln!("backend: gpu, {}", ctx.adapter_description());
                    let $b = &ctx;
                    $body
                }
                BackendArg::Auto => {
                    let ctx = GpuContext::new_blocking(Requirements::default()).ok();
                    match pollster::block_on(choose::decide(ctx.as_ref(), 2048, 2048)) {
                        choose::Decision::Gpu(why) => {
                            eprintln!("backend: gpu (auto), {why}");
                            let $b = ctx.as_ref().context("the chosen GPU vanished")?;
                            $body
                        }
                        choose::Decision::Cpu(why) => {
                            drop(ctx);
                            eprintln!("backend: cpu (auto), {why}");
                            let $b = &CpuBackend;
                            $body
                        }
                    }
                }
            }
        };
    }

    pub fn run() -> Result<()> {
        let cli = Cli::parse();
        let threads = match cpu_pool::set_threads(cli.threads.map_or(0, usize::from)) {
            Ok(n) | Err(n) => n,
        };
        match cli.cmd {
            Cmd::Generate {
                model,
                prompt,
                chat,
                max_tokens,
                temperature,
                top_p,
                top_k,
                repetition_penalty,
                seed,
                json,
            } => {
                if prompt.trim().is_empty() {
                    bail!("--prompt is empty");
                }
                let opts = GenerateOptions {
                    max_tokens,
                    sampling: SamplingParams {
                        temperature,
                        top_k,
                        top_p,
                        repetition_penalty,
                        seed,
                    },
                    stop: Vec::new(),
                };
                opts.sampling.validate()?;
                on_backend!(model.backend, |b| generate_on(
                    b, &model, &prompt, chat, &opts, json
                ))
            }
            Cmd::Perplexity {
                model,
                text,
                tokens,
                window,
                dump_tokens,
                json,
            } => {
                if window < 2 || tokens < 2 {
                    bail!("--window and --tokens must be at least 2");
                }
                on_backend!(model.backend, |b| perplexity_on(
                    b,
                    &model,
                    &text,
                    tokens,
                    window,
                    dump_tokens.as_deref(),
                    json
                ))
            }
            Cmd::Search {
                bundle,
                query,
                k,
                backend,
                json,
            } => {
                if query.trim().is_empty() {
                    bail!("--query is empty");
                }
                if k == 0 || k > 100 {
                    bail!("--k must be in 1..=100");
                }
                on_backend!(backend, |b| search_on(b, &bundle, &query, k, json))
            }
            Cmd::EvalRetrieval {
                bundle,
                questions,
                backend,
                json,
            } => on_backend!(backend, |b| eval_retrieval_on(b, &bundle, &questions, json)),
            Cmd::BenchArch {
                contexts,
                gen_tokens,
                only,
                backend,
                json,
            } => {
                let contexts = crate::bench_arch::parse_contexts(&contexts)?;
                on_backend!(backend, |b| crate::bench_arch::bench_arch_on(
                    b,
                    &contexts,
                    gen_tokens,
                    only.as_deref(),
                    json
                ))
            }
            Cmd::Ask {
                args,
                backend,
                json,
                question,
            } => on_backend!(backend, |b| crate::ask_cmd::ask_on(
                b, &args, &question, json
            )),
            Cmd::Eval {
                args,
                questions,
                limit,
                backend,
                json,
            } => on_backend!(backend, |b| crate::ask_cmd::eval_on(
                b, &args, &questions, limit, json
            )),
            Cmd::Bench {
                model,
                prompt_tokens,
                gen_tokens,
                llama_cpp,
                json,
            } => on_backend!(model.backend, |b| bench_on(
                b,
                &model,
                prompt_tokens,
                gen_tokens,
                llama_cpp.as_deref(),
                threads,
                json
            )),
        }
    }

    fn load<B: Backend>(b: &B, m: &ModelArgs, chunk: usize) -> Result<(Decoder<B>, Tokenizer)> {
        let format = m.weights.map(|w| match w {
            WeightsArg::F32 => WeightFormat::F32,
            WeightsArg::Q4 => WeightFormat::Q4,
        });
        loader::load(b, &m.model, format, m.ctx, chunk)
            .with_context(|| format!("loading {}", m.model.display()))
    }

    fn generate_on<B: Backend>(
        b: &B,
        m: &ModelArgs,
        prompt: &str,
        chat: bool,
        o: &GenerateOptions,
        json: bool,
    ) -> Result<()> {
        let (mut model, tok) = load(b, m, 64)?;
        let text = if chat {
            tok.chat.render(&[(Role::User, prompt.to_string())])
        } else {
            prompt.to_string()
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

    /// The benchmark prompt: public-domain text tokenized and cut to `n` tokens.
    fn bench_on<B: Backend>(
        b: &B,
        m: &ModelArgs,
        n: usize,
        gen: usize,
        py: Option<&Path>,
        threads: usize,
        json: bool,
    ) -> Result<()> {
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
        let peer = match py {
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
        if json {
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

    fn perplexity_on<B: Backend>(
        b: &B,
        m: &ModelArgs,
        text: &Path,
        n_tokens: usize,
        window: usize,
        dump: Option<&Path>,
        json: bool,
    ) -> Result<()> {
        const CHUNK: usize = 64;
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
        ids.truncate(n_tokens);
        if ids.len() < 2 {
            bail!("{}: fewer than 2 tokens", text.display());
        }
        if let Some(p) = dump {
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
        if json {
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

    fn open_index(bundle: &Path) -> Result<IndexBundle> {
        IndexBundle::open_dir(bundle).with_context(|| format!("opening {}", bundle.display()))
    }

    fn search_on<B: Backend>(
        b: &B,
        bundle: &Path,
        query: &str,
        k: usize,
        json: bool,
    ) -> Result<()> {
        let ix = open_index(bundle)?;
        let emb = ix.embedder(b)?;
        let t0 = std::time::Instant::now();
        let qv = match &emb {
            Some(e) => Some(pollster::block_on(e.embed_query(b, query))?),
            None => None,
        };
        let t1 = std::time::Instant::now();
        // Neighbor expansion may add chunks next to the top hits; they compete on their
        // discounted fusion score and the best k are shown.
        let mut hits = ix.story.search(query, qv.as_deref(), k, Sources::ALL)?;
        hits.truncate(k);
        let t2 = std::time::Instant::now();
        if json {
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

    fn eval_retrieval_on<B: Backend>(
        b: &B,
        bundle: &Path,
        questions: &Path,
        json: bool,
    ) -> Result<()> {
        let mut ix = open_index(bundle)?;
        let bytes =
            std::fs::read(questions).with_context(|| format!("reading {}", questions.display()))?;
        let all = parse_questions(&questions.display().to_string(), &bytes)?;
        let qs: Vec<_> = all.into_iter().filter(|q| !q.gold.is_empty()).collect();
        if qs.is_empty() {
            bail!("{}: no question with gold passages", questions.display());
        }
        let emb = ix.embedder(b)?;
        let mut embed_ms = Vec::new();
        let vecs = match &emb {
            Some(e) => {
                let mut v = Vec::with_capacity(qs.len());
                for q in &qs {
                    let t = std::time::Instant::now();
                    v.push(pollster::block_on(e.embed_query(b, &q.question))?);
                    embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                Some(v)
            }
            None => None,
        };
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
            ("fused (dense + bm25 + graph)", Sources::ALL),
        ];
        for (name, src) in configs {
            // Without vectors the dense rankings are empty: skip the rows that need them.
            if src.dense && vecs.is_none() && (!src.graph || !src.sparse) {
                continue;
            }
            let r = evaluate(&ix.story, &qs, vecs.as_deref(), src)?;
            rows.push((name.to_string(), r.metrics));
        }
        // The same fusion without neighbor expansion (neighbors take ranks in the lists above).
        let cfg = ix.story.config().clone();
        let mut no_nb = cfg.fusion.clone();
        no_nb.neighbors = 0;
        ix.story.set_search_config(no_nb, cfg.graph.clone());
        let r = evaluate(&ix.story, &qs, vecs.as_deref(), Sources::ALL)?;
        rows.push(("fused, no neighbor expansion".into(), r.metrics));
        ix.story.set_search_config(cfg.fusion, cfg.graph);
        // Search latency of the fused ranking (query already embedded).
        let mut search_ms = Vec::new();
        for (i, q) in qs.iter().enumerate() {
            let v = vecs.as_ref().map(|v| v[i].as_slice());
            let t = std::time::Instant::now();
            ix.story.search(&q.question, v, 10, Sources::ALL)?;
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
        if json {
            let out = serde_json::json!({
                "questions": qs.len(),
                "chunks": ix.part.chunks,
                "results": rows.iter().map(|(n, m)| serde_json::json!({"sources": n, "recall_at_1": m.recall_at_1, "recall_at_5": m.recall_at_5, "recall_at_10": m.recall_at_10, "mrr": m.mrr})).collect::<Vec<_>>(),
                "latency": lat,
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
}
