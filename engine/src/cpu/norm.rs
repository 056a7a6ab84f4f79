//! Normalisations: RMSNorm (with the `(offset + weight)` form) and LayerNorm.

/// Plain-Rust reference.
pub fn rms_norm(
    x: &[f32],
    weight: &[f32],
    out: &mut [f32],
    rows: usize,
    dim: usize,
    eps: f32,
    weight_offset: f32,
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let ss: f32 = xr.iter().map(|v| v * v).sum();
        let inv = 1.0 / (ss / dim as f32 + eps).sqrt();
        for i in 0..dim {
            out[r * dim + i] = xr[i] * inv * (weight[i] + weight_offset);
        }
    }
}

/// Plain-Rust reference (same two-pass order as the kernel).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    out: &mut [f32],
    rows: usize,
    dim: usize,
    eps: f32,
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let mean = xr.iter().sum::<f32>() / dim as f32;
        let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for i in 0..dim {
            out[r * dim + i] = (xr[i] - mean) * inv * weight[i] + bias[i];
        }
    }
}
