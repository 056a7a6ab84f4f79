//! [`Backend`] on the GPU: shape checks, then the kernels' dispatch functions.

use super::buffer::{GpuBuffer, GpuKv, GpuQ4};
use super::context::GpuContext;
use super::kernels;
use super::kernels::elementwise;
use super::kernels::rows::Rows;
use crate::backend::{
    check, need_len, AttnShape, Backend, DeltaShape, KvFormat, LogitFilter, MatmulInput,
    MatmulKernel, RopeShape, Selection,
};
use crate::error::{shape_err, Result};
use crate::quant::Q4Matrix;

fn no_alias(op: &'static str, out: &GpuBuffer, inputs: &[&GpuBuffer]) -> Result<()> {
    if inputs.iter().any(|i| i.buf == out.buf) {
        return Err(shape_err(op, "the output buffer is also an input"));
    }
    Ok(())
}

impl GpuContext {
    /// A word GEMV's activations: the buffer it reads, and the norm it applies in its prologue
    /// (an RMSNorm input, its shapes checked as the norm pass would check them; with the
    /// tuning's `norm_gemv` off, the norm's pass and no prologue).
    fn gemv_input<'a>(
        &self,
        x: MatmulInput<'a, GpuBuffer>,
        m: usize,
        k: usize,
    ) -> Result<(&'a GpuBuffer, Option<kernels::q4_matmul::NormIn<'a>>)> {
        if !self.tuning.norm_gemv {
            return Ok((self.matmul_input(x, m, k)?, None));
        }
        match x {
            MatmulInput::Plain(x) => Ok((x, None)),
            MatmulInput::RmsNormed {
                x,
                weight,
                eps,
                offset,
                normed,
            } => {
                check::rms_norm(x, weight, normed, m, k)?;
                let norm = kernels::q4_matmul::NormIn {
                    weight: &weight.buf,
                    eps,
                    offset,
                };
                Ok((x, Some(norm)))
            }
        }
    }

    /// Runs `record` with the token ids uploaded into a pooled scratch buffer, given back once
    /// the dispatch is recorded: no buffer is created per token, so the gather's bind group is
    /// built once and found in the cache after. (A later write into the buffer is ordered
    /// after this dispatch: `write_buffer` submits what is recorded first.)
    fn embed_ids(
        &self,
        ids: &[u32],
        record: impl FnOnce(&wgpu::Buffer) -> Result<()>,
    ) -> Result<()> {
        let idb = self.take_scratch("token ids", (ids.len() * 4) as u64)?;
        self.write_buffer(&idb, 0, bytemuck::cast_slice(ids));
        let done = record(&idb);
        self.give_scratch("token ids", idb);
        done
    }
}

impl Backend for GpuContext {
    type Buffer = GpuBuffer;
    type Q4 = GpuQ4;
    type Kv = GpuKv;

    fn submit(&self) -> Result<()> {
        self.flush()
    }

    fn describe(&self) -> String {
        self.adapter_description()
    }

    fn start_profile(&self) {
        GpuContext::start_profile(self)
    }

    fn take_profile(&self) -> Option<crate::backend::Profile> {
        GpuContext::take_profile(self)
    }

    fn alloc(&self, label: &str, len: usize) -> Result<GpuBuffer> {
        let buf = self.create_storage(label, (len * 4) as u64, wgpu::BufferUsages::empty())?;
        Ok(GpuBuffer { buf, len })
    }

    fn upload(&self, label: &str, data: &[f32]) -> Result<GpuBuffer> {
        let b = self.alloc(label, data.len())?;
        self.write_buffer(&b.buf, 0, bytemuck::cast_slice(data));
        Ok(b)
    }

    fn write(&self, buf: &GpuBuffer, data: &[f32]) -> Result<()> {
        need_len("write", "destination", buf, data.len())?;
        self.write_buffer(&buf.buf, 0, bytemuck::cast_slice(data));
        Ok(())
    }

