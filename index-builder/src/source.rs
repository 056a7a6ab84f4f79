//! Model inputs read **row block by row block**, so a 4B model (8 GB of bf16) never sits in
//! memory: a Hugging Face folder of safetensors shards read with positioned reads (no mmap, so
//! pages read are not charged to the process once a block is done), or a GGUF file (parsed
//! whole; GGUF models are already quantized and small).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use lorekeeper_engine::format::gguf::Gguf;
use lorekeeper_engine::format::weights::{GgufSource, HostTensor, WeightSource};
use lorekeeper_engine::loader;
use lorekeeper_engine::models::llama::Config;
use lorekeeper_engine::models::ModelConfig;
use lorekeeper_engine::quant::{BlockLayout, Q4Matrix};
use lorekeeper_engine::tokenizer::Tokenizer;
use serde::Deserialize;

use crate::error::{BuildError, Result};

/// Largest safetensors header accepted (the format's own limit is 100 MB).
const MAX_HEADER: u64 = 100 << 20;

/// Element types read from safetensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StDtype {
    /// f32.
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
}

impl StDtype {
    fn size(self) -> usize {
        match self {
            StDtype::F32 => 4,
            StDtype::F16 | StDtype::BF16 => 2,
        }
    }
}

/// One tensor's place in a safetensors file.
#[derive(Clone, Debug)]
pub struct StTensor {
    /// File index.
    file: usize,
    /// Element type, or the unsupported name.
    dtype: std::result::Result<StDtype, String>,
    /// Shape.
    pub shape: Vec<usize>,
    /// Absolute byte offset of the data in the file.
    start: u64,
}

#[derive(Deserialize)]
struct HeaderEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// Safetensors files read by positioned reads, header-validated at open.
pub struct SafetensorsFiles {
    files: Vec<(PathBuf, File)>,
    tensors: BTreeMap<String, StTensor>,
}

impl SafetensorsFiles {
    /// Opens the given files and validates every header: sizes that do not fit the file
    /// (truncation), offsets that disagree with shape and dtype.
    pub fn open(paths: &[PathBuf]) -> Result<SafetensorsFiles> {
        let mut files = Vec::new();
        let mut tensors = BTreeMap::new();
        for (fi, path) in paths.iter().enumerate() {
            let bad = |detail: String| BuildError::Input {
                file: path.display().to_string(),
                detail,
            };
            let file = File::open(path).map_err(|e| BuildError::io(path, e))?;
            let len = file.metadata().map_err(|e| BuildError::io(path, e))?.len();
            let mut n8 = [0u8; 8];
            file.read_exact_at(&mut n8, 0)
                .map_err(|_| bad(format!("{len} bytes is too short for a safetensors header")))?;
            let n = u64::from_le_bytes(n8);
            if n > MAX_HEADER || n + 8 > len {
                return Err(bad(format!(
                    "header length {n} does not fit the {len}-byte file (truncated or not safetensors)"
                )));
            }
            let mut header = vec![0u8; n as usize];
            file.read_exact_at(&mut header, 8)
                .map_err(|e| BuildError::io(path, e))?;
            let map: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&header)
                .map_err(|e| bad(format!("header is not valid JSON: {e}")))?;
            let data_start = 8 + n;
            for (name, v) in map {
                if name == "__metadata__" {
                    continue;
                }
                let h: HeaderEntry = serde_json::from_value(v)
                    .map_err(|e| bad(format!("tensor '{name}': bad header entry: {e}")))?;
                let dtype = match h.dtype.as_str() {
                    "F32" => Ok(StDtype::F32),
                    "F16" => Ok(StDtype::F16),
                    "BF16" => Ok(StDtype::BF16),
                    other => Err(other.to_string()),
                };
                let [a, b] = h.data_offsets;
                if b < a || data_start + b > len {
                    return Err(bad(format!(
                        "tensor '{name}': data offsets {a}..{b} lie outside the file's {} data bytes (truncated file or lying header)",
                        len - data_start
                    )));
                }
                if let Ok(dt) = dtype {
                    let numel: usize = h.shape.iter().product();
                    if (b - a) as usize != numel * dt.size() {
                        return Err(bad(format!(
                            "tensor '{name}': offsets span {} bytes, shape {:?} of {:?} needs {}",
                            b - a,
                            h.shape,
                            dt,
                            numel * dt.size()
                        )));
                    }
                }
                tensors.insert(
                    name,
                    StTensor {
                        file: fi,
                        dtype,
                        shape: h.shape,
                        start: data_start + a,
                    },
                );
            }
            files.push((path.clone(), file));
        }
        Ok(SafetensorsFiles { files, tensors })
    }

    /// The shards of a Hugging Face folder: `model.safetensors`, or those listed by
    /// `model.safetensors.index.json`.
    pub fn open_hf_dir(dir: &Path) -> Result<SafetensorsFiles> {
        Self::open(&lorekeeper_engine::format::weights::shard_paths(dir)?)
    }

    /// Tensor names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// Shape of `name`.
    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|t| t.shape.as_slice())
    }

    /// Rows `r0..r1` of `name` as f32 (a 1-D tensor is one row).
    pub fn read_rows(&self, name: &str, r0: usize, r1: usize) -> Result<Vec<f32>> {
        let t = self.tensors.get(name).ok_or_else(|| BuildError::Input {
            file: self.describe(),
            detail: format!("tensor '{name}' is missing"),
        })?;
        let (path, file) = &self.files[t.file];
        let dt = t.dtype.clone().map_err(|d| BuildError::Input {
            file: path.display().to_string(),
            detail: format!("tensor '{name}' has dtype {d}; only F32, F16 and BF16 are supported"),
        })?;
        let cols: usize = t.shape.iter().skip(1).product::<usize>().max(1);
        let cols = if t.shape.len() == 1 { t.shape[0] } else { cols };
        let mut raw = vec![0u8; (r1 - r0) * cols * dt.size()];
        file.read_exact_at(&mut raw, t.start + (r0 * cols * dt.size()) as u64)
            .map_err(|e| BuildError::io(path, e))?;
        Ok(match dt {
            StDtype::F32 => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            StDtype::F16 => raw
                .chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            StDtype::BF16 => raw
                .chunks_exact(2)
                .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                .collect(),
        })
    }

    /// The whole tensor.
    pub fn read(&self, name: &str) -> Result<HostTensor> {
        let shape = self
            .shape(name)
            .ok_or_else(|| BuildError::Input {
                file: self.describe(),
                detail: format!("tensor '{name}' is missing"),
            })?
            .to_vec();
        let rows = if shape.len() == 1 { 1 } else { shape[0] };
        Ok(HostTensor {
            data: self.read_rows(name, 0, rows)?,
            shape,
        })
    }

    /// The files, for errors.
    pub fn describe(&self) -> String {
        match self.files.as_slice() {
            [(p, _)] => p.display().to_string(),
            _ => self
                .files
                .first()
                .and_then(|(p, _)| p.parent())
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        }
    }
}

