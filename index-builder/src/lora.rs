//! PEFT LoRA adapters: parse, validate against the base model, merge row block by row block.
//!
//! `W' = W + s · B · A` on every adapted module, with `s = lora_alpha / r`, or
//! `lora_alpha / sqrt(r)` with rsLoRA (`use_rslora`). `A` is `[r, in]`, `B` is `[out, r]`.
//! Modules in `modules_to_save` are replaced by the adapter's copy. Anything else PEFT can
//! express (DoRA, per-module rank or alpha patterns, LoRA on embeddings, LoRA biases, other
//! adapter types) is refused by name rather than merged wrongly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lorekeeper_engine::format::bundle::LoraSummary;
use lorekeeper_engine::format::weights::HostTensor;
use serde::Deserialize;

use crate::error::{BuildError, Result};
use crate::source::SafetensorsFiles;

/// The fields of `adapter_config.json` the merge reads.
#[derive(Debug, Deserialize)]
struct AdapterConfig {
    peft_type: Option<String>,
    r: usize,
    lora_alpha: f64,
    #[serde(default)]
    use_rslora: bool,
    #[serde(default)]
    fan_in_fan_out: bool,
    #[serde(default)]
    modules_to_save: Option<Vec<String>>,
    #[serde(default)]
    bias: Option<String>,
    #[serde(default)]
    rank_pattern: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    alpha_pattern: BTreeMap<String, serde_json::Value>,
}

/// Fields that switch on an adapter variant this merge does not implement.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("use_dora", "DoRA (weight-decomposed LoRA)"),
    ("use_qalora", "QA-LoRA"),
    ("use_bdlora", "BD-LoRA"),
    ("lora_bias", "LoRA bias terms"),
    ("layer_replication", "layer replication"),
    ("trainable_token_indices", "trainable token indices"),
    ("target_parameters", "LoRA on parameters"),
    ("alora_invocation_tokens", "activated LoRA"),
    ("arrow_config", "Arrow routing"),
    ("kasa_config", "KaSA"),
    ("velora_config", "VeLoRA"),
    ("monteclora_config", "MonteCLoRA"),
];

/// A [`BuildError::Lora`] naming `file`.
fn lora_err(file: &Path) -> impl Fn(String) -> BuildError + '_ {
    move |detail| BuildError::Lora {
        file: file.display().to_string(),
        detail,
    }
}

