//! The CPU backend's threads.
//!
//! Natively: one persistent pool (the design of llama.cpp's threadpool). `threads − 1` workers
//! wait for work by spinning, then sleep after `SPIN` idle rounds; the calling thread takes
//! part in every job, so an op costs no thread hand-over. A decode step runs a few hundred small
//! ops back to back, and a pool that puts its threads to sleep between them (rayon's, measured:
//! a third of decode time in `sched_yield` and wake-ups) loses to one that keeps them spinning.
//! The prefill GEMM and other large ops keep using rayon (one call each, long enough to amortize
//! its hand-over); [`set_threads`] sizes both.
//!
//! In wasm with threads (the page's nightly build with `+atomics` and shared memory, when it is
//! cross-origin isolated) the same pool runs on Web Workers: the engine's worker calls
//! `install_wasm_pool`, then starts one worker per pool thread that instantiates the module on
//! the shared memory and enters `pool_worker_entry`. Parking is the same `Condvar`, an atomic
//! wait in wasm. The stable wasm build runs one thread.

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
use std::sync::{Condvar, Mutex, OnceLock};

/// Idle spin rounds before a worker sleeps (about a millisecond: longer than the gap between
/// two ops of a decode step, shorter than a reader's pause).
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
const SPIN: u32 = 1 << 16;

/// Spin rounds between two `yield_now` calls while waiting (cheap when nothing else is
/// runnable; with more runnable threads than cores it hands the core over).
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
const YIELD_EVERY: u32 = 256;

/// [`Pool::state`]: no worker may join the job any more.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
const CLOSED: u64 = 1 << 31;

/// [`Pool::state`]: the workers in the job.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
const ACTIVE: u64 = CLOSED - 1;

/// Threads the CPU kernels run on (the caller included).
pub fn threads() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    {
        pool().workers + 1
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        POOL.get().map_or(1, |p| p.workers + 1)
    }
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    {
        1
    }
}

#[cfg(not(target_arch = "wasm32"))]
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// Sizes the pools (`0`: the default, the physical cores). Takes effect only before the first
/// CPU op; returns the size in force (`Err` when it was already fixed at another size).
#[cfg(not(target_arch = "wasm32"))]
pub fn set_threads(n: usize) -> Result<usize, usize> {
    let n = if n == 0 { physical_cores() } else { n };
    REQUESTED.store(n, SeqCst);
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global();
    let now = threads();
    if now == n {
        Ok(n)
    } else {
        Err(now)
    }
}

/// Physical cores (hyper-threads share one core's load and vector units, and the kernels are
/// bound by memory, so siblings only add contention). Linux: distinct (package, core) pairs in
/// sysfs; elsewhere the logical count.
#[cfg(not(target_arch = "wasm32"))]
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut cores = std::collections::BTreeSet::new();
    for cpu in 0..logical.min(4096) {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        match (read("physical_package_id"), read("core_id")) {
            (Some(p), Some(c)) => {
                cores.insert((p.trim().to_string(), c.trim().to_string()));
            }
            _ => return logical,
        }
    }
    cores.len().clamp(1, logical)
}

std::thread_local! {
    /// Set on pool workers and on a caller inside a job: nested calls run inline.
    static IN_JOB: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// A cap on the threads of this thread's jobs ([`with_max_threads`]).
    static CAP: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Runs `f` with this thread's CPU jobs split for at most `n` threads (1: inline), for tests
/// that check results do not depend on the split.
pub fn with_max_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    let old = CAP.with(|c| c.replace(n.max(1)));
    let r = f();
    CAP.with(|c| c.set(old));
    r
}

/// Runs `f(r0, r1)` over `0..n` cut into contiguous ranges of at least `min` items, a few per
/// thread (so a thread that starts late does not hold the others back). Every index is covered
/// exactly once; `f` must not panic across ranges it did not finish (a panic is re-raised on
/// the caller after every thread has let go of `f`).
pub fn for_ranges<F>(n: usize, min: usize, f: F)
where
    F: Fn(usize, usize) + Sync,
{
    if n == 0 {
        return;
    }
    let threads = threads().min(CAP.with(|c| c.get()));
    let tasks = if threads <= 1 || IN_JOB.with(|j| j.get()) {
        1
    } else {
        (4 * threads).min(n.div_ceil(min.max(1))).max(1)
    };
    if tasks == 1 {
        return f(0, n);
    }
    #[cfg(not(target_arch = "wasm32"))]
    pool().run(n, n.div_ceil(tasks), &f);
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    match POOL.get() {
        Some(p) => p.run(n, n.div_ceil(tasks), &f),
        None => f(0, n),
    }
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    f(0, n);
}

