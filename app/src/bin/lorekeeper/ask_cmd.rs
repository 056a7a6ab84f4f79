//! `lorekeeper ask` and `lorekeeper eval`: grounded answers over a bundle (model + index).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lorekeeper_engine::answer::eval::{parse_answer_questions, EvalSummary};
use lorekeeper_engine::answer::grammar::GrammarVocab;
use lorekeeper_engine::answer::{ask, Answer, AskConfig, Retriever};
use lorekeeper_engine::bundle::IndexBundle;
use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::loader;
use lorekeeper_engine::models::llama::{Llama, LoadOptions};
use lorekeeper_engine::tokenizer::Tokenizer;
use lorekeeper_engine::Backend;

/// Options shared by `ask` and `eval`.
#[derive(clap::Args, Clone)]
pub struct AskArgs {
    /// Bundle folder with a model part and an index part
    #[arg(long)]
    pub bundle: PathBuf,
    /// Answer protocol (grounded_action_v1 JSON)
    #[arg(long, value_enum, default_value = "grounded")]
    pub mode: Mode,
    /// Decode freely and repair broken JSON afterwards (ASA's truncation recovery)
    #[arg(long)]
    pub no_grammar: bool,
    /// Runtime config (JSON, AskConfig fields; ASA's defaults otherwise)
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Most generated tokens per round [default: the config's, 1536]
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Sampling temperature [default: the config's, 0.2]
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Sampling seed
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// KV-cache capacity in tokens (the prompt and the answer must fit)
    #[arg(long, default_value_t = 4096)]
    pub ctx: usize,
}

/// Answer protocols.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// ASA's grounded_action_v1 JSON with quotes
    Grounded,
}

/// Everything a question needs, loaded once.
pub struct Session<B: Backend> {
    model: Llama<B>,
    tok: Tokenizer,
    vocab: Option<GrammarVocab>,
    index: IndexBundle,
    embedder: Option<Embedder<B>>,
    /// Effective settings.
    pub cfg: AskConfig,
}

impl<B: Backend> Session<B> {
    /// Loads the bundle's model, index and embedder, and the grammar vocabulary.
    pub fn open(b: &B, a: &AskArgs) -> Result<Self> {
        let mut cfg = match &a.config {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading {}", p.display()))?;
                serde_json::from_str::<AskConfig>(&text)
                    .with_context(|| format!("{}: not an AskConfig", p.display()))?
            }
            None => AskConfig::default(),
        };
        if a.no_grammar {
            cfg.grammar = false;
        }
        if let Some(n) = a.max_tokens {
            cfg.max_tokens = n;
        }
        if let Some(t) = a.temperature {
            cfg.sampling.temperature = t;
        }
        cfg.sampling.seed = a.seed;
        cfg.sampling.validate()?;
        if cfg.max_tokens == 0 {
            bail!("--max-tokens must be at least 1");
        }
        let index = IndexBundle::open_dir(&a.bundle)
            .with_context(|| format!("opening the index of {}", a.bundle.display()))?;
        let opts = LoadOptions {
            format: loader::native_format(&a.bundle)?,
            ctx: a.ctx,
            chunk: 256,
        };
        let (model, tok) = loader::load(b, &a.bundle, opts)
            .with_context(|| format!("loading the model of {}", a.bundle.display()))?;
        let vocab = if cfg.grammar {
            Some(GrammarVocab::new(&tok, model.cfg.vocab_size)?)
        } else {
            None
        };
        let embedder = index.embedder(b)?;
        Ok(Session {
            model,
            tok,
            vocab,
            index,
            embedder,
            cfg,
        })
    }

    /// Answers one question; `on_text` streams raw model output.
    pub fn ask(&mut self, b: &B, q: &str, on_text: impl FnMut(&str) -> bool) -> Result<Answer> {
        let r = Retriever {
            index: &self.index.story,
            embedder: self.embedder.as_ref(),
        };
        Ok(pollster::block_on(ask(
            b,
            &mut self.model,
            &self.tok,
            self.vocab.as_ref(),
            &r,
            q,
            &self.cfg,
            on_text,
        ))?)
    }
}

/// Streams the `final_answer` string out of the JSON as it is written.
#[derive(Default)]
struct AnswerStream {
    raw: String,
    printed: usize,
}

