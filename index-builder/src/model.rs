//! `index-builder model`: import a base model (Hugging Face folder or GGUF), merge an optional
//! PEFT LoRA adapter, quantize and write the bundle's model part.
//!
//! Memory stays bounded at any model size: tensors are processed one row block at a time
//! (read → merge → check → quantize → write), a row block of f32 is at most 16 MiB, and a
//! quantized part (at most one shard) is the largest thing held.
//!
//! # Per-tensor policy
//! - 1-D tensors (RMSNorm weights) stay f32 under every policy.
//! - Matrices (every projection, the embedding and an untied LM head) get the policy's dtype:
//!   `q4` → LQ4 (q8 for a matrix whose columns are not a multiple of 32), `q8`, `f16`, `f32`.
//! - A matrix is cut into row blocks of at most `min(max binding, shard size)` bytes, so no
//!   binding exceeds WebGPU's default 128 MiB and every block fits one shard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lorekeeper_engine::bundle::{
    BundlePart, DType, GpuLimits, LoraSummary, ModelManifest, Quant, TensorEntry, TensorPart,
    TokenizerEntry, DEFAULT_MAX_BINDING,
};
use lorekeeper_engine::quant::{Q4Matrix, Q8Matrix};
use serde::Serialize;

use crate::error::{BuildError, Result};
use crate::lora::LoraAdapter;
use crate::source::BaseModel;
use crate::writer::ShardWriter;

/// f32 bytes processed at once by default.
const BLOCK_BYTES: usize = 16 << 20;

/// Options of `index-builder model`.
#[derive(Clone, Debug)]
pub struct ModelOptions {
    /// Hugging Face folder or GGUF file.
    pub base: PathBuf,
    /// PEFT adapter folder.
    pub lora: Option<PathBuf>,
    /// Quantization policy.
    pub quant: Quant,
    /// Bundle folder.
    pub out: PathBuf,
    /// Target shard size in bytes.
    pub shard_bytes: u64,
    /// Largest row block in bytes.
    pub max_binding: u64,
    /// f32 bytes read, merged and quantized at once (memory bound; tests make it tiny so a
    /// row block is assembled from many pieces).
    pub block_bytes: usize,
    /// Show a progress bar.
    pub progress: bool,
}

impl ModelOptions {
    /// Defaults: 32 MiB shards, 128 MiB bindings, no progress bar.
    pub fn new(base: &Path, quant: Quant, out: &Path) -> ModelOptions {
        ModelOptions {
            base: base.to_path_buf(),
            lora: None,
            quant,
            out: out.to_path_buf(),
            shard_bytes: 32 << 20,
            max_binding: DEFAULT_MAX_BINDING,
            block_bytes: BLOCK_BYTES,
            progress: false,
        }
    }
}

/// What `--json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct ModelSummary {
    /// Bundle folder.
    pub out: String,
    /// `model_type`.
    pub architecture: String,
    /// Policy.
    pub quant: Quant,
    /// Source.
    pub source: String,
    /// Merged adapter.
    pub lora: Option<LoraSummary>,
    /// Parameters.
    pub parameters: u64,
    /// Tensors written.
    pub tensors: usize,
    /// Row blocks written.
    pub parts: usize,
    /// Model shards (the tokenizer included).
    pub shards: usize,
    /// Bytes of the model part.
    pub bytes: u64,
    /// Bits per weight over the matrices.
    pub matrix_bits_per_weight: f64,
    /// Bits per weight over all tensors.
    pub bits_per_weight: f64,
    /// GPU limits needed.
    pub limits: GpuLimits,
    /// Wall time.
    pub seconds: f64,
    /// Peak resident memory of the process (Linux `VmHWM`), MiB.
    pub peak_rss_mib: Option<f64>,
}

/// Peak resident set size of this process in MiB (Linux).
pub fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn policy_text(q: Quant) -> String {
    match q {
        Quant::Q4 => "matrices LQ4 (q8 where columns % 32 != 0), embedding LQ4, 1-D f32".into(),
        Quant::Q8 => "matrices q8 (int8, f32 scale per 32), 1-D f32".into(),
        Quant::F16 => "matrices f16, 1-D f32".into(),
        Quant::F32 => "all f32".into(),
    }
}

