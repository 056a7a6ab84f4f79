//! BERT-family sentence encoders (all-MiniLM-L6-v2 and relatives): post-LayerNorm transformer
//! encoder with absolute position embeddings, bidirectional attention, exact GELU; the sentence
//! embedding is the mean of the last hidden states over the tokens, L2-normalized
//! (sentence-transformers' `mean` pooling + `Normalize`). One implementation runs in the
//! index-builder (passages) and in the page (queries).
//!
//! Weights by their Hugging Face names (`embeddings.word_embeddings.weight`,
//! `encoder.layer.N.attention.self.query.weight`, …; a `bert.` prefix is accepted), shape-checked
//! at load. The run state is allocated once for `max_tokens` (or more, see `Bert::reserve`:
//! several sequences packed into one pass).
//!
//! The word-embedding table is either uploaded like every other weight (all-MiniLM-L6-v2:
//! 30522 rows) or, for vocabularies too large for a browser's GPU memory (multilingual-e5:
//! 250037 × 384 = 384 MB as f32), kept 4-bit on the host as a [`WordTable`] whose rows are
//! dequantized for the tokens of each input and written into the run state.

use super::{Linear, WeightFormat};
use crate::backend::{AttnShape, Backend, MatmulInput};
use crate::error::{EngineError, Result};
pub use crate::format::encoder::{BertConfig, WordTable};
use crate::format::weights::{expect, WeightSource};

/// Resolves HF names with or without the `bert.` prefix.
struct Prefixed<'a> {
    src: &'a dyn WeightSource,
    prefix: &'static str,
}

impl WeightSource for Prefixed<'_> {
    fn describe(&self) -> String {
        self.src.describe()
    }

    fn get(&self, name: &str) -> Result<Option<crate::format::weights::HostTensor>> {
        self.src.get(&format!("{}{name}", self.prefix))
    }

    fn q4_parts(&self, name: &str) -> Result<Option<Vec<(usize, crate::quant::Q4Matrix)>>> {
        self.src.q4_parts(&format!("{}{name}", self.prefix))
    }
}

/// Where the word embeddings live.
enum WordEmbeddings<B: Backend> {
    /// On the device, `[vocab, hidden]` f32.
    Device(B::Buffer),
    /// On the host, gathered per input.
    Host(Box<dyn WordTable>),
}

/// A linear layer with bias.
struct Dense<B: Backend> {
    w: Linear<B>,
    b: B::Buffer,
    rows: usize,
}

impl<B: Backend> Dense<B> {
    fn new(
        b: &B,
        src: &dyn WeightSource,
        p: &str,
        rows: usize,
        cols: usize,
        fmt: WeightFormat,
    ) -> Result<Self> {
        Ok(Dense {
            w: Linear::new(b, src, &format!("{p}.weight"), rows, cols, fmt)?,
            b: b.upload(p, &expect(src, &format!("{p}.bias"), &[rows])?.data)?,
            rows,
        })
    }

    /// `out[m][rows] = x[m][cols] W^T + bias`.
    fn forward(&self, b: &B, x: &B::Buffer, out: &B::Buffer, m: usize) -> Result<()> {
        self.w.forward(b, x, out, m)?;
        b.add_bias(out, &self.b, m, self.rows)
    }

    /// [`Dense::forward`] of several layers over the same activations, the matmuls in one
    /// [`Linear::forward_many`].
    fn forward_many(
        b: &B,
        x: &B::Buffer,
        parts: &[(&Dense<B>, &B::Buffer)],
        m: usize,
    ) -> Result<()> {
        let lin: Vec<(&Linear<B>, &B::Buffer)> =
            parts.iter().map(|(d, out)| (&d.w, *out)).collect();
        Linear::forward_many(b, MatmulInput::Plain(x), &lin, m)?;
        for (d, out) in parts {
            b.add_bias(out, &d.b, m, d.rows)?;
        }
        Ok(())
    }
}

/// LayerNorm weight and bias.
struct Norm<B: Backend> {
    w: B::Buffer,
    b: B::Buffer,
}

impl<B: Backend> Norm<B> {
    fn new(b: &B, src: &dyn WeightSource, p: &str, dim: usize) -> Result<Self> {
        Ok(Norm {
            w: b.upload(p, &expect(src, &format!("{p}.weight"), &[dim])?.data)?,
            b: b.upload(p, &expect(src, &format!("{p}.bias"), &[dim])?.data)?,
        })
    }
}

