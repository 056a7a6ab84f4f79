//! [`Backend`] on the CPU: shape checks, then the op families beside this file.

use std::sync::{Arc, RwLock};

use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

use super::{
    attention, elementwise, embed, gemv, importance, matmul, norm, pool, recurrent, rope, select,
    simd,
};
use crate::backend::{
    check, need_len, AttnShape, Backend, BufferLen, DeltaShape, KvFormat, LogitFilter, MatmulInput,
    MatmulKernel, RopeShape, Selection,
};
use crate::error::{shape_err, Result};
use crate::quant::{BlockLayout, Q4Matrix};

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

/// A KV cache on the host: f16 where the CPU converts halves in hardware (half the bytes
/// decode attention reads), else f32.
#[derive(Clone, Debug)]
pub struct CpuKv(Arc<RwLock<KvStore>>);

/// (f16 values are kept as their bits: `vec![0u16; n]` is a zeroed allocation whose pages are
/// mapped only when written, as `vec![0f32; n]`, so a long context costs only what is used.)
#[derive(Debug)]
enum KvStore {
    F32(Vec<f32>),
    F16(Vec<u16>),
}

impl BufferLen for CpuKv {
    fn len(&self) -> usize {
        match &*self.get() {
            KvStore::F32(v) => v.len(),
            KvStore::F16(v) => v.len(),
        }
    }
}

impl CpuKv {
    /// A cache of `len` zeros in `format`.
    pub fn new(format: KvFormat, len: usize) -> CpuKv {
        CpuKv(Arc::new(RwLock::new(match format {
            KvFormat::F32 => KvStore::F32(vec![0.0; len]),
            KvFormat::F16 => KvStore::F16(vec![0u16; len]),
        })))
    }
    fn get(&self) -> std::sync::RwLockReadGuard<'_, KvStore> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }
    fn get_mut(&self) -> std::sync::RwLockWriteGuard<'_, KvStore> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
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
    type Kv = CpuKv;

    fn describe(&self) -> String {
        let t = pool::threads();
        format!(
            "cpu ({}, {t} thread{})",
            simd::Isa::best().name(),
            if t == 1 { "" } else { "s" }
        )
    }

    fn q4_activation_rounding(&self, layout: BlockLayout, m: usize) -> Option<usize> {
        if !matmul::integer_products(m) {
            return None;
        }
        let shared = super::gemv::shares_activation_scales(self.runs_layout(layout), m);
        Some(if shared {
            crate::cpu::q8::SUPER_BLOCKS
        } else {
            1
        })
    }

    /// 256: where prefill takes the SGEMM (no 4-bit tiles for the instruction set) it
    /// dequantizes each 4-bit matrix once per pass, so longer passes reuse it over more rows
    /// (SmolLM2, 512-token prompt: 785 tok/s in passes of 128, 1,000–1,060 in one of 512), but
    /// the run state grows with the pass (512 rows: +8 MB peak for `lorekeeper ask` on the
    /// demo bundle, over the sessions' earlier 256).
    fn prefill_chunk(&self) -> usize {
        256
    }

    fn alloc(&self, _label: &str, len: usize) -> Result<CpuBuffer> {
        let b = CpuBuffer(Arc::new(RwLock::new(vec![0.0; len])));
        importance::register(Arc::as_ptr(&b.0) as usize, None);
        Ok(b)
    }

    fn upload(&self, label: &str, data: &[f32]) -> Result<CpuBuffer> {
        let b = CpuBuffer(Arc::new(RwLock::new(data.to_vec())));
        importance::register(Arc::as_ptr(&b.0) as usize, Some(label));
        Ok(b)
    }

    fn write(&self, buf: &CpuBuffer, data: &[f32]) -> Result<()> {
        need_len("write", "destination", buf, data.len())?;
        buf.get_mut()[..data.len()].copy_from_slice(data);
        Ok(())
    }

    fn upload_q4(&self, label: &str, m: &Q4Matrix) -> Result<Arc<Q4Matrix>> {
        m.validate(label)?;
        if self.runs_layout(m.layout) != m.layout {
            return Ok(Arc::new(m.to_portable(label)?.into_owned()));
        }
        Ok(Arc::new(m.clone()))
    }