impl AdapterConfig {
    /// Reads `adapter_config.json` at `cfg_path`, refusing every variant the merge does not
    /// implement by name.
    fn read(cfg_path: &Path) -> Result<AdapterConfig> {
        let err = lora_err(cfg_path);
        let bytes = std::fs::read(cfg_path).map_err(|e| BuildError::io(cfg_path, e))?;
        let raw: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| err(format!("not valid JSON: {e}")))?;
        for (field, what) in UNSUPPORTED {
            let on = match raw.get(*field) {
                None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => {
                    false
                }
                Some(serde_json::Value::Object(o)) => !o.is_empty(),
                Some(serde_json::Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if on {
                return Err(err(format!(
                    "'{field}' is set: {what} is not supported (plain LoRA only)"
                )));
            }
        }
        let cfg: AdapterConfig = serde_json::from_value(raw)
            .map_err(|e| err(format!("missing or malformed field: {e}")))?;
        match cfg.peft_type.as_deref() {
            Some("LORA") | None => {}
            Some(t) => return Err(err(format!("peft_type '{t}' is not supported (LORA only)"))),
        }
        if cfg.r == 0 {
            return Err(err("r is 0".into()));
        }
        if cfg.fan_in_fan_out {
            return Err(err(
                "fan_in_fan_out is set, which is for GPT-2 Conv1D layers; Llama/Qwen linear layers store [out, in]".into(),
            ));
        }
        if let Some(b) = cfg.bias.as_deref().filter(|b| *b != "none") {
            return Err(err(format!(
                "bias '{b}' is not supported (adapters that train biases change modules without bias)"
            )));
        }
        if !cfg.rank_pattern.is_empty() || !cfg.alpha_pattern.is_empty() {
            return Err(err(
                "per-module rank_pattern / alpha_pattern are not supported (one r and lora_alpha for every module)".into(),
            ));
        }
        Ok(cfg)
    }
}

/// The tensors of `adapter_model.safetensors`, by base tensor name.
struct AdapterTensors {
    /// The file, for errors.
    path: PathBuf,
    /// `lora_A` weights.
    a_of: BTreeMap<String, HostTensor>,
    /// `lora_B` weights.
    b_of: BTreeMap<String, HostTensor>,
    /// Replacements (`modules_to_save`).
    replace: BTreeMap<String, HostTensor>,
}

impl AdapterTensors {
    /// Reads every tensor of `st_path`, sorting it into A, B or a replacement of a module in
    /// `saved`; anything else is refused by name.
    fn read(st_path: &Path, saved: &[String]) -> Result<AdapterTensors> {
        let st = SafetensorsFiles::open(&[st_path.to_path_buf()])?;
        let lerr = lora_err(st_path);
        let mut t = AdapterTensors {
            path: st_path.to_path_buf(),
            a_of: BTreeMap::new(),
            b_of: BTreeMap::new(),
            replace: BTreeMap::new(),
        };
        for name in st.names().map(String::from).collect::<Vec<_>>() {
            let inner = name.strip_prefix("base_model.model.").ok_or_else(|| {
                lerr(format!(
                    "tensor '{name}' lacks PEFT's 'base_model.model.' prefix"
                ))
            })?;
            // Qwen3.5's multimodal checkpoint nests the language model; bundles use the text
            // model's names.
            let mapped = inner
                .strip_prefix("model.language_model.")
                .map(|rest| format!("model.{rest}"));
            let inner = mapped.as_deref().unwrap_or(inner);
            if inner.contains("lora_magnitude_vector") {
                return Err(lerr(format!(
                    "tensor '{name}' is a DoRA magnitude; DoRA is not supported"
                )));
            }
            if inner.contains("lora_embedding_") {
                return Err(lerr(format!(
                    "tensor '{name}': LoRA on embeddings is not supported"
                )));
            }
            if let Some(m) = inner.strip_suffix(".lora_A.weight") {
                t.a_of.insert(format!("{m}.weight"), st.read(&name)?);
            } else if let Some(m) = inner.strip_suffix(".lora_B.weight") {
                t.b_of.insert(format!("{m}.weight"), st.read(&name)?);
            } else if inner.contains(".lora_") {
                return Err(lerr(format!(
                    "tensor '{name}' is not a LoRA A/B weight (LoRA biases and other variants are not supported)"
                )));
            } else {
                let base = inner.replace(".modules_to_save.default", "");
                let module = base.rsplit_once('.').map(|(m, _)| m).unwrap_or(&base);
                if !saved
                    .iter()
                    .any(|s| module == s || module.ends_with(&format!(".{s}")))
                {
                    return Err(lerr(format!(
                        "tensor '{name}' is neither a LoRA weight nor in modules_to_save {saved:?}"
                    )));
                }
                t.replace.insert(base, st.read(&name)?);
            }
        }
        Ok(t)
    }

    /// Pairs every A with its B, checking both against rank `r` and for non-finite values.
    /// Returns the pairs and the replacements.
    fn into_pairs(self, r: usize) -> Result<(Pairs, BTreeMap<String, HostTensor>)> {
        let AdapterTensors {
            path,
            a_of,
            mut b_of,
            replace,
        } = self;
        let lerr = lora_err(&path);
        let mut pairs = BTreeMap::new();
        for (base, a) in a_of {
            let b = b_of
                .remove(&base)
                .ok_or_else(|| lerr(format!("'{base}' has lora_A but no lora_B")))?;
            let (ar, br) = (a.shape.first().copied(), b.shape.get(1).copied());
            if a.shape.len() != 2 || b.shape.len() != 2 || ar != Some(r) || br != Some(r) {
                return Err(lerr(format!(
                    "rank mismatch on '{base}': lora_A {:?}, lora_B {:?}, adapter_config.json r = {}",
                    a.shape, b.shape, r
                )));
            }
            if let Some(i) = a.data.iter().chain(&b.data).position(|v| !v.is_finite()) {
                return Err(lerr(format!(
                    "'{base}': non-finite value in lora_A/lora_B (element {i})"
                )));
            }
            pairs.insert(base, (a, b));
        }
        if let Some(base) = b_of.keys().next() {
            return Err(lerr(format!("'{base}' has lora_B but no lora_A")));
        }
        Ok((pairs, replace))
    }
}

/// Base tensor name → (A `[r, in]`, B `[out, r]`).
type Pairs = BTreeMap<String, (HostTensor, HostTensor)>;

/// A validated adapter, held in memory (adapters are small: rank × width per module).
pub struct LoraAdapter {
    /// The adapter folder.
    pub dir: PathBuf,
    /// Rank.
    pub r: usize,
    /// `lora_alpha`.
    pub alpha: f64,
    /// Merge scale.
    pub scale: f32,
    /// Base tensor name → (A `[r, in]`, B `[out, r]`).
    pairs: Pairs,
    /// Base tensor name → replacement (`modules_to_save`).
    replace: BTreeMap<String, HostTensor>,
}

impl LoraAdapter {
    /// Reads `adapter_config.json` and `adapter_model.safetensors` from `dir`.
    pub fn open(dir: &Path) -> Result<LoraAdapter> {
        let cfg = AdapterConfig::read(&dir.join("adapter_config.json"))?;
        let scale = if cfg.use_rslora {
            cfg.lora_alpha / (cfg.r as f64).sqrt()
        } else {
            cfg.lora_alpha / cfg.r as f64
        };

        let st_path = dir.join("adapter_model.safetensors");
        let saved: Vec<String> = cfg.modules_to_save.clone().unwrap_or_default();
        let (pairs, replace) = AdapterTensors::read(&st_path, &saved)?.into_pairs(cfg.r)?;
        if pairs.is_empty() && replace.is_empty() {
            return Err(lora_err(&st_path)("holds no LoRA weights".into()));
        }
        Ok(LoraAdapter {
            dir: dir.to_path_buf(),
            r: cfg.r,
            alpha: cfg.lora_alpha,
            scale: scale as f32,
            pairs,
            replace,
        })
    }

