//! Per-adapter tuning of the kernels (workgroup sizes, variants), picked from the adapter's
//! type and overridable from the environment for measuring variants.

use crate::error::{EngineError, Result};

/// Adapter tuning picked from its type: CPU rasterisers (lavapipe, SwiftShader) prefer few
/// threads per output row; discrete GPUs want wide rows for coalesced loads.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Workgroup size of the 4-bit GEMV.
    pub gemv_wg: u32,
    /// Threads cooperating on one GEMV output row.
    pub gemv_tpr: u32,
    /// The 4-bit GEMV reads a 32-weight group (16 bytes) per lane and step (CPU rasterisers),
    /// not one word.
    pub gemv_groups: bool,
    /// Rows one lane of the group-per-step GEMV takes (1, 2, 4 or 8; more than 1 only with one
    /// thread per row): the group's activations, a lane's own loads on a rasteriser, are read
    /// once for them all.
    pub gemv_rpl: u32,
    /// Steps of the word-per-lane GEMV (`q4_gemv.wgsl`) whose loads are issued together
    /// before their arithmetic: 1 or 4.
    pub gemv_unroll: u32,
    /// Matrices of one width and layout one word-GEMV dispatch computes (a layer's q, k and
    /// v): 1 to 3.
    pub gemv_parts: u32,
    /// A layer's input RMSNorm in the prologue of the word-GEMV that reads it, instead of a
    /// pass of its own.
    pub norm_gemv: bool,
    /// Workgroup size of the row-wise reductions (norm, softmax).
    pub reduce_wg: u32,
    /// Workgroup size of attention.
    pub attn_wg: u32,
    /// Workgroup size (= keys per tile) of decode attention for head_dim a multiple of 4
    /// (`attention_decode.wgsl`); 0: such shapes take the split kernel for any head_dim.
    pub decode_wg: u32,
    /// Decode attention through `attention_lanes.wgsl` (one lane per query head and key range,
    /// no workgroup memory: CPU rasterisers), with key ranges of at least this many keys; 0:
    /// the tiled kernels (GPUs).
    pub decode_lanes: u32,
    /// Lanes of one `attention_lanes.wgsl` workgroup, at most (the rasteriser's SIMD width):
    /// as many key ranges as fit beside a KV head's query heads.
    pub lanes_width: u32,
    /// Prefill attention through `attention_rows.wgsl` (one lane per query token and group of
    /// query heads, walking the keys in order: CPU rasterisers), this many query tokens a
    /// workgroup; 0: the one-pass kernel (GPUs).
    pub prefill_rows: u32,
    /// Prefill attention (and encoders') through `attention_tiles.wgsl` where `prefill_rows`
    /// is 0 or does not fit (GPUs: a workgroup per KV head and few query tokens, key and value
    /// tiles shared in workgroup memory by the group's query rows); off: the one-pass kernel.
    pub prefill_tiles: bool,
    /// Prefill's block-quantized GEMM through `q4_gemm_lanes.wgsl` (CPU rasterisers: a lane
    /// takes `gemv_rpl` rows and this many tokens, no workgroup memory), 1 to 8; 0: the tiled
    /// `q4_gemm.wgsl` (GPUs).
    pub gemm_tokens: u32,
    /// Workgroups decode attention aims to fill the device with (key ranges per KV head and
    /// query token: this over their count, at least one tile each).
    pub attn_groups: u32,
    /// Workgroup size of element-wise kernels.
    pub elem_wg: u32,
    /// Workgroup size of top-k selection, at least: a selection of k widens it to 2k (at most
    /// 256), so that each stage still shrinks its candidates 32-fold or more.
    pub select_wg: u32,
    /// KV cache appends as a dispatch inside the compute pass (GPUs), not a transfer command
    /// that ends the pass (CPU rasterisers, where a pass boundary costs nothing).
    pub kv_dispatch: bool,
    /// The fused kernels (the residual add in the GEMV, SwiGLU in one GEMV, RMSNorm with
    /// RoPE, RoPE with the KV cache append); off: the plain ops they stand for (see
    /// `GpuContext::verify_fused`).
    pub fuse: bool,
    /// Decoders' KV caches in f16 (half the bytes decode attention reads, half the memory),
    /// not f32 ([`crate::Backend::kv_format`]).
    pub kv_f16: bool,
    /// The GEMVs sum a row's lanes by subgroup shuffles where the device has subgroups and
    /// the row's lanes fit in one (`GpuContext::subgroup_rows`); off: through workgroup memory.
    pub gemv_subgroups: bool,
}

