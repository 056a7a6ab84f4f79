//! The engine's dedicated Web Worker. It owns the backend (the GPU device or the CPU path), the
//! bundle and the session, and answers the page's [`ToWorker`] messages with [`FromWorker`]
//! ones:
//!
//! 1. `load`: the backend (auto: the CPU path with wasm SIMD, unless a hardware WebGPU adapter
//!    measures faster; SwiftShader never wins), storage quota against what must be downloaded,
//!    then every shard from the cache or the network (three at a time, streamed with progress),
//!    each checked against the manifest's length and sha256 before it is kept; the verified
//!    bundle loads into an engine session.
//! 2. `ask`: retrieval and generation, raw output streamed as `token` messages; `stop` ends
//!    the generation between two tokens (readbacks yield to the event loop, so the message is
//!    seen).
//! 3. A lost device is reported as such; the page then starts a fresh worker, which reloads
//!    the bundle from the cache.

mod download;
mod threads;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use lorekeeper_engine::answer::session::Session;
use lorekeeper_engine::answer::AskConfig;
use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::generate::{bench_decode, bench_prompt, profile_decode};
use lorekeeper_engine::retrieval::Sources;
use lorekeeper_engine::{Backend, CpuBackend, EngineError, GpuContext};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::protocol::{
    decode, encode, BackendChoice, CatalogEntry, DecodeProfile, FailKind, FromWorker, Settings,
    ToWorker,
};
use crate::web;

/// KV-cache positions per session (prompt + answer).
pub use lorekeeper_engine::answer::session::PAGE_CONTEXT as CONTEXT;

/// Timed runs (or repeats per query) a benchmark message may ask for.
const MAX_BENCH_RUNS: usize = 100;
/// Queries a retrieval benchmark message may carry.
const MAX_BENCH_QUERIES: usize = 10_000;

/// Sends a message to the page.
pub(crate) fn post(m: &FromWorker) {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    if let Err(e) = scope.post_message(&JsValue::from_str(&encode(m))) {
        web_sys::console::error_1(&e);
    }
}

fn fail(kind: FailKind, message: impl Into<String>) -> FromWorker {
    FromWorker::Failed {
        kind,
        message: message.into(),
    }
}

/// The loaded session on the backend that runs it.
pub(crate) enum Engine {
    /// WebGPU.
    Gpu(Rc<GpuContext>, Box<Session<GpuContext>>),
    /// The CPU path (wasm SIMD).
    Cpu(Box<Session<CpuBackend>>),
}

#[derive(Default)]
struct State {
    busy: Cell<bool>,
    stop: Cell<bool>,
    gpu: RefCell<Option<Rc<GpuContext>>>,
    engine: RefCell<Option<Engine>>,
}

/// Marks the worker busy for as long as it lives.
struct Busy(Rc<State>);

impl Busy {
    fn take(st: &Rc<State>) -> Option<Busy> {
        if st.busy.replace(true) {
            return None;
        }
        Some(Busy(st.clone()))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.set(false);
    }
}

/// What the page shows for a panic: its message, on one line, cut to 300 characters.
fn crash_message(info: &str) -> String {
    let one_line = info.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one_line.chars().take(300).collect();
    format!("the engine stopped unexpectedly: {cut}")
}

