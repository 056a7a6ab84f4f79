//! The bounded little-endian reader of E5S1 files.

use crate::error::{EngineError, Result};

/// A little-endian cursor whose every read is bounds-checked and names the field it reads.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(file: &'a str, bytes: &'a [u8]) -> Self {
        Reader {
            bytes,
            pos: 0,
            file,
        }
    }

    pub(crate) fn err(&self, detail: String) -> EngineError {
        EngineError::Format {
            file: self.file.into(),
            detail,
        }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(self.err(format!(
                "{what} at byte {} needs {n} bytes but the file ends at byte {} (truncated?)",
                self.pos,
                self.bytes.len()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub(crate) fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    /// An `i32` count or size that must lie in `min..=max`.
    pub(crate) fn count(&mut self, what: &str, min: usize, max: usize) -> Result<usize> {
        let at = self.pos;
        let v = self.u32(what)? as i32;
        if v < 0 || (v as usize) < min || v as usize > max {
            return Err(self.err(format!(
                "{what} (at byte {at}) is {v}; this reader accepts {min}..={max}"
            )));
        }
        Ok(v as usize)
    }

    /// A `u64` size or offset as `usize` (wasm32 has 32-bit `usize`).
    pub(crate) fn size(&mut self, what: &str) -> Result<usize> {
        let at = self.pos;
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| {
            self.err(format!(
                "{what} (at byte {at}) is {v}, beyond this platform"
            ))
        })
    }

    /// `n` little-endian `u32`s.
    pub(crate) fn u32s(&mut self, n: usize, what: &str) -> Result<Vec<u32>> {
        let len = n
            .checked_mul(4)
            .ok_or_else(|| self.err(format!("{what}: {n} entries overflow")))?;
        Ok(self
            .take(len, what)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The file being read, as errors name it.
    pub(crate) fn file(&self) -> &'a str {
        self.file
    }
}
