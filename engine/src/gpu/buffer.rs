//! Device buffers as the backend hands them out: f32 buffers and LQ4 matrices.

use crate::backend::BufferLen;

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
    /// `lq4h`: an f16 `(s, m)` word per group, no row section ([`crate::quant::Scales::Half`]).
    pub half: bool,
}
