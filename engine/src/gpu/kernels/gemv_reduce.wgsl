// `row_sum` for the block GEMV kernels through workgroup memory (`part`, gemv_common.wgsl), on
// every adapter: the subgroup form is gemv_reduce_sg.wgsl. Prelude after gemv_common.wgsl.

// The (scaled dot, scaled sum) of a row summed over its TPR lanes, valid in lane 0. Every
// invocation of the workgroup must call it (it holds barriers).
fn row_sum(lid: u32, lane: u32, acc: vec2<f32>) -> vec2<f32> {
    part[lid] = acc;
    for (var s = TPR / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lane < s) {
            part[lid] += part[lid + s];
        }
    }
    return part[lid];
}
