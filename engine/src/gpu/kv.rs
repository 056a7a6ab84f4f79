//! The KV cache on the GPU: allocation in the backend's format, appends (a transfer, a copy in
//! the pass, or f16 packing), the fused rotation-and-append of a layer, and attention over the
//! caches. [`crate::backend::Backend`]'s KV methods on [`GpuContext`] call these.

use super::buffer::{GpuBuffer, GpuKv};
use super::context::GpuContext;
use super::kernels;
use super::kernels::rows::Rows;
use crate::backend::{
    check, rms_norm_rope_append_unfused, rope_append_unfused, AttnShape, KvFormat, RopeShape,
};
use crate::error::{shape_err, Result};

/// Refuses a dispatch that binds a buffer it writes (`written`) twice, or beside a buffer it
/// reads (`read`): the browser's WebGPU rejects such a bind group, and a kernel reading what
/// another of its invocations writes is a race.
fn bound_once(op: &'static str, written: &[&wgpu::Buffer], read: &[&wgpu::Buffer]) -> Result<()> {
    for (i, w) in written.iter().enumerate() {
        if written[i + 1..].iter().chain(read).any(|o| w == o) {
            return Err(shape_err(
                op,
                "a buffer it writes is bound twice (as an input, or as another output)",
            ));
        }
    }
    Ok(())
}

impl GpuContext {
    /// A cache of `len` values in `format` (f16: two halves a 4-byte word), zeros.
    pub(crate) fn kv_alloc(&self, label: &str, len: usize, format: KvFormat) -> Result<GpuKv> {
        let words = match format {
            KvFormat::F32 => len,
            KvFormat::F16 => len.div_ceil(2),
        };
        let bytes = (words.max(1) * 4) as u64;
        let buf = self.create_storage(label, bytes, wgpu::BufferUsages::empty())?;
        Ok(GpuKv { buf, len, format })
    }

    /// `src[src_offset..][..len]` into `dst` at `dst_offset`, and as much from a second
    /// `(src, dst)` pair in the same dispatch: a transfer command into an f32 cache on
    /// rasterisers (`kv_dispatch` off), else a copy inside the pass (`copy_range.wgsl`) or f16
    /// packing (`kv_pack.wgsl`). Caches of two formats take one call each.
    pub(crate) fn kv_write(
        &self,
        pairs: &[(&GpuBuffer, &GpuKv)],
        (src_offset, dst_offset): (usize, usize),
        len: usize,
    ) -> Result<()> {
        let mut written = Vec::new();
        let mut read = Vec::new();
        for (src, dst) in pairs {
            check::copy(*src, src_offset, *dst, dst_offset, len)?;
            written.push(&dst.buf);
            read.push(&src.buf);
        }
        bound_once("write_kv", &written, &read)?;
        let format = pairs.first().map_or(KvFormat::F32, |(_, d)| d.format);
        let transfers = format == KvFormat::F32 && !self.tuning.kv_dispatch;
        if transfers || pairs.iter().any(|(_, d)| d.format != format) {
            for (src, dst) in pairs {
                self.kv_write_one(src, dst, (src_offset, dst_offset), len)?;
            }
            return Ok(());
        }
        let bufs: Vec<_> = pairs.iter().map(|(s, d)| (&s.buf, &d.buf)).collect();
        let offsets = (src_offset, dst_offset);
        match format {
            KvFormat::F32 => kernels::elementwise::copy_range(self, &bufs, offsets, len),
            KvFormat::F16 => kernels::elementwise::kv_pack(self, &bufs, offsets, len),
        }
    }

    /// [`GpuContext::kv_write`] of one pair, its shapes checked.
    fn kv_write_one(
        &self,
        src: &GpuBuffer,
        dst: &GpuKv,
        (src_offset, dst_offset): (usize, usize),
        len: usize,
    ) -> Result<()> {
        let pair = [(&src.buf, &dst.buf)];
        let offsets = (src_offset, dst_offset);
        match dst.format {
            KvFormat::F32 if !self.tuning.kv_dispatch => {
                let bytes = |n: usize| (n * 4) as u64;
                let (so, d) = (bytes(src_offset), bytes(dst_offset));
                self.copy_buffer(&src.buf, so, &dst.buf, d, bytes(len));
                Ok(())
            }
            KvFormat::F32 => kernels::elementwise::copy_range(self, &pair, offsets, len),
            KvFormat::F16 => kernels::elementwise::kv_pack(self, &pair, offsets, len),
        }
    }

