//! Model architectures, one file each (candle style): `Config` deserialized with Hugging Face's
//! own field names, one struct per sub-layer with `new` and `forward`, weights addressed by HF
//! tensor names and shape-checked at load.

pub mod bert;
pub mod e5s1;
pub mod llama;

use crate::backend::{Backend, MatmulKernel};
use crate::error::{EngineError, Result};
use crate::quant::Q4Matrix;
use crate::weights::{expect, WeightSource};

/// How matmul weights are stored on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// f32, as loaded (exact against the reference implementation).
    F32,
    /// LQ4 4-bit (see [`crate::quant`]), quantized at load.
    Q4,
}

/// Activation rows at or below which a matmul uses the GEMV kernel.
pub const GEMV_MAX_ROWS: usize = 4;

/// A linear layer `y = x W^T` without bias, `W[out][in]`.
pub enum Linear<B: Backend> {
    /// 4-bit weights.
    Q4(B::Q4),
    /// 4-bit weights in row blocks `(first row, block)`, for matrices over one binding's size
    /// limit (Qwen3-4B's tied embedding).
    Q4Blocks {
        /// The blocks in row order.
        blocks: Vec<(usize, B::Q4)>,
        /// Output features of the whole matrix.
        rows: usize,
    },
    /// f32 weights.
    F32 {
        /// `W`, row-major.
        w: B::Buffer,
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
}

impl<B: Backend> Clone for Linear<B> {
    fn clone(&self) -> Self {
        match self {
            Linear::Q4(q) => Linear::Q4(q.clone()),
            Linear::Q4Blocks { blocks, rows } => Linear::Q4Blocks {
                blocks: blocks.clone(),
                rows: *rows,
            },
            Linear::F32 { w, rows, cols } => Linear::F32 {
                w: w.clone(),
                rows: *rows,
                cols: *cols,
            },
        }
    }
}

impl<B: Backend> Linear<B> {
    /// Loads `name` with shape `[rows, cols]` in the requested format. LQ4 row blocks stored
    /// by the source (a bundle) are uploaded as they are.
    pub fn new(
        b: &B,
        src: &dyn WeightSource,
        name: &str,
        rows: usize,
        cols: usize,
        fmt: WeightFormat,
    ) -> Result<Self> {
        if fmt == WeightFormat::Q4 {
            if let Some(parts) = src.q4_parts(name)? {
                return Self::from_q4_parts(b, src, name, rows, cols, parts);
            }
        }
        let t = expect(src, name, &[rows, cols])?;
        Self::from_host(b, name, rows, cols, &t.data, fmt)
    }

    /// Uploads prequantized row blocks after checking that they tile `[rows, cols]`.
    fn from_q4_parts(
        b: &B,
        src: &dyn WeightSource,
        name: &str,
        rows: usize,
        cols: usize,
        parts: Vec<(usize, Q4Matrix)>,
    ) -> Result<Self> {
        let mut next = 0;
        for (r0, m) in &parts {
            if *r0 != next || m.cols != cols || m.rows == 0 {
                return Err(EngineError::Format {
                    file: src.describe(),
                    detail: format!(
                        "tensor '{name}': LQ4 block at row {r0} of shape [{}, {}] does not continue [{rows}, {cols}] at row {next}",
                        m.rows, m.cols
                    ),
                });
            }
            next += m.rows;
        }
        if next != rows {
            return Err(EngineError::Format {
                file: src.describe(),
                detail: format!("tensor '{name}': LQ4 blocks cover {next} of {rows} rows"),
            });
        }
        let mut blocks = Vec::with_capacity(parts.len());
        for (r0, m) in &parts {
            blocks.push((*r0, b.upload_q4(name, m)?));
        }
        Ok(match blocks.len() {
            1 => Linear::Q4(blocks.remove(0).1),
            _ => Linear::Q4Blocks { blocks, rows },
        })
    }

    /// Uploads host data `[rows, cols]`.
    pub fn from_host(
        b: &B,
        name: &str,
        rows: usize,
        cols: usize,
        data: &[f32],
        fmt: WeightFormat,
    ) -> Result<Self> {
        Ok(match fmt {
            WeightFormat::F32 => Linear::F32 {
                w: b.upload(name, data)?,
                rows,
                cols,
            },
            WeightFormat::Q4 => {
                Linear::Q4(b.upload_q4(name, &Q4Matrix::quantize(name, rows, cols, data)?)?)
            }
        })
    }

    /// `out[m][rows] = x[m][cols] W^T`.
    pub fn forward(&self, b: &B, x: &B::Buffer, out: &B::Buffer, m: usize) -> Result<()> {
        let kernel = if m <= GEMV_MAX_ROWS {
            MatmulKernel::Gemv
        } else {
            MatmulKernel::Gemm
        };
        match self {
            Linear::Q4(q) => b.q4_matmul(x, q, out, m, kernel),
            Linear::Q4Blocks { blocks, rows } => {
                for (r0, q) in blocks {
                    b.q4_matmul_block(x, q, out, m, kernel, *rows, *r0)?;
                }
                Ok(())
            }
            Linear::F32 { w, rows, cols } => b.f32_matmul(x, w, *rows, *cols, out, m, kernel),
        }
    }
}
