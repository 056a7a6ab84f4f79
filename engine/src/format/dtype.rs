//! How a bundle stores a tensor ([`DType`]) and the quantization policy it was built with
//! ([`Quant`]): the manifest's `dtype` and `quant` fields (re-exported by [`super::bundle`]).

use serde::{Deserialize, Serialize};

use crate::quant::{BlockLayout, Q4Matrix, Q8Matrix, GROUP};

/// Storage of a tensor in the bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// Little-endian f32.
    F32,
    /// Little-endian IEEE f16.
    F16,
    /// [`Q8Matrix`] bytes (codes, then per-32 f32 scales).
    Q8,
    /// [`Q4Matrix`] words (LQ4).
    Lq4,
    /// [`Q4Matrix`] words with an f16 scale and min per group ([`BlockLayout::Lq4h`]): GGUF Q4_0 and
    /// Q4_1 tensors as the user brought them.
    Lq4h,
    /// [`Q4Matrix`] words of 8-bit codes with an f16 scale (and min) per group
    /// ([`BlockLayout::Q8`]): GGUF Q8_0, Q5_0 and Q5_1 tensors with the values the user brought.
    #[serde(rename = "q8_0")]
    Q80,
    /// [`Q4Matrix`] words of 5-bit codes (nibbles, then a plane of fifth bits) with an f16 scale
    /// and min per group ([`BlockLayout::Q5`]): GGUF Q5_0 and Q5_1 tensors as the user brought
    /// them, 6 bits a weight. A backend without `q5` kernels reads them as `q8_0`.
    Q5,
}

impl DType {
    /// Bytes of a `[rows, cols]` block (a 1-D tensor is one row).
    pub fn bytes_for(self, rows: usize, cols: usize) -> usize {
        match self {
            DType::F32 => 4 * rows * cols,
            DType::F16 => 2 * rows * cols,
            DType::Q8 => Q8Matrix::bytes_for(rows, cols),
            DType::Lq4 => 4 * Q4Matrix::words_for(rows, cols),
            DType::Lq4h => 4 * BlockLayout::Lq4h.words(rows, cols),
            DType::Q80 => 4 * BlockLayout::Q8.words(rows, cols),
            DType::Q5 => 4 * BlockLayout::Q5.words(rows, cols),
        }
    }

    /// Bytes of a `[rows, cols]` block as a backend may hold it: a `q5` block as `q8_0`
    /// where the backend has no `q5` kernels (the GPU, NEON), so a part sized by this fits
    /// one binding in every form.
    pub fn loaded_bytes_for(self, rows: usize, cols: usize) -> usize {
        match self {
            DType::Q5 => DType::Q80.bytes_for(rows, cols),
            other => other.bytes_for(rows, cols),
        }
    }

    /// The 4-bit layout this dtype stores, if it is one.
    pub fn q4_layout(self) -> Option<BlockLayout> {
        match self {
            DType::Lq4 => Some(BlockLayout::Lq4),
            DType::Lq4h => Some(BlockLayout::Lq4h),
            DType::Q80 => Some(BlockLayout::Q8),
            DType::Q5 => Some(BlockLayout::Q5),
            _ => None,
        }
    }
}

/// The quantization a bundle was built with (`--quant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quant {
    /// 4-bit matrices, f32 norms: a GGUF's own Q4_0 / Q4_1 blocks kept (`lq4h`), its Q5_0 /
    /// Q5_1 blocks too (`q5`), its Q8_0 ones (`q8_0`), everything else LQ4.
    Q4,
    /// LQ4 matrices, GGUF blocks requantized too (the smaller format), f32 norms.
    Lq4,
    /// 8-bit matrices as `q8_0` blocks (llama.cpp's `Q8_0`: an f16 scale per 32 int8 codes;
    /// a GGUF's own Q8_0 / Q5_0 / Q5_1 blocks kept), run by the block kernels; f32 norms.
    Q8,
    /// f16 matrices, f32 norms.
    F16,
    /// Everything f32.
    F32,
}

impl Quant {
    /// The dtype a matrix (2-D tensor) `[rows, cols]` gets under this policy. LQ4 and `q8_0`
    /// need `cols % 32 == 0`; other matrices fall back to q8 with f32 scales (dequantized at
    /// load).
    pub fn matrix_dtype(self, cols: usize) -> DType {
        match self {
            Quant::Q4 | Quant::Lq4 if cols.is_multiple_of(GROUP) => DType::Lq4,
            Quant::Q8 if cols.is_multiple_of(GROUP) => DType::Q80,
            Quant::Q4 | Quant::Lq4 | Quant::Q8 => DType::Q8,
            Quant::F16 => DType::F16,
            Quant::F32 => DType::F32,
        }
    }

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Q4 => "q4",
            Quant::Lq4 => "lq4",
            Quant::Q8 => "q8",
            Quant::F16 => "f16",
            Quant::F32 => "f32",
        }
    }
}
