//! [`Backend`] on the CPU: the path most readers run (no GPU, or only a software adapter).
//!
//! - `q8`, `simd/`, `gemv`: 4-bit matmuls of a few activation rows (decode) as integer dot
//!   products of 8-bit activation blocks with the 4-bit weights, one implementation per
//!   instruction set behind one dispatch (AVX2, NEON, simd128, scalar);
//! - this file: the packed SGEMM (`matrixmultiply`) for prefill-sized matmuls and vectorizable
//!   helpers (`dot`, `sum`, `fast_exp`); the other ops run the kernels' plain-Rust references
//!   (`crate::kernels::*::cpu`), which are also the oracles of the fast paths;
//! - `pool`: the threads (one persistent pool, sized to the physical cores by default).

use std::sync::{Arc, RwLock};

use crate::backend::{
    check, need_len, AttnShape, Backend, BufferLen, DeltaShape, MatmulKernel, RopeShape, Selection,
};
use crate::error::{shape_err, Result};
use crate::kernels;
use crate::quant::Q4Matrix;

pub mod gemv;
pub mod pool;
pub mod q8;
pub mod select;
pub mod simd;

/// A host buffer shared by handle, like a device buffer.
#[derive(Clone, Debug)]
pub struct CpuBuffer(Arc<RwLock<Vec<f32>>>);

impl BufferLen for CpuBuffer {
    fn len(&self) -> usize {
        self.0.read().map(|v| v.len()).unwrap_or(0)
    }
}

impl CpuBuffer {
    fn get(&self) -> std::sync::RwLockReadGuard<'_, Vec<f32>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }
    fn get_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<f32>> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Dot product with eight independent accumulators, so the compiler can vectorise it
/// (a plain `sum()` over f32 must keep its sequential order and cannot).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Sum with eight independent accumulators (vectorizes, unlike a sequential f32 `sum()`).
#[inline(always)]
pub fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let c = a.chunks_exact(8);
    let r = c.remainder();
    for x in c {
        for i in 0..8 {
            acc[i] += x[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for x in r {
        s += x;
    }
    s
}

/// `e^x` without a libm call, so loops over it vectorize: `e^x = 2^n · e^r` with
/// `n = round(x · log2 e)` (by the 1.5·2²³ rounding trick), `r = x − n·ln 2` in two parts
/// (Cody–Waite) and `e^r` by its degree-7 Taylor polynomial on |r| ≤ ln2/2 (relative error
/// below 3e-7 over the clamped range [−87, 88]; the `exp` tests compare it with f64).
#[inline(always)]
pub fn fast_exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    let e = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    p * f32::from_bits(((e + 127) << 23) as u32)
}

/// Activation rows from which the CPU matmuls switch from per-row dot products to a packed GEMM.
pub(crate) const GEMM_MIN_ROWS: usize = 4;

/// Weights of a CPU GEMM: f32 rows, or LQ4 rows dequantized block by block.
pub(crate) enum GemmWeights<'a> {
    /// `[rows][k]`, row-major.
    F32(&'a [f32]),
    /// 4-bit rows.
    Q4(&'a crate::quant::Q4Matrix),
}

/// Output base pointer shared by the threads of `par_gemm` and the blocked attention; each
/// thread writes a disjoint set of elements.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub(crate) *mut f32);
// SAFETY: only used by `par_gemm` and the blocked attention, whose threads write disjoint
// elements.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// `C = alpha · A Bᵀ` with `matrixmultiply`'s SGEMM: `(m, k, n)` the shape, `A` `[m][k]`,
/// `B` `[n][k]` and `C` `[m][n]`, each row-major with the given row stride (elements).
///
/// # Safety
/// Every addressed element — `a + i·lda + p`, `b + j·ldb + p`, `c + i·ldc + j` for `i < m`,
/// `j < n`, `p < k` — must be inside its allocation, and no other thread may write the
/// addressed elements of `C` meanwhile.
pub(crate) unsafe fn sgemm_nt(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, lda): (*const f32, usize),
    (b, ldb): (*const f32, usize),
    (c, ldc): (*mut f32, usize),
) {
    // SAFETY: the caller's contract; Bᵀ is B read with row stride 1 and column stride ldb.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a,
            lda as isize,
            1,
            b,
            1,
            ldb as isize,
            0.0,
            c,
            ldc as isize,
            1,
        );
    }
}

