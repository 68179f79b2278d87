//! The wgpu backend: one device and queue, a pipeline cache, a buffer pool, and chunked
//! launches of batches of any size.

use crate::error::Error;
use crate::spec::{KernelSpec, KernelTime};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Largest buffer the runtime allocates for one chunk, whatever the device allows: keeps
/// staging memory bounded, and makes a large batch a stream of chunks whose copies in and
/// out overlap the GPU's work on their neighbours.
const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// Smallest launch set, in elements: small batches of different sizes share one.
const MIN_CAPACITY: usize = 1024;

/// How many idle launch sets of one kernel and capacity are kept: two, the depth of the
/// chunk pipeline.
const SETS_PER_KEY: usize = 2;

/// Bytes at the start of an upload buffer for the uniform `Params` (the element count).
const PARAMS_BYTES: u64 = 16;

/// Workgroups a launch of a kernel that reduces `#[shared]` gradients is cut into, at
/// most: past 512 x 256 elements each thread takes several, and adds their shared
/// gradients up in registers before its workgroup sums them (with one element per thread,
/// the workgroup sum of 161 words was 84% of the 8-16-1 network's adjoint). Enough
/// workgroups to keep every SM of a large GPU busy (132 on the H100), few enough that the
/// sum is paid once per many elements: on the H100, the network's adjoint at 2^24 took
/// 1.45, 1.34, 1.42, 1.75 and 2.07 ms with at most 256, 512, 1,024, 2,048 and 4,096.
const REDUCE_GROUPS: u64 = 512;

/// How a launch of `m` elements is dispatched: workgroups in x and y, and the elements each
/// thread takes (1 but for kernels that reduce shared gradients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LaunchShape {
    x: u32,
    y: u32,
    per_thread: u32,
}

impl LaunchShape {
    /// Workgroups dispatched: one partial sum each, for a reducing kernel.
    fn groups(&self) -> u32 {
        self.x * self.y
    }

    /// The kernel's uniform `Params`: the element count, the elements per thread.
    fn params(&self, m: usize) -> [u32; 4] {
        [m as u32, self.per_thread, 0, 0]
    }

    /// The uniform `Params` of the reduction's second pass: one partial per workgroup.
    fn reduce_params(&self) -> [u32; 4] {
        [self.groups(), 0, 0, 0]
    }
}

/// A compiled pipeline and its bind group layout.
struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// The pipelines of one launch: the kernel and the second pass of its reduction.
struct Pipelines<'a> {
    main: &'a Pipeline,
    reduce: Option<&'a Pipeline>,
}

