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
//!   `q4` → LQ4 (q8 for a matrix whose columns are not a multiple of 32; a GGUF's own blocks
//!   kept, see `ggml_blocks.rs`), `q8`, `f16`, `f32`; LQ4 weighted by a calibration's
//!   activation statistics when [`ModelOptions::importance`] is set.
//! - A matrix is cut into row blocks of at most `min(max binding, shard size)` bytes, so no
//!   binding exceeds WebGPU's default 128 MiB and every block fits one shard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lorekeeper_engine::cpu::importance::ImportanceMap;
use lorekeeper_engine::format::bundle::{
    BundlePart, DType, GpuLimits, LoraSummary, ModelManifest, Quant, TensorEntry, TensorPart,
    TokenizerEntry, DEFAULT_MAX_BINDING,
};
use lorekeeper_engine::quant::{BlockLayout, Q4Matrix, Q8Matrix};
use serde::Serialize;

use crate::error::{BuildError, Result};
use crate::lora::LoraAdapter;
use crate::source::BaseModel;
use crate::writer::{resolve_shards, ShardWriter};

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
    /// Column importances from a calibration text (importance-weighted LQ4); `None`: uniform.
    pub importance: Option<ImportanceMap>,
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
            importance: None,
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
        Quant::Q4 => "matrices LQ4 (GGUF Q4_0/Q4_1/Q4_K matrices kept with their codes in lq4h, Q5_0/Q5_1/Q8_0/Q5_K/Q6_K in q8_0; q8 where columns % 32 != 0), embedding LQ4, 1-D f32".into(),
        Quant::Lq4 => "matrices and embedding LQ4, GGUF blocks requantized (q8 where columns % 32 != 0), 1-D f32".into(),
        Quant::Q8 => "matrices q8_0 (int8, f16 scale per 32, as llama.cpp's Q8_0; GGUF Q8_0/Q5_0/Q5_1 matrices kept with their codes; q8 with f32 scales where columns % 32 != 0), 1-D f32".into(),
        Quant::F16 => "matrices f16, 1-D f32".into(),
        Quant::F32 => "all f32".into(),
    }
}

/// Builds the model part of the bundle at `o.out`.
pub fn build_model(o: &ModelOptions) -> Result<ModelSummary> {
    let t0 = Instant::now();
    let base = BaseModel::open(&o.base)?;
    let specs = base.config.tensor_shapes();

    // 1. Every tensor the architecture reads is present with its shape.
    let shapes = check_shapes(&base, &specs)?;

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
    let bar = progress_bar(o.progress, total);
    let mut import = Import {
        base: &base,
        lora: lora.as_ref(),
        o,
        cap: o.max_binding.min(o.shard_bytes).max(1),
        w: &mut w,
        bar: &bar,
        totals: Totals::default(),
    };
    let mut tensors = BTreeMap::new();
    for (name, shape) in &specs {
        bar.set_message(name.clone());
        let entry = import.tensor(name, shape)?;
        tensors.insert(name.clone(), entry);
    }
    let mut totals = import.totals;
    totals.limits.max_buffer_size = totals.limits.max_storage_buffer_binding_size;
    let mut shards = w.finish()?;
    // Resolve the placeholder shard references now that names (hashes) are known.
    resolve_shards(tensors.values_mut(), &shards);

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
    let written = Written {
        tensors,
        tokenizer,
        parameters: total,
        totals,
    };
    let model = manifest(o, &base, lora.as_ref(), written)?;
    // Read from the manifest before the commit takes it; time and peak memory come after.
    let summary = ModelSummary {
        out: o.out.display().to_string(),
        architecture: model.architecture.clone(),
        quant: o.quant,
        source: o.base.display().to_string(),
        lora: model.lora.clone(),
        parameters: total,
        tensors: specs.len(),
        parts: totals.parts,
        shards: shards.len(),
        bytes: shards.iter().map(|s| s.bytes).sum(),
        matrix_bits_per_weight: model.matrix_bits_per_weight,
        bits_per_weight: model.bits_per_weight,
        limits: totals.limits,
        seconds: 0.0,
        peak_rss_mib: None,
    };
    w.commit(shards, move |m| m.model = Some(model))?;
    Ok(ModelSummary {
        seconds: t0.elapsed().as_secs_f64(),
        peak_rss_mib: peak_rss_mib(),
        ..summary
    })
}