    /// Checks every adapted or replaced module against the base model's tensors and shapes.
    pub fn check_against(&self, shapes: &BTreeMap<String, Vec<usize>>) -> Result<()> {
        let err = |detail: String| BuildError::Lora {
            file: self.dir.display().to_string(),
            detail,
        };
        for (name, (a, b)) in &self.pairs {
            let shape = shapes.get(name).ok_or_else(|| {
                err(format!(
                    "adapts '{name}', which the base model does not have"
                ))
            })?;
            let want = [b.shape[0], a.shape[1]];
            if shape.as_slice() != want {
                return Err(err(format!(
                    "'{name}' is {shape:?} in the base model, but B·A is {want:?} (lora_A {:?}, lora_B {:?})",
                    a.shape, b.shape
                )));
            }
        }
        for (name, t) in &self.replace {
            let shape = shapes.get(name).ok_or_else(|| {
                err(format!(
                    "modules_to_save replaces '{name}', which the base model does not have"
                ))
            })?;
            if *shape != t.shape {
                return Err(err(format!(
                    "modules_to_save '{name}' is {:?}, the base model's is {shape:?}",
                    t.shape
                )));
            }
        }
        Ok(())
    }

    /// The replacement for `name`, if the adapter saves that module.
    pub fn replacement(&self, name: &str) -> Option<&HostTensor> {
        self.replace.get(name)
    }

    /// Whether `name` is adapted.
    pub fn adapts(&self, name: &str) -> bool {
        self.pairs.contains_key(name)
    }

    /// Adds `s · B[r0..r1] · A` to `w` (rows `r0..r1` of `name`, row-major).
    pub fn merge_rows(&self, name: &str, r0: usize, r1: usize, w: &mut [f32]) {
        let Some((a, b)) = self.pairs.get(name) else {
            return;
        };
        let (r, cols) = (a.shape[0], a.shape[1]);
        let s = self.scale;
        use rayon::prelude::*;
        w.par_chunks_mut(cols)
            .enumerate()
            .take(r1 - r0)
            .for_each(|(i, row)| {
                // As PEFT: delta = (B · A) * s first, then W + delta.
                let brow = &b.data[(r0 + i) * r..(r0 + i + 1) * r];
                let mut delta = vec![0f32; cols];
                for (k, &bk) in brow.iter().enumerate() {
                    let arow = &a.data[k * cols..(k + 1) * cols];
                    for (d, &av) in delta.iter_mut().zip(arow) {
                        *d += bk * av;
                    }
                }
                for (o, d) in row.iter_mut().zip(delta) {
                    *o += d * s;
                }
            });
    }

    /// What was merged, for the manifest.
    pub fn summary(&self) -> LoraSummary {
        LoraSummary {
            source: self.dir.display().to_string(),
            r: self.r,
            alpha: self.alpha,
            scale: self.scale as f64,
            merged: self.pairs.len(),
            replaced: self.replace.len(),
        }
    }
}
