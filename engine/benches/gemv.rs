//! 4-bit GEMV bandwidth against a plain copy kernel, on the same adapter in the same run.
//!
//! `cargo bench -p lorekeeper-engine --bench gemv` (add `-- --quick` for fewer iterations).
//! For each shape `K x N` (input x output features) it reports the GEMV's achieved bandwidth
//! (LQ4 weight bytes + activations + outputs, per second) and its ratio to the bandwidth of
//! `copy.wgsl` moving the same number of bytes. Every threads-per-row variant (with one thread
//! per row, also the adapter's rows per lane) is measured and the best is reported, which is
//! how `Tuning` defaults are chosen. The 4-bit rows are LQ4; the last row is SmolLM2's tied
//! head as the demo bundle holds it, q8_0.

use std::time::Instant;

use lorekeeper_engine::backend::{Backend, MatmulKernel};
use lorekeeper_engine::gpu::kernels;
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{GpuContext, Q4Matrix, Requirements};

/// (name, K, N, q8_0 rather than LQ4).
const SHAPES: &[(&str, usize, usize, bool)] = &[
    ("qwen3-4b gate/up", 2560, 9728, false),
    ("qwen3-4b down", 9728, 2560, false),
    ("qwen3-4b q_proj", 2560, 4096, false),
    ("smollm2-135m gate/up", 576, 1536, false),
    ("smollm2-135m down", 1536, 576, false),
    ("smollm2-135m q/o", 576, 576, false),
    ("smollm2-135m lm_head", 576, 49152, false),
    ("smollm2-135m lm_head q8_0", 576, 49152, true),
];

/// Random GGUF `Q8_0` blocks (f16 scale, 32 signed codes) of an `n x k` matrix.
fn random_q8_0(rng: &mut Pcg32, name: &str, n: usize, k: usize) -> Q4Matrix {
    let mut raw = Vec::with_capacity(n * k / 32 * 34);
    for _ in 0..n * k / 32 {
        let d = half::f16::from_f32(0.0002 + 0.001 * rng.normal_vec(1, 1.0)[0].abs());
        raw.extend_from_slice(&d.to_bits().to_le_bytes());
        raw.extend((0..32).map(|_| (rng.next_u32() & 0xFF) as u8));
    }
    Q4Matrix::from_ggml_q8_0(name, n, k, &raw).expect("q8_0 blocks")
}

fn time_it(ctx: &GpuContext, iters: usize, mut record: impl FnMut()) -> f64 {
    // Warm up (pipeline compile, first touch), then time `iters` dispatches in one submission.
    record();
    ctx.flush().expect("flush");
    ctx.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    let t = Instant::now();
    for _ in 0..iters {
        record();
    }
    ctx.flush().expect("flush");
    ctx.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    t.elapsed().as_secs_f64() / iters as f64
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut ctx = GpuContext::new_blocking(Requirements::default()).expect("adapter");
    println!("adapter: {}", ctx.adapter_description());
    println!("| shape | K x N | MiB | copy GB/s | GEMV GB/s (best TPR, rows per lane) | ratio |");
    println!("|---|---|---|---|---|---|");
    let mut rng = Pcg32::new(7);
    let mut ratios = Vec::new();
    let only = std::env::var("LK_BENCH_ONLY").ok();
    let tuned = ctx.tuning;
    for &(name, k, n, q8) in SHAPES {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let q = if q8 {
            random_q8_0(&mut rng, name, n, k)
        } else {
            let w: Vec<f32> = rng.normal_vec(n * k, 0.05);
            Q4Matrix::quantize(name, n, k, &w).expect("quantize")
        };
        let wd = ctx.upload_q4(name, &q).expect("upload");
        let x = ctx.upload("x", &rng.normal_vec(k, 1.0)).expect("x");
        let out = ctx.alloc("out", n).expect("out");
        let bytes = (q.data.len() * 4 + k * 4 + n * 4) as f64;
        let iters = if quick {
            3
        } else {
            (2e9 / bytes).clamp(5.0, 200.0) as usize
        };
        // Copy yardstick: read + write `bytes` in total.
        let half = (bytes as usize / 2).next_multiple_of(16);
        let src = ctx.alloc("copy src", half / 4).expect("src");
        let dst = ctx.alloc("copy dst", half / 4).expect("dst");
        let copy_s = time_it(&ctx, iters, || {
            kernels::elementwise::copy(&ctx, &src.buf, &dst.buf, half / 4).expect("copy")
        });
        let copy_bw = 2.0 * half as f64 / copy_s / 1e9;
        let mut best = (0.0f64, 0u32, 1u32);
        let tprs: Vec<u32> = match std::env::var("LK_BENCH_TPR") {
            Ok(v) => v.split(',').filter_map(|t| t.parse().ok()).collect(),
            Err(_) => vec![1, 2, 4, 8, 16, 32],
        };
        // One thread per row also with the adapter's rows per lane (CPU rasterisers' 4, in
        // their workgroup); more threads per row take one row a lane, in a workgroup as wide.
        let mut forms: Vec<(u32, u32, u32)> = Vec::new();
        for tpr in tprs {
            if tpr == 1 && tuned.gemv_rpl > 1 {
                forms.push((1, tuned.gemv_rpl, tuned.gemv_wg));
            }
            forms.push((tpr, 1, tpr.max(64)));
        }
        for (tpr, rpl, wg) in forms {
            ctx.tuning.gemv_tpr = tpr;
            ctx.tuning.gemv_rpl = rpl;
            ctx.tuning.gemv_wg = wg;
            let s = time_it(&ctx, iters, || {
                ctx.q4_matmul(&x, &wd, &out, 1, MatmulKernel::Gemv)
                    .expect("gemv")
            });
            let bw = bytes / s / 1e9;
            if bw > best.0 {
                best = (bw, tpr, rpl);
            }
        }
        ctx.tuning = tuned;
        let ratio = best.0 / copy_bw;
        ratios.push(ratio);
        println!(
            "| {name} | {k} x {n} | {:.1} | {copy_bw:.2} | {:.2} (TPR {}, {}) | {ratio:.2} |",
            q.data.len() as f64 * 4.0 / (1 << 20) as f64,
            best.0,
            best.1,
            best.2
        );
    }
    let geo = ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64;
    println!("geometric mean ratio GEMV/copy: {:.2}", geo.exp());
}
