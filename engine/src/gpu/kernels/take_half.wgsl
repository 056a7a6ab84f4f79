// One half of each row: out[r][i] = src[r][half * dim + i] for src[rows][2 * dim].
// Splits Qwen3.5's q_proj output [tokens, heads, 2 * head_dim] into the query (half 0) and
// the output gate (half 1). Prelude: common.wgsl.

struct Params { rows: u32, dim: u32, half: u32, _p: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;          // [rows, 2 * dim]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;    // [rows, dim]

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let e = item_index(ids);
    if (e >= p.rows * p.dim) {
        return;
    }
    let r = e / p.dim;
    let i = e % p.dim;
    out[e] = src[r * 2u * p.dim + p.half * p.dim + i];
}
