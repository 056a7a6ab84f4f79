//! Where model weights come from: a Hugging Face folder (safetensors, sharded or not, f32 /
//! f16 / bf16) or a GGUF file. Both answer by **Hugging Face tensor name** with an f32 copy in
//! HF layout (`[out_features, in_features]` for a linear weight), so a model file is written
//! once against HF names whatever the source.

use std::collections::BTreeMap;

use crate::error::{EngineError, Result};
use crate::format::gguf::{GgmlType, Gguf, Value};

/// A tensor in HF layout.
#[derive(Clone, Debug)]
pub struct HostTensor {
    /// Shape, slowest dimension first.
    pub shape: Vec<usize>,
    /// Row-major f32 values.
    pub data: Vec<f32>,
}

/// A source of named weights.
pub trait WeightSource {
    /// Names the source in errors.
    fn describe(&self) -> String;
    /// The tensor called `name` (HF naming), or `None` if absent.
    fn get(&self, name: &str) -> Result<Option<HostTensor>>;
    /// Whether `name` is present, without reading it where the source can tell.
    fn contains(&self, name: &str) -> bool {
        matches!(self.get(name), Ok(Some(_)))
    }
    /// The tensor as prequantized LQ4 row blocks `(first row, block)`, when the source stores
    /// it so (bundles); the loader then uploads it without requantizing.
    fn q4_parts(&self, _name: &str) -> Result<Option<Vec<(usize, crate::quant::Q4Matrix)>>> {
        Ok(None)
    }
}

/// Fetches a tensor and checks its shape, naming tensor, source and both shapes on mismatch.
pub fn expect(src: &dyn WeightSource, name: &str, shape: &[usize]) -> Result<HostTensor> {
    let t = src.get(name)?.ok_or_else(|| EngineError::Format {
        file: src.describe(),
        detail: format!("tensor '{name}' is missing"),
    })?;
    if t.shape != shape {
        return Err(EngineError::Format {
            file: src.describe(),
            detail: format!(
                "tensor '{name}' has shape {:?}, the config implies {shape:?}",
                t.shape
            ),
        });
    }
    if let Some(i) = t.data.iter().position(|v| !v.is_finite()) {
        return Err(EngineError::Format {
            file: src.describe(),
            detail: format!(
                "tensor '{name}' holds a non-finite value ({}) at element {i}",
                t.data[i]
            ),
        });
    }
    Ok(t)
}

/// Safetensors files, from memory (wasm, tests) or a folder.
pub struct Safetensors {
    source: String,
    /// (file name, bytes) per shard.
    shards: Vec<(String, Vec<u8>)>,
    /// tensor name -> shard index.
    index: BTreeMap<String, usize>,
}

impl Safetensors {
    /// From in-memory shards; validates every header (offsets that lie, truncation).
    pub fn from_shards(source: &str, shards: Vec<(String, Vec<u8>)>) -> Result<Safetensors> {
        let mut index = BTreeMap::new();
        for (i, (name, bytes)) in shards.iter().enumerate() {
            let st =
                safetensors::SafeTensors::deserialize(bytes).map_err(|e| EngineError::Format {
                    file: name.clone(),
                    detail: format!("invalid safetensors: {e}"),
                })?;
            for n in st.names() {
                index.insert(n.to_string(), i);
            }
        }
        Ok(Safetensors {
            source: source.into(),
            shards,
            index,
        })
    }

    /// Opens `model.safetensors`, or every shard listed by `model.safetensors.index.json`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(dir: &std::path::Path) -> Result<Safetensors> {
        let mut shards = Vec::new();
        for p in shard_paths(dir)? {
            let bytes = std::fs::read(&p).map_err(|e| EngineError::Io {
                path: p.display().to_string(),
                detail: e.to_string(),
            })?;
            shards.push((p.display().to_string(), bytes));
        }
        Self::from_shards(&dir.display().to_string(), shards)
    }

    /// Opens one safetensors file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_file(path: &std::path::Path) -> Result<Safetensors> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        let name = path.display().to_string();
        Self::from_shards(&name, vec![(name.clone(), bytes)])
    }

    /// Tensor names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }
}

impl WeightSource for Safetensors {
    fn describe(&self) -> String {
        self.source.clone()
    }

    fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        let Some(&i) = self.index.get(name) else {
            return Ok(None);
        };
        let (file, bytes) = &self.shards[i];
        let fmt = |detail: String| EngineError::Format {
            file: file.clone(),
            detail,
        };
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| fmt(format!("invalid safetensors: {e}")))?;
        let t = st
            .tensor(name)
            .map_err(|e| fmt(format!("tensor '{name}': {e}")))?;
        let raw = t.data();
        use safetensors::Dtype;
        let data: Vec<f32> = match t.dtype() {
            Dtype::F32 => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                .collect(),
            d => {
                return Err(fmt(format!(
                    "tensor '{name}' has dtype {d:?}; only F32, F16 and BF16 are supported"
                )))
            }
        };
        Ok(Some(HostTensor {
            shape: t.shape().to_vec(),
            data,
        }))
    }
}

