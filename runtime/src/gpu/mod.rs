//! The wgpu backend: one device and queue, a pipeline cache, a buffer pool, and chunked
//! launches of batches of any size.
//!
//! [`pipelines`] compiles each kernel once per device; [`sets`] keeps the buffers of a
//! launch for reuse; [`launch`] cuts a batch into chunks and streams them through;
//! [`resident`] keeps buffers on the device and records launches over them;
//! [`timing`] measures kernels and transfers for the benches.

mod batched_lm;
mod bind_cache;
mod gather;
mod gather_rows;
mod host_memory;
mod launch;
mod least_squares;
mod optim;
mod passes;
mod pinned;
mod pipelines;
mod products;
mod resident;
mod sets;
mod sizes;
pub(crate) use sizes::sized_by_runtime;
mod timing;
mod transfer;
mod vectors;
mod waves;

pub(crate) use bind_cache::OwnedBuffer;
pub(crate) use passes::GpuWork;
pub(crate) use pinned::PinnedHost;

use crate::error::Error;
use crate::fast_hash::FastMap;
use crate::spec::KernelSpec;
use pipelines::Pipeline;
use sets::LaunchSet;
use std::sync::{Arc, Mutex, PoisonError};

/// Largest buffer the runtime allocates for one chunk, whatever the device allows: keeps
/// staging memory bounded, and makes a large batch a stream of chunks whose copies in and
/// out overlap the GPU's work on their neighbours.
pub(super) const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// Largest device buffer of one chunk of a launch whose input and outputs are all in pinned
/// memory (`pinned.rs`): no staging memory to bound, and fewer, larger chunks ran faster on
/// the H100 (`value_and_grad_into` at 2^24: 12.8 ms in one chunk of 256 MiB, 14.5 in two,
/// 15.7-16.2 in four of 64 MiB; BENCHMARKS.md, "Pinned memory"). Such a launch keeps its
/// two sets' device buffers for the next, as every launch does: up to 256 MiB a buffer.
pub(super) const MAX_PINNED_CHUNK_BYTES: u64 = 256 << 20;

/// Largest storage binding, in bytes, on any backend (see [`Gpu::binding_bytes`]).
pub(super) const MAX_BINDING_BYTES: u64 = (1 << 31) - 16;

/// Smallest launch set, in elements: small batches of different sizes share one.
pub(super) const MIN_CAPACITY: usize = 1024;

/// How many idle launch sets of one kernel and capacity are kept: two, the depth of the
/// chunk pipeline.
pub(super) const SETS_PER_KEY: usize = 2;

/// Bytes at the start of an upload buffer for the uniform `Params` (the element count).
pub(super) const PARAMS_BYTES: u64 = 16;

/// Workgroups a launch of a kernel that reduces `#[shared]` gradients is cut into, at
/// most, where one wave of the device's multiprocessors is not known (`waves.rs`): past
/// 512 x 256 elements each thread takes several, and adds their shared gradients up in
/// registers before its workgroup sums them (with one element per thread, the workgroup
/// sum of 161 words was 84% of the 8-16-1 network's adjoint). Enough
/// workgroups to keep every SM of a large GPU busy (132 on the H100), few enough that the
/// sum is paid once per many elements: on the H100, the network's adjoint at 2^24 took
/// 1.45, 1.34, 1.42, 1.75 and 2.07 ms with at most 256, 512, 1,024, 2,048 and 4,096.
pub(super) const REDUCE_GROUPS: u64 = 512;