/// `out[mi][r] = x[mi] . w[r]` for `m` activation rows (`x`: `[m][k]`) and `rows` weight rows:
/// `matrixmultiply`'s packed, cache-blocked SGEMM (AVX2/FMA or AVX-512 chosen at run time
/// natively) on one column range of `out` per thread, so the activations are packed once per
/// thread, not once per small block. LQ4 weights are dequantized 256 rows at a time.
pub(crate) fn par_gemm(
    x: &[f32],
    w: GemmWeights<'_>,
    rows: usize,
    k: usize,
    m: usize,
    out: &mut [f32],
) {
    if m == 0 || rows == 0 {
        return;
    }
    if k == 0 {
        out[..m * rows].fill(0.0);
        return;
    }
    let (x, out_len) = (&x[..m * k], m * rows);
    let base = OutPtr(out[..out_len].as_mut_ptr());
    #[cfg(not(target_arch = "wasm32"))]
    if let GemmWeights::F32(w) = &w {
        // More activation rows than weight rows (encoders over packed passages): split the
        // activations instead, so each thread packs only its own rows of them.
        let threads = rayon::current_num_threads().max(1);
        if threads > 1 && m >= rows && m >= 16 * threads {
            use rayon::prelude::*;
            let chunk = m.div_ceil(threads);
            let w = &w[..rows * k];
            (0..m.div_ceil(chunk)).into_par_iter().for_each(|c| {
                let (m0, m1) = (c * chunk, ((c + 1) * chunk).min(m));
                let p = base;
                // SAFETY: x rows m0..m1 ([m1-m0][k]), all `rows` weight rows ([rows][k]) and
                // out rows m0..m1 (row stride `rows`) are in bounds; threads own disjoint row
                // ranges of `out`.
                unsafe {
                    sgemm_nt(
                        (m1 - m0, k, rows),
                        1.0,
                        (x.as_ptr().add(m0 * k), k),
                        (w.as_ptr(), k),
                        (p.0.add(m0 * rows), rows),
                    );
                }
            });
            return;
        }
    }
    // Columns [r0, r1) of `out`: C has row stride `rows`, column stride 1.
    let run = |r0: usize, r1: usize| {
        let mut scratch = Vec::new();
        const SUB: usize = 256;
        for s0 in (r0..r1).step_by(SUB) {
            let s1 = (s0 + SUB).min(r1);
            let wb: &[f32] = match &w {
                GemmWeights::F32(w) => &w[s0 * k..s1 * k],
                GemmWeights::Q4(q) => {
                    scratch.resize((s1 - s0) * k, 0.0);
                    for (r, row) in (s0..s1).zip(scratch.chunks_mut(k)) {
                        q.dequantize_row(r, row);
                    }
                    &scratch
                }
            };
            let p = base;
            // SAFETY: x is [m][k] (m*k elements), wb is [s1-s0][k], C = out[.., s0..s1] with
            // row stride `rows`: the largest index is (m-1)*rows + s1-1 < m*rows = out_len.
            // Threads own disjoint column ranges, so no element is written twice.
            unsafe {
                sgemm_nt(
                    (m, k, s1 - s0),
                    1.0,
                    (x.as_ptr(), k),
                    (wb.as_ptr(), k),
                    (p.0.add(s0), rows),
                );
            }
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads().max(1);
        let chunk = rows.div_ceil(threads).next_multiple_of(16);
        (0..rows.div_ceil(chunk))
            .into_par_iter()
            .for_each(|c| run(c * chunk, ((c + 1) * chunk).min(rows)));
    }
    #[cfg(target_arch = "wasm32")]
    run(0, rows);
}

/// Computes `out[m][rows]` (row-major, `m` activation rows) by weight-row blocks: `f(r0, r1, part)`
/// fills `part[(r - r0) * m + mi]` for rows `r0..r1`. Natively the blocks run on rayon's thread
/// pool; in wasm (single-threaded) there is one block.
pub(crate) fn par_rows<F>(rows: usize, m: usize, out: &mut [f32], f: F)
where
    F: Fn(usize, usize, &mut [f32]) + Sync + Send,
{
    let mut parts = vec![0f32; rows * m];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        const BLOCK: usize = 64;
        parts
            .par_chunks_mut(BLOCK * m.max(1))
            .enumerate()
            .for_each(|(bi, part)| {
                let r0 = bi * BLOCK;
                f(r0, (r0 + BLOCK).min(rows), part)
            });
    }
    #[cfg(target_arch = "wasm32")]
    f(0, rows, &mut parts);
    for r in 0..rows {
        for mi in 0..m {
            out[mi * rows + r] = parts[r * m + mi];
        }
    }
}