/// Installs the message handler and tells the page the worker listens.
pub fn start() {
    // A panic logs to the console and tells the page, which would otherwise wait forever for
    // an answer a dead worker cannot send (wasm32 aborts after the hook).
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        post(&fail(FailKind::Crashed, crash_message(&info.to_string())));
    }));
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let st = Rc::new(State::default());
    let on = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            post(&fail(
                FailKind::Internal,
                "the worker only takes JSON strings",
            ));
            return;
        };
        match decode::<ToWorker>(&text) {
            Err(e) => post(&fail(FailKind::Internal, e)),
            Ok(ToWorker::Stop) => st.stop.set(true),
            #[cfg(feature = "test-hooks")]
            Ok(ToWorker::LoseDevice) => {
                if let Some(g) = st.gpu.borrow().as_ref() {
                    web_sys::console::warn_1(&"lorekeeper: destroying the GPU device".into());
                    g.device().destroy();
                }
            }
            #[cfg(feature = "test-hooks")]
            Ok(ToWorker::Crash) => panic!("test hook: the worker was asked to crash"),
            Ok(ToWorker::Load { bundle, backend }) => match Busy::take(&st) {
                Some(b) => wasm_bindgen_futures::spawn_local(load(b, bundle, backend)),
                None => post(&fail(
                    FailKind::Busy,
                    "the worker is busy; wait or press Stop",
                )),
            },
            Ok(ToWorker::Bench { queries, k, repeat }) => match Busy::take(&st) {
                Some(b) => wasm_bindgen_futures::spawn_local(bench(b, queries, k, repeat)),
                None => post(&fail(FailKind::Busy, "the worker is busy")),
            },
            Ok(ToWorker::BenchDecode {
                prompt_tokens,
                gen_tokens,
                runs,
                profile,
            }) => match Busy::take(&st) {
                Some(b) => wasm_bindgen_futures::spawn_local(decode_bench(
                    b,
                    (prompt_tokens, gen_tokens, runs),
                    profile,
                )),
                None => post(&fail(FailKind::Busy, "the worker is busy")),
            },
            Ok(ToWorker::Ask { question, settings }) => match Busy::take(&st) {
                Some(b) => wasm_bindgen_futures::spawn_local(ask(b, question, settings)),
                None => post(&fail(
                    FailKind::Busy,
                    "a question or a download is under way; wait or press Stop",
                )),
            },
        }
    });
    scope.set_onmessage(Some(on.as_ref().unchecked_ref()));
    on.forget();
    // The CPU pool's workers come up while the page asks for a bundle.
    threads::start_pool();
    post(&FromWorker::Alive);
}

/// How an engine error reads to the page.
fn classify(e: &EngineError) -> FailKind {
    match e {
        EngineError::DeviceLost(_) => FailKind::DeviceLost,
        EngineError::Question(_) => FailKind::Question,
        _ => FailKind::Internal,
    }
}

async fn ask(busy: Busy, question: String, settings: Settings) {
    let st = busy.0.clone();
    st.stop.set(false);
    if let Err(e) = settings.check() {
        post(&fail(FailKind::Question, e));
        return;
    }
    // The engine leaves its cell while it works (the busy flag keeps others out) and goes
    // back when the answer is done.
    let Some(mut engine) = st.engine.borrow_mut().take() else {
        post(&fail(FailKind::Load, "no bundle is loaded yet"));
        return;
    };
    let r = match &mut engine {
        Engine::Gpu(gpu, sess) => answer(&**gpu, sess, &question, &settings, &st).await,
        Engine::Cpu(sess) => answer(&CpuBackend, sess, &question, &settings, &st).await,
    };
    let gpu = match &engine {
        Engine::Gpu(gpu, _) => Some(gpu.clone()),
        Engine::Cpu(_) => None,
    };
    *st.engine.borrow_mut() = Some(engine);
    // A lost device does not fail the reads that follow it: WebGPU maps succeed (with zeros)
    // and only `device.lost` says what happened, a moment later. So an answer is posted only
    // once the device is known to have survived it.
    if let Some(gpu) = gpu {
        gloo_timers::future::TimeoutFuture::new(50).await;
        if let Err(lost @ EngineError::DeviceLost(_)) = gpu.check_errors() {
            post(&fail(FailKind::DeviceLost, lost.to_string()));
            return;
        }
    }
    match r {
        Ok(a) => post(&FromWorker::Answer {
            answer: Box::new(a),
        }),
        Err(e) => post(&fail(classify(&e), e.to_string())),
    }
    drop(busy);
}