    fn upload_q4(&self, label: &str, m: &Q4Matrix) -> Result<GpuQ4> {
        m.validate(label)?;
        // The shaders read `q6_k` and `q5` as `q8_0` and `lq4k` as `lq4h`.
        let m = &*m.to_portable(label)?;
        let buf = self.create_storage(
            label,
            (m.data.len() * 4) as u64,
            wgpu::BufferUsages::empty(),
        )?;
        self.write_buffer(&buf, 0, bytemuck::cast_slice(&m.data));
        Ok(GpuQ4 {
            buf,
            rows: m.rows,
            cols: m.cols,
            sm_off: m.sm_offset(),
            rows_off: m.rows_offset(),
            kind: match m.layout {
                crate::quant::BlockLayout::Lq4 => 0,
                // (`lq4k` arrives here as `lq4h`, `q6_k` and `q5` as `q8_0`.)
                crate::quant::BlockLayout::Lq4h | crate::quant::BlockLayout::Lq4k => 1,
                crate::quant::BlockLayout::Q8
                | crate::quant::BlockLayout::Q6
                | crate::quant::BlockLayout::Q5 => GpuQ4::Q8,
            },
        })
    }

    async fn read(&self, buf: &GpuBuffer, offset: usize, len: usize) -> Result<Vec<f32>> {
        need_len("read", "buffer", buf, offset + len)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let got = self
            .read_ranges(&[(&buf.buf, (offset * 4) as u64, (len * 4) as u64)])
            .await?;
        Ok(bytemuck::cast_slice(&got[0]).to_vec())
    }

    fn q4_matmul(
        &self,
        x: &GpuBuffer,
        w: &GpuQ4,
        out: &GpuBuffer,
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::q4_matmul(x, out, w.rows, w.cols, m)?;
        no_alias("q4_matmul", out, &[x])?;
        kernels::q4_matmul::dispatch(self, kernel, &x.buf, w, &out.buf, (m, (w.rows, 0)))
    }

    fn q4_matmul_add(
        &self,
        x: &GpuBuffer,
        w: &GpuQ4,
        acc: &GpuBuffer,
        tmp: &GpuBuffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::fused_outputs("q4_matmul_add", n_out, m, w.rows)?;
        if kernel == MatmulKernel::Gemm || !self.tuning.fuse {
            self.q4_matmul(x, w, tmp, m, kernel)?;
            return self.add_assign(acc, tmp, n_out);
        }
        check::q4_matmul(x, acc, w.rows, w.cols, m)?;
        no_alias("q4_matmul_add", acc, &[x])?;
        let add = kernels::q4_matmul::Epilogue::Add;
        let win = (m, (w.rows, 0));
        kernels::q4_matmul::dispatch_with(self, kernel, &x.buf, w, &acc.buf, win, add)
    }

    fn q4_matmul_glu(
        &self,
        x: MatmulInput<'_, GpuBuffer>,
        (w_gate, w_up): (&GpuQ4, &GpuQ4),
        (gate, up): (&GpuBuffer, &GpuBuffer),
        out: &GpuBuffer,
        (m, n_out): (usize, usize),
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::fused_outputs("q4_matmul_glu", n_out, m, w_gate.rows)?;
        check::glu_shapes((w_gate.rows, w_gate.cols), (w_up.rows, w_up.cols))?;
        let fused = self.tuning.fuse && kernels::q4_matmul::glu_fits(self, w_gate, w_up);
        if kernel == MatmulKernel::Gemm || !fused {
            let x = self.matmul_input(x, m, w_gate.cols)?;
            self.q4_matmul(x, w_gate, gate, m, kernel)?;
            self.q4_matmul(x, w_up, up, m, kernel)?;
            return self.silu_mul(gate, up, out, n_out);
        }
        let (x, norm) = self.gemv_input(x, m, w_gate.cols)?;
        check::q4_matmul(x, out, w_gate.rows, w_gate.cols, m)?;
        no_alias("q4_matmul_glu", out, &[x])?;
        let glu = kernels::q4_matmul::Epilogue::Glu(w_up);
        let win = (m, (w_gate.rows, 0));
        kernels::q4_matmul::gemv_word(self, &x.buf, &[(w_gate, &out.buf)], win, glu, norm)
    }