/// `out[mi * stride + off + r] = (x Wᵀ)[mi][r]`: the integer GEMV for fewer than
/// [`GEMM_MIN_ROWS`] activation rows, the packed SGEMM (dequantized weights) otherwise.
fn q4_matmul_into(
    x: &[f32],
    w: &Q4Matrix,
    out: &mut [f32],
    m: usize,
    (stride, off): (usize, usize),
) {
    if m < GEMM_MIN_ROWS {
        return gemv::q4_gemv_q8(x, w, m, out, stride, off);
    }
    if (stride, off) == (w.rows, 0) {
        return par_gemm(x, GemmWeights::Q4(w), w.rows, w.cols, m, out);
    }
    let mut block = vec![0f32; m * w.rows];
    par_gemm(x, GemmWeights::Q4(w), w.rows, w.cols, m, &mut block);
    for (mi, row) in block.chunks(w.rows).enumerate() {
        let at = mi * stride + off;
        out[at..at + w.rows].copy_from_slice(row);
    }
}

/// The CPU backend.
#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

fn no_alias(op: &'static str, out: &CpuBuffer, inputs: &[&CpuBuffer]) -> Result<()> {
    if inputs.iter().any(|i| Arc::ptr_eq(&i.0, &out.0)) {
        return Err(shape_err(op, "the output buffer is also an input"));
    }
    Ok(())
}

impl Backend for CpuBackend {
    type Buffer = CpuBuffer;
    type Q4 = Arc<Q4Matrix>;

    fn describe(&self) -> String {
        let t = pool::threads();
        format!(
            "cpu ({}, {t} thread{})",
            simd::Isa::best().name(),
            if t == 1 { "" } else { "s" }
        )
    }

    fn q4_rounds_activations(&self, m: usize) -> bool {
        m < GEMM_MIN_ROWS
    }

    /// 256: prefill dequantizes each 4-bit matrix once per pass, so longer passes reuse it over
    /// more rows (SmolLM2, 512-token prompt: 785 tok/s in passes of 128, 1,000–1,060 in one of
    /// 512), but the run state grows with the pass (512 rows: +8 MB peak for `lorekeeper ask`
    /// on the demo bundle, over the sessions' earlier 256).
    fn prefill_chunk(&self) -> usize {
        256
    }

    fn alloc(&self, _label: &str, len: usize) -> Result<CpuBuffer> {
        Ok(CpuBuffer(Arc::new(RwLock::new(vec![0.0; len]))))
    }

    fn upload(&self, _label: &str, data: &[f32]) -> Result<CpuBuffer> {
        Ok(CpuBuffer(Arc::new(RwLock::new(data.to_vec()))))
    }

    fn write(&self, buf: &CpuBuffer, data: &[f32]) -> Result<()> {
        need_len("write", "destination", buf, data.len())?;
        buf.get_mut()[..data.len()].copy_from_slice(data);
        Ok(())
    }

    fn upload_q4(&self, label: &str, m: &Q4Matrix) -> Result<Arc<Q4Matrix>> {
        m.validate(label)?;
        Ok(Arc::new(m.clone()))
    }

    fn q4_shape(&self, w: &Arc<Q4Matrix>) -> (usize, usize) {
        (w.rows, w.cols)
    }

    async fn read(&self, buf: &CpuBuffer, offset: usize, len: usize) -> Result<Vec<f32>> {
        need_len("read", "buffer", buf, offset + len)?;
        Ok(buf.get()[offset..offset + len].to_vec())
    }

    fn q4_matmul(
        &self,
        x: &CpuBuffer,
        w: &Arc<Q4Matrix>,
        out: &CpuBuffer,
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::q4_matmul(x, out, w.rows, w.cols, m)?;
        no_alias("q4_matmul", out, &[x])?;
        let (x, mut o) = (x.get(), out.get_mut());
        q4_matmul_into(&x, w, &mut o, m, (w.rows, 0));
        let _ = kernel; // the row count decides: few rows → integer GEMV, else SGEMM
        Ok(())
    }

    fn q4_matmul_block(
        &self,
        x: &CpuBuffer,
        w: &Arc<Q4Matrix>,
        out: &CpuBuffer,
        m: usize,
        kernel: MatmulKernel,
        out_stride: usize,
        out_off: usize,
    ) -> Result<()> {
        check::q4_matmul_block(x, out, (w.rows, w.cols), m, out_stride, out_off)?;
        no_alias("q4_matmul_block", out, &[x])?;
        let (x, mut o) = (x.get(), out.get_mut());
        q4_matmul_into(&x, w, &mut o, m, (out_stride, out_off));
        let _ = kernel;
        Ok(())
    }