/// Where the base model's weights come from.
pub enum BaseWeights {
    /// A Hugging Face folder.
    Hf(SafetensorsFiles),
    /// A GGUF file (held whole; tensors dequantized one at a time).
    Gguf(Box<GgufSource>),
}

/// A base model opened for import: config, tokenizer and weights.
pub struct BaseModel {
    /// The path given.
    pub path: PathBuf,
    /// The model config.
    pub config: ModelConfig,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The weights.
    pub weights: BaseWeights,
    /// Whether the weights use the multimodal checkpoint's `model.language_model.*` names.
    nested: bool,
    /// The last tensor read from a GGUF file (reads come row block by row block).
    cache: std::cell::RefCell<Option<(String, std::rc::Rc<HostTensor>)>>,
    /// The last 4-bit tensor taken from a GGUF file as it is stored.
    q4_cache: std::cell::RefCell<Option<(String, bool, std::rc::Rc<Q4Matrix>)>>,
}

impl BaseModel {
    /// Opens a Hugging Face folder or a GGUF file.
    pub fn open(path: &Path) -> Result<BaseModel> {
        let (config, tokenizer, weights) = match loader::detect(path)? {
            loader::ModelKind::Gguf => {
                let g = Gguf::open(path)?;
                let tok = Tokenizer::from_gguf(&g)?;
                let src = GgufSource::new(g)?;
                let cfg = ModelConfig::Llama(Config::from_gguf(&src)?);
                (cfg, tok, BaseWeights::Gguf(Box::new(src)))
            }
            loader::ModelKind::HfFolder => {
                let cfg = loader::hf_config(path)?;
                let tok = loader::hf_tokenizer(path, &cfg)?;
                (
                    cfg,
                    tok,
                    BaseWeights::Hf(SafetensorsFiles::open_hf_dir(path)?),
                )
            }
            loader::ModelKind::Bundle => return Err(BuildError::Input {
                file: path.display().to_string(),
                detail:
                    "is already a bundle; give the Hugging Face folder or GGUF file it came from"
                        .into(),
            }),
        };
        // Qwen3.5's multimodal checkpoint keeps the text model under model.language_model.*;
        // the vision tower and mtp.* are not read.
        let nested = match &weights {
            BaseWeights::Hf(s) => {
                s.shape("model.embed_tokens.weight").is_none()
                    && s.shape("model.language_model.embed_tokens.weight")
                        .is_some()
            }
            BaseWeights::Gguf(_) => false,
        };
        Ok(BaseModel {
            path: path.to_path_buf(),
            config,
            tokenizer,
            weights,
            nested,
            cache: Default::default(),
            q4_cache: Default::default(),
        })
    }