    /// `q6_k`, `lq4k` and `q5` run as they are where the instruction set has their kernels
    /// ([`simd::Isa::runs`]), else as `q8_0`, `lq4h` and `q8_0`.
    fn runs_layout(&self, layout: BlockLayout) -> BlockLayout {
        match layout {
            BlockLayout::Q6 | BlockLayout::Q5 if !simd::Isa::best().runs(layout) => BlockLayout::Q8,
            BlockLayout::Lq4k if !simd::Isa::best().runs(layout) => BlockLayout::Lq4h,
            other => other,
        }
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
        matmul::q4_matmul_into(&x, w, &mut o, m, (w.rows, 0));
        let _ = kernel; // the row count decides: few rows → integer GEMV, else SGEMM
        Ok(())
    }

    fn q4_matmul_add(
        &self,
        x: &CpuBuffer,
        w: &Arc<Q4Matrix>,
        acc: &CpuBuffer,
        tmp: &CpuBuffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::fused_outputs("q4_matmul_add", n_out, m, w.rows)?;
        if !matmul::integer_products(m) {
            self.q4_matmul(x, w, tmp, m, kernel)?;
            return self.add_assign(acc, tmp, n_out);
        }
        check::q4_matmul(x, acc, w.rows, w.cols, m)?;
        no_alias("q4_matmul_add", acc, &[x])?;
        gemv::q4_gemv_q8_add(&x.get(), w, m, &mut acc.get_mut());
        Ok(())
    }

    fn q4_matmul_glu(
        &self,
        x: MatmulInput<'_, CpuBuffer>,
        (w_gate, w_up): (&Arc<Q4Matrix>, &Arc<Q4Matrix>),
        (gate, up): (&CpuBuffer, &CpuBuffer),
        out: &CpuBuffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::fused_outputs("q4_matmul_glu", n_out, m, w_gate.rows)?;
        check::glu_shapes((w_gate.rows, w_gate.cols), (w_up.rows, w_up.cols))?;
        let x = self.matmul_input(x, m, w_gate.cols)?;
        if !matmul::integer_products(m) {
            self.q4_matmul(x, w_gate, gate, m, kernel)?;
            self.q4_matmul(x, w_up, up, m, kernel)?;
            return self.silu_mul(gate, up, out, n_out);
        }
        check::q4_matmul(x, gate, w_gate.rows, w_gate.cols, m)?;
        check::q4_matmul(x, out, w_gate.rows, w_gate.cols, m)?;
        no_alias("q4_matmul_glu", out, &[x, gate])?;
        no_alias("q4_matmul_glu", gate, &[x])?;
        let x = x.get();
        let (mut g, mut o) = (gate.get_mut(), out.get_mut());
        gemv::q4_gemv_q8_glu(&x, (w_gate, w_up), m, &mut g, &mut o);
        Ok(())
    }

