//! 4-bit GEMV bandwidth against a plain copy kernel, on the same adapter in the same run.
//!
//! `cargo bench -p lorekeeper-engine --bench gemv` (add `-- --quick` for fewer iterations).
//! For each shape `K x N` (input x output features) it reports the GEMV's achieved bandwidth
//! (LQ4 weight bytes + activations + outputs, per second) and its ratio to the bandwidth of
//! `copy.wgsl` moving the same number of bytes. Every threads-per-row variant is measured and
//! the best is reported, which is how `Tuning` defaults are chosen.

use std::time::Instant;

use lorekeeper_engine::backend::{Backend, MatmulKernel};
use lorekeeper_engine::gpu::kernels;
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{GpuContext, Q4Matrix, Requirements};

const SHAPES: &[(&str, usize, usize)] = &[
    ("qwen3-4b gate/up", 2560, 9728),
    ("qwen3-4b down", 9728, 2560),
    ("qwen3-4b q_proj", 2560, 4096),
    ("smollm2-135m gate/up", 576, 1536),
    ("smollm2-135m down", 1536, 576),
    ("smollm2-135m q/o", 576, 576),
    ("smollm2-135m lm_head", 576, 49152),
];

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
    println!("| shape | K x N | LQ4 MiB | copy GB/s | GEMV GB/s (best TPR) | ratio |");
    println!("|---|---|---|---|---|---|");
    let mut rng = Pcg32::new(7);
    let mut ratios = Vec::new();
    let only = std::env::var("LK_BENCH_ONLY").ok();
    for &(name, k, n) in SHAPES {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let w: Vec<f32> = rng.normal_vec(n * k, 0.05);
        let q = Q4Matrix::quantize(name, n, k, &w).expect("quantize");
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
        let mut best = (0.0f64, 0u32);
        let tprs: Vec<u32> = match std::env::var("LK_BENCH_TPR") {
            Ok(v) => v.split(',').filter_map(|t| t.parse().ok()).collect(),
            Err(_) => vec![1, 2, 4, 8, 16, 32],
        };
        for tpr in tprs {
            ctx.tuning.gemv_tpr = tpr;
            let s = time_it(&ctx, iters, || {
                ctx.q4_matmul(&x, &wd, &out, 1, MatmulKernel::Gemv)
                    .expect("gemv")
            });
            let bw = bytes / s / 1e9;
            if bw > best.0 {
                best = (bw, tpr);
            }
        }
        let ratio = best.0 / copy_bw;
        ratios.push(ratio);
        println!(
            "| {name} | {k} x {n} | {:.1} | {copy_bw:.2} | {:.2} (TPR {}) | {ratio:.2} |",
            q.data.len() as f64 * 4.0 / (1 << 20) as f64,
            best.0,
            best.1
        );
    }
    let geo = ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64;
    println!("geometric mean ratio GEMV/copy: {:.2}", geo.exp());
}
