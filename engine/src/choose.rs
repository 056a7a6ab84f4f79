//! Which backend runs by default: the CPU path, unless a hardware GPU measures faster.
//!
//! Software adapters (`DeviceType::Cpu`: Mesa's llvmpipe, Chromium's SwiftShader) never win:
//! they run the WGSL kernels on the same cores as the CPU path, an order of magnitude slower.
//! A hardware adapter is calibrated: the same 4-bit GEMVs (decode's matmul, the op that decides
//! decode speed) are timed on it and on the CPU backend, and the faster one is chosen.

use crate::backend::{Backend, MatmulKernel};
use crate::cpu::CpuBackend;
use crate::error::Result;
use crate::generate::now_ms;
use crate::gpu::GpuContext;
use crate::quant::Q4Matrix;
use crate::rng::Pcg32;

/// Whether an adapter is a software rasterizer (never chosen by default).
pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
    matches!(info.device_type, wgpu::DeviceType::Cpu)
        || info.name.to_lowercase().contains("swiftshader")
        || info.name.to_lowercase().contains("llvmpipe")
}

/// Milliseconds per 4-bit GEMV of shape `[rows, cols]` on each side, from `reps` timed calls
/// after one warm-up (the GPU's pipelines compiled, the weights resident).
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// GPU milliseconds per GEMV (read back, so queued work is included).
    pub gpu_ms: f64,
    /// CPU milliseconds per GEMV.
    pub cpu_ms: f64,
}

/// Times `reps` GEMVs `[rows, cols]` (cols a multiple of 32) on `gpu` and on the CPU backend.
pub async fn calibrate(
    gpu: &GpuContext,
    rows: usize,
    cols: usize,
    reps: usize,
) -> Result<Calibration> {
    let mut rng = Pcg32::new(0x5eed);
    let w = Q4Matrix::quantize(
        "calibration",
        rows,
        cols,
        &rng.normal_vec(rows * cols, 0.05),
    )?;
    let x = rng.normal_vec(cols, 1.0);
    Ok(Calibration {
        gpu_ms: time_gemv(gpu, &w, &x, reps).await?,
        cpu_ms: time_gemv(&CpuBackend, &w, &x, reps).await?,
    })
}

async fn time_gemv<B: Backend>(b: &B, w: &Q4Matrix, x: &[f32], reps: usize) -> Result<f64> {
    let (wd, xd) = (b.upload_q4("calibration", w)?, b.upload("x", x)?);
    let out = b.alloc("out", w.rows)?;
    b.q4_matmul(&xd, &wd, &out, 1, MatmulKernel::Gemv)?;
    b.read(&out, 0, 1).await?;
    let t0 = now_ms();
    for _ in 0..reps.max(1) {
        b.q4_matmul(&xd, &wd, &out, 1, MatmulKernel::Gemv)?;
    }
    b.read(&out, 0, 1).await?;
    Ok((now_ms() - t0) / reps.max(1) as f64)
}

/// What [`decide`] chose and why, for the CLI's line and the page's status.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The CPU path.
    Cpu(String),
    /// The GPU adapter.
    Gpu(String),
}

/// GEMVs timed per readback when calibrating a hardware adapter.
pub const CALIBRATION_GEMVS: usize = 64;

/// The default choice for an adapter (or none): software or missing → CPU; hardware →
/// whichever the calibration of a `[rows, cols]` GEMV says is faster.
pub async fn decide(gpu: Option<&GpuContext>, rows: usize, cols: usize) -> Decision {
    let cpu_name = CpuBackend.describe();
    let Some(gpu) = gpu else {
        return Decision::Cpu(format!("{cpu_name}: no GPU adapter"));
    };
    let name = gpu.adapter_description();
    if is_software(gpu.adapter_info()) {
        return Decision::Cpu(format!("{cpu_name}: {name} is a software adapter"));
    }
    // A decode step records hundreds of dispatches per readback, so the calibration does
    // too: with 8 GEMVs per readback an H100 measured 0.050 ms each (the readback's latency
    // spread over 8) against the CPU's 0.049 and lost, though it decodes 2.4x faster.
    match calibrate(gpu, rows, cols, CALIBRATION_GEMVS).await {
        Ok(c) if c.gpu_ms < c.cpu_ms => Decision::Gpu(format!(
            "{name}: GEMV [{rows}, {cols}] {:.3} ms vs CPU {:.3} ms",
            c.gpu_ms, c.cpu_ms
        )),
        Ok(c) => Decision::Cpu(format!(
            "{cpu_name}: GEMV [{rows}, {cols}] {:.3} ms vs {name} {:.3} ms",
            c.cpu_ms, c.gpu_ms
        )),
        Err(e) => Decision::Cpu(format!("{cpu_name}: calibrating {name} failed: {e}")),
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn software_adapters_are_never_chosen() {
        // lavapipe here (a software adapter); on a machine with a GPU this checks the name
        // rules only.
        let info = |name: &str, t| wgpu::AdapterInfo {
            name: name.into(),
            ..wgpu::AdapterInfo::new(t, wgpu::Backend::Vulkan)
        };
        assert!(is_software(&info(
            "llvmpipe (LLVM 15.0.6, 256 bits)",
            wgpu::DeviceType::Cpu
        )));
        assert!(is_software(&info(
            "Google SwiftShader",
            wgpu::DeviceType::Other
        )));
        assert!(!is_software(&info(
            "NVIDIA H100",
            wgpu::DeviceType::DiscreteGpu
        )));
        if let Ok(ctx) = GpuContext::new_blocking(crate::gpu::Requirements::default()) {
            let d = pollster::block_on(decide(Some(&ctx), 256, 256));
            if is_software(ctx.adapter_info()) {
                assert!(matches!(d, Decision::Cpu(_)), "{d:?}");
            }
            println!("{d:?}");
        }
        assert!(matches!(
            pollster::block_on(decide(None, 64, 64)),
            Decision::Cpu(_)
        ));
    }
}
