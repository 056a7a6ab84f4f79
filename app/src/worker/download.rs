//! Capability check, verified download with progress and caching, and the load into a session.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use lorekeeper_engine::choose::{decide, Decision};
use lorekeeper_engine::format::bundle::{
    sha256_hex, verify_shard, Manifest, ShardEntry, MANIFEST_FILE,
};
use lorekeeper_engine::{Backend, CpuBackend, EngineError, GpuContext, Requirements};
use wasm_bindgen::JsCast;
use web_sys::Cache;

use super::{base_config, fail, post, Engine, CONTEXT};
use crate::protocol::{BackendChoice, CatalogEntry, FailKind, FromWorker};
use crate::web;
use lorekeeper_engine::answer::session::{footprint, Session, PAGE_HEAP_LIMIT};

/// Downloads in flight at once.
const PARALLEL: usize = 3;
/// Progress messages at most this often.
const PROGRESS_MS: f64 = 100.0;
/// Further requests for one shard after its transfer broke off or the network failed.
const RETRIES: u32 = 4;
/// The pause before the n-th of them: n times this.
const RETRY_PAUSE_MS: u32 = 500;

/// A loaded bundle.
pub(super) struct Loaded {
    pub engine: Engine,
    /// Where it runs and why (the backend choice), for the page.
    pub backend: String,
    pub all_cached: bool,
    pub note: Option<String>,
}

const NO_WEBGPU: &str = "This browser does not offer WebGPU, which the page's `?backend=gpu` \
setting asks for. Use a current Chrome, Edge or Safari, or Firefox with WebGPU enabled, and check \
that hardware acceleration is on in the browser's settings; or drop the setting to run on the CPU.";

/// The GEMV shape the automatic choice times on a hardware adapter (as the CLI's).
const CALIBRATION: (usize, usize) = (2048, 2048);

/// What the GPU must offer for this bundle: the kernels' needs, and the manifest's largest
/// binding and buffer when they are larger.
fn requirements(m: &Manifest) -> Requirements {
    let mut r = Requirements::default();
    if let Some(model) = &m.model {
        r.max_storage_binding = r
            .max_storage_binding
            .max(model.limits.max_storage_buffer_binding_size);
        r.max_buffer = r.max_buffer.max(model.limits.max_buffer_size);
    }
    r
}

/// The manifest and its bytes: from the network (revalidated, so a rebuilt bundle is seen),
/// else from the cache (offline). Checked against the catalog's `manifest_sha256` when it has
/// one, then parsed and validated. The caller caches the bytes only once every shard verified,
/// so a bad manifest never outlives the load that found it.
async fn manifest(
    entry: &CatalogEntry,
    base: &str,
    cache: Option<&Cache>,
) -> Result<(Manifest, String, Vec<u8>), FromWorker> {
    let url = web::absolute(&format!("{base}{MANIFEST_FILE}"));
    let bytes = match web::fetch(&url, true).await {
        Ok(resp) => web::bytes(resp)
            .await
            .map_err(|e| fail(FailKind::Network, format!("{url}: {e}")))?,
        Err(net) => {
            let cached = match cache {
                Some(c) => match web::cache_match(c, &url).await {
                    Some(r) => web::bytes(r).await.ok(),
                    None => None,
                },
                None => None,
            };
            cached.ok_or_else(|| {
                fail(
                    FailKind::Network,
                    format!("{net}. The bundle is not in this browser's cache either; build it with ./run.sh, or check the connection."),
                )
            })?
        }
    };
    if let Some(want) = &entry.manifest_sha256 {
        let got = sha256_hex(&bytes);
        if !got.eq_ignore_ascii_case(want) {
            return Err(fail(
                FailKind::Corrupt,
                format!("{url}: sha256 is {got}, bundles/index.json says {want} (the manifest was changed or damaged)"),
            ));
        }
    }
    let m = Manifest::parse(&url, &bytes).map_err(|e| fail(FailKind::Load, e.to_string()))?;
    Ok((m, url, bytes))
}

/// Shared download progress.
struct Progress {
    done: Cell<u64>,
    from_cache: Cell<u64>,
    files_done: Cell<usize>,
    total: u64,
    files: usize,
    last: Cell<f64>,
}