/// Step 1: every tensor the architecture reads (`specs`) is in `base` with the shape the config
/// implies; the shapes by name.
fn check_shapes(
    base: &BaseModel,
    specs: &[(String, Vec<usize>)],
) -> Result<BTreeMap<String, Vec<usize>>> {
    let mut shapes = BTreeMap::new();
    for (name, shape) in specs {
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
    Ok(shapes)
}

/// A progress bar over `total` weights, hidden unless `show`.
fn progress_bar(show: bool, total: u64) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {msg:40!} [{bar:30}] {percent:>3}% {human_pos}/{human_len} weights, ETA {eta}",
    ) {
        b.set_style(style.progress_chars("=> "));
    }
    b
}

/// Running totals over the tensors written.
#[derive(Clone, Copy, Default)]
struct Totals {
    /// GPU limits the written blocks need.
    limits: GpuLimits,
    /// Bytes of the matrices.
    mat_bytes: u64,
    /// Elements of the matrices.
    mat_numel: u64,
    /// Bytes of all tensors.
    all_bytes: u64,
    /// Row blocks written.
    parts: usize,
}

/// How one tensor is stored and cut.
struct Layout {
    /// Stored dtype.
    dtype: DType,
    /// Rows (1 for a 1-D tensor).
    rows: usize,
    /// Columns (the remaining dimensions).
    cols: usize,
    /// Rows per written part (one binding, within one shard).
    part_rows: usize,
    /// Rows read, merged and encoded at once.
    block_rows: usize,
    /// The source's own blocks are copied, not quantized afresh.
    kept: bool,
}

/// Step 3: writes tensors row block by row block (read → merge → check → encode → write).
struct Import<'a> {
    base: &'a BaseModel,
    lora: Option<&'a LoraAdapter>,
    o: &'a ModelOptions,
    /// Largest part in bytes: `min(max binding, shard size)`.
    cap: u64,
    w: &'a mut ShardWriter,
    bar: &'a indicatif::ProgressBar,
    totals: Totals,
}