/// Pipelines by the address and length of their WGSL and their entry point: generated
/// specs are statics, so a module's text is one allocation for the program's lifetime.
type PipelineKey = (usize, usize, &'static str);

/// Everything one launch of up to `capacity` elements needs, created once and reused: the
/// buffers, the bind group over them, an upload buffer (the element count, then the
/// arguments) that stays mapped between uses, and one staging buffer that receives every
/// output. A launch is two memcpys, one submit and one wait, with no allocation.
struct LaunchSet {
    capacity: usize,
    upload: wgpu::Buffer,
    input: wgpu::Buffer,
    params: wgpu::Buffer,
    outputs: Vec<wgpu::Buffer>,
    staging: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    shared: Option<SharedSet>,
}

/// The buffers of a kernel's `#[shared]` arguments: their words, and for an adjoint kernel
/// the per-workgroup partial sums, the second pass's uniform, its sums and its bind group.
struct SharedSet {
    values: wgpu::Buffer,
    reduction: Option<ReductionSet>,
}

struct ReductionSet {
    params: wgpu::Buffer,
    sums: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

/// Byte offsets in a launch set's upload buffer of the second pass's uniform, of the
/// shared words and of the arguments; the element count's uniform is at 0.
fn upload_offsets(spec: &KernelSpec) -> (u64, u64, u64) {
    match spec.shared {
        None => (0, 0, PARAMS_BYTES),
        Some(sh) => {
            let shared_at = 2 * PARAMS_BYTES;
            let args_at = shared_at + (sh.words as u64 * 4).next_multiple_of(16);
            (PARAMS_BYTES, shared_at, args_at)
        }
    }
}

/// Where a map request's callback sends its result.
type MapReceiver = std::sync::mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>;

/// A submitted chunk: its launch set, where its results go, and the two map requests
/// (results to read, upload buffer to re-arm) that complete with its submission.
struct InFlight {
    set: LaunchSet,
    start: usize,
    m: usize,
    out_bytes: u64,
    submission: wgpu::SubmissionIndex,
    read: MapReceiver,
    rearm: MapReceiver,
}

/// An open GPU.
pub(crate) struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    timestamps: bool,
    pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
    sets: Mutex<HashMap<(PipelineKey, usize), Vec<LaunchSet>>>,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<Mutex<Option<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves the data consistent (we only insert
    // and remove whole entries), so poisoning is not an error here.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn key(spec: &'static KernelSpec) -> PipelineKey {
    (
        spec.wgsl.as_ptr() as usize,
        spec.wgsl.len(),
        spec.entry_point,
    )
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
        let required_features = if timestamps {
            wgpu::Features::TIMESTAMP_QUERY
        } else {
            wgpu::Features::empty()
        };
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
        Ok(Gpu {
            device,
            queue,
            info,
            limits,
            timestamps,
            pipelines: Mutex::new(HashMap::new()),
            sets: Mutex::new(HashMap::new()),
            lost,
            uncaptured,
        })
    }

    /// The adapter, for [`crate::Device::describe`].
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}, driver {} {})",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.info.driver,
            self.info.driver_info
        )
    }

    /// Whether the adapter is a CPU implementation (lavapipe, WARP, SwiftShader).
    pub(crate) fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    fn check_lost(&self) -> Result<(), Error> {
        match &*lock(&self.lost) {
            Some(msg) => Err(Error::DeviceLost(msg.clone())),
            None => Ok(()),
        }
    }

    /// The pipeline of `spec`, compiled on first use.
    fn pipeline(&self, spec: &'static KernelSpec) -> Result<Arc<Pipeline>, Error> {
        use wgpu::BufferBindingType as B;
        let mut entries = vec![
            (spec.params_binding, B::Uniform),
            (spec.input_binding, B::Storage { read_only: true }),
        ];
        for o in spec.outputs {
            entries.push((o.binding, B::Storage { read_only: false }));
        }
        if let Some(sh) = spec.shared {
            entries.push((
                sh.binding,
                if sh.uniform {
                    B::Uniform
                } else {
                    B::Storage { read_only: true }
                },
            ));
            if let Some(r) = &sh.reduction {
                entries.push((r.partials_binding, B::Storage { read_only: false }));
            }
        }
        self.compile(key(spec), spec.label, spec.wgsl, spec.entry_point, &entries)
    }

    /// The second pass of `spec`'s shared-gradient reduction, if it has one.
    fn reduce_pipeline(&self, spec: &'static KernelSpec) -> Result<Option<Arc<Pipeline>>, Error> {
        use wgpu::BufferBindingType as B;
        let Some(r) = spec.shared.and_then(|sh| sh.reduction.as_ref()) else {
            return Ok(None);
        };
        let entries = [
            (r.params_binding, B::Uniform),
            (r.input_binding, B::Storage { read_only: true }),
            (r.output_binding, B::Storage { read_only: false }),
        ];
        let key = (r.wgsl.as_ptr() as usize, r.wgsl.len(), r.entry_point);
        self.compile(key, r.label, r.wgsl, r.entry_point, &entries)
            .map(Some)
    }

    /// A pipeline compiled on first use.
    ///
    /// Compiled under the cache's lock, so that concurrent first launches of one kernel make
    /// one pipeline; its bind group layout is explicit (from the spec's bindings), not derived
    /// from the shader, so launch sets are valid for it whatever pipeline made them.
    fn compile(
        &self,
        key: PipelineKey,
        label: &'static str,
        wgsl: &'static str,
        entry_point: &'static str,
        bindings: &[(u32, wgpu::BufferBindingType)],
    ) -> Result<Arc<Pipeline>, Error> {
        let mut cache = lock(&self.pipelines);
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
            .iter()
            .map(|(binding, ty)| wgpu::BindGroupLayoutEntry {
                binding: *binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: *ty,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(wgsl.into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry_point),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation {
                label: label.to_string(),
                message: e.to_string(),
            });
        }
        let p = Arc::new(Pipeline { pipeline, layout });
        cache.insert(key, p.clone());
        Ok(p)
    }

    /// Most elements whose every bound buffer fits one storage binding, and one dispatch.
    pub(crate) fn max_binding_elements(&self, spec: &KernelSpec) -> usize {
        let widest = spec
            .outputs
            .iter()
            .map(|o| o.words)
            .chain([spec.input_words])
            .max()
            .unwrap_or(1);
        self.elements_within(spec, widest, self.binding_bytes())
    }

    /// Most elements one streamed chunk holds: its staging buffer holds every output
    /// together, and no buffer exceeds [`MAX_CHUNK_BYTES`].
    pub(crate) fn max_chunk_elements(&self, spec: &KernelSpec) -> usize {
        let widest = (spec.output_words() as u32).max(spec.input_words);
        self.elements_within(spec, widest, self.binding_bytes().min(MAX_CHUNK_BYTES))
    }

    fn binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    fn elements_within(&self, spec: &KernelSpec, widest_words: u32, bytes: u64) -> usize {
        let by_bytes = bytes / (widest_words.max(1) as u64 * 4);
        let by_dispatch = spec.max_workgroups_per_dim as u64
            * spec.max_workgroups_per_dim as u64
            * spec.workgroup_size as u64;
        by_bytes.min(by_dispatch).max(1) as usize
    }

    /// Runs `spec` over `n` elements (lengths already checked), chunk by chunk, two chunks
    /// in flight: while the GPU works on one, the CPU copies the next one's arguments in and
    /// the previous one's results out.
    pub(crate) fn launch(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        shared: &[f32],
        n: usize,
        outputs: &mut [&mut [f32]],
        shared_grad: &mut [f32],
    ) -> Result<(), Error> {
        self.check_lost()?;
        if spec.shared_grad_words() > spec.max_workgroups_per_dim as usize {
            return Err(Error::ShapeMismatch {
                what: format!("{}: shared gradient words (one workgroup each)", spec.label),
                expected: spec.max_workgroups_per_dim as usize,
                got: spec.shared_grad_words(),
            });
        }
        let pipeline = self.pipeline(spec)?;
        let reduce = self.reduce_pipeline(spec)?;
        let pipelines = Pipelines {
            main: &pipeline,
            reduce: reduce.as_deref(),
        };
        let chunk = self.max_chunk_elements(spec);
        let in_words = spec.input_words as usize;
        let mut in_flight: std::collections::VecDeque<InFlight> = Default::default();
        let mut result = Ok(());
        let mut start = 0;
        while start < n && result.is_ok() {
            let m = chunk.min(n - start);
            let chunk_input = &input[start * in_words..(start + m) * in_words];
            match self.submit_chunk(spec, &pipelines, chunk_input, shared, m, start) {
                Ok(f) => in_flight.push_back(f),
                Err(e) => result = Err(e),
            }
            start += m;
            if in_flight.len() == 2
                && let Some(f) = in_flight.pop_front()
            {
                result = result.and(self.complete_chunk(spec, f, outputs, shared_grad));
            }
        }
        while let Some(f) = in_flight.pop_front() {
            let done = self.complete_chunk(spec, f, outputs, shared_grad);
            result = result.and(done);
        }
        if let Some(message) = lock(&self.uncaptured).take() {
            return Err(Error::Validation {
                label: spec.label.to_string(),
                message,
            });
        }
        result
    }

    /// Copies a chunk's arguments into a launch set's upload buffer and submits the copy,
    /// the dispatch and the copy of the results into the staging buffer.
    fn submit_chunk(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        input: &[f32],
        shared: &[f32],
        m: usize,
        start: usize,
    ) -> Result<InFlight, Error> {
        let set = self.take_set(spec, pipelines, m)?;
        let in_bytes = std::mem::size_of_val(input) as u64;
        let shared_bytes = std::mem::size_of_val(shared) as u64;
        let (reduce_at, shared_at, args_at) = upload_offsets(spec);
        let shape = Self::launch_shape(spec, m);
        {
            let map_err = |e: wgpu::MapRangeError| Error::Readback(e.to_string());
            let mut params = set
                .upload
                .get_mapped_range_mut(..PARAMS_BYTES)
                .map_err(map_err)?;
            params.copy_from_slice(bytemuck::cast_slice(&shape.params(m)));
            drop(params);
            if set.shared.is_some() {
                // The second pass sums one partial per dispatched workgroup.
                let mut reduce = set
                    .upload
                    .get_mapped_range_mut(reduce_at..reduce_at + PARAMS_BYTES)
                    .map_err(map_err)?;
                reduce.copy_from_slice(bytemuck::cast_slice(&shape.reduce_params()));
                drop(reduce);
                if shared_bytes > 0 {
                    let mut words = set
                        .upload
                        .get_mapped_range_mut(shared_at..shared_at + shared_bytes)
                        .map_err(map_err)?;
                    words.copy_from_slice(bytemuck::cast_slice(shared));
                }
            }
            let mut args = set
                .upload
                .get_mapped_range_mut(args_at..args_at + in_bytes)
                .map_err(map_err)?;
            args.copy_from_slice(bytemuck::cast_slice(input));
        }
        set.upload.unmap();
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(spec.label),
            });
        encoder.copy_buffer_to_buffer(&set.upload, 0, &set.params, 0, PARAMS_BYTES);
        if let Some(sh) = &set.shared {
            if shared_bytes > 0 {
                encoder.copy_buffer_to_buffer(&set.upload, shared_at, &sh.values, 0, shared_bytes);
            }
            if let Some(r) = &sh.reduction {
                encoder.copy_buffer_to_buffer(&set.upload, reduce_at, &r.params, 0, PARAMS_BYTES);
            }
        }
        encoder.copy_buffer_to_buffer(&set.upload, args_at, &set.input, 0, in_bytes);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(spec.label),
                timestamp_writes: None,
            });
            Self::record(&mut pass, spec, pipelines, &set, (shape.x, shape.y));
        }
        // Every output into one staging buffer, densely: one map reads them all.
        let mut out_bytes = 0u64;
        for (buf, o) in set.outputs.iter().zip(spec.outputs) {
            let bytes = (m * o.words as usize * 4) as u64;
            encoder.copy_buffer_to_buffer(buf, 0, &set.staging, out_bytes, bytes);
            out_bytes += bytes;
        }
        if let Some(r) = set.shared.as_ref().and_then(|sh| sh.reduction.as_ref()) {
            let bytes = spec.shared_grad_words() as u64 * 4;
            encoder.copy_buffer_to_buffer(&r.sums, 0, &set.staging, out_bytes, bytes);
            out_bytes += bytes;
        }
        let submission = self.queue.submit([encoder.finish()]);
        let (tx, read) = std::sync::mpsc::channel();
        set.staging
            .slice(..out_bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        // Re-arm the upload buffer for the next use; it maps once this submission is done.
        let (tx, rearm) = std::sync::mpsc::channel();
        set.upload
            .slice(..)
            .map_async(wgpu::MapMode::Write, move |r| {
                let _ = tx.send(r);
            });
        Ok(InFlight {
            set,
            start,
            m,
            out_bytes,
            submission,
            read,
            rearm,
        })
    }

    /// Waits for a chunk, copies its results out, and gives its launch set back.
    fn complete_chunk(
        &self,
        spec: &'static KernelSpec,
        f: InFlight,
        outputs: &mut [&mut [f32]],
        shared_grad: &mut [f32],
    ) -> Result<(), Error> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(f.submission),
                timeout: None,
            })
            .map_err(|e| {
                self.check_lost()
                    .err()
                    .unwrap_or_else(|| Error::Readback(e.to_string()))
            })?;
        // On an error the set may be in any state: it is dropped rather than reused.
        self.await_map(&f.read)?;
        {
            let view = f
                .set
                .staging
                .slice(..f.out_bytes)
                .get_mapped_range()
                .map_err(|e| Error::Readback(e.to_string()))?;
            let words: &[f32] = bytemuck::cast_slice(&view);
            let mut at = 0usize;
            for (out, o) in outputs.iter_mut().zip(spec.outputs) {
                let w = o.words as usize;
                out[f.start * w..(f.start + f.m) * w].copy_from_slice(&words[at..at + f.m * w]);
                at += f.m * w;
            }
            // Chunks complete in order: their sums are added in a fixed order too.
            for (g, partial) in shared_grad.iter_mut().zip(&words[at..]) {
                *g += partial;
            }
        }
        f.set.staging.unmap();
        if self.await_map(&f.rearm).is_ok() {
            self.return_set(spec, f.set);
        }
        Ok(())
    }

    /// Waits for a map request's callback. Another thread's poll may be delivering it just
    /// as this thread's wait for the submission returns, so the callback is awaited itself.
    fn await_map(&self, rx: &MapReceiver) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match rx.try_recv() {
                Ok(r) => return r.map_err(|e| Error::Readback(e.to_string())),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return Err(Error::Readback("a map request was dropped".into()));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() > deadline => {
                    return Err(Error::Readback(
                        "a map request did not complete in 60 s".into(),
                    ));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    self.device
                        .poll(wgpu::PollType::Poll)
                        .map_err(|e| Error::Readback(e.to_string()))?;
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Pops the error scopes of a launch, turning what they caught into errors.
    fn pop_scopes(
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

    fn buffer(&self, label: &str, usage: wgpu::BufferUsages, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(16),
            usage,
            mapped_at_creation: false,
        })
    }

    /// A launch set for at least `m` elements: a cached one, or a new one.
    fn take_set(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        m: usize,
    ) -> Result<LaunchSet, Error> {
        let capacity = m
            .next_power_of_two()
            .max(MIN_CAPACITY)
            .min(self.max_chunk_elements(spec).max(m));
        if let Some(set) = lock(&self.sets)
            .get_mut(&(key(spec), capacity))
            .and_then(Vec::pop)
        {
            return Ok(set);
        }
        // Creating buffers is where memory runs out: the only error scopes of a launch.
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let set = self.create_set(spec, pipelines, capacity);
        self.pop_scopes(spec, oom, validation)?;
        Ok(set)
    }

    /// A new launch set for `capacity` elements, the upload buffer mapped.
    fn create_set(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        capacity: usize,
    ) -> LaunchSet {
        let bytes = (capacity * spec.input_words as usize * 4) as u64;
        let (_, _, args_at) = upload_offsets(spec);
        let upload = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(spec.label),
            size: args_at + bytes,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        let staging = ((capacity * spec.output_words() + spec.shared_grad_words()) * 4) as u64;
        self.build_set(spec, pipelines, capacity, upload, staging)
    }

    /// The device buffers and bind group of a launch set around a given upload buffer.
    fn build_set(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        capacity: usize,
        upload: wgpu::Buffer,
        staging_bytes: u64,
    ) -> LaunchSet {
        use wgpu::BufferUsages as U;
        let words = |w: u32| (capacity * w as usize * 4) as u64;
        let input = self.buffer(
            spec.label,
            U::STORAGE | U::COPY_DST,
            words(spec.input_words),
        );
        let params = self.buffer(spec.label, U::UNIFORM | U::COPY_DST, PARAMS_BYTES);
        let outputs: Vec<wgpu::Buffer> = spec
            .outputs
            .iter()
            .map(|o| self.buffer(spec.label, U::STORAGE | U::COPY_SRC, words(o.words)))
            .collect();
        let staging = self.buffer(spec.label, U::MAP_READ | U::COPY_DST, staging_bytes);
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: spec.params_binding,
                resource: params.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: spec.input_binding,
                resource: input.as_entire_binding(),
            },
        ];
        for (o, buf) in spec.outputs.iter().zip(&outputs) {
            entries.push(wgpu::BindGroupEntry {
                binding: o.binding,
                resource: buf.as_entire_binding(),
            });
        }
        let mut partials = None;
        let shared = spec.shared.map(|sh| {
            // A uniform array of vec4s binds whole 16-byte strides.
            let (usage, bytes) = if sh.uniform {
                (U::UNIFORM, (sh.words as u64 * 4).next_multiple_of(16))
            } else {
                (U::STORAGE, sh.words as u64 * 4)
            };
            let values = self.buffer(spec.label, usage | U::COPY_DST, bytes);
            let reduction = sh.reduction.as_ref().zip(pipelines.reduce).map(|(r, p)| {
                // One partial per dispatched workgroup and word, for any launch this set
                // takes (the dispatch of its full capacity has the most workgroups).
                let buf = self.buffer(
                    spec.label,
                    U::STORAGE,
                    Self::max_groups(spec, capacity) as u64 * sh.words as u64 * 4,
                );
                let params = self.buffer(r.label, U::UNIFORM | U::COPY_DST, PARAMS_BYTES);
                let sums = self.buffer(r.label, U::STORAGE | U::COPY_SRC, sh.words as u64 * 4);
                let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(r.label),
                    layout: &p.layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: r.params_binding,
                            resource: params.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: r.input_binding,
                            resource: buf.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: r.output_binding,
                            resource: sums.as_entire_binding(),
                        },
                    ],
                });
                partials = Some((r.partials_binding, buf));
                ReductionSet {
                    params,
                    sums,
                    bind_group,
                }
            });
            SharedSet { values, reduction }
        });
        if let (Some(sh), Some(set)) = (spec.shared, &shared) {
            entries.push(wgpu::BindGroupEntry {
                binding: sh.binding,
                resource: set.values.as_entire_binding(),
            });
        }
        if let Some((binding, buf)) = &partials {
            entries.push(wgpu::BindGroupEntry {
                binding: *binding,
                resource: buf.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(spec.label),
            layout: &pipelines.main.layout,
            entries: &entries,
        });
        LaunchSet {
            capacity,
            upload,
            input,
            params,
            outputs,
            staging,
            bind_group,
            shared,
        }
    }

    /// Records a launch's dispatches into a compute pass: the kernel, then the second pass
    /// of its shared-gradient reduction, if any (one workgroup per shared word).
    fn record(
        pass: &mut wgpu::ComputePass<'_>,
        spec: &KernelSpec,
        pipelines: &Pipelines<'_>,
        set: &LaunchSet,
        (x, y): (u32, u32),
    ) {
        Self::record_main(pass, pipelines, set, (x, y));
        Self::record_reduce(pass, spec, pipelines, set);
    }

    /// The kernel itself.
    fn record_main(
        pass: &mut wgpu::ComputePass<'_>,
        pipelines: &Pipelines<'_>,
        set: &LaunchSet,
        (x, y): (u32, u32),
    ) {
        pass.set_pipeline(&pipelines.main.pipeline);
        pass.set_bind_group(0, &set.bind_group, &[]);
        pass.dispatch_workgroups(x, y, 1);
    }

    /// The second pass of the shared gradients' reduction, if the kernel has one; whether
    /// it has.
    fn record_reduce(
        pass: &mut wgpu::ComputePass<'_>,
        spec: &KernelSpec,
        pipelines: &Pipelines<'_>,
        set: &LaunchSet,
    ) -> bool {
        let reduction = set.shared.as_ref().and_then(|sh| sh.reduction.as_ref());
        if let (Some(r), Some(p)) = (reduction, pipelines.reduce) {
            pass.set_pipeline(&p.pipeline);
            pass.set_bind_group(0, &r.bind_group, &[]);
            pass.dispatch_workgroups(spec.shared_grad_words() as u32, 1, 1);
            true
        } else {
            false
        }
    }

    fn return_set(&self, spec: &'static KernelSpec, set: LaunchSet) {
        let mut sets = lock(&self.sets);
        let list = sets.entry((key(spec), set.capacity)).or_default();
        if list.len() < SETS_PER_KEY {
            list.push(set);
        }
    }

    /// Workgroups in x and y for `m` elements: as few rows as the per-dimension limit
    /// allows, of equal length, so that at most `y - 1` workgroups lie past the end (with
    /// full rows, 2^24 elements took 65,535 x 2 workgroups: twice the work for an adjoint,
    /// whose threads past the end compute for the reduction's barriers).
    ///
    /// A kernel that reduces shared gradients gets at most [`REDUCE_GROUPS`] workgroups,
    /// each taking `per_thread` runs of consecutive elements.
    fn launch_shape(spec: &KernelSpec, m: usize) -> LaunchShape {
        let runs = Self::runs(spec, m);
        let per_thread = if spec.shared_grad_words() > 0 {
            runs.div_ceil(REDUCE_GROUPS)
        } else {
            1
        };
        let groups = runs.div_ceil(per_thread);
        let y = groups.div_ceil(spec.max_workgroups_per_dim as u64);
        LaunchShape {
            x: groups.div_ceil(y) as u32,
            y: y as u32,
            per_thread: per_thread as u32,
        }
    }

    /// The most workgroups of any launch of up to `capacity` elements (the partial sums a
    /// launch set must hold): not always the full capacity's, since a reducing launch
    /// just past [`REDUCE_GROUPS`] runs halves its workgroups.
    fn max_groups(spec: &KernelSpec, capacity: usize) -> u32 {
        if spec.shared_grad_words() > 0 {
            Self::runs(spec, capacity).min(REDUCE_GROUPS) as u32
        } else {
            Self::launch_shape(spec, capacity).groups()
        }
    }

    /// Runs of a workgroup's size that `m` elements take (at least one).
    fn runs(spec: &KernelSpec, m: usize) -> u64 {
        (m as u64).div_ceil(spec.workgroup_size as u64).max(1)
    }

    /// Waits for the queue, turning error scopes and device loss into errors.
    fn finish(
        &self,
        spec: &KernelSpec,
        oom: wgpu::ErrorScopeGuard,
        validation: wgpu::ErrorScopeGuard,
    ) -> Result<(), Error> {
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        self.pop_scopes(spec, oom, validation)?;
        polled.map(|_| ()).map_err(|e| {
            self.check_lost()
                .err()
                .unwrap_or_else(|| Error::Readback(e.to_string()))
        })
    }

    /// Whether kernel times come from timestamp queries (else from the wall clock).
    pub(crate) fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Times `launches` launches of `spec` over `input`, resident on the device: returns the
    /// GPU time of each (timestamp queries: the kernel and the reduction's second pass
    /// apart), or the wall-clock time of submit and wait.
    pub(crate) fn time_kernel(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        launches: usize,
    ) -> Result<Vec<KernelTime>, Error> {
        // A query set holds at most 4,096 timestamps, 4 per launch: longer runs are timed
        // in several submissions.
        const MAX_TIMED_LAUNCHES: usize = 1024;
        let mut times = Vec::with_capacity(launches);
        let mut left = launches.max(1);
        while left > 0 {
            let batch = left.min(MAX_TIMED_LAUNCHES);
            times.extend(self.time_kernel_batch(spec, input, batch)?);
            left -= batch;
        }
        Ok(times)
    }

    /// [`Gpu::time_kernel`] for at most 1,024 launches, in one submission.
    fn time_kernel_batch(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        launches: usize,
    ) -> Result<Vec<KernelTime>, Error> {
        let pipeline = self.pipeline(spec)?;
        let reduce = self.reduce_pipeline(spec)?;
        let pipelines = Pipelines {
            main: &pipeline,
            reduce: reduce.as_deref(),
        };
        let n = input.len() / spec.input_words as usize;
        let max = self.max_binding_elements(spec);
        if n > max {
            return Err(Error::ShapeMismatch {
                what: format!("{}: elements that fit one binding for timing", spec.label),
                expected: max,
                got: n,
            });
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let shape = Self::launch_shape(spec, n);
        let set = self.take_set_exact(spec, &pipelines, n.max(1));
        self.queue
            .write_buffer(&set.input, 0, bytemuck::cast_slice(input));
        self.queue
            .write_buffer(&set.params, 0, bytemuck::cast_slice(&shape.params(n)));
        let (x, y) = (shape.x, shape.y);
        // Shared words stay zero (buffers start zeroed); the reduction runs as in a launch.
        if let Some(r) = set.shared.as_ref().and_then(|sh| sh.reduction.as_ref()) {
            self.queue
                .write_buffer(&r.params, 0, bytemuck::cast_slice(&shape.reduce_params()));
        }
        let launches = launches.max(1) as u32;
        let mut times = Vec::with_capacity(launches as usize);
        if self.timestamps {
            use wgpu::BufferUsages as U;
            let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gradfuse timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 4 * launches,
            });
            let resolve = self.buffer(
                "gradfuse timing",
                U::QUERY_RESOLVE | U::COPY_SRC,
                32 * launches as u64,
            );
            let readback = self.buffer(
                "gradfuse timing",
                U::MAP_READ | U::COPY_DST,
                32 * launches as u64,
            );
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some(spec.label),
                });
            // Warm-up on the same buffers: first touches of fresh memory are not timed.
            for _ in 0..3 {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(spec.label),
                    timestamp_writes: None,
                });
                Self::record(&mut pass, spec, &pipelines, &set, (x, y));
            }
            // The kernel and the reduction's second pass in passes of their own, each
            // between its own timestamps.
            let writes = |k: u32| {
                Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * k),
                    end_of_pass_write_index: Some(2 * k + 1),
                })
            };
            let mut reduced = false;
            for l in 0..launches {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(spec.label),
                    timestamp_writes: writes(2 * l),
                });
                Self::record_main(&mut pass, &pipelines, &set, (x, y));
                drop(pass);
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(spec.label),
                    timestamp_writes: writes(2 * l + 1),
                });
                reduced = Self::record_reduce(&mut pass, spec, &pipelines, &set);
            }
            encoder.resolve_query_set(&queries, 0..4 * launches, &resolve, 0);
            encoder.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 32 * launches as u64);
            self.queue.submit([encoder.finish()]);
            let (tx, mapped) = std::sync::mpsc::channel();
            readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            self.finish(spec, oom, validation)?;
            self.await_map(&mapped)?;
            let period = self.queue.get_timestamp_period() as f64;
            {
                let view = readback
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| Error::Readback(e.to_string()))?;
                let ticks: &[u64] = bytemuck::cast_slice(&view);
                let span = |k: usize| {
                    let ns = ticks[2 * k + 1].saturating_sub(ticks[2 * k]) as f64 * period;
                    Duration::from_nanos(ns as u64)
                };
                for l in 0..launches as usize {
                    times.push(KernelTime {
                        main: span(2 * l),
                        reduce: if reduced {
                            span(2 * l + 1)
                        } else {
                            Duration::ZERO
                        },
                    });
                }
            }
            readback.unmap();
        } else {
            for _ in 0..launches {
                let t = Instant::now();
                let mut encoder =
                    self.device
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some(spec.label),
                        });
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(spec.label),
                        timestamp_writes: None,
                    });
                    Self::record(&mut pass, spec, &pipelines, &set, (x, y));
                }
                self.queue.submit([encoder.finish()]);
                self.device
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map_err(|e| Error::Readback(e.to_string()))?;
                times.push(KernelTime {
                    main: t.elapsed(),
                    reduce: Duration::ZERO,
                });
            }
            self.finish(spec, oom, validation)?;
        }
        Ok(times)
    }

    /// A launch set of exactly `n` elements (timing wants no spare capacity), not cached.
    /// Timing uploads once, with `write_buffer`, and reads nothing back: its upload and
    /// staging buffers are placeholders.
    fn take_set_exact(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        n: usize,
    ) -> LaunchSet {
        let upload = self.buffer(
            spec.label,
            wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            16,
        );
        self.build_set(spec, pipelines, n, upload, 16)
    }

    /// Samples of moving `bytes` to the device (write, submit, wait) and back
    /// (copy, submit, map, copy out): the transfers every end-to-end launch pays.
    pub(crate) fn time_transfers(
        &self,
        bytes: usize,
        repeats: usize,
    ) -> Result<(Vec<Duration>, Vec<Duration>), Error> {
        use wgpu::BufferUsages as U;
        let bytes = bytes.max(4).next_multiple_of(4);
        let data = vec![0u8; bytes];
        let mut host = vec![0u8; bytes];
        let device_buf = self.buffer(
            "gradfuse transfer",
            U::STORAGE | U::COPY_DST | U::COPY_SRC,
            bytes as u64,
        );
        let staging = self.buffer("gradfuse transfer", U::MAP_READ | U::COPY_DST, bytes as u64);
        let mut up = Vec::new();
        let mut down = Vec::new();
        let wait = || {
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(|e| Error::Readback(e.to_string()))
        };
        for _ in 0..repeats.max(1) {
            let t = Instant::now();
            self.queue.write_buffer(&device_buf, 0, &data);
            self.queue.submit([]);
            wait()?;
            up.push(t.elapsed());
            let t = Instant::now();
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            encoder.copy_buffer_to_buffer(&device_buf, 0, &staging, 0, bytes as u64);
            self.queue.submit([encoder.finish()]);
            let (tx, mapped) = std::sync::mpsc::channel();
            staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            wait()?;
            self.await_map(&mapped)?;
            host.copy_from_slice(
                &staging
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| Error::Readback(e.to_string()))?,
            );
            staging.unmap();
            down.push(t.elapsed());
        }
        Ok((up, down))
    }

    /// Samples of the smallest round trip: one submit of a 4-byte copy and one map.
    pub(crate) fn time_roundtrip(&self, repeats: usize) -> Result<Vec<Duration>, Error> {
        use wgpu::BufferUsages as U;
        let src = self.buffer("gradfuse roundtrip", U::COPY_SRC | U::COPY_DST, 16);
        let staging = self.buffer("gradfuse roundtrip", U::MAP_READ | U::COPY_DST, 16);
        let mut times = Vec::new();
        for _ in 0..repeats.max(1) {
            let t = Instant::now();
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            encoder.copy_buffer_to_buffer(&src, 0, &staging, 0, 4);
            self.queue.submit([encoder.finish()]);
            let (tx, mapped) = std::sync::mpsc::channel();
            staging.slice(..4).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Readback(e.to_string()))?;
            self.await_map(&mapped)?;
            let _ = staging
                .slice(..4)
                .get_mapped_range()
                .map_err(|e| Error::Readback(e.to_string()))?[0];
            staging.unmap();
            times.push(t.elapsed());
        }
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ReductionSpec, SharedSpec};

    fn spec(shared: Option<&'static SharedSpec>) -> KernelSpec {
        KernelSpec {
            label: "dispatch",
            wgsl: "",
            entry_point: "main",
            workgroup_size: 256,
            max_workgroups_per_dim: 65535,
            params_binding: 0,
            input_binding: 1,
            input_words: 1,
            outputs: &[],
            shared,
            cpu: |_, _| {},
        }
    }

    static REDUCING: SharedSpec = SharedSpec {
        binding: 4,
        words: 3,
        uniform: true,
        reduction: Some(ReductionSpec {
            partials_binding: 5,
            label: "reduce",
            wgsl: "",
            entry_point: "reduce",
            params_binding: 0,
            input_binding: 1,
            output_binding: 2,
        }),
    };

    #[test]
    fn dispatches_cover_the_batch_with_fewer_than_a_row_of_spare_workgroups() {
        let spec = spec(None);
        let mut last = 0u64;
        for m in [
            1usize,
            256,
            257,
            65535 * 256,
            (1 << 24) - 1,
            1 << 24,
            1 << 26,
            3 << 25,
        ] {
            let shape = Gpu::launch_shape(&spec, m);
            let (x, y) = (shape.x, shape.y);
            assert_eq!(shape.per_thread, 1);
            let groups = (m as u64).div_ceil(256);
            let dispatched = x as u64 * y as u64;
            assert!(x <= 65535, "{m}: {x} x {y}");
            assert!(
                dispatched >= groups && dispatched - groups < y as u64,
                "{m}: {x} x {y}"
            );
            assert_eq!(Gpu::max_groups(&spec, m), shape.groups());
            // A launch set's partials are sized by its capacity's dispatch.
            assert!(dispatched >= last, "{m}: not monotone");
            last = dispatched;
        }
        // 2^24 elements: two rows of 32,768, not 65,535 and 65,535 (one past the end).
        let shape = Gpu::launch_shape(&spec, 1 << 24);
        assert_eq!((shape.x, shape.y), (32768, 2));
    }

    #[test]
    fn reducing_launches_give_threads_several_elements_past_the_group_target() {
        let spec = spec(Some(&REDUCING));
        let runs = |m: usize| (m as u64).div_ceil(256).max(1);
        let sizes = [
            1usize,
            255,
            256,
            257,
            512 * 256,
            512 * 256 + 1,
            513 * 256,
            2048 * 256 + 17,
            1 << 20,
            (1 << 24) - 3,
            1 << 24,
            1 << 26,
        ];
        for m in sizes {
            let shape = Gpu::launch_shape(&spec, m);
            let groups = shape.groups() as u64;
            let per_group = shape.per_thread as u64 * 256;
            assert!(groups <= REDUCE_GROUPS, "{m}: {shape:?}");
            // Every element is taken, and no workgroup starts past the end.
            assert!(groups * per_group >= m as u64, "{m}: {shape:?}");
            assert!((groups - 1) * per_group < m.max(1) as u64, "{m}: {shape:?}");
            // One element per thread while there are workgroups to spare.
            if runs(m) <= REDUCE_GROUPS {
                assert_eq!(shape.per_thread, 1, "{m}");
            }
            assert_eq!(shape.params(m), [m as u32, shape.per_thread, 0, 0]);
        }
        assert_eq!(Gpu::launch_shape(&spec, 1 << 24).per_thread, 128);
        // A launch set's partials hold any smaller launch's (not monotone in m: 513 runs
        // take 257 workgroups of 2, 512 runs 512 of 1).
        for capacity in [1024usize, 1 << 18, (1 << 18) + 256, 1 << 20, 1 << 22] {
            let most = Gpu::max_groups(&spec, capacity);
            for m in (1..=capacity).step_by(97).chain([capacity, 512 * 256]) {
                if m <= capacity {
                    let g = Gpu::launch_shape(&spec, m).groups();
                    assert!(g <= most, "{m} in {capacity}: {g} > {most}");
                }
            }
        }
    }
}