/// One encoder layer.
struct Layer<B: Backend> {
    query: Dense<B>,
    key: Dense<B>,
    value: Dense<B>,
    attn_out: Dense<B>,
    attn_norm: Norm<B>,
    intermediate: Dense<B>,
    output: Dense<B>,
    out_norm: Norm<B>,
}

/// Preallocated activations for `cap` packed tokens (one or several sequences).
struct RunState<B: Backend> {
    cap: usize,
    x: B::Buffer,
    h: B::Buffer,
    q: B::Buffer,
    k: B::Buffer,
    v: B::Buffer,
    att: B::Buffer,
    o: B::Buffer,
    i1: B::Buffer,
    i2: B::Buffer,
    /// One sequence's q, k, v and attention output (`[max_tokens, hidden]` each), for packed
    /// passes: attention runs per sequence on copies of its rows.
    seg: [B::Buffer; 4],
}

impl<B: Backend> RunState<B> {
    /// Buffers for `cap` tokens of width `h` (feed-forward width `f`).
    fn new(b: &B, cap: usize, h: usize, f: usize, max_tokens: usize) -> Result<Self> {
        let t = max_tokens * h;
        let seg = [
            b.alloc("seg q", t)?,
            b.alloc("seg k", t)?,
            b.alloc("seg v", t)?,
            b.alloc("seg att", t)?,
        ];
        Ok(RunState {
            cap,
            x: b.alloc("x", cap * h)?,
            h: b.alloc("h", cap * h)?,
            q: b.alloc("q", cap * h)?,
            k: b.alloc("k", cap * h)?,
            v: b.alloc("v", cap * h)?,
            att: b.alloc("att", cap * h)?,
            o: b.alloc("o", cap * h)?,
            i1: b.alloc("i1", cap * f)?,
            i2: b.alloc("i2", cap * f)?,
            seg,
        })
    }
}

/// The encoder.
pub struct Bert<B: Backend> {
    cfg: BertConfig,
    word: WordEmbeddings<B>,
    pos: B::Buffer,
    type0: B::Buffer,
    emb_norm: Norm<B>,
    layers: Vec<Layer<B>>,
    s: RunState<B>,
    max_tokens: usize,
}

impl<B: Backend> Bert<B> {
    /// Loads every weight (shape-checked) and allocates the run state for `max_tokens`.
    pub fn load(
        b: &B,
        cfg: BertConfig,
        src: &dyn WeightSource,
        fmt: WeightFormat,
        max_tokens: usize,
    ) -> Result<Self> {
        Self::load_with(b, cfg, src, fmt, max_tokens, None)
    }

    /// As [`Bert::load`], but the word embeddings stay in `words` on the host (its shape must be
    /// `[vocab_size, hidden_size]`) and `embeddings.word_embeddings.weight` is never read from
    /// `src`: each input's rows are gathered on the host and written to the device.
    pub fn load_host_words(
        b: &B,
        cfg: BertConfig,
        src: &dyn WeightSource,
        fmt: WeightFormat,
        max_tokens: usize,
        words: Box<dyn WordTable>,
    ) -> Result<Self> {
        Self::load_with(b, cfg, src, fmt, max_tokens, Some(words))
    }