    fn q4_matmul_many(
        &self,
        x: MatmulInput<'_, GpuBuffer>,
        parts: &[(&GpuQ4, &GpuBuffer)],
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        let Some((w0, _)) = parts.first() else {
            return Ok(());
        };
        let ws: Vec<&GpuQ4> = parts.iter().map(|(w, _)| *w).collect();
        // Groups of up to three matrices per dispatch (Qwen3.5's four input projections: two).
        let per = self.tuning.gemv_parts as usize;
        let fused = self.tuning.fuse
            && kernel == MatmulKernel::Gemv
            && ws
                .chunks(per)
                .all(|c| kernels::q4_matmul::parts_fit(self, c));
        if !fused {
            let x = self.matmul_input(x, m, w0.cols)?;
            for (w, out) in parts {
                self.q4_matmul(x, w, out, m, kernel)?;
            }
            return Ok(());
        }
        let (x, norm) = self.gemv_input(x, m, w0.cols)?;
        for (i, (w, out)) in parts.iter().enumerate() {
            check::q4_matmul(x, out, w.rows, w.cols, m)?;
            let others: Vec<&GpuBuffer> = parts[..i].iter().map(|(_, o)| *o).collect();
            no_alias("q4_matmul_many", out, &[&[x][..], &others].concat())?;
        }
        let store = kernels::q4_matmul::Epilogue::Store;
        for chunk in parts.chunks(per) {
            let mats: Vec<(&GpuQ4, &wgpu::Buffer)> =
                chunk.iter().map(|(w, o)| (*w, &o.buf)).collect();
            let win = (m, (chunk[0].0.rows, 0));
            kernels::q4_matmul::gemv_word(self, &x.buf, &mats, win, store, norm)?;
        }
        Ok(())
    }

    fn q4_matmul_block(
        &self,
        x: &GpuBuffer,
        w: &GpuQ4,
        out: &GpuBuffer,
        m: usize,
        kernel: MatmulKernel,
        out_stride: usize,
        out_off: usize,
    ) -> Result<()> {
        check::q4_matmul_block(x, out, (w.rows, w.cols), m, out_stride, out_off)?;
        no_alias("q4_matmul_block", out, &[x])?;
        let win = (out_stride, out_off);
        kernels::q4_matmul::dispatch(self, kernel, &x.buf, w, &out.buf, (m, win))
    }

    fn f32_matmul(
        &self,
        x: &GpuBuffer,
        w: &GpuBuffer,
        rows: usize,
        cols: usize,
        out: &GpuBuffer,
        m: usize,
        kernel: MatmulKernel,
    ) -> Result<()> {
        check::f32_matmul(x, w, rows, cols, out, m)?;
        no_alias("f32_matmul", out, &[x, w])?;
        kernels::f32_matmul::dispatch(
            self,
            &x.buf,
            &w.buf,
            rows,
            cols,
            &out.buf,
            m,
            kernel == MatmulKernel::Gemm,
        )
    }

    fn rms_norm(
        &self,
        x: &GpuBuffer,
        weight: &GpuBuffer,
        out: &GpuBuffer,
        rows: usize,
        dim: usize,
        eps: f32,
        weight_offset: f32,
    ) -> Result<()> {
        check::rms_norm(x, weight, out, rows, dim)?;
        no_alias("rms_norm", out, &[x, weight])?;
        let s = Rows {
            rows,
            dim,
            eps,
            offset: weight_offset,
        };
        kernels::rows::rms_norm(self, &x.buf, &weight.buf, &out.buf, s)
    }

