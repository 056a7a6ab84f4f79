//! The sub-layers every decoder shares, one struct each with `new` and `forward`: [`Linear`]
//! (f32 or LQ4 weights), the SwiGLU [`Mlp`], the [`TokenEmbedding`] (which doubles as the tied
//! LM head) and the [`OutputHead`] (final norm + LM head).

use crate::backend::{Backend, BufferLen, MatmulInput, MatmulKernel, MatrixShape};
use crate::error::{EngineError, Result};
use crate::format::weights::{expect, WeightSource};
use crate::quant::Q4Matrix;

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
        let kernel = kernel_for(m);
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

    /// Input features.
    pub fn cols(&self) -> usize {
        match self {
            Linear::Q4(q) => q.cols(),
            Linear::Q4Blocks { blocks, .. } => blocks.first().map_or(0, |(_, q)| q.cols()),
            Linear::F32 { cols, .. } => *cols,
        }
    }

    /// `out_j[m][rows_j] = x[m][cols] W_j^T` for several matrices over the same activations (a
    /// layer's q, k and v projections, after its input norm where `x` says so): one
    /// [`Backend::q4_matmul_many`] where each is a single 4-bit block, else the norm's pass
    /// and one [`Linear::forward`] each.
    pub fn forward_many(
        b: &B,
        x: MatmulInput<'_, B::Buffer>,
        parts: &[(&Linear<B>, &B::Buffer)],
        m: usize,
    ) -> Result<()> {
        let q4: Vec<(&B::Q4, &B::Buffer)> = parts
            .iter()
            .filter_map(|(l, out)| match l {
                Linear::Q4(q) => Some((q, *out)),
                _ => None,
            })
            .collect();
        if q4.len() == parts.len() {
            return b.q4_matmul_many(x, &q4, m, kernel_for(m));
        }
        let cols = parts.first().map_or(0, |(l, _)| l.cols());
        let x = b.matmul_input(x, m, cols)?;
        for (l, out) in parts {
            l.forward(b, x, out, m)?;
        }
        Ok(())
    }

    /// `acc[m][rows] += x[m][cols] W^T` (the matmul and the residual add; `tmp` holds
    /// `[m][rows]` where they are two passes).
    pub fn forward_add(
        &self,
        b: &B,
        x: &B::Buffer,
        (acc, tmp): (&B::Buffer, &B::Buffer),
        m: usize,
        rows: usize,
    ) -> Result<()> {
        match self {
            Linear::Q4(q) => b.q4_matmul_add(x, q, acc, tmp, (m, m * rows), kernel_for(m)),
            _ => {
                self.forward(b, x, tmp, m)?;
                b.add_assign(acc, tmp, m * rows)
            }
        }
    }
}

/// The matmul kernel for `m` activation rows: the GEMV for a few (decode), else the GEMM.
fn kernel_for(m: usize) -> MatmulKernel {
    if m <= GEMV_MAX_ROWS {
        MatmulKernel::Gemv
    } else {
        MatmulKernel::Gemm
    }
}

/// SwiGLU MLP `down(silu(gate(h)) * up(h))` of one layer (`{prefix}.mlp.*`).
pub struct Mlp<B: Backend> {
    gate_proj: Linear<B>,
    up_proj: Linear<B>,
    down_proj: Linear<B>,
    inter: usize,
    hidden: usize,
}

impl<B: Backend> Mlp<B> {
    /// Loads `{prefix}.mlp.{gate,up,down}_proj.weight`.
    pub fn new(
        b: &B,
        src: &dyn WeightSource,
        prefix: &str,
        hidden: usize,
        inter: usize,
        fmt: WeightFormat,
    ) -> Result<Self> {
        let lin = |n: &str, rows: usize, cols: usize| {
            Linear::new(b, src, &format!("{prefix}.mlp.{n}.weight"), rows, cols, fmt)
        };
        Ok(Mlp {
            gate_proj: lin("gate_proj", inter, hidden)?,
            up_proj: lin("up_proj", inter, hidden)?,
            down_proj: lin("down_proj", hidden, inter)?,
            inter,
            hidden,
        })
    }

    /// `x[t][hidden] += down(silu(gate(h)) * up(h))` with scratch `gate, up, act[t][inter]`
    /// and `o[t][hidden]` (`h`: the activations, or the layer's norm of them); 4-bit gate and up
    /// matrices go through [`Backend::q4_matmul_glu`].
    pub fn add_to(
        &self,
        b: &B,
        h: MatmulInput<'_, B::Buffer>,
        [gate, up, act, o]: [&B::Buffer; 4],
        x: &B::Buffer,
        t: usize,
    ) -> Result<()> {
        match (&self.gate_proj, &self.up_proj) {
            (Linear::Q4(g), Linear::Q4(u)) => {
                let n = (t, t * self.inter);
                b.q4_matmul_glu(h, (g, u), (gate, up), act, n, kernel_for(t))?;
            }
            _ => {
                let h = b.matmul_input(h, t, self.hidden)?;
                self.gate_proj.forward(b, h, gate, t)?;
                self.up_proj.forward(b, h, up, t)?;
                b.silu_mul(gate, up, act, t * self.inter)?;
            }
        }
        self.down_proj.forward_add(b, act, (x, o), t, self.hidden)
    }
}

