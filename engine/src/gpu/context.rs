//! One GPU context for native wgpu and the browser's WebGPU.
//!
//! - Adapter selection, then the limits the workload needs ([`Requirements`]) checked against
//!   the adapter and requested explicitly; a shortfall is one error listing every missing limit
//!   with what the adapter offers.
//! - Pipelines cached by (shader label, override constants) and labelled.
//! - Ops are recorded into one compute pass of one command encoder, handed to the device every
//!   [`SUBMIT_EVERY`] dispatches so it starts while the CPU records the rest; their uniform
//!   parameters go into one ring buffer uploaded once per submission and bound at a dynamic
//!   offset, so each (kernel, buffers) bind group is built once and reused every token.
//! - A profile on request: dispatches and submissions counted, each kernel timed with
//!   timestamp queries where the adapter has them (natively and in the page).
//! - Readback through pooled staging buffers, awaited with a channel (works in wasm, where
//!   blocking is impossible; natively the device is polled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{EngineError, Result};

mod bindings;
mod profile;
mod tuning;

use bindings::{BindKey, Layout};
use profile::Prof;
pub use tuning::{Tuning, TUNING_ENV};

/// A WGSL module and its entry point. Pipelines are cached per (label, entry, override
/// constants), so the runtime needs nothing from the kernels but this description.
#[derive(Clone, Copy, Debug)]
pub struct Shader {
    /// Label: the cache key and the debug name in driver tools.
    pub label: &'static str,
    /// WGSL source.
    pub source: &'static str,
    /// Entry point.
    pub entry: &'static str,
}

/// `shader!("name")`: the [`Shader`] for `name.wgsl` beside the calling file, entry `main`;
/// `shader!("name", prelude)`: the same with `prelude.wgsl` prepended (`common`: workgroup size,
/// grid ids, reductions; `gemv_common`: the block GEMVs' parameters and row reduction);
/// `shader!("label" = "name", prelude, …)`: `name.wgsl` after several preludes, under its own
/// label (one kernel in several forms: attention over an f32 or an f16 cache).
#[macro_export]
#[doc(hidden)]
macro_rules! shader {
    ($name:literal) => {
        $crate::gpu::context::Shader {
            label: $name,
            source: include_str!(concat!($name, ".wgsl")),
            entry: "main",
        }
    };
    ($name:literal, $prelude:ident) => {
        $crate::gpu::context::Shader {
            label: $name,
            source: concat!(
                include_str!(concat!(stringify!($prelude), ".wgsl")),
                "\n",
                include_str!(concat!($name, ".wgsl"))
            ),
            entry: "main",
        }
    };
    ($label:literal = $name:literal, $($prelude:ident),+) => {
        $crate::gpu::context::Shader {
            label: $label,
            source: concat!(
                $(include_str!(concat!(stringify!($prelude), ".wgsl")), "\n",)+
                include_str!(concat!($name, ".wgsl"))
            ),
            entry: "main",
        }
    };
}