/// Builds the model part of the bundle at `o.out`.
pub fn build_model(o: &ModelOptions) -> Result<ModelSummary> {
    let t0 = Instant::now();
    let base = BaseModel::open(&o.base)?;
    let cfg = &base.config;
    let specs = cfg.tensor_shapes();

    // 1. Every tensor the architecture reads is present with its shape.
    let mut shapes = BTreeMap::new();
    for (name, shape) in &specs {
        let got = base.shape(name)?.ok_or_else(|| BuildError::Input {
            file: base.describe(),
            detail: format!("tensor '{name}' is missing"),
        })?;
        if got != *shape {
            return Err(BuildError::Input {
                file: base.describe(),
                detail: format!("tensor '{name}' has shape {got:?}, the config implies {shape:?}"),
            });
        }
        shapes.insert(name.clone(), shape.clone());
    }

    // 2. The adapter matches the base.
    let lora = match &o.lora {
        Some(dir) => {
            let a = LoraAdapter::open(dir)?;
            a.check_against(&shapes)?;
            Some(a)
        }
        None => None,
    };

    // 3. Tensors, row block by row block.
    let mut w = ShardWriter::new(&o.out, BundlePart::Model, o.shard_bytes)?;
    let total: u64 = specs
        .iter()
        .map(|(_, s)| s.iter().product::<usize>() as u64)
        .sum();
    let bar = if o.progress {
        let b = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg:40!} [{bar:30}] {percent:>3}% {human_pos}/{human_len} weights, ETA {eta}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let cap = o.max_binding.min(o.shard_bytes).max(1);
    let mut tensors = BTreeMap::new();
    let mut limits = GpuLimits::default();
    let (mut mat_bytes, mut mat_numel, mut all_bytes) = (0u64, 0u64, 0u64);
    let mut nparts = 0;
    for (name, shape) in &specs {
        bar.set_message(name.clone());
        let (rows, cols) = match shape.as_slice() {
            [n] => (1, *n),
            [r, c] => (*r, *c),
            // A conv kernel [channels, 1, K]: rows of its remaining dimensions, kept f32.
            [r, rest @ ..] if rest.len() <= 2 => (*r, rest.iter().product()),
            _ => {
                return Err(BuildError::Input {
                    file: base.describe(),
                    detail: format!("tensor '{name}' has unsupported rank {}", shape.len()),
                })
            }
        };
        let keep_f32 = lorekeeper_engine::models::qwen3_5::F32_MATRICES
            .iter()
            .any(|s| name.ends_with(s));
        let dtype = if shape.len() != 2 || keep_f32 {
            DType::F32
        } else {
            o.quant.matrix_dtype(cols)
        };
        let per_row = dtype.bytes_for(1, cols) as u64;
        if per_row > cap {
            return Err(BuildError::Input {
                file: base.describe(),
                detail: format!(
                    "one row of '{name}' ({per_row} bytes) exceeds the {cap}-byte block limit"
                ),
            });
        }
        let part_rows = ((cap / per_row) as usize).clamp(1, rows);
        let block_rows = (o.block_bytes / (4 * cols)).clamp(1, part_rows);
        let replacement = lora.as_ref().and_then(|l| l.replacement(name));
        let mut parts = Vec::new();
        let mut p0 = 0;
        while p0 < rows {
            let p1 = (p0 + part_rows).min(rows);
            let len = dtype.bytes_for(p1 - p0, cols) as u64;
            let place = w.begin(len)?;
            // Quantized row blocks are assembled whole (their sections are not row-interleaved).
            let mut q4_blocks = Vec::new();
            let mut q8_blocks = Vec::new();
            let mut b0 = p0;
            while b0 < p1 {
                let b1 = (b0 + block_rows).min(p1);
                // 3a. read (or take the adapter's replacement)
                let mut data = match replacement {
                    Some(t) => t.data[b0 * cols..b1 * cols].to_vec(),
                    None => base.read_rows(name, b0, b1)?,
                };
                // 3b. merge W + s·B·A
                if let Some(l) = &lora {
                    l.merge_rows(name, b0, b1, &mut data);
                }
                // 3c. refuse NaN/Inf, naming the element
                if let Some(i) = data.iter().position(|v| !v.is_finite()) {
                    return Err(BuildError::Input {
                        file: base.describe(),
                        detail: format!(
                            "tensor '{name}' holds a non-finite value ({}) at row {}, column {}{}",
                            data[i],
                            b0 + i / cols,
                            i % cols,
                            if lora.as_ref().is_some_and(|l| l.adapts(name)) {
                                " after the LoRA merge"
                            } else {
                                ""
                            }
                        ),
                    });
                }
                // 3d. encode
                match dtype {
                    DType::F32 => {
                        let b: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                        w.write(&b)?;
                    }
                    DType::F16 => {
                        let b: Vec<u8> = data
                            .iter()
                            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                            .collect();
                        w.write(&b)?;
                    }
                    DType::Q8 => q8_blocks.push(Q8Matrix::quantize(b1 - b0, cols, &data)),
                    DType::Lq4 => q4_blocks.push(Q4Matrix::quantize(name, b1 - b0, cols, &data)?),
                }
                bar.inc(data.len() as u64);
                b0 = b1;
            }
            if dtype == DType::Lq4 {
                let m = Q4Matrix::concat_rows(name, &q4_blocks)?;
                w.write(&m.to_bytes())?;
            }
            if dtype == DType::Q8 {
                w.write(&Q8Matrix::concat_rows(&q8_blocks).to_bytes())?;
            }
            parts.push(TensorPart {
                shard: format!("#{}", place.shard),
                offset: place.offset,
                length: len,
                rows: [p0, p1],
            });
            // The engine uploads LQ4 blocks as they are and other matrices as one f32 buffer.
            let binding = if dtype == DType::Lq4 {
                len
            } else {
                (rows * cols * 4) as u64
            };
            limits.max_storage_buffer_binding_size =
                limits.max_storage_buffer_binding_size.max(binding);
            all_bytes += len;
            if shape.len() == 2 {
                mat_bytes += len;
            }
            p0 = p1;
        }
        if shape.len() == 2 {
            mat_numel += (rows * cols) as u64;
        }
        nparts += parts.len();
        tensors.insert(
            name.clone(),
            TensorEntry {
                dtype,
                shape: shape.clone(),
                parts,
            },
        );
    }
    limits.max_buffer_size = limits.max_storage_buffer_binding_size;
    let mut shards = w.finish()?;
    // Resolve the placeholder shard references now that names (hashes) are known.
    for t in tensors.values_mut() {
        for p in &mut t.parts {
            let i: usize = p.shard[1..].parse().unwrap_or(usize::MAX);
            p.shard = shards.get(i).map(|s| s.file.clone()).unwrap_or_default();
        }
    }

    // 4. Tokenizer.
    let tok_json = base.tokenizer.to_json()?;
    let tok_shard = w.file("tokenizer", "json", tok_json.as_bytes())?;
    let tokenizer = TokenizerEntry {
        shard: tok_shard.file.clone(),
        meta: base.tokenizer.meta(),
    };
    shards.push(tok_shard);
    bar.finish_and_clear();

    // 5. Commit the manifest.
    let params: u64 = total;
    let config = serde_json::to_value(cfg).map_err(|e| BuildError::Input {
        file: base.describe(),
        detail: format!("config: {e}"),
    })?;
    let model = ModelManifest {
        architecture: cfg.model_type().to_string(),
        config,
        tokenizer,
        quant: o.quant,
        policy: policy_text(o.quant),
        tensors,
        parameters: params,
        matrix_bits_per_weight: 8.0 * mat_bytes as f64 / mat_numel.max(1) as f64,
        bits_per_weight: 8.0 * all_bytes as f64 / params.max(1) as f64,
        tensor_bytes: all_bytes,
        limits,
        source: o.base.display().to_string(),
        lora: lora.as_ref().map(LoraAdapter::summary),
    };
    let summary_base = (
        model.matrix_bits_per_weight,
        model.bits_per_weight,
        model.lora.clone(),
    );
    let nshards = shards.len();
    let bytes: u64 = shards.iter().map(|s| s.bytes).sum();
    w.commit(shards, move |m| m.model = Some(model))?;
    Ok(ModelSummary {
        out: o.out.display().to_string(),
        architecture: cfg.model_type().to_string(),
        quant: o.quant,
        source: o.base.display().to_string(),
        lora: summary_base.2,
        parameters: params,
        tensors: specs.len(),
        parts: nparts,
        shards: nshards,
        bytes,
        matrix_bits_per_weight: summary_base.0,
        bits_per_weight: summary_base.1,
        limits,
        seconds: t0.elapsed().as_secs_f64(),
        peak_rss_mib: peak_rss_mib(),
    })
}