    fn rms_norm_rope(
        &self,
        x: &GpuBuffer,
        weight: &GpuBuffer,
        out: &GpuBuffer,
        (eps, weight_offset): (f32, f32),
        table: &GpuBuffer,
        shape: RopeShape,
    ) -> Result<()> {
        let rows = shape.tokens * shape.heads;
        if !self.tuning.fuse {
            self.rms_norm(x, weight, out, rows, shape.head_dim, eps, weight_offset)?;
            return self.rope(out, table, shape);
        }
        check::rms_norm(x, weight, out, rows, shape.head_dim)?;
        check::rope(out, table, shape)?;
        no_alias("rms_norm_rope", out, &[x, weight, table])?;
        let s = Rows {
            rows,
            dim: shape.head_dim,
            eps,
            offset: weight_offset,
        };
        let rope = (shape.heads, shape.rot_dim, shape.pos0);
        let ins = (&x.buf, &weight.buf, &table.buf);
        kernels::rows::rms_norm_rope(self, ins, &out.buf, s, rope, None)
    }

    fn rms_norm_rope_pair(
        &self,
        [q, k]: [(&GpuBuffer, &GpuBuffer, &GpuBuffer); 2],
        (eps, weight_offset): (f32, f32),
        table: &GpuBuffer,
        [qs, ks]: [RopeShape; 2],
    ) -> Result<()> {
        let same = (qs.tokens, qs.head_dim, qs.rot_dim, qs.pos0)
            == (ks.tokens, ks.head_dim, ks.rot_dim, ks.pos0);
        if !self.tuning.fuse || !same {
            self.rms_norm_rope(q.0, q.1, q.2, (eps, weight_offset), table, qs)?;
            return self.rms_norm_rope(k.0, k.1, k.2, (eps, weight_offset), table, ks);
        }
        for ((x, weight, out), shape) in [(q, qs), (k, ks)] {
            check::rms_norm(x, weight, out, shape.tokens * shape.heads, shape.head_dim)?;
            check::rope(out, table, shape)?;
            no_alias("rms_norm_rope_pair", out, &[q.0, q.1, k.0, k.1, table])?;
        }
        no_alias("rms_norm_rope_pair", q.2, &[k.2])?;
        let s = Rows {
            rows: qs.tokens * qs.heads,
            dim: qs.head_dim,
            eps,
            offset: weight_offset,
        };
        let rope = (qs.heads, qs.rot_dim, qs.pos0);
        let ins = (&q.0.buf, &q.1.buf, &table.buf);
        let second = (
            [&k.0.buf, &k.1.buf, &k.2.buf],
            (ks.tokens * ks.heads, ks.heads),
        );
        kernels::rows::rms_norm_rope(self, ins, &q.2.buf, s, rope, Some(second))
    }

    fn rope(&self, x: &GpuBuffer, table: &GpuBuffer, shape: RopeShape) -> Result<()> {
        check::rope(x, table, shape)?;
        no_alias("rope", x, &[table])?;
        kernels::rope::dispatch(self, &x.buf, &table.buf, shape)
    }

    fn attention(
        &self,
        q: &GpuBuffer,
        k_cache: &GpuBuffer,
        v_cache: &GpuBuffer,
        out: &GpuBuffer,
        shape: AttnShape,
    ) -> Result<()> {
        check::attention(q, k_cache, v_cache, out, shape)?;
        no_alias("attention", out, &[q, k_cache, v_cache])?;
        let caches = [&k_cache.buf, &v_cache.buf];
        kernels::attention::dispatch(self, &q.buf, caches, KvFormat::F32, &out.buf, shape)
    }

    /// f16 unless the tuning says otherwise (`kv_f16=0`): half the bytes decode attention
    /// reads, converted as the kernels read them (`unpack2x16float`: every adapter has it).
    fn kv_format(&self) -> KvFormat {
        if self.tuning.kv_f16 {
            KvFormat::F16
        } else {
            KvFormat::F32
        }
    }

    fn alloc_kv(&self, label: &str, len: usize, format: KvFormat) -> Result<GpuKv> {
        self.kv_alloc(label, len, format)
    }

    fn write_kv(
        &self,
        src: &GpuBuffer,
        src_offset: usize,
        dst: &GpuKv,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.kv_write(&[(src, dst)], (src_offset, dst_offset), len)
    }

