//! The page: a bundle picker, the capability check and download, the chat with streamed
//! answers, and the evidence panel. All state lives in [`AppState`]'s signals; the engine runs
//! in the worker ([`crate::worker`]), reached through [`EngineHandle`].

mod answer;
mod chat;
mod evidence;
mod picker;
mod settings;
mod status;

use leptos::prelude::*;
use lorekeeper_engine::answer::session::AnswerStream;
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::chat_log::{push_turn, to_save, Live, Turn};
use crate::format::RateMeter;
use crate::protocol::{
    decode, encode, gpu_tuning_from_query, parse_catalog, threads_from_query, BackendChoice,
    Catalog, CatalogEntry, FailKind, FromWorker, Settings, ToWorker,
};
use crate::web;

/// Where the engine is.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// Nothing loaded; the reader picks a bundle.
    Idle,
    /// Checking WebGPU, the adapter's limits and storage.
    Checking,
    /// Shards arriving.
    Downloading,
    /// Verified; weights going to the GPU.
    Loading,
    /// Ready for questions.
    Ready,
    /// The engine cannot run (the message says why).
    Failed(FailKind, String),
}

/// What the capability check found.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckInfo {
    /// The adapter.
    pub adapter: String,
    /// Bytes of the bundle.
    pub bundle_bytes: u64,
    /// Bytes already cached.
    pub cached_bytes: u64,
    /// Free storage.
    pub storage_free: Option<u64>,
    /// Will be cached.
    pub will_cache: bool,
    /// Largest binding needed / the adapter's limit.
    pub binding: (u64, u64),
}

/// Download progress with rate and time left.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgressInfo {
    /// Bytes done.
    pub done: u64,
    /// Bytes in all.
    pub total: u64,
    /// From the cache.
    pub from_cache: u64,
    /// Shards done / all.
    pub files: (usize, usize),
    /// Bytes per second over the network.
    pub rate: Option<f64>,
    /// Seconds left.
    pub eta: Option<f64>,
}

/// The loaded bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedInfo {
    /// Adapter.
    pub adapter: String,
    /// Model in words.
    pub model: String,
    /// Passages in the index.
    pub passages: usize,
    /// Embedder kind.
    pub embedder: Option<String>,
    /// Seconds to load.
    pub seconds: f64,
    /// Nothing came from the network.
    pub all_cached: bool,
}

/// Every signal of the page (cheap to copy into closures).
#[derive(Clone, Copy)]
pub struct AppState {
    /// Engine phase.
    pub phase: RwSignal<Phase>,
    /// The bundle chosen.
    pub bundle: RwSignal<Option<CatalogEntry>>,
    /// Capability check result.
    pub check: RwSignal<Option<CheckInfo>>,
    /// Download progress.
    pub progress: RwSignal<Option<ProgressInfo>>,
    /// The loaded bundle.
    pub loaded: RwSignal<Option<LoadedInfo>>,
    /// Notices (storage, GPU reset).
    pub notice: RwSignal<Option<String>>,
    /// The conversation: finished turns and the running one's question (changes once per
    /// question and once per answer).
    pub turns: RwSignal<Vec<Turn>>,
    /// The running turn's streamed answer (changes with every token).
    pub live: RwSignal<Live>,
    /// A question is being answered.
    pub asking: RwSignal<bool>,
    /// Question settings.
    pub settings: RwSignal<Settings>,
    /// The evidence id the reader points at (highlighted in the panel).
    pub focus: RwSignal<Option<String>>,
    /// Whether the browser granted persistent storage (`navigator.storage.persist()`), once
    /// asked at the first load.
    pub persisted: RwSignal<Option<bool>>,
    engine: StoredValue<EngineHandle, LocalStorage>,
    /// A question cut short by a lost device or a crashed worker, asked again once the fresh
    /// worker has loaded the bundle (at most [`MAX_RESTARTS`] times in a row).
    retry: StoredValue<Option<String>>,
    meter: StoredValue<RateMeter>,
    stream: StoredValue<AnswerStream>,
}