impl Progress {
    fn add(&self, n: u64, cached: bool) {
        self.done.set(self.done.get() + n);
        if cached {
            self.from_cache.set(self.from_cache.get() + n);
        }
        let now = web::now_ms();
        if now - self.last.get() >= PROGRESS_MS {
            self.last.set(now);
            self.post();
        }
    }

    fn post(&self) {
        post(&FromWorker::Progress {
            done: self.done.get(),
            total: self.total,
            from_cache: self.from_cache.get(),
            files_done: self.files_done.get(),
            files: self.files,
        });
    }
}

/// The cache while it takes files: it stops taking them when storage runs out.
struct Keep {
    cache: Option<Cache>,
    on: Cell<bool>,
    note: RefCell<Option<String>>,
}

impl Keep {
    async fn put(&self, url: &str, bytes: &[u8]) {
        let Some(c) = self.cache.as_ref().filter(|_| self.on.get()) else {
            return;
        };
        if let Err(e) = web::cache_put(c, url, bytes).await {
            self.on.set(false);
            let why = if web::dom_error_name(&e).as_deref() == Some("QuotaExceededError") {
                "this browser's storage for the site is full".to_string()
            } else {
                web::js_error(&e)
            };
            *self.note.borrow_mut() = Some(format!(
                "The bundle could not be kept for your next visit ({why}); it runs from memory this time and will be downloaded again."
            ));
        }
    }
}

/// Reads a verified cached copy of a shard; a corrupt copy is deleted (and downloaded again).
async fn from_cache(cache: Option<&Cache>, url: &str, e: &ShardEntry) -> Option<Vec<u8>> {
    let c = cache?;
    let resp = web::cache_match(c, url).await?;
    let bytes = web::bytes(resp).await.ok()?;
    if verify_shard(e, &bytes).is_ok() {
        Some(bytes)
    } else {
        web::cache_delete(c, url).await;
        None
    }
}

/// Downloads one shard, streaming progress, and checks it against the manifest. A transfer
/// that breaks off is resumed where it stopped (`Range`), and a request the network failed is
/// sent again, [`RETRIES`] times at most with a growing pause; a server that ignores the range
/// sends the whole file again, which is taken from its start.
async fn download(url: &str, e: &ShardEntry, p: &Progress) -> Result<Vec<u8>, FromWorker> {
    let mut out: Vec<u8> = Vec::with_capacity(e.bytes as usize);
    let mut tries = 0;
    loop {
        let from = out.len() as u64;
        let attempt = async {
            let resp = web::get_from(url, false, from).await?;
            if from > 0 && web::range_start(&resp) != Some(from) {
                // Not the rest of the file: start over with what came.
                p.done.set(p.done.get().saturating_sub(from));
                out.clear();
            }
            web::read_body(resp, &mut out, |n| p.add(n, false))
                .await
                .map_err(|m| web::NetError {
                    message: format!("{url}: {m}"),
                    retry: true,
                })
        };
        match attempt.await {
            Ok(()) => break,
            Err(err) if err.retry && tries < RETRIES => {
                tries += 1;
                gloo_timers::future::TimeoutFuture::new(RETRY_PAUSE_MS * tries).await;
            }
            Err(err) => {
                p.done.set(p.done.get().saturating_sub(out.len() as u64));
                let again = if tries > 0 {
                    format!(" (after {tries} more tries)")
                } else {
                    String::new()
                };
                return Err(fail(FailKind::Network, format!("{}{again}", err.message)));
            }
        }
    }
    verify_shard(e, &out).map_err(|err| {
        // Take back what this shard added, so the bar does not pass 100 % on a retry.
        p.done.set(p.done.get().saturating_sub(out.len() as u64));
        fail(
            FailKind::Corrupt,
            format!("{err}. The file on the server does not match the bundle's manifest; rebuild or re-upload the bundle."),
        )
    })?;
    Ok(out)
}

