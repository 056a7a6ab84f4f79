//! GGUF (v2/v3) reader: metadata, tensor directory, and dequantization of the tensor types
//! the engine imports (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) to f32.
//!
//! Works on a byte slice, so the same code runs natively and in wasm. Every offset is checked
//! against the file length: a truncated file fails naming the tensor that runs past the end.

use std::collections::BTreeMap;

use crate::error::{EngineError, Result};

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any unsigned integer type.
    U64(u64),
    /// Any signed integer type.
    I64(i64),
    /// f32 or f64.
    F64(f64),
    /// bool.
    Bool(bool),
    /// UTF-8 string.
    Str(String),
    /// Array of values.
    Array(Vec<Value>),
}

impl Value {
    /// As an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            Value::I64(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    /// As a float, if numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F64(v) => Some(v),
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            _ => None,
        }
    }
    /// As a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// As an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// ggml tensor types this reader dequantizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// bfloat16.
    BF16,
    /// 8-bit, blocks of 32 with an f16 scale.
    Q8_0,
    /// 4-bit symmetric, blocks of 32 with an f16 scale.
    Q4_0,
    /// 4-bit asymmetric, blocks of 32 with f16 scale and min.
    Q4_1,
    /// 5-bit symmetric, blocks of 32 with an f16 scale (`d·(q − 16)`).
    Q5_0,
    /// 5-bit asymmetric, blocks of 32 with f16 scale and min (`d·q + m`).
    Q5_1,
    /// 4-bit k-quant, super-blocks of 256.
    Q4K,
    /// 5-bit k-quant, super-blocks of 256.
    Q5K,
    /// 6-bit k-quant, super-blocks of 256.
    Q6K,
}

impl GgmlType {
    fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    /// (weights per block, bytes per block).
    pub fn block(self) -> (usize, usize) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 | GgmlType::BF16 => (1, 2),
            GgmlType::Q8_0 => (32, 34),
            GgmlType::Q4_0 => (32, 18),
            GgmlType::Q4_1 => (32, 20),
            GgmlType::Q5_0 => (32, 22),
            GgmlType::Q5_1 => (32, 24),
            GgmlType::Q4K => (256, 144),
            GgmlType::Q5K => (256, 176),
            GgmlType::Q6K => (256, 210),
        }
    }
}

/// One tensor's directory entry.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// GGUF name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, fastest first (GGUF order: `[cols, rows]` for a matrix).
    pub dims: Vec<u64>,
    /// Element type, or the raw id if unsupported.
    pub ty: std::result::Result<GgmlType, u32>,
    /// Absolute byte offset in the file.
    pub offset: usize,
}

impl TensorInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product::<u64>() as usize
    }
}

