//! The profile behind `lorekeeper bench --profile` (and the page's `bench_decode` with
//! `profile`): dispatches and submissions counted, and each dispatch timed with timestamp queries
//! where the device has them. A submission's timestamps come back through a map callback:
//! natively the submission is waited for; in the page they arrive while the caller awaits a
//! later readback (see [`crate::generate::profile_decode`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{lock, GpuContext, Pending};
use crate::backend::{KernelTime, Profile};

/// Timestamp queries per submission while profiling (two per dispatch).
const QUERIES: u32 = 1024;

/// A profile being counted.
pub(super) struct Prof {
    dispatches: u64,
    submissions: u64,
    kernels: HashMap<&'static str, KernelTime>,
    timer: Option<Timer>,
}

/// Timestamps around each dispatch of a submission, resolved and read at its end.
struct Timer {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    /// The kernel of each timed dispatch, in order (queries 2i, 2i + 1).
    labels: Vec<&'static str>,
    period_ns: f64,
    /// Submissions whose timestamps were asked for, and those read back so far: each one's
    /// labels with their (begin, end) ticks.
    asked: u64,
    arrived: Arc<Mutex<Vec<Timed>>>,
}

/// A submission's timed dispatches: labels and their timestamps, in order.
type Timed = (Vec<&'static str>, Vec<u64>);

impl Prof {
    /// The query set and first index for timing the next dispatch of `label`, if timed and the
    /// set has room.
    pub(super) fn timed_slot(&mut self, label: &'static str) -> Option<(&wgpu::QuerySet, u32)> {
        let t = self.timer.as_mut()?;
        if t.labels.len() as u32 >= QUERIES / 2 {
            return None;
        }
        t.labels.push(label);
        Some((&t.set, 2 * (t.labels.len() as u32 - 1)))
    }

    /// Counts a recorded dispatch of `label`; true when the query set is full, so the
    /// submission must end for its timestamps to be read.
    pub(super) fn count(&mut self, label: &'static str) -> bool {
        self.dispatches += 1;
        self.kernels.entry(label).or_default().count += 1;
        self.timer
            .as_ref()
            .is_some_and(|t| t.labels.len() as u32 >= QUERIES / 2)
    }
}

impl GpuContext {
    /// Submits `enc`; while profiling, counts the submission and, where its dispatches were
    /// timed, resolves their timestamps and adds each one's time to its kernel.
    pub(super) fn submit_profiled(&self, pending: &mut Pending, mut enc: wgpu::CommandEncoder) {
        let Some(pr) = pending.prof.as_mut() else {
            self.queue.submit([enc.finish()]);
            return;
        };
        pr.submissions += 1;
        let Some(t) = pr.timer.as_mut().filter(|t| !t.labels.is_empty()) else {
            self.queue.submit([enc.finish()]);
            return;
        };
        let n = 2 * t.labels.len() as u32;
        let bytes = n as u64 * 8;
        // A buffer of its own per submission: in the page several may be in flight.
        let read = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile read"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.resolve_query_set(&t.set, 0..n, &t.resolve, 0);
        enc.copy_buffer_to_buffer(&t.resolve, 0, &read, 0, bytes);
        self.queue.submit([enc.finish()]);
        t.asked += 1;
        let labels = std::mem::take(&mut t.labels);
        let arrived = t.arrived.clone();
        let buf = read.clone();
        read.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            if r.is_err() {
                return;
            }
            let times = match buf.slice(..).get_mapped_range() {
                Ok(view) => bytemuck::pod_collect_to_vec::<u8, u64>(&view),
                Err(_) => return,
            };
            buf.unmap();
            lock(&arrived).push((labels, times));
        });
        // Natively the timestamps are read now; the page's arrive with a later readback.
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
    }

    /// Notes the weight bytes a matmul dispatch reads, for the profile's bandwidth figures.
    pub(crate) fn note_weight_bytes(&self, label: &'static str, bytes: u64) {
        if let Some(pr) = lock(&self.pending).prof.as_mut() {
            pr.kernels.entry(label).or_default().weight_bytes += bytes;
        }
    }

    /// Starts a profile: dispatches and submissions counted, and each dispatch timed where the
    /// device has timestamp queries.
    pub fn start_profile(&self) {
        let mut pending = lock(&self.pending);
        self.submit_locked(&mut pending);
        let timer = self
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| Timer {
                set: self.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("profile"),
                    ty: wgpu::QueryType::Timestamp,
                    count: QUERIES,
                }),
                resolve: self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("profile resolve"),
                    size: QUERIES as u64 * 8,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
                labels: Vec::new(),
                period_ns: self.queue.get_timestamp_period() as f64,
                asked: 0,
                arrived: Arc::default(),
            });
        pending.prof = Some(Prof {
            dispatches: 0,
            submissions: 0,
            kernels: HashMap::new(),
            timer,
        });
    }

    /// The profile since [`GpuContext::start_profile`], which stops; `None` if none was started.
    pub fn take_profile(&self) -> Option<Profile> {
        let mut pending = lock(&self.pending);
        self.submit_locked(&mut pending);
        let mut pr = pending.prof.take()?;
        // Timed only if every submission's timestamps came back (in the page, the caller
        // awaits a readback after the last one).
        let mut timed = false;
        if let Some(t) = pr.timer.take() {
            let arrived = std::mem::take(&mut *lock(&t.arrived));
            timed = arrived.len() as u64 == t.asked;
            for (labels, times) in arrived {
                for (i, label) in labels.into_iter().enumerate() {
                    if let (Some(&a), Some(&b)) = (times.get(2 * i), times.get(2 * i + 1)) {
                        let ns = (b.saturating_sub(a) as f64 * t.period_ns) as u64;
                        pr.kernels.entry(label).or_default().ns += ns;
                    }
                }
            }
        }
        let mut kernels: Vec<KernelTime> = pr
            .kernels
            .into_iter()
            .map(|(label, k)| KernelTime { label, ..k })
            .collect();
        kernels.sort_by_key(|k| std::cmp::Reverse((k.ns, k.count)));
        Some(Profile {
            dispatches: pr.dispatches,
            submissions: pr.submissions,
            timed,
            kernels,
        })
    }
}