/// A GGUF file answering by HF names: `blk.N.attn_q.weight` is `model.layers.N.self_attn.q_proj.weight`,
/// and so on. Llama-architecture files store q/k rows permuted for llama.cpp's interleaved RoPE;
/// they are permuted back to HF's rotate-half order here.
pub struct GgufSource {
    gguf: Gguf,
    arch: String,
}

impl GgufSource {
    /// Wraps a parsed file.
    pub fn new(gguf: Gguf) -> Result<GgufSource> {
        let arch = gguf
            .get("general.architecture")
            .and_then(Value::as_str)
            .ok_or_else(|| EngineError::Format {
                file: gguf.source.clone(),
                detail: "no general.architecture".into(),
            })?
            .to_string();
        Ok(GgufSource { gguf, arch })
    }

    /// The file.
    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    /// `general.architecture`.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    fn key(&self, k: &str) -> Option<&Value> {
        self.gguf.get(&format!("{}.{k}", self.arch))
    }

    fn gguf_name(name: &str) -> Option<String> {
        let fixed = [
            ("model.embed_tokens.weight", "token_embd.weight"),
            ("model.norm.weight", "output_norm.weight"),
            ("lm_head.weight", "output.weight"),
        ];
        if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == name) {
            return Some(g.to_string());
        }
        let rest = name.strip_prefix("model.layers.")?;
        let (n, tail) = rest.split_once('.')?;
        let g = match tail {
            "input_layernorm.weight" => "attn_norm.weight",
            "post_attention_layernorm.weight" => "ffn_norm.weight",
            "self_attn.q_proj.weight" => "attn_q.weight",
            "self_attn.k_proj.weight" => "attn_k.weight",
            "self_attn.v_proj.weight" => "attn_v.weight",
            "self_attn.o_proj.weight" => "attn_output.weight",
            "self_attn.q_norm.weight" => "attn_q_norm.weight",
            "self_attn.k_norm.weight" => "attn_k_norm.weight",
            "mlp.gate_proj.weight" => "ffn_gate.weight",
            "mlp.up_proj.weight" => "ffn_up.weight",
            "mlp.down_proj.weight" => "ffn_down.weight",
            _ => return None,
        };
        Some(format!("blk.{n}.{g}"))
    }
}