/// A parsed GGUF file.
pub struct Gguf {
    /// Where it came from (for errors).
    pub source: String,
    /// Metadata by key.
    pub metadata: BTreeMap<String, Value>,
    /// Tensor directory.
    pub tensors: Vec<TensorInfo>,
    bytes: Vec<u8>,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    source: &'a str,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: &str) -> EngineError {
        EngineError::Format {
            file: self.source.to_string(),
            detail: format!(
                "{what} at byte {} (file has {} bytes)",
                self.at,
                self.b.len()
            ),
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        match end {
            Some(e) => {
                let s = &self.b[self.at..e];
                self.at = e;
                Ok(s)
            }
            None => Err(self.err(&format!("truncated: need {n} more bytes"))),
        }
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn len(&mut self, what: &str) -> Result<usize> {
        let n = self.u64()?;
        if n > (self.b.len() - self.at.min(self.b.len())) as u64 {
            return Err(self.err(&format!("{what} length {n} exceeds the file")));
        }
        Ok(n as usize)
    }
    fn string(&mut self) -> Result<String> {
        let n = self.len("string")?;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.err("invalid UTF-8 in a string"))
    }
    fn value(&mut self, ty: u32, depth: usize) -> Result<Value> {
        Ok(match ty {
            0 => Value::U64(self.take(1)?[0] as u64),
            1 => Value::I64(self.take(1)?[0] as i8 as i64),
            2 => {
                let s = self.take(2)?;
                Value::U64(u16::from_le_bytes([s[0], s[1]]) as u64)
            }
            3 => {
                let s = self.take(2)?;
                Value::I64(i16::from_le_bytes([s[0], s[1]]) as i64)
            }
            4 => Value::U64(self.u32()? as u64),
            5 => Value::I64(self.u32()? as i32 as i64),
            6 => Value::F64(f32::from_bits(self.u32()?) as f64),
            7 => Value::Bool(self.take(1)?[0] != 0),
            8 => Value::Str(self.string()?),
            9 => {
                if depth > 2 {
                    return Err(self.err("arrays nested too deeply"));
                }
                let ety = self.u32()?;
                let n = self.len("array")?;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    v.push(self.value(ety, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(self.u64()? as i64),
            12 => Value::F64(f64::from_bits(self.u64()?)),
            t => return Err(self.err(&format!("unknown metadata type {t}"))),
        })
    }
}

impl Gguf {
    /// Parses `bytes` (the whole file). `source` names it in errors.
    pub fn parse(source: &str, bytes: Vec<u8>) -> Result<Gguf> {
        let mut c = Cursor {
            b: &bytes,
            at: 0,
            source,
        };
        if c.take(4)? != b"GGUF" {
            return Err(EngineError::Format {
                file: source.into(),
                detail: "not a GGUF file (magic is not 'GGUF')".into(),
            });
        }
        let version = c.u32()?;
        if !(2..=3).contains(&version) {
            return Err(c.err(&format!("unsupported GGUF version {version}")));
        }
        let n_tensors = c.u64()?;
        let n_kv = c.u64()?;
        if n_tensors > 1 << 20 || n_kv > 1 << 20 {
            return Err(c.err("implausible tensor or metadata count"));
        }
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.string()?;
            let ty = c.u32()?;
            let v = c.value(ty, 0)?;
            metadata.insert(key, v);
        }
        let mut raw = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string()?;
            let nd = c.u32()? as usize;
            if nd > 4 {
                return Err(c.err(&format!("tensor '{name}' has {nd} dimensions")));
            }
            let dims = (0..nd).map(|_| c.u64()).collect::<Result<Vec<_>>>()?;
            let ty = c.u32()?;
            let off = c.u64()?;
            raw.push((name, dims, ty, off));
        }
        let align = metadata
            .get("general.alignment")
            .and_then(Value::as_u64)
            .unwrap_or(32)
            .max(1) as usize;
        let data_start = c.at.next_multiple_of(align);
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, tyid, off) in raw {
            // Element count checked once here, so `numel` never overflows later.
            let count = dims.iter().try_fold(1usize, |a, &d| {
                usize::try_from(d).ok().and_then(|d| a.checked_mul(d))
            });
            if count.is_none_or(|n| n > bytes.len().saturating_mul(8)) {
                return Err(EngineError::Format {
                    file: source.into(),
                    detail: format!(
                        "tensor '{name}' has dimensions {dims:?}, more elements than a {}-byte file can hold",
                        bytes.len()
                    ),
                });
            }
            let ty = GgmlType::from_id(tyid).ok_or(tyid);
            let info = TensorInfo {
                offset: data_start.saturating_add(off as usize),
                name,
                dims,
                ty,
            };
            if let Ok(t) = info.ty {
                let (bw, bb) = t.block();
                let n = info.numel();
                if !n.is_multiple_of(bw) {
                    return Err(EngineError::Format {
                        file: source.into(),
                        detail: format!(
                            "tensor '{}' has {n} elements, not a multiple of its block of {bw}",
                            info.name
                        ),
                    });
                }
                let end = (n / bw)
                    .checked_mul(bb)
                    .and_then(|size| info.offset.checked_add(size))
                    .unwrap_or(usize::MAX);
                if end > bytes.len() {
                    return Err(EngineError::Format {
                        file: source.into(),
                        detail: format!(
                            "tensor '{}' ends at byte {end} but the file has {} bytes (truncated?)",
                            info.name,
                            bytes.len()
                        ),
                    });
                }
            }
            tensors.push(info);
        }
        Ok(Gguf {
            source: source.into(),
            metadata,
            tensors,
            bytes,
        })
    }

    /// Reads and parses a file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path) -> Result<Gguf> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&path.display().to_string(), bytes)
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// A tensor's directory entry.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Dequantizes a tensor to f32 in GGUF element order (fastest dimension first).
    pub fn dequantize(&self, info: &TensorInfo) -> Result<Vec<f32>> {
        let (ty, data) = self.raw(info)?;
        let mut out = vec![0f32; info.numel()];
        dequantize_into(ty, data, &mut out);
        Ok(out)
    }

    /// A tensor's type and stored bytes (its blocks as the file holds them; the parser checked
    /// that they lie inside the file).
    pub fn raw(&self, info: &TensorInfo) -> Result<(GgmlType, &[u8])> {
        let ty = info.ty.map_err(|id| EngineError::Format {
            file: self.source.clone(),
            detail: format!(
                "tensor '{}' has ggml type {id}, which is not supported",
                info.name
            ),
        })?;
        let (bw, bb) = ty.block();
        Ok((
            ty,
            &self.bytes[info.offset..info.offset + info.numel() / bw * bb],
        ))
    }
}