    /// Names the source in errors.
    pub fn describe(&self) -> String {
        match &self.weights {
            BaseWeights::Hf(s) => s.describe(),
            BaseWeights::Gguf(g) => g.describe(),
        }
    }

    fn gguf_tensor(&self, g: &GgufSource, name: &str) -> Result<Option<std::rc::Rc<HostTensor>>> {
        if let Some((n, t)) = self.cache.borrow().as_ref() {
            if n == name {
                return Ok(Some(t.clone()));
            }
        }
        let Some(t) = g.get(name)? else {
            return Ok(None);
        };
        let t = std::rc::Rc::new(t);
        *self.cache.borrow_mut() = Some((name.to_string(), t.clone()));
        Ok(Some(t))
    }

    /// The name a text-model tensor has in the source.
    fn stored_name(&self, name: &str) -> String {
        if self.nested {
            lorekeeper_engine::models::qwen3_5::language_model_name(name)
        } else {
            name.to_string()
        }
    }

    /// Shape of `name`, if present.
    pub fn shape(&self, name: &str) -> Result<Option<Vec<usize>>> {
        let name = &self.stored_name(name);
        Ok(match &self.weights {
            BaseWeights::Hf(s) => s.shape(name).map(<[usize]>::to_vec),
            BaseWeights::Gguf(g) => self.gguf_tensor(g, name)?.map(|t| t.shape.clone()),
        })
    }

    /// `name` as the source stores it in blocks the engine runs, when it does: a GGUF Q4_0 /
    /// Q4_1 matrix as an `lq4h` matrix, a Q8_0 one as `q8_0` (Q6_K too, rounded), Q5_0 / Q5_1
    /// as `q5` where `keep_q5` (else as `q8_0`, the same values), the same values (the importer
    /// then writes it without rounding it again). `None` for every other tensor and source.
    pub fn stored_q4(&self, name: &str, keep_q5: bool) -> Result<Option<std::rc::Rc<Q4Matrix>>> {
        let BaseWeights::Gguf(g) = &self.weights else {
            return Ok(None);
        };
        if let Some((n, k, m)) = self.q4_cache.borrow().as_ref() {
            if n == name && *k == keep_q5 {
                return Ok(Some(m.clone()));
            }
        }
        let Some(mut parts) = g.q4_parts(&self.stored_name(name))? else {
            return Ok(None);
        };
        let Some((_, m)) = parts.pop().filter(|_| parts.is_empty()) else {
            return Ok(None);
        };
        // Bundles hold the layouts every backend runs (`q6_k` as `q8_0`, `lq4k` as `lq4h`), and
        // `q5`, which a backend without its kernels reads as `q8_0` at load.
        let m = if keep_q5 && m.layout == BlockLayout::Q5 {
            m
        } else {
            m.to_portable(name)?.into_owned()
        };
        let m = std::rc::Rc::new(m);
        *self.q4_cache.borrow_mut() = Some((name.to_string(), keep_q5, m.clone()));
        Ok(Some(m))
    }

    /// Rows `r0..r1` of `name` as f32.
    pub fn read_rows(&self, name: &str, r0: usize, r1: usize) -> Result<Vec<f32>> {
        let name = &self.stored_name(name);
        match &self.weights {
            BaseWeights::Hf(s) => s.read_rows(name, r0, r1),
            BaseWeights::Gguf(g) => {
                let t = self
                    .gguf_tensor(g, name)?
                    .ok_or_else(|| BuildError::Input {
                        file: g.describe(),
                        detail: format!("tensor '{name}' is missing"),
                    })?;
                let cols = t.shape.iter().skip(1).product::<usize>().max(1);
                let cols = if t.shape.len() == 1 { t.shape[0] } else { cols };
                Ok(t.data[r0 * cols..r1 * cols].to_vec())
            }
        }
    }
}
