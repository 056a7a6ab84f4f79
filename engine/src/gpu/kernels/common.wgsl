// Prepended to the element-wise and row kernels (`shader!(NAME, common)`): the workgroup size
// and the invocation's place in a grid folded into 2-D (`crate::gpu::context::grid`).

override WG: u32 = 64u;  // invocations per workgroup (row kernels: a power of two, <= 256)

struct Ids {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

// The workgroup's linear index: a row of the row kernels. They take the builtins one by one,
// not as `Ids`: browsers' uniformity analysis counts a whole struct as non-uniform when one
// member is, and rejects the barriers that follow a row check on it.
fn row_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// The invocation's linear index: an element of the element-wise kernels (no barriers).
fn item_index(ids: Ids) -> u32 {
    return row_index(ids.wid, ids.nwg) * WG + ids.lid;
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