    fn f32_matmul(
        &self,
        x: &CpuBuffer,
        w: &CpuBuffer,
        rows: usize,
        cols: usize,
        out: &CpuBuffer,
        m: usize,
        _kernel: MatmulKernel,
    ) -> Result<()> {
        check::f32_matmul(x, w, rows, cols, out, m)?;
        no_alias("f32_matmul", out, &[x, w])?;
        kernels::f32_matmul::cpu(&x.get(), &w.get(), rows, cols, &mut out.get_mut(), m);
        Ok(())
    }

    fn rms_norm(
        &self,
        x: &CpuBuffer,
        weight: &CpuBuffer,
        out: &CpuBuffer,
        rows: usize,
        dim: usize,
        eps: f32,
        weight_offset: f32,
    ) -> Result<()> {
        check::rms_norm(x, weight, out, rows, dim)?;
        no_alias("rms_norm", out, &[x, weight])?;
        kernels::rms_norm::cpu(
            &x.get(),
            &weight.get(),
            &mut out.get_mut(),
            rows,
            dim,
            eps,
            weight_offset,
        );
        Ok(())
    }

    fn rope(&self, x: &CpuBuffer, table: &CpuBuffer, shape: RopeShape) -> Result<()> {
        check::rope(x, table, shape)?;
        no_alias("rope", x, &[table])?;
        kernels::rope::cpu(&mut x.get_mut(), &table.get(), shape);
        Ok(())
    }

    fn attention(
        &self,
        q: &CpuBuffer,
        k_cache: &CpuBuffer,
        v_cache: &CpuBuffer,
        out: &CpuBuffer,
        shape: AttnShape,
    ) -> Result<()> {
        check::attention(q, k_cache, v_cache, out, shape)?;
        no_alias("attention", out, &[q, k_cache, v_cache])?;
        kernels::attention::cpu(
            &q.get(),
            &k_cache.get(),
            &v_cache.get(),
            &mut out.get_mut(),
            shape,
        );
        Ok(())
    }

    fn silu_mul(&self, gate: &CpuBuffer, up: &CpuBuffer, out: &CpuBuffer, n: usize) -> Result<()> {
        check::silu_mul(gate, up, out, n)?;
        no_alias("silu_mul", out, &[gate, up])?;
        kernels::silu_mul::cpu(&gate.get(), &up.get(), &mut out.get_mut(), n);
        Ok(())
    }

    fn sigmoid_mul(
        &self,
        x: &CpuBuffer,
        gate: &CpuBuffer,
        out: &CpuBuffer,
        n: usize,
    ) -> Result<()> {
        check::sigmoid_mul(x, gate, out, n)?;
        no_alias("sigmoid_mul", out, &[x, gate])?;
        kernels::sigmoid_mul::cpu(&x.get(), &gate.get(), &mut out.get_mut(), n);
        Ok(())
    }

    fn take_half(
        &self,
        src: &CpuBuffer,
        out: &CpuBuffer,
        rows: usize,
        dim: usize,
        half: usize,
    ) -> Result<()> {
        check::take_half(src, out, rows, dim, half)?;
        no_alias("take_half", out, &[src])?;
        kernels::take_half::cpu(&src.get(), &mut out.get_mut(), rows, dim, half);
        Ok(())
    }

    fn conv1d_silu(
        &self,
        x: &CpuBuffer,
        w: &CpuBuffer,
        state: &CpuBuffer,
        out: &CpuBuffer,
        tokens: usize,
        channels: usize,
        kernel: usize,
    ) -> Result<()> {
        check::conv1d(x, w, state, out, tokens, channels, kernel)?;
        no_alias("conv1d_silu", out, &[x, w, state])?;
        no_alias("conv1d_silu", state, &[x, w])?;
        kernels::conv1d::cpu(
            &x.get(),
            &w.get(),
            &mut state.get_mut(),
            &mut out.get_mut(),
            tokens,
            channels,
            kernel,
        );
        Ok(())
    }

    fn gated_delta_rule(
        &self,
        qkv: &CpuBuffer,
        a: &CpuBuffer,
        b: &CpuBuffer,
        a_log: &CpuBuffer,
        dt_bias: &CpuBuffer,
        state: &CpuBuffer,
        out: &CpuBuffer,
        shape: DeltaShape,
    ) -> Result<()> {
        check::delta_rule(qkv, a, b, a_log, dt_bias, state, out, shape)?;
        no_alias("gated_delta_rule", out, &[qkv, a, b, a_log, dt_bias, state])?;
        no_alias("gated_delta_rule", state, &[qkv, a, b, a_log, dt_bias])?;
        kernels::delta_rule::cpu(
            &qkv.get(),
            &a.get(),
            &b.get(),
            &a_log.get(),
            &dt_bias.get(),
            &mut state.get_mut(),
            &mut out.get_mut(),
            shape,
        );
        Ok(())
    }

