//! A check, on the adapter in hand, that the fused kernels (the residual add in the GEMV,
//! SwiGLU in one GEMV, the input's RMSNorm in the GEMV's prologue, several matrices in one
//! GEMV, RMSNorm with RoPE, RoPE with the KV cache append, with and without the norms) give
//! what the plain ops they stand for give. The kernel tests hold them to the oracle on lavapipe
//! in CI, but a driver that compiles one of them wrongly should cost speed, not answers: where
//! they differ, the context turns the fusions off and says why. The GEMVs' row sums by subgroup
//! shuffles (where the device has subgroups) are checked against workgroup memory the same way.

use crate::backend::MatmulInput::{Plain, RmsNormed};
use crate::backend::{rope_table, AttnShape, Backend, KvFormat, MatmulKernel, RopeShape};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::quant::Q4Matrix;
use crate::rng::Pcg32;

/// Output rows of the check's matrices: not a multiple of any workgroup's rows.
const ROWS: usize = 70;
/// Their input features.
const COLS: usize = 96;

impl GpuContext {
    /// Runs the fused ops and the plain ones on the same small random inputs; if any output
    /// differs beyond float rounding, leaves the fusions off (`tuning.fuse = false`) and
    /// returns what differed. `Ok(None)`: they agree (or the fusions were off already). Where
    /// the GEMVs would sum a row's lanes by subgroup shuffles, first checks those against
    /// the workgroup-memory sum the same way (off, `tuning.gemv_subgroups = false`, where
    /// they differ: a driver whose subgroups do not hold consecutive invocations).
    pub async fn verify_fused(&mut self) -> Result<Option<String>> {
        if !self.subgroup_rows() && !self.tuning.fuse {
            return Ok(None);
        }
        let mut why = Vec::new();
        // The outputs with the tuning as it will run: the side each check compares.
        let mut tuned = outputs(self).await?;
        if self.subgroup_rows() {
            self.tuning.gemv_subgroups = false;
            let plain = outputs(self).await?;
            match first_difference(&tuned, &plain) {
                Some((op, i, a, b)) => {
                    why.push(format!(
                        "the {op} with subgroup sums on {} gave {a} at [{i}] where workgroup \
                         memory gives {b}; subgroup sums are off",
                        self.adapter_description()
                    ));
                    tuned = plain;
                }
                None => self.tuning.gemv_subgroups = true,
            }
        }
        if self.tuning.fuse {
            self.tuning.fuse = false;
            let plain = outputs(self).await?;
            match first_difference(&tuned, &plain) {
                Some((op, i, a, b)) => why.push(format!(
                    "the fused {op} on {} gave {a} at [{i}] where the plain ops give {b}; \
                     the fusions are off",
                    self.adapter_description()
                )),
                None => self.tuning.fuse = true,
            }
        }
        Ok((!why.is_empty()).then(|| why.join("; ")))
    }
}

