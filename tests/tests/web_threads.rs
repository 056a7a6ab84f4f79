//! The CPU path on wasm threads (the page's threaded build: `+atomics`, shared memory) in
//! headless Chromium: the engine's pool on Web Workers that share the test's memory, as the
//! page's engine worker runs it, and the CPU suite's checks with rows split across them. (The
//! single-threaded wasm build, without shared memory, runs the same checks in `web.rs`.)
//! Run (nightly, std rebuilt with atomics; `test.sh` does it):
//! `RUSTUP_TOOLCHAIN=nightly RUSTFLAGS="…atomics…" cargo test --target wasm32-unknown-unknown
//! -Z build-std=std,panic_abort --test web_threads` with the runner of `web.rs`.

#![cfg(all(target_arch = "wasm32", target_feature = "atomics"))]

use std::sync::Mutex;

use lorekeeper_engine::cpu::pool;
use lorekeeper_engine::{Backend, CpuBackend};
use lorekeeper_tests::suite;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

/// Threads of the pool under test (the test's thread included): not a power of two.
const THREADS: usize = 3;

const SEEDS: [u64; 3] = [1, 2, 5];

/// Lets the event loop run (nested workers start only then).
async fn pause(ms: i32) {
    let p = js_sys::Promise::new(&mut |done, _| {
        let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&done, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(p).await;
}

/// The distinct threads that ran ranges of one job long enough for every live worker to join.
fn threads_in_a_job() -> usize {
    std::thread_local!(static MARK: u8 = const { 0 });
    let seen = Mutex::new(Vec::new());
    pool::for_ranges(64, 1, |_, _| {
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        let me = MARK.with(|m| m as *const u8 as usize);
        if let Ok(mut s) = seen.lock() {
            s.push(me);
        }
    });
    let mut s = seen.into_inner().unwrap_or_default();
    s.sort_unstable();
    s.dedup();
    s.len()
}

/// Installs the pool and starts its workers once (`/pool-worker-test.js`), then waits until a
/// job runs on every thread.
async fn pool_up() {
    if pool::threads() < THREADS {
        assert_eq!(pool::install_wasm_pool(THREADS - 1), THREADS);
        for i in 0..THREADS - 1 {
            let opts = web_sys::WorkerOptions::new();
            opts.set_type(web_sys::WorkerType::Module);
            opts.set_name(&format!("pool-{i}"));
            let w = web_sys::Worker::new_with_options("/pool-worker-test.js", &opts)
                .unwrap_or_else(|e| panic!("pool worker {i}: {e:?}"));
            let msg = js_sys::Array::of2(&wasm_bindgen::module(), &wasm_bindgen::memory());
            w.post_message(&msg)
                .unwrap_or_else(|e| panic!("pool worker {i}: {e:?}"));
            std::mem::forget(w);
        }
    }
    for _ in 0..400 {
        if threads_in_a_job() == THREADS {
            return;
        }
        pause(25).await;
    }
    panic!("the pool's {} workers did not all join a job", THREADS - 1);
}

#[wasm_bindgen_test]
fn cpu_rows_match_the_scalar_rows() {
    for seed in SEEDS {
        report(seed, suite::cpu_rows(seed));
    }
}

#[wasm_bindgen_test]
async fn pool_runs_jobs_on_every_thread_and_covers_each_index_once() {
    pool_up().await;
    assert_eq!(pool::threads(), THREADS);
    for (n, min) in [(1usize, 16usize), (17, 16), (1000, 16), (49_153, 64)] {
        let hits: Vec<std::sync::atomic::AtomicU32> = (0..n)
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect();
        pool::for_ranges(n, min, |r0, r1| {
            for h in &hits[r0..r1] {
                h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        assert!(
            hits.iter()
                .all(|h| h.load(std::sync::atomic::Ordering::Relaxed) == 1),
            "n {n} min {min}"
        );
    }
}

fn report(seed: u64, r: suite::Check) {
    match r {
        Ok(line) => console_log!("[{}] seed {seed}: {line}", CpuBackend.describe()),
        Err(msg) => panic!("[{}] seed {seed}: {msg}", CpuBackend.describe()),
    }
}

macro_rules! on_threads {
    ($($name:ident),*) => {
        $( #[wasm_bindgen_test] async fn $name() {
            pool_up().await;
            for seed in SEEDS { report(seed, suite::$name(&CpuBackend, seed).await); }
        } )*
    };
}

on_threads!(
    q4_gemv,
    q4_gemm,
    f32_gemv,
    f32_gemm,
    attention,
    attention_kv,
    select,
    bias_gelu,
    delta_rule
);