/// One question on either backend, raw output streamed as `token` messages.
async fn answer<B: Backend>(
    b: &B,
    sess: &mut Session<B>,
    question: &str,
    settings: &Settings,
    st: &Rc<State>,
) -> Result<lorekeeper_engine::answer::Answer, EngineError> {
    settings.apply(&mut sess.cfg);
    let stop = st.clone();
    sess.ask(b, question, |piece| {
        post(&FromWorker::Token {
            text: piece.to_string(),
        });
        !stop.stop.get()
    })
    .await
}

/// Retrieval timings on the loaded bundle (see [`ToWorker::Bench`]).
async fn bench(busy: Busy, queries: Vec<String>, k: usize, repeat: usize) {
    let st = busy.0.clone();
    let Some(engine) = st.engine.borrow_mut().take() else {
        post(&fail(FailKind::Load, "no bundle is loaded yet"));
        return;
    };
    let r = match &engine {
        Engine::Gpu(gpu, sess) => {
            run_bench(&**gpu, sess, gpu.adapter_description(), &queries, k, repeat).await
        }
        Engine::Cpu(sess) => {
            run_bench(
                &CpuBackend,
                sess,
                CpuBackend.describe(),
                &queries,
                k,
                repeat,
            )
            .await
        }
    };
    *st.engine.borrow_mut() = Some(engine);
    match r {
        Ok(m) => post(&m),
        Err(e) => post(&fail(classify(&e), e.to_string())),
    }
    drop(busy);
}

/// Decoder timings on the loaded model (see [`ToWorker::BenchDecode`]).
async fn decode_bench(busy: Busy, shape: (usize, usize, usize), profile: bool) {
    let st = busy.0.clone();
    let Some(mut engine) = st.engine.borrow_mut().take() else {
        post(&fail(FailKind::Load, "no bundle is loaded yet"));
        return;
    };
    let r = match &mut engine {
        Engine::Gpu(gpu, sess) => {
            time_decoder(&**gpu, sess, gpu.adapter_description(), shape, profile).await
        }
        Engine::Cpu(sess) => {
            time_decoder(&CpuBackend, sess, CpuBackend.describe(), shape, profile).await
        }
    };
    *st.engine.borrow_mut() = Some(engine);
    match r {
        Ok(m) => post(&m),
        Err(e) => post(&fail(classify(&e), e.to_string())),
    }
    drop(busy);
}

async fn time_decoder<B: Backend>(
    b: &B,
    sess: &mut Session<B>,
    backend: String,
    (prompt_tokens, gen_tokens, runs): (usize, usize, usize),
    profile: bool,
) -> Result<FromWorker, EngineError> {
    if !(1..=MAX_BENCH_RUNS).contains(&runs) {
        return Err(EngineError::Question(format!(
            "runs {runs} is outside 1 to {MAX_BENCH_RUNS}"
        )));
    }
    if prompt_tokens == 0 || prompt_tokens.saturating_add(gen_tokens) >= CONTEXT {
        return Err(EngineError::Question(format!(
            "prompt {prompt_tokens} + generated {gen_tokens} tokens do not fit the context of {CONTEXT}"
        )));
    }
    let ids = bench_prompt(&sess.tok, prompt_tokens)?;
    let result = bench_decode(b, &mut sess.model, &ids, gen_tokens, runs).await?;
    let profile = if profile {
        profile_decode(b, &mut sess.model, &ids, gen_tokens)
            .await?
            .map(|p| DecodeProfile::per_token(&p, gen_tokens))
    } else {
        None
    };
    // The next question starts from an empty cache.
    sess.model.reset(b)?;
    Ok(FromWorker::BenchDecode {
        backend,
        prompt_tokens,
        gen_tokens,
        result,
        profile,
    })
}