/// The pool: started on first use natively, installed by the page in wasm.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
static POOL: OnceLock<&'static Pool> = OnceLock::new();

/// Sets up a pool of `workers` threads besides the caller (once; later calls keep the first)
/// and returns the threads in use. The workers join as they enter `pool_worker_entry`;
/// jobs submitted before they do simply run on fewer threads.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub fn install_wasm_pool(workers: usize) -> usize {
    POOL.get_or_init(|| Box::leak(Box::new(Pool::new(workers))))
        .workers
        + 1
}

/// A pool thread's life, called by a Web Worker that instantiated this module on the engine
/// worker's shared memory: waits for jobs and never returns. Without an installed pool it
/// returns at once.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn pool_worker_entry() {
    if let Some(p) = POOL.get() {
        p.work();
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let n = match REQUESTED.load(SeqCst) {
            0 => physical_cores(),
            n => n,
        };
        Pool::start(n.saturating_sub(1))
    })
}

/// The job being run: a type-erased `&dyn Fn` (valid until every worker checked out) and its
/// split.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize, usize) + Sync),
    n: usize,
    chunk: usize,
}

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
struct Pool {
    workers: usize,
    /// One job at a time; a caller that finds the pool busy (another thread's job) runs inline.
    submit: Mutex<()>,
    /// The job's state in one word: its epoch (bits 32–63, bumped once per job; workers wait
    /// for it to change), [`CLOSED`] (set by the submitter once every range is claimed: no
    /// worker may join after) and the count of workers that joined and have not left (bits
    /// 0–30). A worker that was not scheduled in time never joins, so the submitter never
    /// waits for it (with more runnable threads than cores, waiting for every worker cost a
    /// scheduler time slice per op).
    state: AtomicU64,
    /// The current job, written only while no worker can read it (all checked out).
    job: Mutex<Option<Job>>,
    /// Next range index to claim.
    next: AtomicUsize,
    /// Workers asleep on `wake`.
    sleeping: AtomicUsize,
    panicked: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `Job::f` points to a `Sync` closure that the submitting thread keeps alive until every
// worker has checked out of the job (see `Pool::run`).
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
unsafe impl Send for Job {}

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
impl Pool {
    #[cfg(not(target_arch = "wasm32"))]
    fn start(workers: usize) -> &'static Pool {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(workers)));
        for i in 0..workers {
            let spawned = std::thread::Builder::new()
                .name(format!("lorekeeper-cpu-{i}"))
                .spawn(move || pool.work());
            if spawned.is_err() {
                // Threads cannot be spawned: every job inline, and `threads()` says so (the
                // workers already started stay parked on the first pool).
                return Box::leak(Box::new(Pool::new(0)));
            }
        }
        pool
    }

