//! `lorekeeper ask`: a grounded answer over a bundle (model + index): evidence, quoted facts,
//! or an abstention. The session options and the [`Session`] are shared with `lorekeeper eval`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use lorekeeper_engine::answer::session::{AnswerStream, Session as EngineSession};
use lorekeeper_engine::answer::{Answer, AskConfig};
use lorekeeper_engine::Backend;

use crate::common::{on_backend, override_fusion, BackendArg};

/// Options shared by `ask` and `eval`.
#[derive(clap::Args, Clone)]
pub struct SessionArgs {
    /// Bundle folder with a model part and an index part
    #[arg(long)]
    pub bundle: PathBuf,
    /// Answer protocol [default: the config's, else auto]
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
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
    /// Fusion settings to search with instead of the index's (a JSON `FusionConfig`; missing
    /// fields take their defaults)
    #[arg(long)]
    pub fusion: Option<PathBuf>,
}

/// Answer protocols.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// The best measured for the model's size: extractive under 1B parameters, else grounded
    Auto,
    /// ASA's grounded_action_v1 JSON with verbatim quotes
    Grounded,
    /// One <answer> with every claim in <snippet id=E1,E2>…</snippet>
    Refiner,
    /// Thought / Action (search, read) / Observation / Final Answer
    React,
    /// The reader's best span as the answer, checked, without running the model
    Extractive,
}

/// Everything a question needs, loaded once (the engine's session, shared with the page).
pub struct Session<B: Backend> {
    inner: EngineSession<B>,
    /// Effective settings.
    pub cfg: AskConfig,
}

impl<B: Backend> Session<B> {
    /// Loads the bundle's model, index and embedder, and the grammar vocabulary.
    pub fn open(b: &B, a: &SessionArgs) -> Result<Self> {
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
        if let Some(m) = a.mode {
            cfg.mode = match m {
                Mode::Auto => lorekeeper_engine::answer::Mode::Auto,
                Mode::Grounded => lorekeeper_engine::answer::Mode::Grounded,
                Mode::Refiner => lorekeeper_engine::answer::Mode::Refiner,
                Mode::React => lorekeeper_engine::answer::Mode::React,
                Mode::Extractive => lorekeeper_engine::answer::Mode::Extractive,
            };
        }
        if let Some(n) = a.max_tokens {
            cfg.max_tokens = n;
        }
        if let Some(t) = a.temperature {
            cfg.sampling.temperature = t;
        }
        cfg.sampling.seed = a.seed;
        if cfg.max_tokens == 0 {
            bail!("--max-tokens must be at least 1");
        }
        let mut inner = EngineSession::open_dir(b, &a.bundle, cfg.clone(), a.ctx)
            .with_context(|| format!("opening the bundle {}", a.bundle.display()))?;
        if let Some(path) = &a.fusion {
            override_fusion(&mut inner.index.story, path)?;
        }
        Ok(Session { inner, cfg })
    }

    /// Answers one question; `on_text` streams raw model output.
    pub fn ask(&mut self, b: &B, q: &str, on_text: impl FnMut(&str) -> bool) -> Result<Answer> {
        Ok(pollster::block_on(self.inner.ask(b, q, on_text))?)
    }
}

/// Options of `lorekeeper ask`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    session: SessionArgs,
    /// Where the model runs
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Print the whole outcome as JSON
    #[arg(long)]
    json: bool,
    /// The question
    question: String,
}

/// `lorekeeper ask`.
pub fn run(args: Args) -> Result<()> {
    on_backend!(args.backend, |b| ask_on(b, &args))
}

fn ask_on<B: Backend>(b: &B, a: &Args) -> Result<()> {
    let (question, json) = (a.question.as_str(), a.json);
    let mut s = Session::open(b, &a.session)?;
    let mut stdout = std::io::stdout();
    let mut stream = AnswerStream::default();
    let ans = s.ask(b, question, |piece| {
        if !json {
            let shown = stream.push(piece);
            if !shown.is_empty() {
                let _ = write!(stdout, "{shown}");
                let _ = stdout.flush();
            }
        }
        true
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&ans)?);
        return Ok(());
    }
    if stream.shown() == 0 {
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
        "[{}, {} round(s), {}; retrieval {:.0} ms, prefill {:.1} s, decode {:.1} s, {} masks at {:.3} ms]",
        ans.mode.as_str(),
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
