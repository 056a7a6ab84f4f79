//! What several commands share: the model and backend options, loading a model, opening a
//! bundle's index, the backend choice ([`on_backend!`]) and the CPU thread count.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;
use lorekeeper_engine::cpu::pool as cpu_pool;
use lorekeeper_engine::format::bundle::IndexBundle;
use lorekeeper_engine::loader;
use lorekeeper_engine::models::{Decoder, WeightFormat};
use lorekeeper_engine::retrieval::{FusionConfig, StoryIndex};
use lorekeeper_engine::tokenizer::Tokenizer;
use lorekeeper_engine::Backend;

/// `--backend`: where a command runs.
#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// The CPU path unless a hardware GPU measures faster (software adapters never win)
    Auto,
    /// The GPU adapter wgpu picks (WGSL kernels)
    Gpu,
    /// The CPU path (SIMD integer dot products, threads)
    Cpu,
}

/// `--weights`: how matmul weights are stored on the device.
#[derive(Clone, Copy, ValueEnum)]
pub enum WeightsArg {
    /// f32 (exact dequantization of the source)
    F32,
    /// quantized blocks: the source's own (LQ4, lq4h, q8_0), else LQ4 quantized at load
    Q4,
}

/// The options of the commands that load a model (`generate`, `perplexity`, `bench`).
#[derive(clap::Args)]
pub struct ModelArgs {
    /// GGUF file, Hugging Face model folder or Lorekeeper bundle folder
    #[arg(long)]
    pub model: PathBuf,
    /// Where to run
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// How to store matmul weights on the device [default: q4 for a q4 or q8 bundle or a GGUF of quantized blocks, else f32]
    #[arg(long, value_enum)]
    pub weights: Option<WeightsArg>,
    /// KV-cache capacity in tokens
    #[arg(long, default_value_t = 4096)]
    pub ctx: usize,
}

/// Runs `$body` with `$b` bound to the chosen backend (both implement the same op set).
macro_rules! on_backend {
    ($which:expr, |$b:ident| $body:expr) => {
        match $which {
            $crate::common::BackendArg::Cpu => {
                let $b = &lorekeeper_engine::CpuBackend;
                $body
            }
            $crate::common::BackendArg::Gpu => {
                let ctx = $crate::common::gpu_context()?;
                eprintln!("backend: gpu, {}", ctx.adapter_description());
                let $b = &ctx;
                $body
            }
            $crate::common::BackendArg::Auto => {
                use lorekeeper_engine::choose;
                let ctx = lorekeeper_engine::GpuContext::new_blocking(Default::default()).ok();
                match pollster::block_on(choose::decide(ctx.as_ref(), 2048, 2048)) {
                    choose::Decision::Gpu(why) => {
                        eprintln!("backend: gpu (auto), {why}");
                        let ctx = anyhow::Context::context(ctx, "the chosen GPU vanished")?;
                        let ctx = $crate::common::checked(ctx)?;
                        let $b = &ctx;
                        $body
                    }
                    choose::Decision::Cpu(why) => {
                        drop(ctx);
                        eprintln!("backend: cpu (auto), {why}");
                        let $b = &lorekeeper_engine::CpuBackend;
                        $body
                    }
                }
            }
        }
    };
}
pub(crate) use on_backend;

/// The GPU context with the default requirements, [`checked`].
pub fn gpu_context() -> anyhow::Result<lorekeeper_engine::GpuContext> {
    checked(lorekeeper_engine::GpuContext::new_blocking(
        Default::default(),
    )?)
}

/// `ctx` with its fused kernels checked against the plain ops, once it is the backend that
/// runs (a warning on stderr where they differ and are turned off).
pub fn checked(
    mut ctx: lorekeeper_engine::GpuContext,
) -> anyhow::Result<lorekeeper_engine::GpuContext> {
    if let Some(why) = pollster::block_on(ctx.verify_fused())? {
        eprintln!("warning: {why}");
    }
    Ok(ctx)
}

/// Sets the CPU pool's thread count (`--threads`; `None` = the physical cores) and returns the
/// count in effect.
pub fn set_threads(requested: Option<u16>) -> usize {
    match cpu_pool::set_threads(requested.map_or(0, usize::from)) {
        Ok(n) | Err(n) => n,
    }
}

/// Loads the model and tokenizer `m` names, prefilling at most `chunk` tokens per pass.
pub fn load<B: Backend>(b: &B, m: &ModelArgs, chunk: usize) -> Result<(Decoder<B>, Tokenizer)> {
    let format = m.weights.map(|w| match w {
        WeightsArg::F32 => WeightFormat::F32,
        WeightsArg::Q4 => WeightFormat::Q4,
    });
    loader::load(b, &m.model, format, m.ctx, chunk, None)
        .with_context(|| format!("loading {}", m.model.display()))
}

/// Makes `story` search with the fusion configuration in the JSON file `path` (`--fusion`;
/// missing fields take their defaults) instead of its own; its graph settings stay.
pub fn override_fusion(story: &mut StoryIndex, path: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let fusion: FusionConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a fusion configuration", path.display()))?;
    let graph = story.config().graph.clone();
    story.set_search_config(fusion, graph);
    Ok(())
}

/// Opens a bundle folder's story index.
pub fn open_index(bundle: &Path) -> Result<IndexBundle> {
    IndexBundle::open_dir(bundle).with_context(|| format!("opening {}", bundle.display()))
}

/// Resident memory of this process in MiB (Linux `VmRSS`; `None` elsewhere).
pub fn resident_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Prints a profile of `tokens` decode steps or prefilled tokens (`what`), per token:
/// dispatches, submissions and each kernel's device time (where the adapter has timestamps)
/// with the weight bandwidth of the matmuls.
pub fn print_profile(
    p: &lorekeeper_engine::Profile,
    (what, tokens): (&str, usize),
    wall_ms_per_token: f64,
) {
    let t = tokens.max(1) as f64;
    let busy: u64 = p.kernels.iter().map(|k| k.ns).sum();
    println!(
        "profile over {tokens} {what} tokens: {:.0} dispatches and {:.1} submissions per token{}",
        p.dispatches as f64 / t,
        p.submissions as f64 / t,
        if p.timed {
            format!(
                "; device busy {:.3} ms per token (each dispatch timed alone) against {:.3} ms wall unprofiled",
                busy as f64 / 1e6 / t,
                wall_ms_per_token
            )
        } else {
            "; no timestamp queries on this backend, counts only".into()
        }
    );
    println!("| kernel | dispatches/token | device ms/token | share | weight GB/s |");
    println!("|---|---|---|---|---|");
    for k in &p.kernels {
        let gbs = if k.weight_bytes > 0 && k.ns > 0 {
            format!("{:.1}", k.weight_bytes as f64 / k.ns as f64)
        } else {
            "—".into()
        };
        println!(
            "| {} | {:.1} | {:.3} | {:.1} % | {} |",
            k.label,
            k.count as f64 / t,
            k.ns as f64 / 1e6 / t,
            100.0 * k.ns as f64 / busy.max(1) as f64,
            gbs
        );
    }
}
