// Exact GELU: out[i] = x/2 * (1 + erf(x / sqrt(2))) (BERT's "gelu"). WGSL has no erf: it is
// computed as 1 - erfc with Numerical Recipes' Chebyshev fit (fractional error < 1.2e-7).
// Prelude: common.wgsl.

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [n]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // [n]

fn erf(v: f32) -> f32 {
    let z = abs(v);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(r - 1.0, 1.0 - r, v >= 0.0);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    let i = item_index(ids);
    if (i < p.n) { out[i] = 0.5 * x[i] * (1.0 + erf(x[i] * 0.70710678)); }
}
