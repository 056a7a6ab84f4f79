//! Native runner: every suite check on the CPU reference and on the native wgpu adapter
//! (lavapipe in CI). Each GPU check prints the adapter it ran on.

#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use lorekeeper_engine::{Backend, CpuBackend, GpuContext, Requirements};
use lorekeeper_tests::suite;

fn gpu() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| match GpuContext::new_blocking(Requirements::default()) {
        Ok(c) => {
            println!("adapter: {}", c.adapter_description());
            c
        }
        Err(e) => panic!("no GPU adapter for the kernel tests: {e}"),
    })
}

const SEEDS: [u64; 4] = [1, 2, 3, 4];

fn report(who: &str, seed: u64, r: suite::Check) {
    match r {
        Ok(line) => println!("[{who}] seed {seed}: {line}"),
        Err(msg) => panic!("[{who}] seed {seed}: {msg}"),
    }
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod cpu {
            use super::*;
            $( #[test] fn $name() {
                for seed in SEEDS { report(&CpuBackend.describe(), seed, pollster::block_on(suite::$name(&CpuBackend, seed))); }
            } )*
        }
        mod wgpu {
            use super::*;
            $( #[test] fn $name() {
                for seed in SEEDS { report(&gpu().describe(), seed, pollster::block_on(suite::$name(gpu(), seed))); }
            } )*
        }
    };
}

on_both!(
    q4_gemv,
    q4_gemm,
    f32_gemv,
    f32_gemm,
    rms_norm,
    rope,
    attention,
    silu_mul,
    add,
    softmax,
    embed_q4,
    select,
    q4_blocks,
    layer_norm,
    bias_gelu,
    sigmoid_mul,
    take_half,
    conv1d,
    delta_rule
);

#[test]
fn errors_are_named_not_panics() {
    for r in [
        pollster::block_on(suite::rejects_bad_shapes(&CpuBackend)),
        pollster::block_on(suite::rejects_bad_shapes(gpu())),
    ] {
        match r {
            Ok(line) => println!("{line}"),
            Err(msg) => panic!("{msg}"),
        }
    }
}

#[test]
fn pipelines_are_cached() {
    let ctx = gpu();
    pollster::block_on(suite::silu_mul(ctx, 11)).unwrap_or_else(|m| panic!("{m}"));
    let before = ctx.pipeline_count();
    pollster::block_on(suite::silu_mul(ctx, 12)).unwrap_or_else(|m| panic!("{m}"));
    assert_eq!(
        ctx.pipeline_count(),
        before,
        "a second run of the same kernel compiled a new pipeline"
    );
}

#[test]
fn gemv_every_threads_per_row() {
    // The default tuning picks one TPR per adapter type; the cooperative-reduction path
    // (TPR > 1, used on GPUs) must be exact too, so run every variant here.
    let mut ctx = match GpuContext::new_blocking(Requirements::default()) {
        Ok(c) => c,
        Err(e) => panic!("no GPU adapter: {e}"),
    };
    for tpr in [1, 2, 8, 32, 64] {
        ctx.tuning.gemv_tpr = tpr;
        for seed in SEEDS {
            report(
                &format!("{} TPR={tpr}", ctx.describe()),
                seed,
                pollster::block_on(suite::q4_gemv(&ctx, seed)),
            );
        }
    }
}