/// Query embedding on the session's backend (`embed_gpu_ms`: the backend's, whichever it is)
/// and on the CPU path, and search, `repeat` times per query.
async fn run_bench<B: Backend>(
    b: &B,
    sess: &Session<B>,
    adapter: String,
    queries: &[String],
    k: usize,
    repeat: usize,
) -> Result<FromWorker, EngineError> {
    if !(1..=MAX_BENCH_RUNS).contains(&repeat) || queries.len() > MAX_BENCH_QUERIES {
        return Err(EngineError::Question(format!(
            "{} queries repeated {repeat} times: at most {MAX_BENCH_QUERIES} queries, 1 to {MAX_BENCH_RUNS} times",
            queries.len()
        )));
    }
    let cpu = CpuBackend;
    let cpu_embedder = Embedder::from_index(&sess.index, &cpu)?;
    let (mut embed_gpu_ms, mut embed_cpu_ms, mut search_ms) = (vec![], vec![], vec![]);
    let mut top_ids = Vec::with_capacity(queries.len());
    for q in queries {
        let t0 = web::now_ms();
        // The query and its words for expansion, as an answer's search embeds them.
        let (qv, words) = match &sess.embedder {
            Some(e) => {
                let (qv, words) = e.embed_search(b, &sess.index.story, q).await?;
                (Some(qv), words)
            }
            None => (None, Vec::new()),
        };
        if qv.is_some() {
            embed_gpu_ms.push(web::now_ms() - t0);
        }
        if let Some(e) = &cpu_embedder {
            let t0 = web::now_ms();
            e.embed_search(&cpu, &sess.index.story, q).await?;
            embed_cpu_ms.push(web::now_ms() - t0);
        }
        let mut ids = vec![];
        for _ in 0..repeat {
            let t0 = web::now_ms();
            let hits =
                sess.index
                    .story
                    .search_expanded(q, qv.as_deref(), &words, k, Sources::ALL)?;
            search_ms.push(web::now_ms() - t0);
            ids = hits.into_iter().take(k).map(|h| h.id).collect();
        }
        top_ids.push(ids);
    }
    Ok(FromWorker::Bench {
        adapter,
        passages: sess.index.story.chunks().len(),
        embed_gpu_ms,
        embed_cpu_ms,
        search_ms,
        top_ids,
    })
}

async fn load(busy: Busy, entry: CatalogEntry, backend: BackendChoice) {
    let st = busy.0.clone();
    let t0 = web::now_ms();
    // Free the old bundle's memory before the new one arrives.
    *st.engine.borrow_mut() = None;
    *st.gpu.borrow_mut() = None;
    match download::load_bundle(&entry, backend).await {
        Ok(d) => {
            let (model, passages, embedder) = match &d.engine {
                Engine::Gpu(_, s) => describe(s),
                Engine::Cpu(s) => describe(s),
            };
            let adapter = match (&d.engine, threads::single_thread_reason()) {
                (Engine::Cpu(_), Some(why)) => format!("{}; one thread: {why}", d.backend),
                _ => d.backend,
            };
            post(&FromWorker::Loaded {
                adapter,
                model,
                passages,
                embedder,
                seconds: (web::now_ms() - t0) / 1e3,
                all_cached: d.all_cached,
                note: d.note,
            });
            if let Engine::Gpu(gpu, _) = &d.engine {
                *st.gpu.borrow_mut() = Some(gpu.clone());
            }
            *st.engine.borrow_mut() = Some(d.engine);
        }
        Err(f) => post(&f),
    }
    drop(busy);
}

/// The model's line, the passage count and the embedder's kind, for the page.
fn describe<B: Backend>(s: &Session<B>) -> (String, usize, Option<String>) {
    (
        describe_model(s),
        s.index.story.chunks().len(),
        s.embedder.as_ref().map(|e| e.spec.kind.clone()),
    )
}

fn describe_model<B: Backend>(s: &Session<B>) -> String {
    let Some(m) = s.index.manifest.model.as_ref() else {
        return "model".into();
    };
    let p = m.parameters as f64;
    let size = if p >= 1e9 {
        format!("{:.1}B", p / 1e9)
    } else if p >= 1e6 {
        format!("{:.0}M", p / 1e6)
    } else {
        format!("{:.0}K", p / 1e3)
    };
    format!(
        "{} · {size} parameters · {}",
        m.architecture,
        m.quant.name()
    )
}

/// Settings the session is loaded with (each question applies its own on top).
fn base_config() -> AskConfig {
    AskConfig::default()
}
