//! `lorekeeper eval`: a question set run through `ask`, summarized eval50-style.

use std::path::PathBuf;

use anyhow::{Context, Result};
use lorekeeper_engine::answer::eval::{parse_answer_questions, EvalSummary};
use lorekeeper_engine::Backend;

use crate::ask::{Session, SessionArgs};
use crate::common::{on_backend, resident_mib, BackendArg};

/// Options of `lorekeeper eval`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    session: SessionArgs,
    /// JSONL of {id, question, answers:[…], unanswerable}
    #[arg(long)]
    questions: PathBuf,
    /// Only the first N questions
    #[arg(long)]
    limit: Option<usize>,
    /// Run the set N times in this one process (a soak: 13 × the 81 Alice questions is 1,053
    /// questions); the summary's `resident_mib` holds the memory after the first and the last
    /// question, `resident_mib_per_pass` after each pass
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Where the model runs
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Print JSON (summary + per question)
    #[arg(long)]
    json: bool,
}

/// `lorekeeper eval`.
pub fn run(args: Args) -> Result<()> {
    on_backend!(args.backend, |b| eval_on(b, &args))
}

fn eval_on<B: Backend>(b: &B, a: &Args) -> Result<()> {
    let (questions, limit, json) = (a.questions.as_path(), a.limit, a.json);
    let text = std::fs::read_to_string(questions)
        .with_context(|| format!("reading {}", questions.display()))?;
    let mut qs = parse_answer_questions(&questions.display().to_string(), &text)
        .map_err(anyhow::Error::msg)?;
    if let Some(n) = limit {
        qs.truncate(n);
    }
    let mut s = Session::open(b, &a.session)?;
    let mut sum = EvalSummary::default();
    let mut masks = 0usize;
    let total = qs.len() * a.repeat as usize;
    let mut first_mib = None;
    let runs = (0..a.repeat as usize).flat_map(|_| qs.iter());
    for (i, q) in runs.enumerate() {
        let t0 = std::time::Instant::now();
        let r = s.ask(b, &q.question, |_| true);
        let secs = t0.elapsed().as_secs_f64();
        match &r {
            Ok(ans) => {
                masks += ans.timings.masks;
                eprintln!(
                    "[{}/{}] {} {} ({:.1} s): {}",
                    i + 1,
                    total,
                    q.id,
                    ans.action_sequence(),
                    secs,
                    ans.answer.chars().take(100).collect::<String>()
                );
            }
            Err(e) => eprintln!("[{}/{}] {} error: {e:#}", i + 1, total, q.id),
        }
        sum.add(q, r.as_ref().map_err(|e| format!("{e:#}")), secs);
        if i == 0 {
            first_mib = resident_mib();
        }
        if (i + 1) % qs.len() == 0 {
            sum.resident_mib_per_pass.extend(resident_mib());
        }
    }
    sum.finish(masks);
    sum.resident_mib = first_mib.zip(resident_mib()).map(|(f, l)| [f, l]);
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
            a.session.bundle.display()
        );
        print!("{}", sum.markdown());
    }
    Ok(())
}