/// What a workload needs from the adapter. [`Requirements::default`] is what the kernels
/// themselves need; models raise `max_storage_binding` / `max_buffer` to their largest tensor.
#[derive(Clone, Copy, Debug)]
pub struct Requirements {
    /// Largest single storage binding in bytes.
    pub max_storage_binding: u64,
    /// Largest buffer in bytes.
    pub max_buffer: u64,
    /// Workgroup memory in bytes.
    pub workgroup_storage: u32,
    /// Invocations per workgroup.
    pub invocations: u32,
    /// Storage buffers bound in one kernel.
    pub storage_buffers_per_stage: u32,
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements {
            max_storage_binding: 128 << 20,
            max_buffer: 256 << 20,
            workgroup_storage: 16 << 10,
            invocations: 256,
            storage_buffers_per_stage: 8,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PipelineKey {
    label: &'static str,
    entry: &'static str,
    constants: Vec<(&'static str, u64)>,
}

/// Uniform ring size: 1024 dispatches of ≤256 bytes of parameters per submission.
const RING_BYTES: u64 = 256 << 10;
/// Dispatches recorded before they are submitted, so the device starts on a step while the
/// CPU records the rest of it.
pub const SUBMIT_EVERY: u32 = 96;
struct Pending {
    encoder: Option<wgpu::CommandEncoder>,
    /// The open compute pass of `encoder` (closed before copies and submission).
    pass: Option<wgpu::ComputePass<'static>>,
    uniforms: Vec<u8>,
    /// Dispatches recorded since the last submission.
    recorded: u32,
    prof: Option<Prof>,
}

/// The context: device, queue, caches. Cheap to share by reference.
pub struct GpuContext {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    /// Kernel tuning for this adapter.
    pub tuning: Tuning,
    modules: Mutex<HashMap<&'static str, wgpu::ShaderModule>>,
    layouts: Mutex<HashMap<&'static str, Arc<Layout>>>,
    pipelines: Mutex<HashMap<PipelineKey, (wgpu::ComputePipeline, Arc<Layout>)>>,
    binds: Mutex<HashMap<BindKey, wgpu::BindGroup>>,
    pending: Mutex<Pending>,
    ring: wgpu::Buffer,
    staging: Mutex<Vec<wgpu::Buffer>>,
    scratch: Mutex<Vec<(&'static str, wgpu::Buffer)>>,
    /// A 16-byte buffer bound where a kernel's optional input is unused.
    dummy: wgpu::Buffer,
    /// Two 16-byte buffers bound where a kernel's optional outputs are unused.
    dummy_out: [wgpu::Buffer; 2],
    errors: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
    /// The adapter's smallest subgroup, where the device has subgroups.
    subgroup_min: Option<u32>,
}

/// The step's command encoder, begun on first use.
fn encoder<'a>(
    slot: &'a mut Option<wgpu::CommandEncoder>,
    device: &wgpu::Device,
) -> &'a mut wgpu::CommandEncoder {
    slot.get_or_insert_with(|| {
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("step"),
        })
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked mid-op; the data is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuContext {
    /// Picks an adapter (high performance first), checks `req` against its limits and
    /// creates the device.
    pub async fn new(req: Requirements) -> Result<GpuContext> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if cfg!(target_arch = "wasm32") {
            desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        }
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| {
                EngineError::NoAdapter(if cfg!(target_arch = "wasm32") {
                    format!("{e}. This browser exposes no WebGPU adapter (navigator.gpu missing or disabled).")
                } else {
                    format!("{e}. Install a Vulkan, Metal or DX12 driver (on Linux without a GPU: Mesa's lavapipe, package mesa-vulkan-drivers).")
                })
            })?;
        Self::from_adapter(adapter, req).await
    }

    /// [`GpuContext::new`] for an adapter already chosen.
    pub async fn from_adapter(adapter: wgpu::Adapter, req: Requirements) -> Result<GpuContext> {
        #[allow(unused_mut)]
        let mut info = adapter.get_info();
        #[cfg(target_arch = "wasm32")]
        if info.name.is_empty() {
            info.name = browser_adapter_name().await;
        }
        let have = adapter.limits();
        let limits = required_limits(&info.name, &have, &req)?;
        // Timestamps for `lorekeeper bench --profile` and the page's profile, where the
        // adapter has them (used only while a profile runs).
        // Subgroups where the adapter has them (native Vulkan, Metal, DX12; wgpu's WebGPU
        // backend does not offer them): the GEMVs then sum a row's lanes by shuffles.
        let features =
            adapter.features() & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("lorekeeper"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| EngineError::RequestDevice(e.to_string()))?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&sink).push(e.to_string());
        }));
        let lost: Arc<Mutex<Option<String>>> = Arc::default();
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            *lock(&lost_sink) = Some(format!("{reason:?}: {msg}"));
        });
        let ring = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("uniform ring"),
            size: RING_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let unused = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        };
        let dummy = unused("unused binding");
        let dummy_out = [unused("unused output 1"), unused("unused output 2")];
        let subgroup_min = features
            .contains(wgpu::Features::SUBGROUP)
            .then_some(info.subgroup_min_size)
            .filter(|&n| n > 0);
        Ok(GpuContext {
            tuning: Tuning::for_adapter(&info).overridden(TUNING_ENV)?,
            device,
            queue,
            info,
            limits,
            modules: Mutex::default(),
            layouts: Mutex::default(),
            pipelines: Mutex::default(),
            binds: Mutex::default(),
            pending: Mutex::new(Pending {
                encoder: None,
                pass: None,
                uniforms: Vec::new(),
                recorded: 0,
                prof: None,
            }),
            ring,
            staging: Mutex::default(),
            scratch: Mutex::default(),
            dummy,
            dummy_out,
            errors,
            lost,
            subgroup_min,
        })
    }

    /// Blocking constructor for native code.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking(req: Requirements) -> Result<GpuContext> {
        pollster::block_on(Self::new(req))
    }

    /// The adapter as the driver names it, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]`.
    pub fn adapter_description(&self) -> String {
        format!(
            "{} [{:?}, {:?}]",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    /// The adapter's smallest subgroup (invocations), where the device has subgroups.
    pub fn subgroup_min(&self) -> Option<u32> {
        self.subgroup_min
    }

    /// Whether the GEMVs sum a row's lanes by subgroup shuffles (`gemv_reduce_sg.wgsl`): the
    /// device has subgroups, the tuning allows them (`gemv_subgroups`), and a row's lanes
    /// (more than one) fit in the adapter's smallest subgroup.
    pub fn subgroup_rows(&self) -> bool {
        let tpr = self.tuning.gemv_tpr;
        self.tuning.gemv_subgroups && tpr > 1 && self.subgroup_min.is_some_and(|min| tpr <= min)
    }

    /// The adapter's information.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// Limits the device was created with.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// The wgpu device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Fails with the first driver error or device loss reported so far.
    pub fn check_errors(&self) -> Result<()> {
        if let Some(reason) = lock(&self.lost).clone() {
            return Err(EngineError::DeviceLost(reason));
        }
        let mut errs = lock(&self.errors);
        if !errs.is_empty() {
            let msg = errs.join("\n");
            errs.clear();
            return Err(EngineError::Gpu(msg));
        }
        Ok(())
    }

    /// A storage buffer; fails with a clear error past the device's limits.
    pub(crate) fn create_storage(
        &self,
        label: &str,
        bytes: u64,
        extra: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer> {
        // Whole 16-byte elements, so a kernel may read any buffer as an array of vec4.
        let bytes = bytes.max(16).next_multiple_of(16);
        if bytes > self.limits.max_storage_buffer_binding_size {
            return Err(EngineError::TooLarge {
                label: label.into(),
                bytes,
                limit: self.limits.max_storage_buffer_binding_size,
                what: "storage binding",
            });
        }
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST
                | extra,
            mapped_at_creation: false,
        }))
    }

    fn pipeline(
        &self,
        shader: &Shader,
        constants: &[(&'static str, u32)],
    ) -> Result<(wgpu::ComputePipeline, Arc<Layout>)> {
        let key = PipelineKey {
            label: shader.label,
            entry: shader.entry,
            constants: constants.iter().map(|&(n, v)| (n, v as u64)).collect(),
        };
        if let Some(p) = lock(&self.pipelines).get(&key) {
            return Ok(p.clone());
        }
        let layout = self.layout(shader)?;
        let module = {
            let mut modules = lock(&self.modules);
            modules
                .entry(shader.label)
                .or_insert_with(|| {
                    self.device
                        .create_shader_module(wgpu::ShaderModuleDescriptor {
                            label: Some(shader.label),
                            source: wgpu::ShaderSource::Wgsl(shader.source.into()),
                        })
                })
                .clone()
        };
        let consts: Vec<(&str, f64)> = constants.iter().map(|&(n, v)| (n, v as f64)).collect();
        let label = format!(
            "{}:{}{}",
            shader.label,
            shader.entry,
            constants
                .iter()
                .map(|(n, v)| format!(" {n}={v}"))
                .collect::<String>()
        );
        let p = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: Some(&layout.pipeline),
                module: &module,
                entry_point: Some(shader.entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &consts,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        lock(&self.pipelines).insert(key, (p.clone(), layout.clone()));
        Ok((p, layout))
    }

    /// Number of pipelines compiled so far (for tests of the cache).
    pub fn pipeline_count(&self) -> usize {
        lock(&self.pipelines).len()
    }

    /// Number of bind groups built and kept so far (for tests that a token's ops build none).
    pub fn bind_group_count(&self) -> usize {
        lock(&self.binds).len()
    }

    /// Records one dispatch: `params` become binding 0 (uniform), `buffers` bindings 1.. in order.
    pub(crate) fn dispatch(
        &self,
        shader: &Shader,
        constants: &[(&'static str, u32)],
        params: &[u8],
        buffers: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) -> Result<()> {
        let max = self.limits.max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > max) {
            return Err(EngineError::Shape {
                op: shader.label,
                detail: format!("dispatch {groups:?} exceeds {max} workgroups per dimension"),
            });
        }
        if groups.contains(&0) {
            return Ok(());
        }
        let (pipeline, layout) = self.pipeline(shader, constants)?;
        let align = self.limits.min_uniform_buffer_offset_alignment as usize;
        let mut pending = lock(&self.pending);
        let padded = params.len().next_multiple_of(16);
        let mut offset = pending.uniforms.len().next_multiple_of(align);
        if offset + padded > RING_BYTES as usize {
            self.submit_locked(&mut pending);
            offset = 0;
        }
        pending.uniforms.resize(offset, 0);
        pending.uniforms.extend_from_slice(params);
        pending.uniforms.resize(offset + padded, 0);
        let bind = self.bind_group(shader.label, &layout, padded as u64, buffers);
        let p = &mut *pending;
        let enc = encoder(&mut p.encoder, &self.device);
        let record = |pass: &mut wgpu::ComputePass<'_>| {
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[offset as u32]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        };
        match p.prof.as_mut().and_then(|pr| pr.timed_slot(shader.label)) {
            Some((set, i)) => {
                // Timed: this dispatch alone in a pass with timestamps at its ends.
                p.pass = None;
                record(&mut enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(shader.label),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: set,
                        beginning_of_pass_write_index: Some(i),
                        end_of_pass_write_index: Some(i + 1),
                    }),
                }));
            }
            None => record(p.pass.get_or_insert_with(|| {
                enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("step"),
                    timestamp_writes: None,
                })
                .forget_lifetime()
            })),
        }
        p.recorded += 1;
        let full = p.prof.as_mut().is_some_and(|pr| pr.count(shader.label));
        if p.recorded >= SUBMIT_EVERY || full {
            self.submit_locked(p);
        }
        Ok(())
    }

    /// Records a buffer-to-buffer copy in order with the dispatches.
    pub(crate) fn copy_buffer(
        &self,
        src: &wgpu::Buffer,
        src_off: u64,
        dst: &wgpu::Buffer,
        dst_off: u64,
        bytes: u64,
    ) {
        if bytes == 0 {
            return;
        }
        let mut pending = lock(&self.pending);
        pending.pass = None;
        encoder(&mut pending.encoder, &self.device)
            .copy_buffer_to_buffer(src, src_off, dst, dst_off, bytes);
    }

    /// Writes `data` into `buf` ordered after everything recorded so far.
    pub(crate) fn write_buffer(&self, buf: &wgpu::Buffer, offset: u64, data: &[u8]) {
        // queue.write_buffer lands before the *next* submission; submit what is recorded
        // first so the write cannot overtake earlier ops.
        let mut pending = lock(&self.pending);
        if pending.encoder.is_some() {
            self.submit_locked(&mut pending);
        }
        self.queue.write_buffer(buf, offset, data);
    }

    fn submit_locked(&self, pending: &mut Pending) {
        pending.pass = None;
        pending.recorded = 0;
        if !pending.uniforms.is_empty() {
            self.queue.write_buffer(&self.ring, 0, &pending.uniforms);
            pending.uniforms.clear();
        }
        if let Some(enc) = pending.encoder.take() {
            self.submit_profiled(pending, enc);
        }
    }

    /// Submits everything recorded so far as one submission.
    pub fn flush(&self) -> Result<()> {
        let mut pending = lock(&self.pending);
        self.submit_locked(&mut pending);
        drop(pending);
        self.check_errors()
    }

    /// Reads back byte ranges of several buffers with one submission and one map.
    pub(crate) async fn read_ranges(
        &self,
        ranges: &[(&wgpu::Buffer, u64, u64)],
    ) -> Result<Vec<Vec<u8>>> {
        let total: u64 = ranges.iter().map(|r| r.2.next_multiple_of(8)).sum();
        let staging = self.take_staging(total.max(8));
        let mut at = 0;
        for &(buf, off, len) in ranges {
            self.copy_buffer(buf, off, &staging, at, len);
            at += len.next_multiple_of(8);
        }
        self.flush()?;
        let (tx, rx) = futures_channel::oneshot::channel();
        let size = total.max(8);
        staging
            .slice(..size)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| EngineError::Readback {
                label: "staging".into(),
                reason: e.to_string(),
            })?;
        let mapped = rx.await.map_err(|_| EngineError::Readback {
            label: "staging".into(),
            reason: "the map callback was dropped (device lost?)".into(),
        })?;
        mapped.map_err(|e| EngineError::Readback {
            label: "staging".into(),
            reason: e.to_string(),
        })?;
        let mut out = Vec::with_capacity(ranges.len());
        {
            let view =
                staging
                    .slice(..size)
                    .get_mapped_range()
                    .map_err(|e| EngineError::Readback {
                        label: "staging".into(),
                        reason: e.to_string(),
                    })?;
            let mut at = 0usize;
            for &(_, _, len) in ranges {
                out.push(view[at..at + len as usize].to_vec());
                at += (len as usize).next_multiple_of(8);
            }
        }
        staging.unmap();
        lock(&self.staging).push(staging);
        self.check_errors()?;
        Ok(out)
    }

    /// A storage buffer of at least `bytes` for an op's temporaries, from a pool. Give it back
    /// with [`GpuContext::give_scratch`] under the same `label` once the op's work is
    /// recorded: a later `write_buffer` submits recorded work before writing, and later
    /// dispatches run after earlier ones, so reuse never overtakes a pending use. The pool
    /// hands back the buffer last given under `label` when it fits, so an op called again
    /// (each token) binds the same buffers and finds its bind groups in the cache; only when
    /// none under its label fits does it take another label's or a new one.
    pub(crate) fn take_scratch(&self, label: &'static str, bytes: u64) -> Result<wgpu::Buffer> {
        let bytes = bytes.max(16).next_multiple_of(256);
        let fits = |b: &wgpu::Buffer| b.size() >= bytes && b.size() <= 4 * bytes;
        let mut pool = lock(&self.scratch);
        let at = (pool.iter().rposition(|(l, b)| *l == label && fits(b)))
            .or_else(|| pool.iter().rposition(|(_, b)| fits(b)));
        if let Some(i) = at {
            return Ok(pool.remove(i).1);
        }
        drop(pool);
        self.create_storage(label, bytes, wgpu::BufferUsages::empty())
    }

    /// Returns a scratch buffer taken under `label` to the pool (which keeps the 32 given
    /// last).
    pub(crate) fn give_scratch(&self, label: &'static str, buf: wgpu::Buffer) {
        let mut pool = lock(&self.scratch);
        if pool.len() == 32 {
            pool.remove(0);
        }
        pool.push((label, buf));
    }

    fn take_staging(&self, size: u64) -> wgpu::Buffer {
        let mut pool = lock(&self.staging);
        if let Some(i) = pool.iter().position(|b| b.size() >= size) {
            return pool.swap_remove(i);
        }
        drop(pool);
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback staging"),
            size: size.next_multiple_of(256),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// The 16-byte placeholder for unused optional bindings.
    pub(crate) fn dummy(&self) -> &wgpu::Buffer {
        &self.dummy
    }

    /// Buffers for unused writable bindings, one per binding of a dispatch: browsers refuse
    /// one buffer bound writable twice in a dispatch, and read-only beside writable anywhere.
    pub(crate) fn dummy_out(&self, i: usize) -> &wgpu::Buffer {
        &self.dummy_out[i % 2]
    }
}

