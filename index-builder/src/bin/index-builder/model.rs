//! `index-builder model`: import a model, merge a PEFT LoRA adapter, quantize, and write (or
//! replace) the bundle's model part ([`index_builder::build_model`]).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use index_builder::calibrate::calibrate;
use index_builder::{build_model, ModelOptions};
use lorekeeper_engine::format::bundle::Quant;

/// `--quant`: the weight quantization.
#[derive(Clone, Copy, ValueEnum)]
enum QuantArg {
    /// 4-bit: a GGUF's own Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K/Q6_K blocks kept with their values,
    /// other matrices LQ4 (4.5 + 64/K bits per weight), f32 norms
    Q4,
    /// LQ4 for every matrix, a GGUF's blocks requantized too (smaller, some quality lost)
    Lq4,
    /// 8-bit q8_0 matrices (llama.cpp's Q8_0: int8 with an f16 scale per 32, 9 bits per weight;
    /// a GGUF's own Q8_0/Q5_0/Q5_1 blocks kept), f32 norms
    Q8,
    /// f16 matrices
    F16,
    /// everything f32
    F32,
}

/// Options of `index-builder model`.
#[derive(clap::Args)]
pub struct Args {
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
    pub(crate) out: PathBuf,
    /// Target shard size in MiB
    #[arg(long, default_value_t = 32)]
    shard_mb: u64,
    /// Largest row block (one GPU binding) in MiB
    #[arg(long, default_value_t = 128)]
    max_binding_mb: u64,
    /// Calibration text (UTF-8) for importance-weighted LQ4: the base model runs over its first
    /// `--calibration-tokens` tokens in f32 on the CPU, and each matrix's rounding error is
    /// weighed by the activations it multiplies (llama.cpp's importance matrix)
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Tokens of the calibration text to run
    #[arg(long, default_value_t = 4096)]
    calibration_tokens: usize,
    /// Print a JSON summary on stdout
    #[arg(long)]
    pub(crate) json: bool,
}

/// `index-builder model`.
pub fn run(args: Args) -> Result<()> {
    let quant = match args.quant {
        QuantArg::Q4 => Quant::Q4,
        QuantArg::Lq4 => Quant::Lq4,
        QuantArg::Q8 => Quant::Q8,
        QuantArg::F16 => Quant::F16,
        QuantArg::F32 => Quant::F32,
    };
    if args.shard_mb == 0 || args.max_binding_mb == 0 {
        anyhow::bail!("--shard-mb and --max-binding-mb must be positive");
    }
    let mut o = ModelOptions::new(&args.base, quant, &args.out);
    o.lora = args.lora;
    o.shard_bytes = args.shard_mb << 20;
    o.max_binding = args.max_binding_mb << 20;
    o.progress = std::io::stderr().is_terminal();
    if let Some(text) = &args.calibration {
        let t0 = std::time::Instant::now();
        let c = calibrate(&args.base, text, args.calibration_tokens, 512)?;
        eprintln!(
            "index-builder: calibrated on {} tokens of {} ({} matrices measured) in {:.1} s",
            c.tokens,
            text.display(),
            c.importance.tensors.len(),
            t0.elapsed().as_secs_f64()
        );
        o.importance = Some(c.importance);
    }
    let s = build_model(&o)?;
    if args.json {
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