/// Check, download, verify, load.
pub(super) async fn load_bundle(
    entry: &CatalogEntry,
    backend: BackendChoice,
) -> Result<Loaded, FromWorker> {
    // The catalog was checked in the page; the worker checks again where the path leads.
    let base = web::same_origin(&entry.base()).map_err(|e| {
        fail(
            FailKind::Load,
            format!("bundle '{}' lives at {e}", entry.id),
        )
    })?;
    let (cache, cache_note) = match web::open_cache().await {
        Ok(c) => (Some(c), None),
        Err(e) => (
            None,
            Some(format!(
                "The bundle cannot be kept for your next visit: {e}."
            )),
        ),
    };
    // 1. The manifest.
    let (manifest, manifest_url, manifest_bytes) = manifest(entry, &base, cache.as_ref()).await?;
    // 2. The backend: the CPU path unless a hardware WebGPU adapter measures faster (or the
    //    page's setting forces one).
    let (gpu, backend_line) = choose_backend(&manifest, backend).await?;
    // 2b. Room in this page's memory, from the manifest alone: a bundle the page cannot hold
    //     is refused before anything is downloaded.
    footprint(&manifest, gpu.is_none(), CONTEXT)
        .and_then(|f| f.check(&manifest_url, PAGE_HEAP_LIMIT))
        .map_err(|e| fail(FailKind::Memory, e.to_string()))?;
    let binding_needed = manifest
        .model
        .as_ref()
        .map(|m| m.limits.max_storage_buffer_binding_size)
        .unwrap_or(0);
    // 3. What is cached already, and room for the rest.
    let total: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    let p = Progress {
        done: Cell::new(0),
        from_cache: Cell::new(0),
        files_done: Cell::new(0),
        total,
        files: manifest.shards.len(),
        last: Cell::new(0.0),
    };
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut missing: Vec<(String, &ShardEntry)> = Vec::new();
    for e in &manifest.shards {
        let url = web::absolute(&format!("{base}{}", e.file));
        match from_cache(cache.as_ref(), &url, e).await {
            Some(b) => {
                p.files_done.set(p.files_done.get() + 1);
                p.add(b.len() as u64, true);
                files.insert(e.file.clone(), b);
            }
            None => missing.push((url, e)),
        }
    }
    let cached_bytes = p.done.get();
    let need: u64 = missing.iter().map(|(_, e)| e.bytes).sum();
    let free = web::storage_free().await;
    let mut note = cache_note;
    let mut will_cache = cache.is_some();
    if let (true, Some(f)) = (will_cache && need > 0, free) {
        if f < need + (16 << 20) {
            will_cache = false;
            note = Some(format!(
                "This browser has {} free for the site but the bundle needs {} more; it runs from memory this time and will be downloaded again next visit.",
                crate::format::bytes(f),
                crate::format::bytes(need)
            ));
        }
    }
    post(&FromWorker::Checked {
        adapter: backend_line.clone(),
        binding_needed,
        // The CPU path has no binding limit (0: the page shows no GPU line).
        binding_limit: gpu
            .as_ref()
            .map(|g| g.limits().max_storage_buffer_binding_size)
            .unwrap_or(0),
        bundle_bytes: total,
        cached_bytes,
        storage_free: free,
        will_cache,
        note: note.clone(),
    });
    p.post();
    // 4. The rest from the network, a few at a time, each verified before it is kept.
    let keep = Keep {
        cache: cache.clone(),
        on: Cell::new(will_cache),
        note: RefCell::new(None),
    };
    let fetched: Vec<(String, Vec<u8>)> = stream::iter(missing.iter())
        .map(|(url, e)| {
            let (p, keep) = (&p, &keep);
            async move {
                let b = download(url, e, p).await?;
                keep.put(url, &b).await;
                p.files_done.set(p.files_done.get() + 1);
                p.post();
                Ok::<_, FromWorker>((e.file.clone(), b))
            }
        })
        .buffer_unordered(PARALLEL)
        .try_collect()
        .await?;
    files.extend(fetched);
    p.post();
    if let Some(n) = keep.note.borrow().clone() {
        note = Some(n);
    }
    // 5. Drop cached files of this bundle that the manifest no longer names (an older build).
    if let Some(c) = &cache {
        drop_stale(c, &base, &manifest_url, &manifest).await;
    }
    // 6. The session (verifies every shard again as it takes it, then uploads the weights).
    let engine = start_session(gpu, &base, manifest, files)?;
    // 7. Every shard verified and the session loaded: only now is the manifest kept for the
    //    next visit (a manifest that fails any check never reaches the cache).
    if let (Some(c), true) = (&cache, keep.on.get()) {
        let _ = web::cache_put(c, &manifest_url, &manifest_bytes).await;
    }
    Ok(Loaded {
        engine,
        backend: backend_line,
        all_cached: need == 0,
        note,
    })
}

