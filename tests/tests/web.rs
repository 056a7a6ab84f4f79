//! Browser runner: the same suite checks as `kernels.rs`, in headless Chromium's WebGPU
//! (SwiftShader in CI) and on the CPU reference compiled to wasm.
//! Run: `cargo test -p lorekeeper-tests --target wasm32-unknown-unknown` with
//! `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner` (see `.ci/run`).

#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;

use lorekeeper_engine::{Backend, CpuBackend, GpuContext, Requirements};
use lorekeeper_tests::suite;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

thread_local! {
    static CTX: RefCell<Option<Rc<GpuContext>>> = const { RefCell::new(None) };
}

async fn gpu() -> Rc<GpuContext> {
    if let Some(c) = CTX.with(|c| c.borrow().clone()) {
        return c;
    }
    let c = match GpuContext::new(Requirements::default()).await {
        Ok(c) => Rc::new(c),
        Err(e) => panic!("no WebGPU adapter for the kernel tests: {e}"),
    };
    console_log!("adapter: {}", c.adapter_description());
    CTX.with(|s| *s.borrow_mut() = Some(c.clone()));
    c
}

const SEEDS: [u64; 2] = [1, 2];

fn report(who: &str, seed: u64, r: suite::Check) {
    match r {
        Ok(line) => console_log!("[{who}] seed {seed}: {line}"),
        Err(msg) => panic!("[{who}] seed {seed}: {msg}"),
    }
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod cpu {
            use super::*;
            $( #[wasm_bindgen_test] async fn $name() {
                for seed in SEEDS { report(&CpuBackend.describe(), seed, suite::$name(&CpuBackend, seed).await); }
            } )*
        }
        mod webgpu {
            use super::*;
            $( #[wasm_bindgen_test] async fn $name() {
                let g = gpu().await;
                for seed in SEEDS { report(&g.describe(), seed, suite::$name(&*g, seed).await); }
            } )*
        }
    };
}

on_both!(
    q4_gemv,
    q4_gemm,
    q4_fused,
    f32_gemv,
    f32_gemm,
    rms_norm,
    rope,
    rms_norm_rope,
    attention,
    attention_kv,
    attention_prefill,
    rope_append,
    rms_norm_rope_append,
    silu_mul,
    add,
    softmax,
    embed_q4,
    select,
    select_filtered,
    q4_blocks,
    layer_norm,
    bias_gelu,
    sigmoid_mul,
    take_half,
    conv1d,
    delta_rule
);

/// A hardware GPU's tuning in the page (the word GEMV with its fused forms, 16 threads a row,
/// KV appends inside the pass, the tiled decode attention, the tiled and the one-pass prefill
/// attention, the tiled GEMM), which SwiftShader's own tuning never takes: the browser's
/// WebGPU validates bindings more strictly than wgpu natively (one buffer bound writable twice
/// in a dispatch is refused), so the kernels a page on a real GPU runs are run here.
#[wasm_bindgen_test]
async fn gpu_tuning_kernels() {
    let mut g = match GpuContext::new(Requirements::default()).await {
        Ok(c) => c,
        Err(e) => panic!("no WebGPU adapter: {e}"),
    };
    (
        g.tuning.gemv_groups,
        g.tuning.gemv_tpr,
        g.tuning.gemv_wg,
        g.tuning.kv_dispatch,
        g.tuning.decode_lanes,
        g.tuning.prefill_rows,
        g.tuning.gemm_tokens,
    ) = (false, 16, 64, true, 0, 0, 0);
    let who = format!("{} with a GPU's tuning", g.describe());
    for seed in SEEDS {
        report(&who, seed, suite::q4_fused(&g, seed).await);
        report(&who, seed, suite::q4_gemm(&g, seed).await);
        report(&who, seed, suite::attention_kv(&g, seed).await);
        report(&who, seed, suite::attention_prefill(&g, seed).await);
        g.tuning.prefill_tiles = false;
        report(&who, seed, suite::attention_prefill(&g, seed).await);
        g.tuning.prefill_tiles = true;
        report(&who, seed, suite::rms_norm_rope(&g, seed).await);
        report(&who, seed, suite::rope_append(&g, seed).await);
        report(&who, seed, suite::rms_norm_rope_append(&g, seed).await);
    }
    match g.verify_fused().await {
        Ok(None) => console_log!("[{who}] fused check passed"),
        Ok(Some(why)) => panic!("[{who}] {why}"),
        Err(e) => panic!("[{who}] {e}"),
    }
}