    fn write_kv_pair(
        &self,
        [k, v]: [&GpuBuffer; 2],
        src_offset: usize,
        [k_cache, v_cache]: [&GpuKv; 2],
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        let pairs = [(k, k_cache), (v, v_cache)];
        self.kv_write(&pairs, (src_offset, dst_offset), len)
    }

    fn rms_norm_rope_append(
        &self,
        qkv: [&GpuBuffer; 3],
        weights: [&GpuBuffer; 2],
        norm: (f32, f32),
        table: &GpuBuffer,
        shapes: [RopeShape; 2],
        scratch: [&GpuBuffer; 2],
        caches: [&GpuKv; 2],
        dst: usize,
    ) -> Result<()> {
        self.kv_norm_rope_append(qkv, weights, norm, table, shapes, scratch, caches, dst)
    }

    fn rope_append(
        &self,
        qkv: [&GpuBuffer; 3],
        table: &GpuBuffer,
        shapes: [RopeShape; 2],
        caches: [&GpuKv; 2],
        dst: usize,
    ) -> Result<()> {
        self.kv_rope_append(qkv, table, shapes, caches, dst)
    }

    fn attention_kv(
        &self,
        q: &GpuBuffer,
        k_cache: &GpuKv,
        v_cache: &GpuKv,
        out: &GpuBuffer,
        shape: AttnShape,
    ) -> Result<()> {
        self.kv_attention(q, [k_cache, v_cache], out, shape)
    }

    fn silu_mul(&self, gate: &GpuBuffer, up: &GpuBuffer, out: &GpuBuffer, n: usize) -> Result<()> {
        check::silu_mul(gate, up, out, n)?;
        no_alias("silu_mul", out, &[gate, up])?;
        kernels::elementwise::gate(
            self,
            &elementwise::SILU_MUL,
            [&gate.buf, &up.buf],
            &out.buf,
            n,
        )
    }

    fn sigmoid_mul(
        &self,
        x: &GpuBuffer,
        gate: &GpuBuffer,
        out: &GpuBuffer,
        n: usize,
    ) -> Result<()> {
        check::sigmoid_mul(x, gate, out, n)?;
        no_alias("sigmoid_mul", out, &[x, gate])?;
        kernels::elementwise::gate(
            self,
            &elementwise::SIGMOID_MUL,
            [&x.buf, &gate.buf],
            &out.buf,
            n,
        )
    }

    fn take_half(
        &self,
        src: &GpuBuffer,
        out: &GpuBuffer,
        rows: usize,
        dim: usize,
        half: usize,
    ) -> Result<()> {
        check::take_half(src, out, rows, dim, half)?;
        no_alias("take_half", out, &[src])?;
        kernels::elementwise::take_half(self, &src.buf, &out.buf, (rows, dim, half))
    }

    fn conv1d_silu(
        &self,
        x: &GpuBuffer,
        w: &GpuBuffer,
        state: &GpuBuffer,
        out: &GpuBuffer,
        tokens: usize,
        channels: usize,
        kernel: usize,
    ) -> Result<()> {
        check::conv1d(x, w, state, out, tokens, channels, kernel)?;
        no_alias("conv1d_silu", out, &[x, w, state])?;
        no_alias("conv1d_silu", state, &[x, w])?;
        kernels::conv1d::dispatch(
            self, &x.buf, &w.buf, &state.buf, &out.buf, tokens, channels, kernel,
        )
    }

    fn gated_delta_rule(
        &self,
        qkv: &GpuBuffer,
        a: &GpuBuffer,
        b: &GpuBuffer,
        a_log: &GpuBuffer,
        dt_bias: &GpuBuffer,
        state: &GpuBuffer,
        out: &GpuBuffer,
        shape: DeltaShape,
    ) -> Result<()> {
        check::delta_rule(qkv, a, b, a_log, dt_bias, state, out, shape)?;
        no_alias("gated_delta_rule", out, &[qkv, a, b, a_log, dt_bias, state])?;
        no_alias("gated_delta_rule", state, &[qkv, a, b, a_log, dt_bias])?;
        kernels::delta_rule::dispatch(
            self,
            &qkv.buf,
            &a.buf,
            &b.buf,
            &a_log.buf,
            &dt_bias.buf,
            &state.buf,
            &out.buf,
            shape,
        )
    }

