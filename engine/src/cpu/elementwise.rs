//! Element-wise and row-wise ops: residual add, bias, the gates (SwiGLU, sigmoid), GELU,
//! softmax and the half-row copy. Plain loops the compiler vectorizes; GELU runs in parallel
//! blocks natively.

/// Plain-Rust reference.
pub fn add_assign(acc: &mut [f32], x: &[f32], n: usize) {
    for i in 0..n {
        acc[i] += x[i];
    }
}

/// Plain-Rust reference.
pub fn add_bias(x: &mut [f32], bias: &[f32], rows: usize, cols: usize) {
    for r in 0..rows {
        for (v, b) in x[r * cols..(r + 1) * cols].iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// `out = silu(gate) · up`, the exponential by [`super::math::fast_exp`] (relative error
/// < 3e-7, no libm call, so the loop vectorizes; the fused GEMV epilogue computes the same
/// bits).
pub fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32], n: usize) {
    for ((o, &g), &u) in out[..n].iter_mut().zip(&gate[..n]).zip(&up[..n]) {
        *o = g / (1.0 + super::math::fast_exp(-g)) * u;
    }
}

/// Plain-Rust reference.
pub fn sigmoid_mul(x: &[f32], gate: &[f32], out: &mut [f32], n: usize) {
    for i in 0..n {
        out[i] = x[i] / (1.0 + (-gate[i]).exp());
    }
}

/// Plain-Rust reference.
pub fn take_half(src: &[f32], out: &mut [f32], rows: usize, dim: usize, half: usize) {
    for r in 0..rows {
        out[r * dim..(r + 1) * dim]
            .copy_from_slice(&src[r * 2 * dim + half * dim..r * 2 * dim + (half + 1) * dim]);
    }
}

/// Plain-Rust reference.
pub fn softmax(x: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        let xr = &x[r * cols..(r + 1) * cols];
        let mx = xr.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = xr.iter().map(|v| (v - mx).exp()).sum();
        for i in 0..cols {
            out[r * cols + i] = (xr[i] - mx).exp() / sum;
        }
    }
}

/// erf by Numerical Recipes' `erfcc` (fractional error < 1.2e-7), as in the WGSL; its `exp` is
/// [`super::math::fast_exp`] (relative error < 3e-7), so the loop vectorizes.
pub fn erf(v: f32) -> f32 {
    let z = v.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_2 + t * 0.170_872_77))))))));
    let r = t * super::math::fast_exp(poly);
    if v >= 0.0 {
        1.0 - r
    } else {
        r - 1.0
    }
}

/// Plain-Rust reference (natively in parallel blocks: the `exp` in `erf` dominates an encoder
/// layer's element-wise work).
pub fn gelu(x: &[f32], out: &mut [f32]) {
    let run = |x: &[f32], out: &mut [f32]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        const BLOCK: usize = 16 * 1024;
        out.par_chunks_mut(BLOCK)
            .zip(x.par_chunks(BLOCK))
            .for_each(|(o, x)| run(x, o));
    }
    #[cfg(target_arch = "wasm32")]
    {
        const BLOCK: usize = 16 * 1024;
        let n = out.len().min(x.len());
        let base = super::math::OutPtr(out.as_mut_ptr());
        super::pool::for_ranges(n, BLOCK, |i0, i1| {
            let p = base;
            // SAFETY: each call owns out[i0..i1] (i1 <= n <= out.len()); ranges are disjoint.
            let o = unsafe { std::slice::from_raw_parts_mut(p.0.add(i0), i1 - i0) };
            run(&x[i0..i1], o)
        });
    }
}