    fn layer_norm(
        &self,
        x: &CpuBuffer,
        weight: &CpuBuffer,
        bias: &CpuBuffer,
        out: &CpuBuffer,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> Result<()> {
        check::layer_norm(x, weight, bias, out, rows, dim)?;
        no_alias("layer_norm", out, &[x, weight, bias])?;
        kernels::layer_norm::cpu(
            &x.get(),
            &weight.get(),
            &bias.get(),
            &mut out.get_mut(),
            rows,
            dim,
            eps,
        );
        Ok(())
    }

    fn add_bias(&self, x: &CpuBuffer, bias: &CpuBuffer, rows: usize, cols: usize) -> Result<()> {
        check::add_bias(x, bias, rows, cols)?;
        no_alias("add_bias", x, &[bias])?;
        kernels::add_bias::cpu(&mut x.get_mut(), &bias.get(), rows, cols);
        Ok(())
    }

    fn gelu(&self, x: &CpuBuffer, out: &CpuBuffer, n: usize) -> Result<()> {
        check::add_assign(out, x, n).map_err(|_| {
            crate::error::shape_err("gelu", format!("buffers shorter than {n} elements"))
        })?;
        no_alias("gelu", out, &[x])?;
        kernels::gelu::cpu(&x.get()[..n], &mut out.get_mut()[..n]);
        Ok(())
    }

    fn add_assign(&self, acc: &CpuBuffer, x: &CpuBuffer, n: usize) -> Result<()> {
        check::add_assign(acc, x, n)?;
        no_alias("add_assign", acc, &[x])?;
        kernels::add::cpu(&mut acc.get_mut(), &x.get(), n);
        Ok(())
    }

    fn softmax(&self, x: &CpuBuffer, out: &CpuBuffer, rows: usize, cols: usize) -> Result<()> {
        check::softmax(x, out, rows, cols)?;
        no_alias("softmax", out, &[x])?;
        kernels::softmax::cpu(&x.get(), &mut out.get_mut(), rows, cols);
        Ok(())
    }

    fn embed_q4(&self, ids: &[u32], table: &Arc<Q4Matrix>, out: &CpuBuffer) -> Result<()> {
        check::embed(ids, table.rows, table.cols, out)?;
        kernels::embed_q4::cpu(ids, table, 0, &mut out.get_mut());
        Ok(())
    }

    fn embed_q4_block(
        &self,
        ids: &[u32],
        table: &Arc<Q4Matrix>,
        row0: usize,
        out: &CpuBuffer,
    ) -> Result<()> {
        check::embed_block(ids, table.cols, out)?;
        kernels::embed_q4::cpu(ids, table, row0, &mut out.get_mut());
        Ok(())
    }

    fn copy(
        &self,
        src: &CpuBuffer,
        src_offset: usize,
        dst: &CpuBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check::copy(src, src_offset, dst, dst_offset, len)?;
        if Arc::ptr_eq(&src.0, &dst.0) {
            dst.get_mut()
                .copy_within(src_offset..src_offset + len, dst_offset);
        } else {
            dst.get_mut()[dst_offset..dst_offset + len]
                .copy_from_slice(&src.get()[src_offset..src_offset + len]);
        }
        Ok(())
    }

    async fn select(
        &self,
        logits: &CpuBuffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
    ) -> Result<Selection> {
        check::select(logits, n, k)?;
        Ok(select::select(&logits.get()[..n], k, inv_temp))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fast_exp_matches_f64() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let got = super::fast_exp(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert!(super::fast_exp(-1e9) >= 0.0 && super::fast_exp(-1e9) < 1e-37);
        assert!(super::fast_exp(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn par_rows_scatters_every_range() {
        // Large enough to take the multi-threaded path on a multi-core machine.
        let (rows, m) = (5001, 3);
        let mut out = vec![f32::NAN; rows * m];
        super::par_rows(rows, m, &mut out, |r0, r1, part| {
            for r in r0..r1 {
                for mi in 0..m {
                    part[(r - r0) * m + mi] = (mi * 100_000 + r) as f32;
                }
            }
        });
        for mi in 0..m {
            for r in 0..rows {
                assert_eq!(out[mi * rows + r], (mi * 100_000 + r) as f32);
            }
        }
    }
}