/// The first output of `a` that differs from `b`'s beyond float rounding: the op, the index
/// and the two values.
fn first_difference(
    a: &[(&'static str, Vec<f32>)],
    b: &[(&'static str, Vec<f32>)],
) -> Option<(&'static str, usize, f32, f32)> {
    a.iter().zip(b).find_map(|((op, x), (_, y))| {
        let i = x.iter().zip(y).position(|(&u, &v)| {
            let diff = (u - v).abs();
            !diff.is_finite() || diff > 1e-4 + 1e-4 * v.abs()
        })?;
        Some((*op, i, x[i], y[i]))
    })
}

/// The residual-add GEMV, the SwiGLU GEMV and RMSNorm with RoPE on fixed random inputs.
async fn outputs(b: &GpuContext) -> Result<Vec<(&'static str, Vec<f32>)>> {
    let mut rng = Pcg32::new(0xf05e);
    let mut matrix = |name, rows: usize| {
        Q4Matrix::quantize(name, rows, COLS, &rng.normal_vec(rows * COLS, 0.05))
    };
    let (wg, wu) = (matrix("check gate", ROWS)?, matrix("check up", ROWS)?);
    let (wk, wv) = (matrix("check k", 33)?, matrix("check v", 17)?);
    let (wg, wu, wk, wv) = (
        b.upload_q4("check gate", &wg)?,
        b.upload_q4("check up", &wu)?,
        b.upload_q4("check k", &wk)?,
        b.upload_q4("check v", &wv)?,
    );
    let x = b.upload("check x", &rng.normal_vec(COLS, 1.0))?;
    let acc = b.upload("check residual", &rng.normal_vec(ROWS, 1.0))?;
    let [t1, t2, glu] = ["check t1", "check t2", "check glu"].map(|l| b.alloc(l, ROWS));
    let (t1, t2, glu) = (t1?, t2?, glu?);
    let gemv = MatmulKernel::Gemv;
    b.q4_matmul_add(&x, &wg, &acc, &t1, (1, ROWS), gemv)?;
    b.q4_matmul_glu(Plain(&x), (&wg, &wu), (&t1, &t2), &glu, (1, ROWS), gemv)?;
    // The same with the input's RMSNorm ((1 + w), as Qwen3.5's) in the prologue, and three
    // matrices of other heights (q, k and v) in one dispatch after a plain norm.
    let nw = b.upload("check input norm", &rng.normal_vec(COLS, 0.5))?;
    let normed = b.alloc("check normed x", COLS)?;
    let norm = |offset| RmsNormed {
        x: &x,
        weight: &nw,
        eps: 1e-6,
        offset,
        normed: &normed,
    };
    let glu_n = b.alloc("check normed glu", ROWS)?;
    b.q4_matmul_glu(norm(1.0), (&wg, &wu), (&t1, &t2), &glu_n, (1, ROWS), gemv)?;
    let [q, k, v] = ["check q", "check k out", "check v out"].map(|l| b.alloc(l, ROWS));
    let (q, k, v) = (q?, k?, v?);
    b.q4_matmul_many(norm(0.0), &[(&wg, &q), (&wk, &k), (&wv, &v)], 1, gemv)?;
    // Three heads of 40 dims at position 5, the last 8 dims unrotated.
    let shape = RopeShape {
        tokens: 1,
        heads: 3,
        head_dim: 40,
        rot_dim: 32,
        pos0: 5,
    };
    let heads = b.upload("check heads", &rng.normal_vec(120, 2.0))?;
    let w = b.upload("check norm", &rng.normal_vec(40, 1.0))?;
    let table = b.upload("check rope", &rope_table(1e6, 32, 6))?;
    let normed = b.alloc("check normed", 120)?;
    b.rms_norm_rope(&heads, &w, &normed, (1e-6, 0.0), &table, shape)?;
    // Queries and keys (one head of the same dims) in one pass.
    let keys = b.upload("check keys", &rng.normal_vec(40, 2.0))?;
    let (q_out, k_out) = (b.alloc("check q out", 120)?, b.alloc("check k out", 40)?);
    let k_shape = RopeShape { heads: 1, ..shape };
    let qk = [(&heads, &w, &q_out), (&keys, &w, &k_out)];
    b.rms_norm_rope_pair(qk, (1e-6, 0.0), &table, [shape, k_shape])?;
    // Three query heads and one key head of 40 dims rotated at position 5, with the key and a
    // value appended to f16 caches after the positions before it, then attention over them.
    let full = RopeShape {
        rot_dim: 40,
        ..shape
    };
    let table_full = b.upload("check rope full", &rope_table(1e6, 40, 7))?;
    let qa = b.upload("check append q", &rng.normal_vec(120, 1.0))?;
    let ka = b.upload("check append k", &rng.normal_vec(40, 1.0))?;
    let va = b.upload("check append v", &rng.normal_vec(40, 1.0))?;
    let earlier = b.upload("check earlier keys", &rng.normal_vec(200, 1.0))?;
    let caches = [
        b.alloc_kv("check k cache", 280, KvFormat::F16)?,
        b.alloc_kv("check v cache", 280, KvFormat::F16)?,
    ];
    for c in &caches {
        b.write_kv(&earlier, 0, c, 0, 200)?;
    }
    let pair = [&caches[0], &caches[1]];
    let rs = [full, RopeShape { heads: 1, ..full }];
    b.rope_append([&qa, &ka, &va], &table_full, rs, pair, 200)?;
    let attended = b.alloc("check attention", 120)?;
    let attn = AttnShape {
        tokens: 1,
        heads: 3,
        kv_heads: 1,
        head_dim: 40,
        pos0: 5,
        ctx: 6,
        scale: 0.25,
        causal: true,
    };
    b.attention_kv(&qa, &caches[0], &caches[1], &attended, attn)?;
    // The same with Qwen3's norms before the rotation (the queries back in place), at the
    // next position of the same caches.
    let qn = b.upload("check norm q", &rng.normal_vec(120, 2.0))?;
    let kn = b.upload("check norm k", &rng.normal_vec(40, 2.0))?;
    let scratch = [
        b.alloc("check norm q out", 120)?,
        b.alloc("check norm k out", 40)?,
    ];
    let next = [
        RopeShape { pos0: 6, ..rs[0] },
        RopeShape { pos0: 6, ..rs[1] },
    ];
    b.rms_norm_rope_append(
        [&qn, &kn, &va],
        [&w, &w],
        (1e-6, 0.0),
        &table_full,
        next,
        [&scratch[0], &scratch[1]],
        pair,
        240,
    )?;
    let attended_next = b.alloc("check attention after the norms", 120)?;
    let attn_next = AttnShape {
        pos0: 6,
        ctx: 7,
        ..attn
    };
    b.attention_kv(&qn, &caches[0], &caches[1], &attended_next, attn_next)?;
    Ok(vec![
        ("residual-add GEMV", b.read(&acc, 0, ROWS).await?),
        ("SwiGLU GEMV", b.read(&glu, 0, ROWS).await?),
        ("SwiGLU GEMV after RMSNorm", b.read(&glu_n, 0, ROWS).await?),
        ("q GEMV of three after RMSNorm", b.read(&q, 0, ROWS).await?),
        ("k GEMV of three after RMSNorm", b.read(&k, 0, 33).await?),
        ("v GEMV of three after RMSNorm", b.read(&v, 0, 17).await?),
        ("RMSNorm with RoPE", b.read(&normed, 0, 120).await?),
        (
            "RMSNorm with RoPE of queries and keys",
            b.read(&q_out, 0, 120).await?,
        ),
        (
            "RMSNorm with RoPE of the keys beside queries",
            b.read(&k_out, 0, 40).await?,
        ),
        (
            "RoPE of queries with the cache append",
            b.read(&qa, 0, 120).await?,
        ),
        (
            "RoPE of keys with the cache append",
            b.read(&ka, 0, 40).await?,
        ),
        (
            "attention over the cache appended with RoPE",
            b.read(&attended, 0, 120).await?,
        ),
        (
            "RMSNorm with RoPE of queries with the cache append",
            b.read(&qn, 0, 120).await?,
        ),
        (
            "attention over the cache appended with RMSNorm and RoPE",
            b.read(&attended_next, 0, 120).await?,
        ),
    ])
}