/// The browser's own words for its adapter (`GPUAdapterInfo` vendor, architecture,
/// description), which wgpu leaves empty: e.g. `google swiftshader`.
#[cfg(target_arch = "wasm32")]
async fn browser_adapter_name() -> String {
    use wasm_bindgen::{JsCast, JsValue};
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k)).ok();
    let global = js_sys::global();
    let Some(gpu) = get(&global, "navigator").and_then(|n| get(&n, "gpu")) else {
        return "WebGPU (unnamed)".into();
    };
    let Some(request) =
        get(&gpu, "requestAdapter").and_then(|f| f.dyn_into::<js_sys::Function>().ok())
    else {
        return "WebGPU (unnamed)".into();
    };
    let Ok(promise) = request
        .call0(&gpu)
        .and_then(|p| p.dyn_into::<js_sys::Promise>())
    else {
        return "WebGPU (unnamed)".into();
    };
    let Ok(adapter) = wasm_bindgen_futures::JsFuture::from(promise).await else {
        return "WebGPU (unnamed)".into();
    };
    let Some(info) = get(&adapter, "info") else {
        return "WebGPU (unnamed)".into();
    };
    let words: Vec<String> = ["vendor", "architecture", "description"]
        .iter()
        .filter_map(|k| get(&info, k).and_then(|v| v.as_string()))
        .filter(|s| !s.is_empty())
        .collect();
    if words.is_empty() {
        "WebGPU (unnamed)".into()
    } else {
        words.join(" ")
    }
}