    fn q4_matmul_many(
        &self,
        x: MatmulInput<'_, CpuBuffer>,
        parts: &[(&Arc<Q4Matrix>, &CpuBuffer)],
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        let Some((w0, _)) = parts.first() else {
            return Ok(());
        };
        let x = self.matmul_input(x, m, w0.cols)?;
        let one_width = parts.windows(2).all(|p| p[0].0.cols == p[1].0.cols);
        if !matmul::integer_products(m) || !one_width {
            for (w, out) in parts {
                self.q4_matmul(x, w, out, m, kernel)?;
            }
            return Ok(());
        }
        for (i, (w, out)) in parts.iter().enumerate() {
            check::q4_matmul(x, *out, w.rows, w.cols, m)?;
            let others: Vec<&CpuBuffer> = parts[..i].iter().map(|(_, o)| *o).collect();
            no_alias("q4_matmul_many", out, &[&[x][..], &others].concat())?;
        }
        let x = x.get();
        let mut outs: Vec<_> = parts.iter().map(|(_, o)| o.get_mut()).collect();
        let mut views: Vec<(&Q4Matrix, &mut [f32])> = parts
            .iter()
            .zip(outs.iter_mut())
            .map(|((w, _), o)| (&***w, &mut o[..]))
            .collect();
        gemv::q4_gemv_q8_many(&x, &mut views, m);
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
        matmul::q4_matmul_into(&x, w, &mut o, m, (out_stride, out_off));
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
        let x = x.get();
        importance::observe(Arc::as_ptr(&w.0) as usize, &x, m, cols);
        matmul::f32_matmul(&x, &w.get(), rows, cols, &mut out.get_mut(), m);
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
        norm::rms_norm(
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
        rope::rope(&mut x.get_mut(), &table.get(), shape);
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
        attention::attention(
            &q.get(),
            &k_cache.get(),
            &v_cache.get(),
            &mut out.get_mut(),
            shape,
        );
        Ok(())
    }

    fn kv_format(&self) -> KvFormat {
        if simd::Isa::f16c() {
            KvFormat::F16
        } else {
            KvFormat::F32
        }
    }

    fn alloc_kv(&self, _label: &str, len: usize, format: KvFormat) -> Result<CpuKv> {
        Ok(CpuKv::new(format, len))
    }

    fn write_kv(
        &self,
        src: &CpuBuffer,
        src_offset: usize,
        dst: &CpuKv,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check::copy(src, src_offset, dst, dst_offset, len)?;
        let src = &src.get()[src_offset..src_offset + len];
        match &mut *dst.get_mut() {
            KvStore::F32(d) => d[dst_offset..dst_offset + len].copy_from_slice(src),
            KvStore::F16(d) => d[dst_offset..dst_offset + len]
                .reinterpret_cast_mut::<half::f16>()
                .convert_from_f32_slice(src),
        }
        Ok(())
    }

    fn attention_kv(
        &self,
        q: &CpuBuffer,
        k_cache: &CpuKv,
        v_cache: &CpuKv,
        out: &CpuBuffer,
        shape: AttnShape,
    ) -> Result<()> {
        check::attention(q, k_cache, v_cache, out, shape)?;
        no_alias("attention", out, &[q])?;
        let (q, mut out) = (q.get(), out.get_mut());
        match (&*k_cache.get(), &*v_cache.get()) {
            (KvStore::F32(k), KvStore::F32(v)) => attention::attention(&q, k, v, &mut out, shape),
            (KvStore::F16(k), KvStore::F16(v)) => attention::attention::<half::f16>(
                &q,
                k.reinterpret_cast(),
                v.reinterpret_cast(),
                &mut out,
                shape,
            ),
            _ => {
                return Err(shape_err(
                    "attention",
                    "the K and V caches are in different formats",
                ))
            }
        }
        Ok(())
    }

    fn silu_mul(&self, gate: &CpuBuffer, up: &CpuBuffer, out: &CpuBuffer, n: usize) -> Result<()> {
        check::silu_mul(gate, up, out, n)?;
        no_alias("silu_mul", out, &[gate, up])?;
        elementwise::silu_mul(&gate.get(), &up.get(), &mut out.get_mut(), n);
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
        elementwise::sigmoid_mul(&x.get(), &gate.get(), &mut out.get_mut(), n);
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
        elementwise::take_half(&src.get(), &mut out.get_mut(), rows, dim, half);
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
        recurrent::conv1d_silu(
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
        recurrent::gated_delta_rule(
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
        norm::layer_norm(
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
        elementwise::add_bias(&mut x.get_mut(), &bias.get(), rows, cols);
        Ok(())
    }

    fn gelu(&self, x: &CpuBuffer, out: &CpuBuffer, n: usize) -> Result<()> {
        check::add_assign(out, x, n).map_err(|_| {
            crate::error::shape_err("gelu", format!("buffers shorter than {n} elements"))
        })?;
        no_alias("gelu", out, &[x])?;
        elementwise::gelu(&x.get()[..n], &mut out.get_mut()[..n]);
        Ok(())
    }

    fn add_assign(&self, acc: &CpuBuffer, x: &CpuBuffer, n: usize) -> Result<()> {
        check::add_assign(acc, x, n)?;
        no_alias("add_assign", acc, &[x])?;
        elementwise::add_assign(&mut acc.get_mut(), &x.get(), n);
        Ok(())
    }

    fn softmax(&self, x: &CpuBuffer, out: &CpuBuffer, rows: usize, cols: usize) -> Result<()> {
        check::softmax(x, out, rows, cols)?;
        no_alias("softmax", out, &[x])?;
        elementwise::softmax(&x.get(), &mut out.get_mut(), rows, cols);
        Ok(())
    }

    fn embed_q4(&self, ids: &[u32], table: &Arc<Q4Matrix>, out: &CpuBuffer) -> Result<()> {
        check::embed(ids, table.rows, table.cols, out)?;
        embed::embed_q4(ids, table, 0, &mut out.get_mut());
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
        embed::embed_q4(ids, table, row0, &mut out.get_mut());
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

    async fn select_filtered(
        &self,
        logits: &CpuBuffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
        filter: &LogitFilter<'_>,
    ) -> Result<Selection> {
        check::select_filtered(logits, n, k, filter)?;
        Ok(select::select_filtered(
            &logits.get()[..n],
            k,
            inv_temp,
            filter,
        ))
    }
}