/// The final RMSNorm and LM head with their buffers: the last token's logits, or every
/// token's of a chunk.
pub struct OutputHead<B: Backend> {
    norm: B::Buffer,
    lm_head: Linear<B>,
    last: B::Buffer,
    last_n: B::Buffer,
    logits: B::Buffer,
    rows: usize,
    vocab: usize,
    hidden: usize,
    eps: f32,
    /// 0 for Llama/Qwen3, 1 for Qwen3.5's `(1 + w)`.
    offset: f32,
}

impl<B: Backend> OutputHead<B> {
    /// Loads `model.norm.weight` and allocates the output buffers.
    pub fn new(
        b: &B,
        src: &dyn WeightSource,
        lm_head: Linear<B>,
        (vocab, hidden): (usize, usize),
        eps: f32,
        offset: f32,
    ) -> Result<Self> {
        let norm = b.upload("norm", &expect(src, "model.norm.weight", &[hidden])?.data)?;
        Ok(OutputHead {
            norm,
            lm_head,
            last: b.alloc("last", hidden)?,
            last_n: b.alloc("last_n", hidden)?,
            logits: b.alloc("logits", vocab)?,
            rows: 0,
            vocab,
            hidden,
            eps,
            offset,
        })
    }

    /// Logits of `x[t][hidden]`: every row with `all`, else the last (`scratch` holds `[t,
    /// hidden]`).
    pub fn forward(
        &mut self,
        b: &B,
        x: &B::Buffer,
        scratch: &B::Buffer,
        t: usize,
        all: bool,
    ) -> Result<()> {
        let (h, v) = (self.hidden, self.vocab);
        if all {
            b.rms_norm(x, &self.norm, scratch, t, h, self.eps, self.offset)?;
            if self.logits.len() < t * v {
                self.logits = b.alloc("logits", t * v)?;
            }
            self.lm_head.forward(b, scratch, &self.logits, t)?;
            self.rows = t;
        } else {
            b.copy(x, (t - 1) * h, &self.last, 0, h)?;
            b.rms_norm(
                &self.last,
                &self.norm,
                &self.last_n,
                1,
                h,
                self.eps,
                self.offset,
            )?;
            self.lm_head.forward(b, &self.last_n, &self.logits, 1)?;
            self.rows = 1;
        }
        Ok(())
    }

    /// Vocabulary size (logit row length).
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The logits buffer: `[rows, vocab]` with `rows` from the last forward.
    pub fn logits(&self) -> (&B::Buffer, usize) {
        (&self.logits, self.rows)
    }
}

/// Storage of the token embedding table.
enum EmbeddingTable<B: Backend> {
    Q4(B::Q4),
    Q4Blocks(Vec<(usize, B::Q4)>),
    F32(B::Buffer),
}

/// The token embedding table `[vocab, hidden]`, which doubles as the tied LM head.
pub struct TokenEmbedding<B: Backend> {
    table: EmbeddingTable<B>,
    vocab: usize,
    hidden: usize,
}

impl<B: Backend> TokenEmbedding<B> {
    /// Loads `model.embed_tokens.weight` `[vocab, hidden]` and the LM head: the same matrix
    /// when `tied`, else `lm_head.weight`. LQ4 needs `hidden % 32 == 0`; otherwise f32.
    pub fn new(
        b: &B,
        src: &dyn WeightSource,
        vocab: usize,
        hidden: usize,
        fmt: WeightFormat,
        tied: bool,
    ) -> Result<(Self, Linear<B>)> {
        let emb_fmt = if hidden.is_multiple_of(32) {
            fmt
        } else {
            WeightFormat::F32
        };
        let head = Linear::new(b, src, "model.embed_tokens.weight", vocab, hidden, emb_fmt)?;
        let table = match &head {
            Linear::Q4(q) => EmbeddingTable::Q4(q.clone()),
            Linear::Q4Blocks { blocks, .. } => EmbeddingTable::Q4Blocks(blocks.clone()),
            Linear::F32 { w, .. } => EmbeddingTable::F32(w.clone()),
        };
        let head = if tied {
            head
        } else {
            Linear::new(b, src, "lm_head.weight", vocab, hidden, fmt)?
        };
        Ok((
            TokenEmbedding {
                table,
                vocab,
                hidden,
            },
            head,
        ))
    }

    /// Gathers the rows of `ids` into `out[ids.len()][hidden]`.
    pub fn forward(&self, b: &B, ids: &[u32], out: &B::Buffer) -> Result<()> {
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= self.vocab) {
            return Err(EngineError::Shape {
                op: "embed",
                detail: format!("token id {bad} is outside the vocabulary of {}", self.vocab),
            });
        }
        match &self.table {
            EmbeddingTable::Q4(q) => b.embed_q4(ids, q, out),
            EmbeddingTable::Q4Blocks(blocks) => {
                for (r0, q) in blocks {
                    b.embed_q4_block(ids, q, *r0, out)?;
                }
                Ok(())
            }
            EmbeddingTable::F32(table) => {
                let h = self.hidden;
                for (i, &id) in ids.iter().enumerate() {
                    b.copy(table, id as usize * h, out, i * h, h)?;
                }
                Ok(())
            }
        }
    }
}

/// Uploads the 1-D weight `name` of `len` elements (a norm's scale, a bias).
pub fn vector<B: Backend>(
    b: &B,
    src: &dyn WeightSource,
    name: &str,
    len: usize,
) -> Result<B::Buffer> {
    b.upload(name, &expect(src, name, &[len])?.data)
}