/// The worker and whether it listens yet.
#[derive(Default)]
pub struct EngineHandle {
    worker: Option<Worker>,
    alive: bool,
    queued: Vec<ToWorker>,
    /// Counts workers started; a message or error from an older (terminated) worker is ignored.
    generation: u32,
    /// Restarts after a crash or a lost device since the last bundle load or answer that
    /// succeeded; past [`MAX_RESTARTS`] the page stops retrying and says so.
    restarts: u32,
}

/// Fresh workers started after failures in a row before the page gives up.
const MAX_RESTARTS: u32 = 2;

const LAST_BUNDLE_KEY: &str = "lorekeeper.last-bundle";
const SETTINGS_KEY: &str = "lorekeeper.settings";

/// The page's backend setting: `?backend=cpu` or `?backend=gpu` in its address (auto without).
fn backend_choice() -> BackendChoice {
    web_sys::window()
        .and_then(|w| w.location().search().ok())
        .map(|s| BackendChoice::from_query(&s))
        .unwrap_or_default()
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

fn history_key(id: &str) -> String {
    format!("lorekeeper.chat.{id}")
}

/// Reads a JSON value from localStorage.
fn stored<T: for<'de> Deserialize<'de>>(key: &str) -> Option<T> {
    let s = storage()?.get_item(key).ok().flatten()?;
    serde_json::from_str(&s).ok()
}

/// Writes a JSON value to localStorage (quietly: history is a convenience).
fn store<T: Serialize + ?Sized>(key: &str, v: &T) {
    if let (Some(s), Ok(text)) = (storage(), serde_json::to_string(v)) {
        let _ = s.set_item(key, &text);
    }
}

impl AppState {
    fn new() -> Self {
        AppState {
            phase: RwSignal::new(Phase::Idle),
            bundle: RwSignal::new(None),
            check: RwSignal::new(None),
            progress: RwSignal::new(None),
            loaded: RwSignal::new(None),
            notice: RwSignal::new(None),
            turns: RwSignal::new(Vec::new()),
            live: RwSignal::new(Live::default()),
            asking: RwSignal::new(false),
            settings: RwSignal::new(stored(SETTINGS_KEY).unwrap_or_default()),
            focus: RwSignal::new(None),
            persisted: RwSignal::new(None),
            engine: StoredValue::new_local(EngineHandle::default()),
            retry: StoredValue::new(None),
            meter: StoredValue::new(RateMeter::default()),
            stream: StoredValue::new(AnswerStream::default()),
        }
    }

    /// Sends a message, queueing it until the worker listens.
    pub fn send(&self, m: ToWorker) {
        self.engine.update_value(|h| match (&h.worker, h.alive) {
            (Some(w), true) => {
                if let Err(e) = w.post_message(&JsValue::from_str(&encode(&m))) {
                    web_sys::console::error_1(&e);
                }
            }
            _ => h.queued.push(m),
        });
    }

    /// Starts a fresh worker (the old one, if any, is terminated).
    pub fn restart_engine(&self) {
        let st = *self;
        let generation = self
            .engine
            .try_update_value(|h| {
                h.generation += 1;
                h.generation
            })
            .unwrap_or_default();
        let current = move || st.engine.with_value(|h| h.generation) == generation;
        let on = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if !current() {
                return;
            }
            if let Some(text) = ev.data().as_string() {
                match decode::<FromWorker>(&text) {
                    Ok(m) => st.on_message(m),
                    Err(e) => web_sys::console::error_1(&JsValue::from_str(&e)),
                }
            }
        });
        // An uncaught error in the worker (a trap after a panic, out of memory, a script that
        // does not load) and a message that cannot be read both end the worker's usefulness.
        let on_error =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
                if current() {
                    let what = ev.message();
                    let what = if what.is_empty() {
                        "an uncaught error".to_string()
                    } else {
                        what
                    };
                    st.on_failure(
                        FailKind::Crashed,
                        format!("the engine stopped unexpectedly: {what}"),
                    );
                }
            });
        let on_message_error = Closure::<dyn FnMut(MessageEvent)>::new(move |_| {
            if current() {
                st.on_failure(
                    FailKind::Crashed,
                    "the engine sent a message the page cannot read".into(),
                );
            }
        });
        let opts = WorkerOptions::new();
        opts.set_type(WorkerType::Classic);
        opts.set_name("lorekeeper-engine");
        // `?threads=N` and `?gpu_tuning=…` in the page's address reach the worker in its own.
        let search = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .unwrap_or_default();
        let mut query = Vec::new();
        if let Some(n) = threads_from_query(&search) {
            query.push(format!("threads={n}"));
        }
        if let Some(t) = gpu_tuning_from_query(&search) {
            query.push(format!("gpu_tuning={t}"));
        }
        let script = if query.is_empty() {
            "./worker-boot.js".to_string()
        } else {
            format!("./worker-boot.js?{}", query.join("&"))
        };
        let worker = Worker::new_with_options(&script, &opts);
        self.engine.update_value(|h| {
            if let Some(w) = h.worker.take() {
                w.terminate();
            }
            h.alive = false;
            h.queued.clear();
            match worker {
                Ok(w) => {
                    w.set_onmessage(Some(on.as_ref().unchecked_ref()));
                    w.set_onerror(Some(on_error.as_ref().unchecked_ref()));
                    w.set_onmessageerror(Some(on_message_error.as_ref().unchecked_ref()));
                    h.worker = Some(w);
                }
                Err(e) => {
                    self.phase.set(Phase::Failed(
                        FailKind::Internal,
                        format!("the engine worker could not start: {}", web::js_error(&e)),
                    ));
                }
            }
        });
        // The handlers may be running right now (a lost device restarts the engine from
        // inside one), so they are never dropped: three small closures per restart.
        on.forget();
        on_error.forget();
        on_message_error.forget();
    }

    /// Checks, downloads and loads `b`.
    pub fn load(&self, b: CatalogEntry) {
        self.retry.set_value(None);
        if self.engine.with_value(|h| h.worker.is_none()) {
            self.restart_engine();
        }
        self.turns
            .set(stored::<Vec<Turn>>(&history_key(&b.id)).unwrap_or_default());
        store(LAST_BUNDLE_KEY, &b.id);
        self.bundle.set(Some(b.clone()));
        self.phase.set(Phase::Checking);
        self.check.set(None);
        self.progress.set(None);
        self.loaded.set(None);
        self.meter.set_value(RateMeter::default());
        self.send(ToWorker::Load {
            bundle: b,
            backend: backend_choice(),
        });
        if self.persisted.get_untracked().is_none() {
            let st = *self;
            wasm_bindgen_futures::spawn_local(async move {
                st.persisted.set(Some(web::persist_storage().await));
            });
        }
    }

    /// Cancels a download or load: the worker is replaced.
    pub fn cancel(&self) {
        self.retry.set_value(None);
        self.restart_engine();
        self.phase.set(Phase::Idle);
        self.progress.set(None);
    }

    /// Asks a question.
    pub fn ask(&self, question: String) {
        let settings = self.settings.get_untracked();
        store(SETTINGS_KEY, &settings);
        self.stream.set_value(AnswerStream::default());
        self.asking.set(true);
        self.focus.set(None);
        self.turns.update(|t| {
            push_turn(
                t,
                Turn {
                    question: question.clone(),
                    asked_ms: web::now_ms(),
                    ..Turn::default()
                },
            );
        });
        self.live.set(Live::default());
        self.send(ToWorker::Ask { question, settings });
    }

    fn save_history(&self) {
        if let Some(b) = self.bundle.get_untracked() {
            self.turns
                .with_untracked(|t| store(&history_key(&b.id), &to_save(t)));
        }
    }

    fn finish_turn(&self, f: impl FnOnce(&mut Turn)) {
        let first_token_s = self.live.with_untracked(|l| l.first_token_s);
        self.turns.update(|t| {
            if let Some(last) = t.last_mut() {
                last.first_token_s = first_token_s;
                f(last);
            }
        });
        self.asking.set(false);
        self.save_history();
    }

    fn on_message(&self, m: FromWorker) {
        match m {
            FromWorker::Alive => {
                let queued = self.engine.try_update_value(|h| {
                    h.alive = true;
                    std::mem::take(&mut h.queued)
                });
                for q in queued.unwrap_or_default() {
                    self.send(q);
                }
            }
            FromWorker::Checked {
                adapter,
                binding_needed,
                binding_limit,
                bundle_bytes,
                cached_bytes,
                storage_free,
                will_cache,
                note,
            } => {
                self.check.set(Some(CheckInfo {
                    adapter,
                    bundle_bytes,
                    cached_bytes,
                    storage_free,
                    will_cache,
                    binding: (binding_needed, binding_limit),
                }));
                if note.is_some() {
                    self.notice.set(note);
                }
                self.phase.set(Phase::Downloading);
            }
            FromWorker::Progress {
                done,
                total,
                from_cache,
                files_done,
                files,
            } => {
                let now = web::now_ms();
                let (rate, eta) = self
                    .meter
                    .try_update_value(|m| {
                        m.sample(now, done.saturating_sub(from_cache));
                        (m.rate(), m.eta(total.saturating_sub(done)))
                    })
                    .unwrap_or((None, None));
                self.progress.set(Some(ProgressInfo {
                    done,
                    total,
                    from_cache,
                    files: (files_done, files),
                    rate,
                    eta,
                }));
                if done >= total && files_done >= files {
                    self.phase.set(Phase::Loading);
                }
            }
            FromWorker::Loaded {
                adapter,
                model,
                passages,
                embedder,
                seconds,
                all_cached,
                note,
            } => {
                self.loaded.set(Some(LoadedInfo {
                    adapter,
                    model,
                    passages,
                    embedder,
                    seconds,
                    all_cached,
                }));
                if note.is_some() {
                    self.notice.set(note);
                }
                self.phase.set(Phase::Ready);
                if let Some(q) = self.retry.try_update_value(Option::take).flatten() {
                    self.ask(q);
                }
            }
            FromWorker::Token { text } => {
                let shown = self
                    .stream
                    .try_update_value(|s| s.push(&text).to_string())
                    .unwrap_or_default();
                // Only the running turn's line changes; the conversation is not rebuilt.
                self.live.update(|l| {
                    if l.first_token_s.is_none() {
                        let asked = self
                            .turns
                            .with_untracked(|t| t.last().map(|t| t.asked_ms))
                            .unwrap_or_default();
                        l.first_token_s = Some((web::now_ms() - asked) / 1e3);
                    }
                    l.raw_chars += text.chars().count();
                    l.streamed.push_str(&shown);
                });
            }
            FromWorker::Answer { answer } => {
                self.engine.update_value(|h| h.restarts = 0);
                self.finish_turn(|t| t.answer = Some(*answer));
            }
            FromWorker::Failed { kind, message } => self.on_failure(kind, message),
            // Benchmark results go to the console, where the benchmark script reads them.
            m @ (FromWorker::Bench { .. } | FromWorker::BenchDecode { .. }) => {
                web_sys::console::info_1(&format!("lorekeeper-bench {}", encode(&m)).into());
            }
        }
    }

    fn on_failure(&self, kind: FailKind, message: String) {
        match kind {
            FailKind::DeviceLost | FailKind::Crashed => {
                let restarts = self
                    .engine
                    .try_update_value(|h| {
                        h.restarts += 1;
                        h.restarts
                    })
                    .unwrap_or(u32::MAX);
                let again = restarts <= MAX_RESTARTS;
                let then = if again {
                    "it is asked again once the engine has restarted"
                } else {
                    "ask again after reloading the page"
                };
                let (answer_error, notice) = if kind == FailKind::DeviceLost {
                    (
                        format!("The GPU was reset while answering; {then}."),
                        format!("The GPU device was lost ({message})."),
                    )
                } else {
                    (
                        format!("The engine stopped while answering ({message}); {then}."),
                        format!("The engine stopped: {message}."),
                    )
                };
                if self.asking.get_untracked() {
                    let mut question = String::new();
                    self.finish_turn(|t| {
                        question = t.question.clone();
                        t.error = Some(answer_error);
                    });
                    // The fresh worker answers it from the start (capped with the restarts).
                    if again && !question.is_empty() {
                        self.retry.set_value(Some(question));
                    }
                }
                if !again {
                    // A failure that repeats after fresh starts will repeat again: stop here.
                    // A new generation, so the dead worker's remaining events are ignored.
                    let dead = self.engine.try_update_value(|h| {
                        h.generation += 1;
                        h.alive = false;
                        h.worker.take()
                    });
                    if let Some(w) = dead.flatten() {
                        w.terminate();
                    }
                    self.phase.set(Phase::Failed(
                        kind,
                        format!(
                            "{notice} It happened {restarts} times in a row, so the engine was not restarted again; reload the page to try once more."
                        ),
                    ));
                    return;
                }
                self.notice.set(Some(format!(
                    "{notice} The engine restarted and is reloading the bundle from this browser's cache."
                )));
                self.restart_engine();
                if let Some(b) = self.bundle.get_untracked() {
                    self.phase.set(Phase::Checking);
                    self.send(ToWorker::Load {
                        bundle: b,
                        backend: backend_choice(),
                    });
                } else {
                    self.phase.set(Phase::Idle);
                }
            }
            FailKind::Question | FailKind::Busy | FailKind::Internal
                if self.asking.get_untracked() =>
            {
                self.finish_turn(|t| t.error = Some(message));
            }
            FailKind::Busy => self.notice.set(Some(message)),
            _ => {
                if self.asking.get_untracked() {
                    self.finish_turn(|t| t.error = Some(message.clone()));
                }
                self.phase.set(Phase::Failed(kind, message));
            }
        }
    }
}