impl Import<'_> {
    /// Writes tensor `name` of `shape`; its manifest entry, with placeholder shard references.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<TensorEntry> {
        let l = self.layout(name, shape)?;
        let mut parts = Vec::new();
        let mut p0 = 0;
        while p0 < l.rows {
            let p1 = (p0 + l.part_rows).min(l.rows);
            let part = self.part(name, &l, p0, p1)?;
            // The engine uploads 4-bit blocks as they are and other matrices as one f32 buffer.
            let binding = if l.dtype.q4_layout().is_some() {
                part.length
            } else {
                (l.rows * l.cols * 4) as u64
            };
            let t = &mut self.totals;
            t.limits.max_storage_buffer_binding_size =
                t.limits.max_storage_buffer_binding_size.max(binding);
            t.all_bytes += part.length;
            if shape.len() == 2 {
                t.mat_bytes += part.length;
            }
            parts.push(part);
            p0 = p1;
        }
        if shape.len() == 2 {
            self.totals.mat_numel += (l.rows * l.cols) as u64;
        }
        self.totals.parts += parts.len();
        Ok(TensorEntry {
            dtype: l.dtype,
            shape: shape.to_vec(),
            parts,
        })
    }

    /// The dtype the policy gives tensor `name` and how it is cut into parts and blocks.
    fn layout(&self, name: &str, shape: &[usize]) -> Result<Layout> {
        let (rows, cols) = match shape {
            [n] => (1, *n),
            [r, c] => (*r, *c),
            // A conv kernel [channels, 1, K]: rows of its remaining dimensions, kept f32.
            [r, rest @ ..] if rest.len() <= 2 => (*r, rest.iter().product()),
            _ => {
                return Err(BuildError::Input {
                    file: self.base.describe(),
                    detail: format!("tensor '{name}' has unsupported rank {}", shape.len()),
                })
            }
        };
        let keep_f32 = lorekeeper_engine::models::qwen3_5::F32_MATRICES
            .iter()
            .any(|s| name.ends_with(s));
        // A GGUF Q4_0 / Q4_1 / Q5_x / Q8_0 / k-quant matrix is kept (no second rounding): under
        // q4 every one (Q5_0 / Q5_1 as `q5`), under q8 the 8-bit ones (Q5_x as `q8_0`, the
        // same values; the 4-bit ones become q8_0 from their values); a LoRA merge changes the
        // values, so an adapted matrix is quantized afresh.
        let kept = if shape.len() == 2
            && !keep_f32
            && matches!(self.o.quant, Quant::Q4 | Quant::Q8)
            && !self.lora.is_some_and(|l| l.adapts(name))
        {
            self.base
                .stored_q4(name, self.o.quant == Quant::Q4)?
                .map(|m| m.layout)
                .filter(|&l| self.o.quant == Quant::Q4 || l == BlockLayout::Q8)
        } else {
            None
        };
        let dtype = match kept {
            Some(BlockLayout::Q8) => DType::Q80,
            Some(BlockLayout::Q5) => DType::Q5,
            Some(_) => DType::Lq4h,
            None if shape.len() != 2 || keep_f32 => DType::F32,
            None => self.o.quant.matrix_dtype(cols),
        };
        // A part must fit one binding in the form a backend loads it in (`q5` as `q8_0` on the
        // GPU).
        let per_row = dtype.loaded_bytes_for(1, cols) as u64;
        if per_row > self.cap {
            return Err(BuildError::Input {
                file: self.base.describe(),
                detail: format!(
                    "one row of '{name}' ({per_row} bytes) exceeds the {}-byte block limit",
                    self.cap
                ),
            });
        }
        let part_rows = ((self.cap / per_row) as usize).clamp(1, rows);
        Ok(Layout {
            dtype,
            rows,
            cols,
            part_rows,
            block_rows: (self.o.block_bytes / (4 * cols)).clamp(1, part_rows),
            kept: kept.is_some(),
        })
    }

    /// Writes rows `p0..p1` of `name` as one part (one binding), block by block.
    fn part(&mut self, name: &str, l: &Layout, p0: usize, p1: usize) -> Result<TensorPart> {
        let (dtype, cols) = (l.dtype, l.cols);
        let len = dtype.bytes_for(p1 - p0, cols) as u64;
        let place = self.w.begin(len)?;
        let stored = if l.kept {
            self.base.stored_q4(name, self.o.quant == Quant::Q4)?
        } else {
            None
        };
        if let Some(m) = stored {
            // The source's own blocks, copied (their rows as this part's).
            self.w.write(&m.row_block(p0, p1).to_bytes())?;
            self.bar.inc(((p1 - p0) * cols) as u64);
            return Ok(TensorPart {
                shard: format!("#{}", place.shard),
                offset: place.offset,
                length: len,
                rows: [p0, p1],
            });
        }
        // Quantized row blocks are assembled whole (their sections are not row-interleaved).
        let mut q4_blocks = Vec::new();
        let mut q8_blocks = Vec::new();
        let mut b0 = p0;
        while b0 < p1 {
            let b1 = (b0 + l.block_rows).min(p1);
            let data = self.block(name, cols, b0, b1)?;
            // 3d. encode
            match dtype {
                DType::F32 => {
                    let b: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                    self.w.write(&b)?;
                }
                DType::F16 => {
                    let b: Vec<u8> = data
                        .iter()
                        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                        .collect();
                    self.w.write(&b)?;
                }
                DType::Q8 => q8_blocks.push(Q8Matrix::quantize(b1 - b0, cols, &data)),
                DType::Q80 => q4_blocks.push(Q4Matrix::quantize_q8_0(name, b1 - b0, cols, &data)?),
                // Lq4h and q5 are chosen only where the source holds the blocks (copied above).
                DType::Lq4h | DType::Q5 => {
                    return Err(BuildError::Input {
                        file: self.base.describe(),
                        detail: format!(
                            "tensor '{name}': its {dtype:?} blocks are no longer in the source"
                        ),
                    })
                }
                DType::Lq4 => {
                    let imp = self.o.importance.as_ref().and_then(|m| m.get(name));
                    q4_blocks.push(Q4Matrix::quantize_weighted(
                        name,
                        b1 - b0,
                        cols,
                        &data,
                        imp,
                    )?)
                }
            }
            self.bar.inc(data.len() as u64);
            b0 = b1;
        }
        if dtype.q4_layout().is_some() {
            let m = Q4Matrix::concat_rows(name, &q4_blocks)?;
            self.w.write(&m.to_bytes())?;
        }
        if dtype == DType::Q8 {
            self.w
                .write(&Q8Matrix::concat_rows(&q8_blocks).to_bytes())?;
        }
        Ok(TensorPart {
            shard: format!("#{}", place.shard),
            offset: place.offset,
            length: len,
            rows: [p0, p1],
        })
    }

    /// Rows `b0..b1` of `name` as f32: read (or the adapter's replacement), merged, checked.
    fn block(&self, name: &str, cols: usize, b0: usize, b1: usize) -> Result<Vec<f32>> {
        // 3a. read (or take the adapter's replacement)
        let mut data = match self.lora.and_then(|l| l.replacement(name)) {
            Some(t) => t.data[b0 * cols..b1 * cols].to_vec(),
            None => self.base.read_rows(name, b0, b1)?,
        };
        // 3b. merge W + s·B·A
        if let Some(l) = self.lora {
            l.merge_rows(name, b0, b1, &mut data);
        }
        // 3c. refuse NaN/Inf, naming the element
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(BuildError::Input {
                file: self.base.describe(),
                detail: format!(
                    "tensor '{name}' holds a non-finite value ({}) at row {}, column {}{}",
                    data[i],
                    b0 + i / cols,
                    i % cols,
                    if self.lora.is_some_and(|l| l.adapts(name)) {
                        " after the LoRA merge"
                    } else {
                        ""
                    }
                ),
            });
        }
        Ok(data)
    }
}

