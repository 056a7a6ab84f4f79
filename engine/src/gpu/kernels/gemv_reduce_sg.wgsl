// `row_sum` for the block GEMV kernels through subgroup shuffles, no workgroup memory and no
// barrier: for adapters with subgroups (wgpu's `SUBGROUP` feature, native Vulkan, Metal, DX12;
// naga takes the builtins without WGSL's `enable subgroups;`) when TPR is at most the adapter's
// smallest subgroup. A row's TPR lanes are consecutive invocations; the butterfly below pairs
// lanes whose subgroup ids differ in one bit under TPR, which are the same row's when a
// subgroup holds consecutive invocations from a multiple of its size (what drivers do; the
// context checks it on the adapter before use: `GpuContext::verify_fused`). Prelude after
// gemv_common.wgsl.

// The (scaled dot, scaled sum) of a row summed over its TPR lanes, valid in every lane of the
// row. Every invocation of the workgroup must call it (subgroup operations).
fn row_sum(lid: u32, lane: u32, acc: vec2<f32>) -> vec2<f32> {
    var v = acc;
    for (var s = TPR / 2u; s > 0u; s = s / 2u) {
        v += subgroupShuffleXor(v, s);
    }
    return v;
}