/// The environment variable whose `field=value,…` list overrides the adapter's tuning (for
/// measuring variants, e.g. `gemv_unroll=1,decode_wg=64`); unset in normal use.
pub const TUNING_ENV: &str = "LOREKEEPER_GPU_TUNING";

impl Tuning {
    /// This tuning with the overrides that `var` names in the environment, if set. An
    /// unknown field or a value that is not a number is an error naming it.
    pub(super) fn overridden(self, var: &str) -> Result<Tuning> {
        match std::env::var(var) {
            Ok(list) => self.with_overrides(var, &list),
            Err(_) => Ok(self),
        }
    }

    /// This tuning with the overrides of `list`, `field=value` (or `field:value`, as a web
    /// address's query carries them) items separated by commas, from `source` (named in
    /// errors: an unknown field, a value that is not a number, a tuning out of range).
    pub fn with_overrides(mut self, source: &str, list: &str) -> Result<Tuning> {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = |what: &str| EngineError::Gpu(format!("{source}: {what} in '{item}'"));
            let (field, value) = item
                .split_once(['=', ':'])
                .ok_or_else(|| bad("no '=' or ':'"))?;
            let v: u32 = value.trim().parse().map_err(|_| bad("not a number"))?;
            match field.trim() {
                "gemv_wg" => self.gemv_wg = v,
                "gemv_tpr" => self.gemv_tpr = v,
                "gemv_groups" => self.gemv_groups = v != 0,
                "gemv_rpl" => self.gemv_rpl = v,
                "gemv_unroll" => self.gemv_unroll = v,
                "gemv_parts" => self.gemv_parts = v,
                "norm_gemv" => self.norm_gemv = v != 0,
                "reduce_wg" => self.reduce_wg = v,
                "attn_wg" => self.attn_wg = v,
                "decode_wg" => self.decode_wg = v,
                "attn_groups" => self.attn_groups = v,
                "decode_lanes" => self.decode_lanes = v,
                "lanes_width" => self.lanes_width = v,
                "prefill_rows" => self.prefill_rows = v,
                "prefill_tiles" => self.prefill_tiles = v != 0,
                "gemm_tokens" => self.gemm_tokens = v,
                "elem_wg" => self.elem_wg = v,
                "select_wg" => self.select_wg = v,
                "kv_dispatch" => self.kv_dispatch = v != 0,
                "fuse" => self.fuse = v != 0,
                "kv_f16" => self.kv_f16 = v != 0,
                "gemv_subgroups" => self.gemv_subgroups = v != 0,
                _ => return Err(bad("unknown field")),
            }
        }
        let t = self;
        let pow2 = [
            t.gemv_wg,
            t.gemv_tpr,
            t.reduce_wg,
            t.attn_wg,
            t.elem_wg,
            t.select_wg,
        ];
        if pow2.iter().any(|&v| !v.is_power_of_two() || v > 256)
            || (t.decode_wg != 0 && (!t.decode_wg.is_power_of_two() || t.decode_wg > 256))
            || t.gemv_tpr > t.gemv_wg
            || !matches!(t.gemv_unroll, 1 | 4)
            || !(1..=3).contains(&t.gemv_parts)
            || t.attn_groups == 0
            || !(1..=256).contains(&t.lanes_width)
            || t.prefill_rows > 64
            || t.gemm_tokens > 8
            || !matches!(t.gemv_rpl, 1 | 2 | 4 | 8)
        {
            return Err(EngineError::Gpu(format!(
                "{source}: workgroup sizes and threads per row must be powers of two up to 256 \
                 (threads per row up to the GEMV's workgroup; decode_wg 0 or one), the GEMV's \
                 unroll 1 or 4, its matrices per dispatch 1 to 3, attention's workgroups \
                 positive and its lanes 1 to 256, prefill's rows 0 to 64, the GEMM's tokens a lane 0 to 8, the GEMV's rows per lane 1, 2, 4 or 8: {t:?}"
            )));
        }
        Ok(self)
    }

    pub(super) fn for_adapter(info: &wgpu::AdapterInfo) -> Tuning {
        let cpu = matches!(info.device_type, wgpu::DeviceType::Cpu);
        Tuning {
            // Rasterisers: 8 lanes × 8 rows a workgroup, so a 192-row matrix still spreads
            // over several workgroups (threads); SwiftShader in the page measured 4.03 tok/s
            // on SmolLM2 with these against 3.85 at 16 lanes and 3.43 at 4 rows.
            gemv_wg: if cpu { 8 } else { 64 },
            gemv_tpr: if cpu { 1 } else { 16 },
            gemv_groups: cpu,
            gemv_rpl: if cpu { 8 } else { 1 },
            gemv_unroll: 4,
            gemv_parts: 3,
            norm_gemv: true,
            // A rasteriser runs a barrier's every step for each SIMD vector of the group:
            // SwiftShader in the page 3.92 tok/s on SmolLM2 at 64 lanes, 4.40 at 16, 4.54 at 4.
            reduce_wg: if cpu { 4 } else { 128 },
            attn_wg: 64,
            decode_wg: if cpu { 64 } else { 128 },
            decode_lanes: if cpu { 64 } else { 0 },
            lanes_width: 8,
            prefill_rows: if cpu { 8 } else { 0 },
            prefill_tiles: true,
            // SmolLM2's prefill GEMMs, device time a token at 2 / 4 / 8 tokens a lane:
            // lavapipe 11.0–13.1 / 13.2–13.6 / 11.5–12.0 ms, SwiftShader 67.7 / 57.4 / 49.3 ms
            // (the tiled GEMM: 38.1 and 124.9).
            gemm_tokens: if cpu { 8 } else { 0 },
            attn_groups: 1024,
            elem_wg: 64,
            // A rasteriser runs a workgroup's barriers for each of its SIMD vectors, and
            // greedy decoding selects one token: SmolLM2's greedy top-1 over 49,152 logits,
            // SwiftShader natively 3.9 ms a token at 256 lanes, 2.4–2.8 at 4–16 (lavapipe
            // 0.55 at 256, 0.38 at 16, 0.62 at 4, three stages there).
            select_wg: if cpu { 16 } else { 256 },
            kv_dispatch: !cpu,
            fuse: true,
            kv_f16: true,
            gemv_subgroups: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rasteriser() -> Tuning {
        Tuning::for_adapter(&wgpu::AdapterInfo::new(
            wgpu::DeviceType::Cpu,
            wgpu::Backend::Vulkan,
        ))
    }

    #[test]
    fn overrides_take_either_separator_and_name_what_is_wrong() {
        let t = rasteriser()
            .with_overrides("?gpu_tuning", "gemv_rpl:2, gemv_wg=32,decode_lanes:0")
            .expect("valid overrides");
        assert_eq!((t.gemv_rpl, t.gemv_wg, t.decode_lanes), (2, 32, 0));
        let bad = |list: &str| match rasteriser().with_overrides("?gpu_tuning", list) {
            Err(e) => e.to_string(),
            Ok(t) => panic!("{list} was accepted: {t:?}"),
        };
        assert!(bad("gemv_speed:3").contains("unknown field in 'gemv_speed:3'"));
        assert!(bad("gemv_rpl:two").contains("not a number"));
        assert!(bad("gemv_rpl").contains("no '=' or ':'"));
        assert!(bad("gemv_rpl:3").contains("rows per lane 1, 2, 4 or 8"));
        assert!(bad("gemv_wg:48").contains("?gpu_tuning"));
        assert!(bad("select_wg:12").contains("powers of two"));
        let t = rasteriser()
            .with_overrides("?gpu_tuning", "select_wg:4")
            .expect("valid");
        assert_eq!(t.select_wg, 4);
    }
}