/// A page error shown by the `ErrorBoundary`.
#[derive(Clone, Debug)]
pub struct PageError(pub String);

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PageError {}

/// `bundles/index.json`.
async fn fetch_catalog() -> Result<Catalog, PageError> {
    let resp = web::fetch("bundles/index.json", true).await.map_err(|e| {
        PageError(format!(
            "{e}. The page has no bundle list; build one with ./run.sh."
        ))
    })?;
    let text = web::text(resp).await.map_err(PageError)?;
    parse_catalog(&text).map_err(PageError)
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let st = AppState::new();
    provide_context(st);
    st.restart_engine();
    // Test hooks (builds with the `test-hooks` feature only): destroy the GPU device as a
    // driver reset would; make the worker panic as a bug would.
    #[cfg(feature = "test-hooks")]
    if let Some(w) = web_sys::window() {
        let hooks: [(&str, ToWorker); 2] = [
            ("lorekeeperLoseDevice", ToWorker::LoseDevice),
            ("lorekeeperCrashWorker", ToWorker::Crash),
        ];
        for (name, m) in hooks {
            let hook = Closure::<dyn Fn()>::new(move || st.send(m.clone()));
            let _ = js_sys::Reflect::set(&w, &name.into(), hook.as_ref());
            hook.forget();
        }
    }
    let catalog = LocalResource::new(fetch_catalog);
    view! {
        <header class="top">
            <h1>"Lorekeeper"</h1>
            <p class="tagline">"Questions about a story, answered from quoted passages — on your machine, offline."</p>
        </header>
        <main class="layout">
            <section class="left">
                <Transition fallback=|| view! { <p class="muted">"Loading the bundle list…"</p> }>
                    <ErrorBoundary fallback=|errors| {
                        view! {
                            <div class="card error" role="alert">
                                <h2>"No bundles"</h2>
                                <ul>
                                    {move || {
                                        errors
                                            .get()
                                            .into_iter()
                                            .map(|(_, e)| view! { <li>{e.to_string()}</li> })
                                            .collect_view()
                                    }}
                                </ul>
                            </div>
                        }
                    }>
                        {move || {
                            catalog
                                .get()
                                .map(|r| r.map(|c| view! { <picker::Picker catalog=c /> }))
                        }}
                    </ErrorBoundary>
                </Transition>
                <status::Status />
                <chat::Chat />
            </section>
            <aside class="right">
                <evidence::EvidencePanel />
                <settings::SettingsPanel />
            </aside>
        </main>
    }
}
