//! The CPU pool's threads in the page: in the threaded build (nightly, `+atomics`, shared
//! memory; `scripts/build-threads.sh`), when the page is cross-origin isolated, the engine
//! worker starts one Web Worker per extra pool thread (`pool-worker.js`, same-origin as the CSP
//! asks). Each instantiates this module on the engine's shared memory and enters the engine's
//! pool loop; the CPU kernels then split rows across them as natively. The stable build (a
//! page that is not isolated, a browser without relaxed SIMD, a site without the threaded
//! build) runs one thread and says why.

#[cfg(target_feature = "atomics")]
use wasm_bindgen::JsCast;

/// At most this many threads: the kernels are bound by memory bandwidth, which a few cores
/// saturate.
#[cfg(target_feature = "atomics")]
const MAX_THREADS: usize = 8;

/// Why the page runs one thread (`None`: it runs several).
pub fn single_thread_reason() -> Option<&'static str> {
    if lorekeeper_engine::cpu::pool::threads() > 1 {
        None
    } else if !isolated() {
        Some("the page is not cross-origin isolated (its host sends no COOP/COEP)")
    } else if !cfg!(target_feature = "atomics") && !relaxed_simd() {
        // public/worker-boot.js runs the threaded build only where relaxed SIMD validates.
        Some("this browser has no relaxed SIMD, which the threaded build needs")
    } else if !cfg!(target_feature = "atomics") {
        Some("the site has no threaded build")
    } else {
        Some("one was asked for or the browser reports one processor")
    }
}

/// What public/worker-boot.js found: does this browser validate a relaxed-SIMD module?
fn relaxed_simd() -> bool {
    crate::web::get(&js_sys::global(), "lorekeeperRelaxedSimd").and_then(|v| v.as_bool())
        == Some(true)
}

fn isolated() -> bool {
    crate::web::get(&js_sys::global(), "crossOriginIsolated").and_then(|v| v.as_bool())
        == Some(true)
}

/// Starts the pool's workers once (threaded build, isolated page) and returns the threads the
/// CPU kernels will use, the engine worker included. The workers join as they come up (a
/// nested worker starts after this worker returns to its event loop); jobs before that run on
/// the threads already there.
pub fn start_pool() -> usize {
    #[cfg(target_feature = "atomics")]
    if isolated() {
        return spawn_workers(wanted_threads());
    }
    1
}

/// The threads to use: `?threads=N` in the page's address if given, else the logical
/// processors the browser reports, halved above four (two hyper-threads share one core's
/// memory bandwidth); at most [`MAX_THREADS`].
#[cfg(target_feature = "atomics")]
fn wanted_threads() -> usize {
    let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let asked = crate::protocol::threads_from_query(&scope.location().search());
    let logical = scope.navigator().hardware_concurrency() as usize;
    let n = asked.unwrap_or(if logical > 4 { logical / 2 } else { logical });
    n.clamp(1, MAX_THREADS)
}

#[cfg(target_feature = "atomics")]
fn spawn_workers(n: usize) -> usize {
    use std::cell::RefCell;
    thread_local! {
        static WORKERS: RefCell<Vec<web_sys::Worker>> = const { RefCell::new(Vec::new()) };
        static THREADS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    if THREADS.with(|t| t.get()) > 0 {
        return THREADS.with(|t| t.get());
    }
    let threads = lorekeeper_engine::cpu::pool::install_wasm_pool(n.saturating_sub(1));
    let (module, memory) = (wasm_bindgen::module(), wasm_bindgen::memory());
    let mut started = 1;
    for i in 0..threads - 1 {
        let opts = web_sys::WorkerOptions::new();
        opts.set_type(web_sys::WorkerType::Classic);
        opts.set_name(&format!("lorekeeper-cpu-{i}"));
        let Ok(w) = web_sys::Worker::new_with_options("./pool-worker.js", &opts) else {
            break;
        };
        let msg = js_sys::Array::of2(&module, &memory);
        if w.post_message(&msg).is_err() {
            w.terminate();
            break;
        }
        WORKERS.with(|v| v.borrow_mut().push(w));
        started += 1;
    }
    THREADS.with(|t| t.set(started));
    started
}
