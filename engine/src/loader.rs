//! Opens a model from a path, natively: a GGUF file, a Hugging Face folder (`config.json`,
//! safetensors, `tokenizer.json`), or a Lorekeeper bundle (`manifest.json` and shards).

use std::path::Path;

use crate::backend::{Backend, KvFormat};
use crate::error::{EngineError, Result};
use crate::format::bundle::ModelBundle;
use crate::format::gguf::Gguf;
use crate::format::weights::{GgufSource, Safetensors};
use crate::models::llama::Config;
use crate::models::LoadOptions;
use crate::models::WeightFormat;
use crate::models::{Decoder, ModelConfig};
use crate::tokenizer::Tokenizer;

/// What kind of model a path holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// A `.gguf` file.
    Gguf,
    /// A Hugging Face folder.
    HfFolder,
    /// A Lorekeeper bundle (`manifest.json`).
    Bundle,
}

/// Detects the model kind, or explains what the path lacks.
pub fn detect(path: &Path) -> Result<ModelKind> {
    let io = |detail: &str| EngineError::Io {
        path: path.display().to_string(),
        detail: detail.into(),
    };
    if path.is_file() {
        let mut magic = [0u8; 4];
        use std::io::Read;
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .map_err(|e| io(&e.to_string()))?;
        if &magic == b"GGUF" {
            return Ok(ModelKind::Gguf);
        }
        return Err(io("is a file but not a GGUF model"));
    }
    if path.join("manifest.json").is_file() {
        return Ok(ModelKind::Bundle);
    }
    if path.join("config.json").is_file() {
        return Ok(ModelKind::HfFolder);
    }
    Err(io("is neither a GGUF file, a Hugging Face model folder (config.json) nor a bundle (manifest.json)"))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| EngineError::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    })
}

/// Loads the model and its tokenizer onto `b`, its matmul weights stored as `format` (`None`:
/// the format the file runs in by default, see [`gguf_format`] and the bundle's manifest; read from the file already
/// opened, not from a second read).
pub fn load<B: Backend>(
    b: &B,
    path: &Path,
    format: Option<WeightFormat>,
    ctx: usize,
    chunk: usize,
    kv: Option<KvFormat>,
) -> Result<(Decoder<B>, Tokenizer)> {
    let opts = |native: WeightFormat| LoadOptions {
        format: format.unwrap_or(native),
        ctx,
        chunk,
        kv,
    };
    match detect(path)? {
        ModelKind::Gguf => {
            let g = Gguf::open(path)?;
            let native = gguf_format(&g);
            let tok = Tokenizer::from_gguf(&g)?;
            let src = GgufSource::new(g)?;
            let cfg = ModelConfig::Llama(Config::from_gguf(&src)?);
            Ok((Decoder::load(b, cfg, &src, opts(native))?, tok))
        }
        ModelKind::HfFolder => {
            let cfg = hf_config(path)?;
            let tok = hf_tokenizer(path, &cfg)?;
            let src = Safetensors::open_dir(path)?;
            Ok((Decoder::load(b, cfg, &src, opts(WeightFormat::F32))?, tok))
        }
        ModelKind::Bundle => {
            let bundle = ModelBundle::open_dir(path)?;
            let native = crate::answer::session::bundle_format(&bundle.manifest);
            let (cfg, tok) = bundle_config(&bundle)?;
            Ok((Decoder::load(b, cfg, &bundle, opts(native))?, tok))
        }
    }
}

/// The weight format a GGUF runs in by default: the block path ([`WeightFormat::Q4`]) when its
/// layer matrices are quantized blocks the kernels read (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
/// Q5_K, Q6_K: kept with their values, see [`crate::format::ggml_blocks`]; f32 would hold up to
/// 7× the bytes and decode slower), f32 otherwise (an f16 / bf16 / f32 file, which the block path
/// would round). (A q4 bundle: its blocks; a Hugging Face folder: f32.)
pub fn gguf_format(g: &Gguf) -> WeightFormat {
    use crate::format::gguf::GgmlType::*;
    let blocks = g.tensors.iter().any(|t| {
        t.name.starts_with("blk.")
            && t.dims.len() == 2
            && matches!(t.ty, Ok(Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4K | Q5K | Q6K))
    });
    if blocks {
        WeightFormat::Q4
    } else {
        WeightFormat::F32
    }
}

/// Parses and validates a Hugging Face folder's `config.json`.
pub fn hf_config(path: &Path) -> Result<ModelConfig> {
    let cfg_path = path.join("config.json");
    let text = String::from_utf8(read(&cfg_path)?).map_err(|_| EngineError::Format {
        file: cfg_path.display().to_string(),
        detail: "not UTF-8".into(),
    })?;
    ModelConfig::from_json(&cfg_path.display().to_string(), &text)
}

/// A Hugging Face folder's `tokenizer.json`, with end-of-sequence ids from the config and
/// `generation_config.json`.
pub fn hf_tokenizer(path: &Path, cfg: &ModelConfig) -> Result<Tokenizer> {
    let tok_path = path.join("tokenizer.json");
    let mut eos = cfg.eos_ids();
    if let Ok(gc) = std::fs::read(path.join("generation_config.json")) {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&gc) {
            match v.get("eos_token_id") {
                Some(serde_json::Value::Number(n)) => eos.extend(n.as_u64().map(|x| x as u32)),
                Some(serde_json::Value::Array(a)) => {
                    eos.extend(a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32))
                }
                _ => {}
            }
        }
    }
    Tokenizer::from_json(
        &tok_path.display().to_string(),
        &read(&tok_path)?,
        &eos,
        cfg.model_type(),
    )
}

pub use crate::answer::session::bundle_config;
