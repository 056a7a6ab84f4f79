// Prepended to the element-wise and row kernels (`shader!(NAME, common)`): the workgroup size
// and the invocation's place in a grid folded into 2-D (`crate::gpu::context::grid`).

override WG: u32 = 64u;  // invocations per workgroup (row kernels: a power of two, <= 256)

struct Ids {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

// The workgroup's linear index (a row, for the row kernels).
fn group_index(ids: Ids) -> u32 {
    return ids.wid.x + ids.wid.y * ids.nwg.x;
}

// The invocation's linear index (an element, for the element-wise kernels).
fn item_index(ids: Ids) -> u32 {
    return group_index(ids) * WG + ids.lid;
}

// Workgroup reductions over one value per invocation (every invocation must call them).
var<workgroup> red: array<f32, 256>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] += red[lid + s];
        }
    }
    workgroupBarrier();
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduce_max(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
    }
    workgroupBarrier();
    let r = red[0];
    workgroupBarrier();
    return r;
}