/// Limits to request: WebGPU's defaults raised to the workload's needs. Fails listing every
/// limit the adapter cannot meet.
fn required_limits(adapter: &str, have: &wgpu::Limits, req: &Requirements) -> Result<wgpu::Limits> {
    let mut l = wgpu::Limits::downlevel_defaults();
    let mut missing = Vec::new();
    let mut need64 = |name: &str, need: u64, offered: u64, slot: &mut u64| {
        if need > offered {
            missing.push(format!("- {name}: need {need}, adapter offers {offered}"));
        }
        *slot = (*slot).max(need).min(offered);
    };
    need64(
        "max_storage_buffer_binding_size",
        req.max_storage_binding,
        have.max_storage_buffer_binding_size,
        &mut l.max_storage_buffer_binding_size,
    );
    need64(
        "max_buffer_size",
        req.max_buffer,
        have.max_buffer_size,
        &mut l.max_buffer_size,
    );
    let mut need32 = |name: &str, need: u32, offered: u32, slot: &mut u32| {
        if need > offered {
            missing.push(format!("- {name}: need {need}, adapter offers {offered}"));
        }
        *slot = (*slot).max(need).min(offered);
    };
    need32(
        "max_compute_workgroup_storage_size",
        req.workgroup_storage,
        have.max_compute_workgroup_storage_size,
        &mut l.max_compute_workgroup_storage_size,
    );
    need32(
        "max_compute_invocations_per_workgroup",
        req.invocations,
        have.max_compute_invocations_per_workgroup,
        &mut l.max_compute_invocations_per_workgroup,
    );
    need32(
        "max_compute_workgroup_size_x",
        req.invocations,
        have.max_compute_workgroup_size_x,
        &mut l.max_compute_workgroup_size_x,
    );
    need32(
        "max_storage_buffers_per_shader_stage",
        req.storage_buffers_per_stage,
        have.max_storage_buffers_per_shader_stage,
        &mut l.max_storage_buffers_per_shader_stage,
    );
    if !missing.is_empty() {
        return Err(EngineError::AdapterLimits {
            adapter: adapter.into(),
            missing: missing.join("\n"),
        });
    }
    Ok(l)
}