/// `g` with the tuning overrides of the worker's address (`?gpu_tuning=…`, passed on from the
/// page's), if any.
fn tuned(mut g: GpuContext) -> Result<GpuContext, EngineError> {
    let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let search = scope.location().search();
    if let Some(list) = crate::protocol::gpu_tuning_from_query(&search) {
        g.tuning = g.tuning.with_overrides("?gpu_tuning", &list)?;
    }
    Ok(g)
}

/// Step 2 of [`load_bundle`]: the GPU context to run on (`None`: the CPU path) and the line
/// that says where the engine runs and why.
async fn choose_backend(
    manifest: &Manifest,
    backend: BackendChoice,
) -> Result<(Option<GpuContext>, String), FromWorker> {
    let gpu = if backend == BackendChoice::Cpu {
        None
    } else if !web::has_webgpu() {
        if backend == BackendChoice::Gpu {
            return Err(fail(FailKind::NoWebGpu, NO_WEBGPU));
        }
        None
    } else {
        match GpuContext::new(requirements(manifest))
            .await
            .and_then(tuned)
        {
            Ok(g) => Some(g),
            Err(e) if backend == BackendChoice::Gpu => {
                return Err(match e {
                    EngineError::NoAdapter(_) => fail(
                        FailKind::NoWebGpu,
                        format!("{NO_WEBGPU} (The browser said: {e}.)"),
                    ),
                    EngineError::AdapterLimits { .. } => fail(
                        FailKind::Limits,
                        format!("Your GPU cannot run this bundle. {e}"),
                    ),
                    other => fail(FailKind::Internal, other.to_string()),
                })
            }
            // Auto: no usable adapter means the CPU path.
            Err(_) => None,
        }
    };
    let cpu_name = CpuBackend.describe();
    let (gpu, line) = match backend {
        BackendChoice::Cpu => (None, format!("{cpu_name} (set by ?backend=cpu)")),
        BackendChoice::Gpu => {
            let line = gpu
                .as_ref()
                .map(|g| format!("{} (set by ?backend=gpu)", g.adapter_description()))
                .unwrap_or_default();
            (gpu, line)
        }
        BackendChoice::Auto => match decide(gpu.as_ref(), CALIBRATION.0, CALIBRATION.1).await {
            Decision::Gpu(why) => (gpu, why),
            Decision::Cpu(why) => (None, why),
        },
    };
    // The chosen GPU's fused kernels checked against the plain ops (off where they differ).
    match gpu {
        Some(mut g) => match g.verify_fused().await {
            Ok(None) => Ok((Some(g), line)),
            Ok(Some(why)) => Ok((Some(g), format!("{line}; {why}"))),
            Err(e) => Err(fail(FailKind::Internal, e.to_string())),
        },
        None => Ok((None, line)),
    }
}

/// Step 5 of [`load_bundle`]: removes cached files under `base` that `manifest` no longer names.
async fn drop_stale(c: &Cache, base: &str, manifest_url: &str, manifest: &Manifest) {
    let prefix = web::absolute(base);
    for u in web::cache_urls(c).await {
        let name = u.strip_prefix(&prefix).unwrap_or("");
        if !name.is_empty()
            && u != manifest_url
            && !name.contains('/')
            && manifest.shard(name).is_none()
        {
            web::cache_delete(c, &u).await;
        }
    }
}

/// Step 6 of [`load_bundle`]: the session on the chosen backend, from the verified files.
fn start_session(
    gpu: Option<GpuContext>,
    base: &str,
    manifest: Manifest,
    files: BTreeMap<String, Vec<u8>>,
) -> Result<Engine, FromWorker> {
    let load_err = |e: EngineError| {
        let kind = if matches!(e, EngineError::DeviceLost(_)) {
            FailKind::DeviceLost
        } else {
            FailKind::Load
        };
        fail(kind, e.to_string())
    };
    Ok(match gpu {
        Some(gpu) => {
            let session = Session::from_files(&gpu, base, manifest, files, base_config(), CONTEXT)
                .map_err(load_err)?;
            Engine::Gpu(Rc::new(gpu), Box::new(session))
        }
        None => Engine::Cpu(Box::new(
            Session::from_files(&CpuBackend, base, manifest, files, base_config(), CONTEXT)
                .map_err(load_err)?,
        )),
    })
}