impl AnswerStream {
    fn push(&mut self, piece: &str, out: &mut impl Write) {
        if piece.contains("{\"next_action\"") {
            // A new round starts its object.
            self.raw.clear();
            self.printed = 0;
        }
        self.raw.push_str(piece);
        const KEY: &str = "\"final_answer\":\"";
        let Some(at) = self.raw.find(KEY) else { return };
        let body = &self.raw[at + KEY.len()..];
        let end = body.find('"').unwrap_or(body.len());
        if end > self.printed && body.is_char_boundary(self.printed) && body.is_char_boundary(end) {
            let _ = write!(out, "{}", &body[self.printed..end]);
            let _ = out.flush();
            self.printed = end;
        }
    }
}

/// `lorekeeper ask`.
pub fn ask_on<B: Backend>(b: &B, a: &AskArgs, question: &str, json: bool) -> Result<()> {
    let mut s = Session::open(b, a)?;
    let mut stdout = std::io::stdout();
    let mut stream = AnswerStream::default();
    let ans = s.ask(b, question, |piece| {
        if !json {
            stream.push(piece, &mut stdout);
        }
        true
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&ans)?);
        return Ok(());
    }
    if stream.printed == 0 {
        print!("{}", ans.answer);
    }
    println!();
    if let Some(r) = &ans.abstain_reason {
        println!("(abstained: {r})");
    }
    for f in &ans.facts {
        println!(
            "- {} [{}]",
            f.fact,
            if f.verified {
                "verified"
            } else {
                "NOT verified"
            }
        );
        for r in &f.refs {
            let ev = ans.evidence.iter().find(|e| e.id == r.evidence_id);
            println!(
                "    [{}] \"{}\"{}",
                r.evidence_id,
                r.quote,
                ev.map(|e| format!(" ({})", e.chapter)).unwrap_or_default()
            );
        }
    }
    for e in &ans.snippets {
        println!("  [{}] ({}) {}", e.id, e.chapter, e.text);
    }
    eprintln!(
        "[{} round(s), {}; retrieval {:.0} ms, prefill {:.1} s, decode {:.1} s, {} masks at {:.3} ms]",
        ans.rounds.len(),
        ans.action_sequence(),
        ans.timings.retrieval_ms,
        ans.timings.prefill_s,
        ans.timings.decode_s,
        ans.timings.masks,
        ans.timings.mask_ms_mean
    );
    Ok(())
}

/// `lorekeeper eval`.
pub fn eval_on<B: Backend>(
    b: &B,
    a: &AskArgs,
    questions: &Path,
    limit: Option<usize>,
    json: bool,
) -> Result<()> {
    let text = std::fs::read_to_string(questions)
        .with_context(|| format!("reading {}", questions.display()))?;
    let mut qs = parse_answer_questions(&questions.display().to_string(), &text)
        .map_err(anyhow::Error::msg)?;
    if let Some(n) = limit {
        qs.truncate(n);
    }
    let mut s = Session::open(b, a)?;
    let mut sum = EvalSummary::default();
    let mut masks = 0usize;
    for (i, q) in qs.iter().enumerate() {
        let t0 = std::time::Instant::now();
        let r = s.ask(b, &q.question, |_| true);
        let secs = t0.elapsed().as_secs_f64();
        match &r {
            Ok(ans) => {
                masks += ans.timings.masks;
                eprintln!(
                    "[{}/{}] {} {} ({:.1} s): {}",
                    i + 1,
                    qs.len(),
                    q.id,
                    ans.action_sequence(),
                    secs,
                    ans.answer.chars().take(100).collect::<String>()
                );
            }
            Err(e) => eprintln!("[{}/{}] {} error: {e:#}", i + 1, qs.len(), q.id),
        }
        sum.add(q, r.as_ref().map_err(|e| format!("{e:#}")), secs);
    }
    sum.finish(masks);
    if json {
        println!("{}", serde_json::to_string_pretty(&sum)?);
    } else {
        println!(
            "{} ({}, {})\n",
            questions.display(),
            if s.cfg.grammar {
                "grammar on"
            } else {
                "grammar off"
            },
            a.bundle.display()
        );
        print!("{}", sum.markdown());
    }
    Ok(())
}