    fn load_with(
        b: &B,
        cfg: BertConfig,
        src: &dyn WeightSource,
        fmt: WeightFormat,
        max_tokens: usize,
        host_words: Option<Box<dyn WordTable>>,
    ) -> Result<Self> {
        let prefix = if src.get("embeddings.LayerNorm.weight")?.is_none()
            && src.get("bert.embeddings.LayerNorm.weight")?.is_some()
        {
            "bert."
        } else {
            ""
        };
        let src = &Prefixed { src, prefix };
        if max_tokens == 0 || max_tokens > cfg.max_position_embeddings {
            return Err(EngineError::Shape {
                op: "bert load",
                detail: format!(
                    "max_tokens {max_tokens} must be in 1..={}",
                    cfg.max_position_embeddings
                ),
            });
        }
        let (h, f) = (cfg.hidden_size, cfg.intermediate_size);
        let up = |name: &str, shape: &[usize]| -> Result<B::Buffer> {
            b.upload(name, &expect(src, name, shape)?.data)
        };
        let word = match host_words {
            None => WordEmbeddings::Device(up(
                "embeddings.word_embeddings.weight",
                &[cfg.vocab_size, h],
            )?),
            Some(t) if t.shape() == (cfg.vocab_size, h) => WordEmbeddings::Host(t),
            Some(t) => {
                return Err(EngineError::Format {
                    file: src.describe(),
                    detail: format!(
                        "host word-embedding table has shape {:?}, the config implies [{}, {h}]",
                        t.shape(),
                        cfg.vocab_size
                    ),
                })
            }
        };
        let pos = up(
            "embeddings.position_embeddings.weight",
            &[cfg.max_position_embeddings, h],
        )?;
        let types = expect(
            src,
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        let type0 = b.upload("type0", &types.data[..h])?;
        let emb_norm = Norm::new(b, src, "embeddings.LayerNorm", h)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            layers.push(Layer {
                query: Dense::new(b, src, &format!("{p}.attention.self.query"), h, h, fmt)?,
                key: Dense::new(b, src, &format!("{p}.attention.self.key"), h, h, fmt)?,
                value: Dense::new(b, src, &format!("{p}.attention.self.value"), h, h, fmt)?,
                attn_out: Dense::new(b, src, &format!("{p}.attention.output.dense"), h, h, fmt)?,
                attn_norm: Norm::new(b, src, &format!("{p}.attention.output.LayerNorm"), h)?,
                intermediate: Dense::new(b, src, &format!("{p}.intermediate.dense"), f, h, fmt)?,
                output: Dense::new(b, src, &format!("{p}.output.dense"), h, f, fmt)?,
                out_norm: Norm::new(b, src, &format!("{p}.output.LayerNorm"), h)?,
            });
        }
        let s = RunState::new(b, max_tokens, h, f, max_tokens)?;
        Ok(Bert {
            cfg,
            word,
            pos,
            type0,
            emb_norm,
            layers,
            s,
            max_tokens,
        })
    }

    /// Longest input in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokens one forward pass holds (several sequences packed end to end).
    pub fn capacity(&self) -> usize {
        self.s.cap
    }

    /// Grows the run state to hold `tokens` packed tokens per forward pass (no-op when it
    /// already does). Packing amortizes each weight matrix over many short sequences.
    pub fn reserve(&mut self, b: &B, tokens: usize) -> Result<()> {
        if tokens > self.s.cap {
            let (h, f) = (self.cfg.hidden_size, self.cfg.intermediate_size);
            self.s = RunState::new(b, tokens, h, f, self.max_tokens)?;
        }
        Ok(())
    }

    /// Embedding width.
    pub fn dim(&self) -> usize {
        self.cfg.hidden_size
    }