    /// [`crate::Backend::rope_append`]: one dispatch (`rope_append.wgsl`) where the shapes
    /// allow it ([`kernels::rope::append_fits`]: every published model's) and the fusions are
    /// on; else the three plain ops.
    pub(crate) fn kv_rope_append(
        &self,
        [q, k, v]: [&GpuBuffer; 3],
        table: &GpuBuffer,
        [qs, ks]: [RopeShape; 2],
        [kc, vc]: [&GpuKv; 2],
        dst: usize,
    ) -> Result<()> {
        let fits =
            self.tuning.fuse && kernels::rope::append_fits(&qs, &ks, dst) && kc.format == vc.format;
        if !fits {
            return rope_append_unfused(self, [q, k, v], table, [qs, ks], [kc, vc], dst);
        }
        check::rope_append([q, k, v], table, [qs, ks], [kc, vc], dst)?;
        let written = [&q.buf, &k.buf, &kc.buf, &vc.buf];
        bound_once("rope_append", &written, &[&v.buf, &table.buf])?;
        let caches = [&kc.buf, &vc.buf];
        let qkv = [&q.buf, &k.buf, &v.buf];
        kernels::rope::dispatch_append(self, qkv, &table.buf, caches, kc.format, (qs, ks), dst)
    }

    /// [`crate::Backend::rms_norm_rope_append`]: one dispatch (`rms_norm_rope_append.wgsl`)
    /// where the shapes allow it ([`kernels::rows::norm_append_fits`]: Qwen3's) and the fusions
    /// are on; else the plain ops. `scratch` is left unwritten by the one dispatch.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn kv_norm_rope_append(
        &self,
        [q, k, v]: [&GpuBuffer; 3],
        [wq, wk]: [&GpuBuffer; 2],
        (eps, offset): (f32, f32),
        table: &GpuBuffer,
        [qs, ks]: [RopeShape; 2],
        scratch: [&GpuBuffer; 2],
        [kc, vc]: [&GpuKv; 2],
        dst: usize,
    ) -> Result<()> {
        let fits = self.tuning.fuse
            && kernels::rows::norm_append_fits(&qs, &ks, dst)
            && kc.format == vc.format;
        if !fits {
            let (qkv, w, norm, shapes) = ([q, k, v], [wq, wk], (eps, offset), [qs, ks]);
            let caches = [kc, vc];
            return rms_norm_rope_append_unfused(
                self, qkv, w, norm, table, shapes, scratch, caches, dst,
            );
        }
        check::rope_append([q, k, v], table, [qs, ks], [kc, vc], dst)?;
        check::rms_norm(q, wq, q, qs.tokens * qs.heads, qs.head_dim)?;
        check::rms_norm(k, wk, k, ks.tokens * ks.heads, ks.head_dim)?;
        let read = [&wq.buf, &table.buf, &k.buf, &wk.buf, &v.buf];
        bound_once("rms_norm_rope_append", &[&q.buf, &kc.buf, &vc.buf], &read)?;
        let s = Rows {
            rows: qs.tokens * qs.heads,
            dim: qs.head_dim,
            eps,
            offset,
        };
        kernels::rows::rms_norm_rope_append(
            self,
            [&q.buf, &k.buf, &v.buf],
            [&wq.buf, &wk.buf],
            &table.buf,
            [&kc.buf, &vc.buf],
            kc.format,
            s,
            (qs, ks),
            dst,
        )
    }

    /// [`crate::Backend::attention_kv`]: the attention kernels in the caches' format.
    pub(crate) fn kv_attention(
        &self,
        q: &GpuBuffer,
        [kc, vc]: [&GpuKv; 2],
        out: &GpuBuffer,
        shape: AttnShape,
    ) -> Result<()> {
        check::attention(q, kc, vc, out, shape)?;
        if kc.format != vc.format {
            return Err(shape_err(
                "attention",
                "the K and V caches are in different formats",
            ));
        }
        bound_once("attention", &[&out.buf], &[&q.buf, &kc.buf, &vc.buf])?;
        let caches = [&kc.buf, &vc.buf];
        kernels::attention::dispatch(self, &q.buf, caches, kc.format, &out.buf, shape)
    }
}