/// The profile in the page (`bench_decode` with `profile`): dispatches counted and, where the
/// adapter has timestamp queries (Chromium's SwiftShader does), each one's device time, which
/// arrives by a map callback while a later readback is awaited.
#[wasm_bindgen_test]
async fn profile_times_dispatches_in_the_page() {
    let g = match GpuContext::new(Requirements::default()).await {
        Ok(c) => c,
        Err(e) => panic!("no WebGPU adapter: {e}"),
    };
    let stamps = g
        .device()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    Backend::start_profile(&g);
    for seed in SEEDS {
        report(&g.describe(), seed, suite::silu_mul(&g, seed).await);
    }
    let p = Backend::take_profile(&g).expect("the GPU keeps a profile");
    console_log!("{p:?}");
    let silu = p.kernels.iter().find(|k| k.label == "silu_mul");
    assert_eq!(silu.map(|k| k.count), Some(2), "{p:?}");
    assert_eq!(
        p.timed, stamps,
        "timestamps on the adapter, all read back: {p:?}"
    );
    if stamps {
        assert!(
            silu.is_some_and(|k| k.ns > 0),
            "timed, yet no device time: {p:?}"
        );
    }
}

const QWEN35_CONFIG: &str = include_str!("../fixtures/qwen35-lora/base/config.json");
const QWEN35_WEIGHTS: &[u8] = include_bytes!("../fixtures/qwen35-lora/merged.safetensors");
const QWEN35_GOLDEN: &str = include_str!("../fixtures/qwen35-lora/golden.json");

/// The tiny Qwen3.5 hybrid (LoRA merged) against transformers, in the page: Gated DeltaNet and
/// gated attention on WebGPU and on the wasm CPU reference, the body of `tests/qwen35.rs`.
#[wasm_bindgen_test]
fn cpu_rows_match_the_scalar_rows() {
    for seed in SEEDS {
        report(&CpuBackend.describe(), seed, suite::cpu_rows(seed));
    }
}

#[wasm_bindgen_test]
async fn qwen35_tiny_matches_transformers() {
    let g = gpu().await;
    for r in [
        lorekeeper_tests::decoder::fixture_matches_within(
            &CpuBackend,
            "qwen35-lora merged",
            QWEN35_CONFIG,
            QWEN35_WEIGHTS.to_vec(),
            QWEN35_GOLDEN,
            lorekeeper_tests::decoder::HYBRID_LOGITS,
        )
        .await,
        lorekeeper_tests::decoder::fixture_matches_within(
            &*g,
            "qwen35-lora merged",
            QWEN35_CONFIG,
            QWEN35_WEIGHTS.to_vec(),
            QWEN35_GOLDEN,
            lorekeeper_tests::decoder::HYBRID_LOGITS,
        )
        .await,
    ] {
        match r {
            Ok(lines) => lines.iter().for_each(|l| console_log!("{l}")),
            Err(msg) => panic!("{msg}"),
        }
    }
}

const QWEN3_CONFIG: &str = include_str!("../fixtures/qwen3-tiny/config.json");
const QWEN3_WEIGHTS: &[u8] = include_bytes!("../fixtures/qwen3-tiny/model.safetensors");
const QWEN3_GOLDEN: &str = include_str!("../fixtures/qwen3-tiny/golden.json");

/// The tiny Qwen3 against transformers, in the page: the same body as the native decoder test.
#[wasm_bindgen_test]
async fn qwen3_tiny_matches_transformers() {
    let g = gpu().await;
    for r in [
        lorekeeper_tests::decoder::fixture_matches(
            &CpuBackend,
            "qwen3-tiny",
            QWEN3_CONFIG,
            QWEN3_WEIGHTS.to_vec(),
            QWEN3_GOLDEN,
        )
        .await,
        lorekeeper_tests::decoder::fixture_matches(
            &*g,
            "qwen3-tiny",
            QWEN3_CONFIG,
            QWEN3_WEIGHTS.to_vec(),
            QWEN3_GOLDEN,
        )
        .await,
    ] {
        match r {
            Ok(lines) => lines.iter().for_each(|l| console_log!("{l}")),
            Err(msg) => panic!("{msg}"),
        }
    }
}

#[wasm_bindgen_test]
async fn errors_are_named_not_panics() {
    let g = gpu().await;
    for r in [
        suite::rejects_bad_shapes(&CpuBackend).await,
        suite::rejects_bad_shapes(&*g).await,
    ] {
        match r {
            Ok(line) => console_log!("{line}"),
            Err(msg) => panic!("{msg}"),
        }
    }
}