    fn layer_norm(
        &self,
        x: &GpuBuffer,
        weight: &GpuBuffer,
        bias: &GpuBuffer,
        out: &GpuBuffer,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> Result<()> {
        check::layer_norm(x, weight, bias, out, rows, dim)?;
        no_alias("layer_norm", out, &[x, weight, bias])?;
        let s = Rows {
            rows,
            dim,
            eps,
            offset: 0.0,
        };
        kernels::rows::layer_norm(self, &x.buf, [&weight.buf, &bias.buf], &out.buf, s)
    }

    fn add_bias(&self, x: &GpuBuffer, bias: &GpuBuffer, rows: usize, cols: usize) -> Result<()> {
        check::add_bias(x, bias, rows, cols)?;
        no_alias("add_bias", x, &[bias])?;
        kernels::elementwise::add_bias(self, &x.buf, &bias.buf, (rows, cols))
    }

    fn gelu(&self, x: &GpuBuffer, out: &GpuBuffer, n: usize) -> Result<()> {
        check::add_assign(out, x, n).map_err(|_| {
            crate::error::shape_err("gelu", format!("buffers shorter than {n} elements"))
        })?;
        no_alias("gelu", out, &[x])?;
        kernels::elementwise::gelu(self, &x.buf, &out.buf, n)
    }

    fn add_assign(&self, acc: &GpuBuffer, x: &GpuBuffer, n: usize) -> Result<()> {
        check::add_assign(acc, x, n)?;
        no_alias("add_assign", acc, &[x])?;
        kernels::elementwise::add(self, &acc.buf, &x.buf, n)
    }

    fn softmax(&self, x: &GpuBuffer, out: &GpuBuffer, rows: usize, cols: usize) -> Result<()> {
        check::softmax(x, out, rows, cols)?;
        no_alias("softmax", out, &[x])?;
        let s = Rows {
            rows,
            dim: cols,
            eps: 0.0,
            offset: 0.0,
        };
        kernels::rows::softmax(self, &x.buf, &out.buf, s)
    }

    fn embed_q4(&self, ids: &[u32], table: &GpuQ4, out: &GpuBuffer) -> Result<()> {
        check::embed(ids, table.rows, table.cols, out)?;
        self.embed_ids(ids, |idb| {
            kernels::embed_q4::dispatch(self, table, idb, &out.buf, ids.len(), 0)
        })
    }

    fn embed_q4_block(
        &self,
        ids: &[u32],
        table: &GpuQ4,
        row0: usize,
        out: &GpuBuffer,
    ) -> Result<()> {
        check::embed_block(ids, table.cols, out)?;
        if ids.is_empty() {
            return Ok(());
        }
        self.embed_ids(ids, |idb| {
            kernels::embed_q4::dispatch(self, table, idb, &out.buf, ids.len(), row0)
        })
    }

    fn copy(
        &self,
        src: &GpuBuffer,
        src_offset: usize,
        dst: &GpuBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check::copy(src, src_offset, dst, dst_offset, len)?;
        self.copy_buffer(
            &src.buf,
            (src_offset * 4) as u64,
            &dst.buf,
            (dst_offset * 4) as u64,
            (len * 4) as u64,
        );
        Ok(())
    }

    async fn select(
        &self,
        logits: &GpuBuffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
    ) -> Result<Selection> {
        check::select(logits, n, k)?;
        kernels::topk::select(self, &logits.buf, n, k, inv_temp).await
    }

    async fn select_filtered(
        &self,
        logits: &GpuBuffer,
        n: usize,
        k: usize,
        inv_temp: Option<f32>,
        filter: &LogitFilter<'_>,
    ) -> Result<Selection> {
        check::select_filtered(logits, n, k, filter)?;
        kernels::topk::select_filtered(self, &logits.buf, n, k, inv_temp, filter).await
    }
}
