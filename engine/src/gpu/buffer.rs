//! Device buffers as the backend hands them out: f32 buffers, KV caches and LQ4 matrices.

use crate::backend::{BufferLen, KvFormat, MatrixShape};

/// A device buffer of `len` 4-byte elements.
#[derive(Clone, Debug)]
pub struct GpuBuffer {
    /// The wgpu buffer (may be larger than `len` elements).
    pub buf: wgpu::Buffer,
    /// Elements.
    pub len: usize,
}

impl BufferLen for GpuBuffer {
    fn len(&self) -> usize {
        self.len
    }
}

/// A KV cache on the device: `len` values, as f32 or as f16 halves two to a 4-byte word (value
/// `i` in half `i % 2` of word `i / 2`, the lower half first, as `pack2x16float` packs them).
#[derive(Clone, Debug)]
pub struct GpuKv {
    /// The wgpu buffer.
    pub buf: wgpu::Buffer,
    /// Values.
    pub len: usize,
    /// How they are stored.
    pub format: KvFormat,
}

impl BufferLen for GpuKv {
    fn len(&self) -> usize {
        self.len
    }
}

/// An LQ4 matrix on the device: one buffer with the three sections.
#[derive(Clone, Debug)]
pub struct GpuQ4 {
    /// Packed words.
    pub buf: wgpu::Buffer,
    /// N.
    pub rows: usize,
    /// K.
    pub cols: usize,
    /// Word offset of the sub-scale section.
    pub sm_off: usize,
    /// Word offset of the row-scale section.
    pub rows_off: usize,
    /// The layout as the kernels' `kind`: 0 LQ4, 1 `lq4h`, 2 `q8_0` ([`GpuQ4::Q8`]).
    pub kind: u32,
}

impl MatrixShape for GpuQ4 {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
}

impl GpuQ4 {
    /// `kind` of a `q8_0` matrix (8-bit codes: its own GEMV kernel).
    pub const Q8: u32 = 2;
}