fn f16(b: &[u8]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

/// The 32 five-bit codes (0..=31) of a Q5_0 / Q5_1 block from its `qh` (4 bytes: bit `j` is
/// weight `j`'s fifth bit) and `qs` (16 bytes: weight `j` in the low nibble of byte `j`, weight
/// `j + 16` in the high one), as llama.cpp's `dequantize_row_q5_0` reads them.
pub fn q5_codes(qh_qs: &[u8], out: &mut [u8; 32]) {
    let qh = u32::from_le_bytes([qh_qs[0], qh_qs[1], qh_qs[2], qh_qs[3]]);
    let qs = &qh_qs[4..20];
    for j in 0..16 {
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        out[j] = (qs[j] & 0x0F) | h0;
        out[j + 16] = (qs[j] >> 4) | h1;
    }
}

/// Sub-block `j`'s 6-bit scale and min from a Q4_K / Q5_K super-block's 12 packed bytes
/// (ggml's `get_scale_min_k4`).
pub(crate) fn kquant_scale_min(q: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Group `j`'s 32 five-bit codes (0..=31) of a Q5_K super-block (176 bytes: 32 bytes of fifth
/// bits from byte 16, 128 of nibbles from byte 48; group `2c` takes the low nibbles of
/// `qs[32c..32c + 32]` and bit `2c` of each `qh` byte, group `2c + 1` the high nibbles and bit
/// `2c + 1`), as llama.cpp's `dequantize_row_q5_K` reads them.
pub(crate) fn q5k_codes(b: &[u8], j: usize, out: &mut [u8; 32]) {
    let (qh, qs) = (&b[16..48], &b[48 + 32 * (j / 2)..48 + 32 * (j / 2) + 32]);
    for (l, o) in out.iter_mut().enumerate() {
        *o = ((qs[l] >> (4 * (j % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4);
    }
}

/// The 256 six-bit codes (−32..=31) of a Q6_K super-block (210 bytes: 128 of low nibbles, 64
/// of high bit pairs), in weight order, as llama.cpp's `dequantize_row_q6_K` reads them.
pub(crate) fn q6k_codes(b: &[u8]) -> [i32; 256] {
    let mut q = [0i32; 256];
    for h in 0..2 {
        let (ql, qh) = (&b[64 * h..], &b[128 + 32 * h..]);
        for l in 0..32 {
            let o = 128 * h + l;
            q[o] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
            q[o + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            q[o + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            q[o + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
        }
    }
    q
}

/// Dequantizes `data` of type `ty` into `out` (whose length is the element count).
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) {
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = f16(c);
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16);
            }
        }
        GgmlType::Q8_0 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(34)) {
                let d = f16(b);
                for (i, x) in o.iter_mut().enumerate() {
                    *x = d * (b[2 + i] as i8) as f32;
                }
            }
        }
        GgmlType::Q4_0 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(18)) {
                let d = f16(b);
                for j in 0..16 {
                    let q = b[2 + j];
                    o[j] = ((q & 0xF) as f32 - 8.0) * d;
                    o[j + 16] = ((q >> 4) as f32 - 8.0) * d;
                }
            }
        }
        GgmlType::Q4_1 => {
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(20)) {
                let (d, m) = (f16(b), f16(&b[2..]));
                for j in 0..16 {
                    let q = b[4 + j];
                    o[j] = (q & 0xF) as f32 * d + m;
                    o[j + 16] = (q >> 4) as f32 * d + m;
                }
            }
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let bb = ty.block().1;
            for (o, b) in out.chunks_exact_mut(32).zip(data.chunks_exact(bb)) {
                let (d, m) = if ty == GgmlType::Q5_1 {
                    (f16(b), f16(&b[2..]))
                } else {
                    (f16(b), 0.0)
                };
                let mut q = [0u8; 32];
                q5_codes(&b[bb - 20..], &mut q);
                for (o, &q) in o.iter_mut().zip(&q) {
                    *o = if ty == GgmlType::Q5_1 {
                        q as f32 * d + m
                    } else {
                        (q as i32 - 16) as f32 * d
                    };
                }
            }
        }
        GgmlType::Q4K => {
            for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(144)) {
                let (d, dmin) = (f16(b), f16(&b[2..]));
                let scales = &b[4..16];
                let qs = &b[16..144];
                for c in 0..4 {
                    let (s1, m1) = kquant_scale_min(scales, 2 * c);
                    let (s2, m2) = kquant_scale_min(scales, 2 * c + 1);
                    let (s1, m1, s2, m2) = (s1 as f32, m1 as f32, s2 as f32, m2 as f32);
                    let q = &qs[32 * c..32 * c + 32];
                    for l in 0..32 {
                        o[64 * c + l] = d * s1 * (q[l] & 0xF) as f32 - dmin * m1;
                        o[64 * c + 32 + l] = d * s2 * (q[l] >> 4) as f32 - dmin * m2;
                    }
                }
            }
        }
        GgmlType::Q5K => {
            // f16 d, f16 dmin, 12 bytes of 6-bit (sc, m), then the codes (`q5k_codes`).
            for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(176)) {
                let (d, dmin) = (f16(b), f16(&b[2..]));
                let mut q = [0u8; 32];
                for (j, o) in o.chunks_exact_mut(32).enumerate() {
                    let (sc, m) = kquant_scale_min(&b[4..16], j);
                    q5k_codes(b, j, &mut q);
                    for (o, &q) in o.iter_mut().zip(&q) {
                        *o = d * sc as f32 * q as f32 - dmin * m as f32;
                    }
                }
            }
        }
        GgmlType::Q6K => {
            // Weight i of a super-block is d · sc[i / 16] · q[i].
            for (o, b) in out.chunks_exact_mut(256).zip(data.chunks_exact(210)) {
                let (sc, d) = (&b[192..208], f16(&b[208..]));
                for (i, (o, q)) in o.iter_mut().zip(q6k_codes(b)).enumerate() {
                    *o = d * (sc[i / 16] as i8) as f32 * q as f32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push_str(b: &mut Vec<u8>, s: &str) {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    }

    /// A minimal GGUF with one metadata string and one Q4_1 tensor of 32 elements.
    fn tiny() -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        push_str(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        push_str(&mut b, "llama");
        push_str(&mut b, "w");
        b.extend(1u32.to_le_bytes());
        b.extend(32u64.to_le_bytes());
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
        b.extend(half::f16::from_f32(0.5).to_bits().to_le_bytes());
        b.extend(half::f16::from_f32(-1.0).to_bits().to_le_bytes());
        for j in 0..16u8 {
            b.push(j | ((15 - j) << 4));
        }
        b
    }

    #[test]
    fn parses_and_dequantizes_q4_1() {
        let g = Gguf::parse("tiny", tiny()).expect("parse");
        assert_eq!(
            g.get("general.architecture").and_then(Value::as_str),
            Some("llama")
        );
        let t = g.tensor("w").expect("tensor").clone();
        let v = g.dequantize(&t).expect("dequant");
        for j in 0..16 {
            assert_eq!(v[j], j as f32 * 0.5 - 1.0);
            assert_eq!(v[j + 16], (15 - j) as f32 * 0.5 - 1.0);
        }
    }

    #[test]
    fn truncation_names_the_tensor() {
        let mut b = tiny();
        b.truncate(b.len() - 3);
        let e = Gguf::parse("tiny.gguf", b)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("tensor 'w'") && e.contains("truncated"), "{e}");
        let e = Gguf::parse("x.gguf", b"GGUF\x03\0\0\0".to_vec())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("x.gguf") && e.contains("truncated"), "{e}");
        let e = Gguf::parse("y.bin", b"PK\x03\x04".to_vec())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not a GGUF"), "{e}");
    }

    #[test]
    fn q4k_and_q6k_follow_ggml() {
        // One Q4_K block: d = 1, dmin = 0.5, sub-block 0 scale 3 / min 2, codes all 5.
        let mut b = vec![0u8; 144];
        b[0..2].copy_from_slice(&half::f16::from_f32(1.0).to_bits().to_le_bytes());
        b[2..4].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
        b[4] = 3; // scale of sub-block 0
        b[8] = 2; // min of sub-block 0
        for q in &mut b[16..144] {
            *q = 0x55;
        }
        let mut out = vec![0f32; 256];
        dequantize_into(GgmlType::Q4K, &b, &mut out);
        assert_eq!(out[0], 3.0 * 5.0 - 0.5 * 2.0);
        assert_eq!(out[32], 0.0); // sub-block 1 has scale 0, min 0
                                  // One Q6_K block: d = 2, all scales 1, all codes 33 (q = 1).
        let mut b = vec![0u8; 210];
        for q in &mut b[0..128] {
            *q = 0x11;
        }
        for q in &mut b[128..192] {
            *q = 0b1010_1010;
        }
        for s in &mut b[192..208] {
            *s = 1;
        }
        b[208..210].copy_from_slice(&half::f16::from_f32(2.0).to_bits().to_le_bytes());
        let mut out = vec![0f32; 256];
        dequantize_into(GgmlType::Q6K, &b, &mut out);
        assert!(
            out.iter().all(|&v| v == 2.0 * (33.0 - 32.0)),
            "{:?}",
            &out[..4]
        );
    }
}