    fn new(workers: usize) -> Pool {
        Pool {
            workers,
            submit: Mutex::new(()),
            state: AtomicU64::new(CLOSED),
            job: Mutex::new(None),
            next: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    fn claim_all(&self, job: Job) {
        let tasks = job.n.div_ceil(job.chunk);
        loop {
            let t = self.next.fetch_add(1, AcqRel);
            if t >= tasks {
                return;
            }
            // SAFETY: the submitter keeps `f` alive until this thread checks out.
            let f = unsafe { &*job.f };
            f(t * job.chunk, ((t + 1) * job.chunk).min(job.n));
        }
    }

    fn work(&self) {
        IN_JOB.with(|j| j.set(true));
        let mut seen = 0u64;
        loop {
            let mut spins = 0u32;
            let epoch = loop {
                let e = self.state.load(Acquire) >> 32;
                if e != seen {
                    break e;
                }
                if spins < SPIN {
                    spins += 1;
                    if spins.is_multiple_of(YIELD_EVERY) {
                        // Let other runnable threads (another process's) have the core.
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                } else {
                    let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                    self.sleeping.fetch_add(1, SeqCst);
                    while self.state.load(SeqCst) >> 32 == seen {
                        g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                    self.sleeping.fetch_sub(1, SeqCst);
                    spins = 0;
                }
            };
            seen = epoch;
            // Join the job unless it was closed (or replaced) meanwhile.
            let mut s = self.state.load(Acquire);
            let joined = loop {
                if s >> 32 != epoch || s & CLOSED != 0 {
                    break false;
                }
                match self.state.compare_exchange_weak(s, s + 1, AcqRel, Acquire) {
                    Ok(_) => break true,
                    Err(now) => s = now,
                }
            };
            if !joined {
                continue;
            }
            let job = *self.job.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(job) = job {
                let ok =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.claim_all(job)));
                if ok.is_err() {
                    self.panicked.store(true, SeqCst);
                }
            }
            self.state.fetch_sub(1, AcqRel);
        }
    }

    fn run(&self, n: usize, chunk: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        let Ok(_busy) = self.submit.try_lock() else {
            return f(0, n);
        };
        if self.workers == 0 {
            return f(0, n);
        }
        // SAFETY (lifetime erasure): `f` outlives this call, and this call returns only after
        // the job is closed and every worker that joined it has left, i.e. stopped using `f`
        // (a worker that did not join never reads it).
        let f_static: &'static (dyn Fn(usize, usize) + Sync) = unsafe { std::mem::transmute(f) };
        let job = Job {
            f: f_static as *const _,
            n,
            chunk,
        };
        // The previous job is closed and every worker left it (waited for below), so none
        // reads these until it joins the new epoch.
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        self.next.store(0, SeqCst);
        self.panicked.store(false, SeqCst);
        let epoch = (self.state.load(SeqCst) >> 32).wrapping_add(1) & 0xFFFF_FFFF;
        self.state.store(epoch << 32, SeqCst);
        if self.sleeping.load(SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
        IN_JOB.with(|j| j.set(true));
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.claim_all(job)));
        IN_JOB.with(|j| j.set(false));
        // Close the job and wait for the workers that joined it.
        let mut s = self.state.fetch_or(CLOSED, AcqRel) | CLOSED;
        let mut spins = 0u32;
        while s & ACTIVE != 0 {
            spins += 1;
            if spins.is_multiple_of(YIELD_EVERY) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            s = self.state.load(Acquire);
        }
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        if self.panicked.load(SeqCst) {
            panic!("a CPU kernel panicked on a pool thread");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    #[test]
    fn ranges_cover_everything_once() {
        for cap in [1usize, 2, 3, 64] {
            for (n, min) in [
                (0usize, 16usize),
                (1, 16),
                (15, 16),
                (17, 16),
                (1000, 16),
                (49_153, 64),
            ] {
                let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                super::with_max_threads(cap, || {
                    super::for_ranges(n, min, |r0, r1| {
                        for h in &hits[r0..r1] {
                            h.fetch_add(1, Relaxed);
                        }
                    })
                });
                assert!(
                    hits.iter().all(|h| h.load(Relaxed) == 1),
                    "n {n} min {min} cap {cap}"
                );
            }
        }
    }

    #[test]
    fn jobs_from_many_threads_and_nested_jobs_complete() {
        // Callers on several threads at once (one gets the pool, the others run inline) and a
        // job inside a job (inline): every sum is exact.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for round in 0..200u64 {
                        let n = 1000 + (t * 37 + round) as usize % 500;
                        let total = std::sync::atomic::AtomicU64::new(0);
                        super::for_ranges(n, 8, |r0, r1| {
                            let inner = std::sync::atomic::AtomicU64::new(0);
                            super::for_ranges(r1 - r0, 4, |a, b| {
                                inner.fetch_add(((r0 + a) as u64..(r0 + b) as u64).sum(), Relaxed);
                            });
                            total.fetch_add(inner.load(Relaxed), Relaxed);
                        });
                        assert_eq!(total.load(Relaxed), (n as u64 - 1) * n as u64 / 2);
                    }
                });
            }
        });
    }
}