/// Splits a large 1-D workgroup count into a 2-D grid within the per-dimension limit; kernels
/// recover the linear id as `wid.x + wid.y * num_workgroups.x`.
pub(crate) fn grid(total: u32) -> [u32; 3] {
    const MAX: u32 = 65535;
    if total <= MAX {
        [total, 1, 1]
    } else {
        let y = total.div_ceil(MAX);
        [total.div_ceil(y), y, 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_error_lists_every_shortfall() {
        let mut have = wgpu::Limits::downlevel_defaults();
        have.max_storage_buffer_binding_size = 64 << 20;
        have.max_compute_invocations_per_workgroup = 128;
        let e = required_limits("tiny", &have, &Requirements::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_storage_buffer_binding_size: need 134217728, adapter offers 67108864"),
            "{e}"
        );
        assert!(
            e.contains("max_compute_invocations_per_workgroup: need 256, adapter offers 128"),
            "{e}"
        );
        assert!(e.contains("tiny"));
    }

    #[test]
    fn grid_covers_total() {
        for t in [1u32, 65535, 65536, 151936, 1_000_000] {
            let g = grid(t);
            assert!(g[0] <= 65535 && g[1] <= 65535);
            assert!(g[0] as u64 * g[1] as u64 >= t as u64);
        }
    }
}