/// Undoes llama.cpp's q/k permutation: GGUF row `h*hd + 2j + t` is HF row `h*hd + t*hd/2 + j`.
/// Rows are `cols` elements of any type (f32 values, or a row's quantized blocks as bytes).
fn unpermute_rows<T: Copy + Default>(data: &[T], rows: usize, cols: usize, heads: usize) -> Vec<T> {
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![T::default(); data.len()];
    for h in 0..heads {
        for j in 0..half {
            for t in 0..2 {
                let src = h * hd + 2 * j + t;
                let dst = h * hd + t * half + j;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&data[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

impl WeightSource for GgufSource {
    fn describe(&self) -> String {
        self.gguf.source.clone()
    }

    /// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 matrices as the file holds them (`lq4h`; `q8_0` for the
    /// 5- and 8-bit ones), the same values, and Q4_K / Q5_K / Q6_K ones with their codes and f16
    /// group scales (`lq4h`; `q8_0` for Q5_K / Q6_K, see `ggml_blocks.rs`); llama's q/k rows unpermuted as
    /// whole rows of blocks. Other types are read through [`Self::get`].
    fn q4_parts(&self, name: &str) -> Result<Option<Vec<(usize, crate::quant::Q4Matrix)>>> {
        use crate::quant::Q4Matrix;
        let Some(info) = Self::gguf_name(name).and_then(|g| self.gguf.tensor(&g)) else {
            return Ok(None);
        };
        let (ty, raw) = self.gguf.raw(info)?;
        let kept = [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
            GgmlType::Q4K,
            GgmlType::Q5K,
            GgmlType::Q6K,
        ];
        if info.dims.len() != 2 || !kept.contains(&ty) {
            return Ok(None);
        }
        let (rows, cols) = (info.dims[1] as usize, info.dims[0] as usize);
        let what = format!("{} ('{}' in {})", name, info.name, self.gguf.source);
        let heads = self.permuted_heads(&info.name);
        let raw = match heads {
            Some(h) if rows.is_multiple_of(2 * h) => {
                std::borrow::Cow::Owned(unpermute_rows(raw, rows, raw.len() / rows.max(1), h))
            }
            // Heads that do not tile the rows: the f32 path reports what is wrong.
            Some(_) => return Ok(None),
            None => std::borrow::Cow::Borrowed(raw),
        };
        let m = match ty {
            GgmlType::Q4_1 => Q4Matrix::from_ggml_q4_1(&what, rows, cols, &raw)?,
            GgmlType::Q8_0 => Q4Matrix::from_ggml_q8_0(&what, rows, cols, &raw)?,
            GgmlType::Q5_0 => Q4Matrix::from_ggml_q5(&what, rows, cols, &raw, false)?,
            GgmlType::Q5_1 => Q4Matrix::from_ggml_q5(&what, rows, cols, &raw, true)?,
            GgmlType::Q4K => Q4Matrix::from_ggml_q4_k(&what, rows, cols, &raw)?,
            GgmlType::Q5K => Q4Matrix::from_ggml_q5_k(&what, rows, cols, &raw)?,
            GgmlType::Q6K => Q4Matrix::from_ggml_q6_k(&what, rows, cols, &raw)?,
            _ => Q4Matrix::from_ggml_q4_0(&what, rows, cols, &raw)?,
        };
        Ok(Some(vec![(0, m)]))
    }

    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        let Some(gname) = Self::gguf_name(name) else {
            return Ok(None);
        };
        let Some(info) = self.gguf.tensor(&gname) else {
            return Ok(None);
        };
        let mut data = self.gguf.dequantize(info)?;
        let shape: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
        if shape.len() == 2 {
            if let Some(h) = self.permuted_heads(&gname) {
                data = unpermute_rows(&data, shape[0], shape[1], h);
            }
        }
        Ok(Some(HostTensor { shape, data }))
    }
}

impl GgufSource {
    /// The head count whose q/k row permutation llama.cpp applied to tensor `gname` (llama
    /// only), if any.
    fn permuted_heads(&self, gname: &str) -> Option<usize> {
        if self.arch != "llama" {
            return None;
        }
        let heads = if gname.ends_with("attn_q.weight") {
            self.key("attention.head_count")
        } else if gname.ends_with("attn_k.weight") {
            self.key("attention.head_count_kv")
                .or_else(|| self.key("attention.head_count"))
        } else {
            None
        };
        // Zero heads would divide by zero below; the model's config check names it.
        heads
            .and_then(Value::as_u64)
            .map(|h| h as usize)
            .filter(|&h| h > 0)
    }
}

/// The shard files of a Hugging Face model folder: `model.safetensors`, or the files
/// `model.safetensors.index.json`'s `weight_map` names (sorted, once each, never outside the
/// folder).
#[cfg(not(target_arch = "wasm32"))]
pub fn shard_paths(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    let idx = dir.join("model.safetensors.index.json");
    if !idx.exists() {
        return Ok(vec![dir.join("model.safetensors")]);
    }
    let file = idx.display().to_string();
    let bytes = std::fs::read(&idx).map_err(|e| EngineError::Io {
        path: file.clone(),
        detail: e.to_string(),
    })?;
    Ok(shard_names(&file, &bytes)?
        .iter()
        .map(|n| dir.join(n))
        .collect())
}

/// The shard file names a `model.safetensors.index.json` lists in its `weight_map` (sorted,
/// once each); a name that would leave the model's folder is refused. `file` names the index in
/// errors.
pub fn shard_names(file: &str, bytes: &[u8]) -> Result<Vec<String>> {
    let bad = |detail: String| EngineError::Format {
        file: file.to_string(),
        detail,
    };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("no weight_map object".into()))?;
    let mut names: Vec<&str> = map.values().filter_map(|s| s.as_str()).collect();
    names.sort();
    names.dedup();
    if let Some(n) = names.iter().find(|n| {
        n.is_empty() || n.contains('/') || n.contains('\\') || n.contains("..") || n.contains(':')
    }) {
        return Err(bad(format!("shard name '{n}' leaves the folder")));
    }
    if names.is_empty() {
        return Err(bad("weight_map names no shard".into()));
    }
    Ok(names.into_iter().map(String::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        // llama.cpp: reshape(heads, 2, hd/2, cols).swapaxes(1, 2): HF row h*hd + t*hd/2 + j
        // goes to GGUF row h*hd + 2j + t.
        let (heads, hd, cols) = (2, 6, 3);
        let rows = heads * hd;
        let hf: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let mut gguf = vec![0f32; hf.len()];
        for h in 0..heads {
            for t in 0..2 {
                for j in 0..hd / 2 {
                    let (src, dst) = (h * hd + t * hd / 2 + j, h * hd + 2 * j + t);
                    gguf[dst * cols..(dst + 1) * cols]
                        .copy_from_slice(&hf[src * cols..(src + 1) * cols]);
                }
            }
        }
        assert_eq!(unpermute_rows(&gguf, rows, cols, heads), hf);
    }

    #[test]
    fn safetensors_errors_name_the_file() {
        let e = Safetensors::from_shards("m", vec![("bad.safetensors".into(), vec![1, 2, 3])])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("bad.safetensors"), "{e}");
        // A header whose offsets point past the data.
        let header = br#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header);
        b.extend_from_slice(&[0u8; 8]);
        let e = Safetensors::from_shards("m", vec![("lies.safetensors".into(), b)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("lies.safetensors"), "{e}");
    }
}