    /// The last hidden states of several sequences packed end to end (`[Σ len, hidden]`, no
    /// padding): position ids restart at every sequence and attention never crosses one.
    pub async fn hidden_packed(&self, b: &B, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        let h = self.cfg.hidden_size;
        for ids in seqs {
            let t = ids.len();
            if t == 0 || t > self.max_tokens {
                return Err(EngineError::Shape {
                    op: "bert",
                    detail: format!("{t} tokens; the encoder takes 1..={}", self.max_tokens),
                });
            }
            if let Some(bad) = ids.iter().find(|&&i| i as usize >= self.cfg.vocab_size) {
                return Err(EngineError::Shape {
                    op: "bert",
                    detail: format!(
                        "token id {bad} is outside the vocabulary of {}",
                        self.cfg.vocab_size
                    ),
                });
            }
        }
        let t: usize = seqs.iter().map(|s| s.len()).sum();
        if t == 0 || t > self.s.cap {
            return Err(EngineError::Shape {
                op: "bert",
                detail: format!(
                    "{t} packed tokens; this encoder's run state holds 1..={}",
                    self.s.cap
                ),
            });
        }
        let s = &self.s;
        let eps = self.cfg.layer_norm_eps as f32;
        // Offsets of the sequences in the packed rows.
        let offs: Vec<(usize, usize)> = seqs
            .iter()
            .scan(0, |at, ids| {
                let o = *at;
                *at += ids.len();
                Some((o, ids.len()))
            })
            .collect();
        // 1. x = word[ids] + pos[0..len] per sequence + type[0]  [t, h]
        //    (a host table: the t rows gathered here and written to x)
        match &self.word {
            WordEmbeddings::Device(word) => {
                for (i, &id) in seqs.iter().flat_map(|s| s.iter()).enumerate() {
                    b.copy(word, id as usize * h, &s.x, i * h, h)?;
                }
            }
            WordEmbeddings::Host(table) => {
                let mut rows = vec![0f32; t * h];
                let ids = seqs.iter().flat_map(|s| s.iter());
                for (row, &id) in rows.chunks_exact_mut(h).zip(ids) {
                    table.row_into(id as usize, row);
                }
                b.write(&s.x, &rows)?;
            }
        }
        for &(o, n) in &offs {
            b.copy(&self.pos, 0, &s.o, o * h, n * h)?;
        }
        b.add_assign(&s.x, &s.o, t * h)?;
        b.add_bias(&s.x, &self.type0, t, h)?;
        // 2. h = LayerNorm(x)
        b.layer_norm(&s.x, &self.emb_norm.w, &self.emb_norm.b, &s.h, t, h, eps)?;
        let (nh, hd) = (self.cfg.num_attention_heads, self.cfg.head_dim());
        let shape = |tokens: usize| AttnShape {
            tokens,
            heads: nh,
            kv_heads: nh,
            head_dim: hd,
            pos0: 0,
            ctx: tokens,
            scale: 1.0 / (hd as f32).sqrt(),
            causal: false,
        };
        for l in &self.layers {
            // 3. q, k, v = h W^T + b (one pass where the backend fuses them)  [t, h]
            let qkv = [(&l.query, &s.q), (&l.key, &s.k), (&l.value, &s.v)];
            Dense::forward_many(b, &s.h, &qkv, t)?;
            // 4. bidirectional attention within each sequence     [t, nh*hd]
            if let [(0, _)] = offs[..] {
                b.attention(&s.q, &s.k, &s.v, &s.att, shape(t))?;
            } else {
                let [sq, sk, sv, sa] = &s.seg;
                for &(o, n) in &offs {
                    b.copy(&s.q, o * h, sq, 0, n * h)?;
                    b.copy(&s.k, o * h, sk, 0, n * h)?;
                    b.copy(&s.v, o * h, sv, 0, n * h)?;
                    b.attention(sq, sk, sv, sa, shape(n))?;
                    b.copy(sa, 0, &s.att, o * h, n * h)?;
                }
            }
            // 5. x = LayerNorm(h + att Wo^T + bo)
            l.attn_out.forward(b, &s.att, &s.o, t)?;
            b.add_assign(&s.o, &s.h, t * h)?;
            b.layer_norm(&s.o, &l.attn_norm.w, &l.attn_norm.b, &s.x, t, h, eps)?;
            // 6. h = LayerNorm(x + gelu(x W1^T + b1) W2^T + b2)
            l.intermediate.forward(b, &s.x, &s.i1, t)?;
            b.gelu(&s.i1, &s.i2, t * self.cfg.intermediate_size)?;
            l.output.forward(b, &s.i2, &s.o, t)?;
            b.add_assign(&s.o, &s.x, t * h)?;
            b.layer_norm(&s.o, &l.out_norm.w, &l.out_norm.b, &s.h, t, h, eps)?;
        }
        b.read(&s.h, 0, t * h).await
    }

    /// The mean of the last hidden states (`[hidden]`, f64, not normalized) of each of several
    /// sequences run in one packed pass, for pooling over a text's windows.
    pub async fn mean_hidden_packed(&self, b: &B, seqs: &[&[u32]]) -> Result<Vec<Vec<f64>>> {
        let h = self.cfg.hidden_size;
        let states = self.hidden_packed(b, seqs).await?;
        let mut rows = states.chunks_exact(h);
        let mut means = Vec::with_capacity(seqs.len());
        for ids in seqs {
            let mut v = vec![0f64; h];
            for row in rows.by_ref().take(ids.len()) {
                for (a, &x) in v.iter_mut().zip(row) {
                    *a += x as f64;
                }
            }
            let n = ids.len() as f64;
            v.iter_mut().for_each(|a| *a /= n);
            means.push(v);
        }
        Ok(means)
    }

    /// The configuration.
    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }
}