/// What step 3 and 4 wrote, for the manifest.
struct Written {
    tensors: BTreeMap<String, TensorEntry>,
    tokenizer: TokenizerEntry,
    parameters: u64,
    totals: Totals,
}

/// Step 5: the model part's manifest section.
fn manifest(
    o: &ModelOptions,
    base: &BaseModel,
    lora: Option<&LoraAdapter>,
    written: Written,
) -> Result<ModelManifest> {
    let cfg = &base.config;
    let Written {
        tensors,
        tokenizer,
        parameters: params,
        totals: t,
    } = written;
    let config = serde_json::to_value(cfg).map_err(|e| BuildError::Input {
        file: base.describe(),
        detail: format!("config: {e}"),
    })?;
    Ok(ModelManifest {
        architecture: cfg.model_type().to_string(),
        config,
        tokenizer,
        quant: o.quant,
        policy: policy_text(o.quant),
        tensors,
        parameters: params,
        matrix_bits_per_weight: 8.0 * t.mat_bytes as f64 / t.mat_numel.max(1) as f64,
        bits_per_weight: 8.0 * t.all_bytes as f64 / params.max(1) as f64,
        tensor_bytes: t.all_bytes,
        limits: t.limits,
        source: o.base.display().to_string(),
        lora: lora.map(LoraAdapter::summary),
    })
}