/// Pipelines by the address and length of their WGSL and their entry point: generated
/// specs are statics, so a module's text is one allocation for the program's lifetime.
/// A compiled pipeline's identity: its WGSL (address and length), its entry point, and the
/// workgroup size it is compiled for (0 for a module without
/// [`crate::spec::WORKGROUP_SIZE_OVERRIDE`]).
pub(super) type PipelineKey = (usize, usize, &'static str, u32);

/// An open GPU.
pub(crate) struct Gpu {
    /// Kept for its report of live wgpu objects ([`Gpu::resource_counts`]).
    instance: wgpu::Instance,
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    timestamps: bool,
    /// Whether the device was opened with `SHADER_F64`.
    f64: bool,
    /// Whether kernels may bind mapped buffers (`MAPPABLE_PRIMARY_BUFFERS`).
    mappable_bindings: bool,
    pipelines: Mutex<FastMap<PipelineKey, Arc<Pipeline>>>,
    /// Idle launch sets by kernel, capacity and whether they are pinned launches' (whose
    /// upload and staging buffers hold no elements).
    sets: Mutex<FastMap<(PipelineKey, usize, bool), Vec<LaunchSet>>>,
    /// Per kernel, the partial sums of resident launches that reduce shared gradients.
    scratch: Mutex<FastMap<PipelineKey, wgpu::Buffer>>,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<Mutex<Option<String>>>,
    /// Bind groups of recorded dispatches, for the next identical one.
    bind_cache: Arc<bind_cache::BindCache>,
    /// The longest wait for the GPU, in milliseconds ([`crate::Device::set_timeout`]).
    timeout_ms: std::sync::atomic::AtomicU64,
    /// Whether gathered adjoints may launch by rows ([`crate::Device::set_gather_by_rows`]).
    pub(super) by_rows: std::sync::atomic::AtomicBool,
    /// Staging buffers kept between uploads and readbacks.
    staging: Mutex<transfer::StagingPool>,
    /// Per kernel sized by the runtime, its specs at other workgroup sizes and the one
    /// chosen (`sizes.rs`).
    sizes: Mutex<FastMap<PipelineKey, sizes::KernelSizes>>,
    /// Whether large launches choose workgroup sizes on a CPU adapter too
    /// ([`crate::Device::choose_sizes_on_any_adapter`]).
    pub(super) sizes_on_any_adapter: std::sync::atomic::AtomicBool,
    /// Whether uploads stage through host memory where the device has it
    /// (`host_memory.rs`; [`crate::Device::set_host_staging`]).
    host_staging: std::sync::atomic::AtomicBool,
    /// Whether the device has host memory to stage uploads in, once probed.
    host_memory: std::sync::OnceLock<bool>,
    /// The pinned allocations made by this device ([`crate::Pinned`]), found by address.
    pinned: pinned::Registry,
    /// Copies made straight between pinned memory and device buffers.
    pinned_copies: std::sync::atomic::AtomicU64,
    /// A lower bound on launches' chunk bytes than [`MAX_CHUNK_BYTES`], for tests
    /// ([`crate::Device::set_chunk_bytes`]).
    chunk_bytes: std::sync::atomic::AtomicU64,
    /// The workgroup memory launches take the device to have: its limit, unless a test
    /// set another ([`crate::Device::set_workgroup_bytes`]).
    workgroup_bytes: std::sync::atomic::AtomicU32,
    /// The device's multiprocessors where its driver reports them, else 0 (`waves.rs`).
    multiprocessors: std::sync::atomic::AtomicU32,
}

/// How long a wait for the GPU lasts before it is an [`Error::Timeout`], unless the user
/// sets another: far past any submission the runtime makes (each is cut to
/// [`KernelSpec::WORK_PER_SUBMISSION`] operations), so only a hung device reaches it.
pub(crate) const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves the data consistent (we only insert
    // and remove whole entries), so poisoning is not an error here.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Gpu {
    /// The kernel a launch of `spec` runs on this device: `spec`, or its fallback where the
    /// device has less workgroup memory than `spec` needs ([`KernelSpec::for_workgroup_bytes`]).
    pub(crate) fn runnable(&self, spec: &'static KernelSpec) -> Result<&'static KernelSpec, Error> {
        spec.for_workgroup_bytes(self.workgroup_bytes())
    }

    /// The workgroup memory launches take the device to have ([`Gpu::runnable`]).
    pub(crate) fn workgroup_bytes(&self) -> u32 {
        self.workgroup_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Takes the device to have `bytes` of workgroup memory ([`crate::Device::set_workgroup_bytes`]).
    pub(crate) fn set_workgroup_bytes(&self, bytes: u32) {
        (self.workgroup_bytes).store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// The workgroups `(x, y)` of a dispatch of `groups` workgroups: rows of at most the
    /// device's per-dimension limit, the second dimension counting rows.
    pub(super) fn workgroups(&self, groups: u64) -> (u32, u32) {
        let limit = self.limits.max_compute_workgroups_per_dimension as u64;
        let y = groups.div_ceil(limit).max(1);
        (groups.div_ceil(y) as u32, y as u32)
    }
}

pub(super) fn key(spec: &'static KernelSpec) -> PipelineKey {
    (
        spec.wgsl.as_ptr() as usize,
        spec.wgsl.len(),
        spec.entry_point,
        spec.workgroup_size,
    )
}

/// The key of a module whose workgroup size is its own (the runtime's passes, a
/// reduction's second pass): entry point `entry` of `wgsl`.
pub(super) fn module_key(wgsl: &'static str, entry: &'static str) -> PipelineKey {
    (wgsl.as_ptr() as usize, wgsl.len(), entry, 0)
}

impl Gpu {
    /// Opens the first high-performance adapter, with the adapter's full limits.
    pub(crate) fn open() -> Result<Gpu, Error> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| Error::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        // Timestamp queries, where the adapter has them, time kernels for benchmarks.
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        // 64-bit floats in shaders, where the adapter has them: f64 kernels need them.
        let f64 = adapter.features().contains(wgpu::Features::SHADER_F64)
            && !crate::spec::env_flag(crate::spec::DISABLE_F64_ENV);
        // Mapped buffers bound by kernels, where the adapter allows it: small launches bind
        // their upload and staging buffers and copy nothing (`sets.rs`).
        let mappable_bindings = adapter
            .features()
            .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS);
        let mut required_features = wgpu::Features::empty();
        required_features.set(wgpu::Features::TIMESTAMP_QUERY, timestamps);
        required_features.set(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS, mappable_bindings);
        required_features.set(wgpu::Features::SHADER_F64, f64);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("gradfuse"),
            required_features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::RequestDevice(e.to_string()))?;
        let lost = Arc::new(Mutex::new(None));
        let lost_cb = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            *lock(&lost_cb) = Some(format!("{reason:?}: {msg}"));
        });
        // Errors are caught by scopes around every operation; an uncaptured one (which
        // would be a gradfuse bug) is logged instead of aborting the user's program.
        // Launches push no error scopes (they cost a quarter of a small launch's latency):
        // an error there is caught here and returned by the launch that sees it.
        let uncaptured = Arc::new(Mutex::new(None));
        let slot = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            log::error!("gradfuse: wgpu error: {e}");
            let mut slot = lock(&slot);
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        let workgroup_bytes = limits.max_compute_workgroup_storage_size.into();
        let multiprocessors = waves::multiprocessors(&device).unwrap_or(0).into();
        Ok(Gpu {
            workgroup_bytes,
            multiprocessors,
            instance,
            device,
            queue,
            info,
            limits,
            timestamps,
            f64,
            mappable_bindings,
            pipelines: Mutex::new(FastMap::default()),
            sets: Mutex::new(FastMap::default()),
            scratch: Mutex::new(FastMap::default()),
            lost,
            uncaptured,
            bind_cache: Arc::default(),
            timeout_ms: (DEFAULT_TIMEOUT.as_millis() as u64).into(),
            by_rows: true.into(),
            staging: Default::default(),
            sizes: Mutex::new(FastMap::default()),
            sizes_on_any_adapter: false.into(),
            host_staging: true.into(),
            host_memory: std::sync::OnceLock::new(),
            pinned: Default::default(),
            pinned_copies: 0.into(),
            chunk_bytes: u64::MAX.into(),
        })
    }

    /// Whether kernels may compute in f64.
    pub(crate) fn has_f64(&self) -> bool {
        self.f64
    }

    /// The adapter, for [`crate::Device::describe`].
    pub(crate) fn describe(&self) -> String {
        let multiprocessors = match self
            .multiprocessors
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => String::new(),
            n => format!(", {n} multiprocessors"),
        };
        format!(
            "{} ({:?}, {:?}, driver {} {}{multiprocessors})",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.info.driver,
            self.info.driver_info
        )
    }

    /// How many wgpu objects of each kind the instance holds now (IDs allocated).
    pub(crate) fn resource_counts(&self) -> Option<crate::ResourceCounts> {
        let report = self.instance.generate_report()?;
        let hub = report.hub_report();
        Some(crate::ResourceCounts {
            buffers: hub.buffers.num_allocated,
            bind_groups: hub.bind_groups.num_allocated,
            bind_group_layouts: hub.bind_group_layouts.num_allocated,
            compute_pipelines: hub.compute_pipelines.num_allocated,
            shader_modules: hub.shader_modules.num_allocated,
            command_encoders: hub.command_encoders.num_allocated,
            command_buffers: hub.command_buffers.num_allocated,
            query_sets: hub.query_sets.num_allocated,
        })
    }

    /// The longest wait for the GPU.
    pub(crate) fn timeout(&self) -> std::time::Duration {
        let ms = self.timeout_ms.load(std::sync::atomic::Ordering::Relaxed);
        std::time::Duration::from_millis(ms)
    }

    /// Sets the longest wait for the GPU (at least a millisecond).
    pub(crate) fn set_timeout(&self, timeout: std::time::Duration) {
        let ms = (timeout.as_millis() as u64).max(1);
        self.timeout_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Destroys the wgpu device, as a driver reset or a removed GPU would. A loss the
    /// driver reports reaches the lost callback at once (wgpu-core's `Device::lose`);
    /// `destroy` defers it until the queue drains, which other threads' work may delay
    /// indefinitely, so the loss is recorded here as the driver's path would.
    pub(crate) fn destroy(&self) {
        self.device.destroy();
        let mut lost = lock(&self.lost);
        if lost.is_none() {
            *lost = Some("Destroyed: the device was destroyed".into());
        }
    }

    /// Whether the adapter is a CPU implementation (lavapipe, WARP, SwiftShader).
    pub(crate) fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// `e`, or [`Error::DeviceLost`] where the device is lost: a lost device makes every
    /// later operation fail with whatever error wgpu meets first (an invalid buffer, a
    /// failed map, a submission that never happened), and wgpu reports the loss itself
    /// only from a poll once the queue is empty.
    pub(crate) fn lost_or(&self, e: Error) -> Error {
        // Only what wgpu reports can hide a loss; the runtime's own checks cannot.
        if !matches!(
            e,
            Error::Readback(_) | Error::Validation { .. } | Error::OutOfMemory(_)
        ) {
            return e;
        }
        // wgpu calls the lost callback once the queue has drained: wait for that, briefly.
        let _ = self.device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(std::time::Duration::from_millis(500)),
        });
        self.check_lost().err().unwrap_or(e)
    }

    /// [`Gpu::lost_or`] on a result's error.
    pub(crate) fn surface<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        r.map_err(|e| self.lost_or(e))
    }

    pub(super) fn check_lost(&self) -> Result<(), Error> {
        match &*lock(&self.lost) {
            Some(msg) => Err(Error::DeviceLost(msg.clone())),
            None => Ok(()),
        }
    }

    /// Pops the error scopes of a launch, turning what they caught into errors.
    pub(super) fn pop_scopes(
        &self,
        spec: &KernelSpec,
        oom: wgpu::ErrorScopeGuard,
        validation: wgpu::ErrorScopeGuard,
    ) -> Result<(), Error> {
        let validation_err = pollster::block_on(validation.pop());
        let oom_err = pollster::block_on(oom.pop());
        if let Some(e) = oom_err {
            return Err(Error::OutOfMemory(e.to_string()));
        }
        if let Some(e) = validation_err {
            return Err(Error::Validation {
                label: spec.label.to_string(),
                message: e.to_string(),
            });
        }
        Ok(())
    }

    pub(super) fn buffer(
        &self,
        label: &str,
        usage: wgpu::BufferUsages,
        bytes: u64,
    ) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(16),
            usage,
            mapped_at_creation: false,
        })
    }
}
