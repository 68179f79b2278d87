//! The wgpu backend: one device and queue, a pipeline cache, a buffer pool, and chunked
//! launches of batches of any size.

use crate::error::Error;
use crate::spec::KernelSpec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Largest buffer the runtime allocates for one chunk, whatever the device allows: keeps
/// staging memory bounded and lets a huge batch stream through in pieces.
const MAX_CHUNK_BYTES: u64 = 256 << 20;

/// A compiled pipeline and its bind group layout.
struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// Buffers kept for reuse, by usage and size (sizes are rounded up to powers of two, so a
/// batch of similar size finds the buffers of the previous one).
#[derive(Default)]
struct BufferPool {
    free: HashMap<(u32, u64), Vec<wgpu::Buffer>>,
}

/// How many idle buffers of one usage and size the pool keeps.
const POOL_DEPTH: usize = 4;

/// Pipelines by the address and length of their WGSL and their entry point: generated
/// specs are statics, so a module's text is one allocation for the program's lifetime.
type PipelineCache = HashMap<(usize, usize, &'static str), Arc<Pipeline>>;

/// An open GPU.
pub(crate) struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    pipelines: Mutex<PipelineCache>,
    pool: Mutex<BufferPool>,
    lost: Arc<Mutex<Option<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves the data consistent (we only insert
    // and remove whole entries), so poisoning is not an error here.
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("gradfuse"),
            required_features: wgpu::Features::empty(),
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
        device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
            log::error!("gradfuse: uncaptured wgpu error: {e}");
        }));
        Ok(Gpu {
            device,
            queue,
            info,
            limits,
            pipelines: Mutex::new(HashMap::new()),
            pool: Mutex::new(BufferPool::default()),
            lost,
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
        let key = (
            spec.wgsl.as_ptr() as usize,
            spec.wgsl.len(),
            spec.entry_point,
        );
        if let Some(p) = lock(&self.pipelines).get(&key) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(spec.label),
                source: wgpu::ShaderSource::Wgsl(spec.wgsl.into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(spec.label),
                layout: None,
                module: &module,
                entry_point: Some(spec.entry_point),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation {
                label: spec.label.to_string(),
                message: e.to_string(),
            });
        }
        let layout = pipeline.get_bind_group_layout(0);
        let p = Arc::new(Pipeline { pipeline, layout });
        lock(&self.pipelines).insert(key, p.clone());
        Ok(p)
    }

    fn take_buffer(&self, usage: wgpu::BufferUsages, bytes: u64) -> wgpu::Buffer {
        let size = bytes
            .max(256)
            .next_power_of_two()
            .min(self.limits.max_buffer_size.max(bytes));
        if let Some(b) = lock(&self.pool)
            .free
            .get_mut(&(usage.bits(), size))
            .and_then(Vec::pop)
        {
            return b;
        }
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gradfuse batch"),
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    fn give_back(&self, buffers: Vec<wgpu::Buffer>) {
        let mut pool = lock(&self.pool);
        for b in buffers {
            let list = pool.free.entry((b.usage().bits(), b.size())).or_default();
            if list.len() < POOL_DEPTH {
                list.push(b);
            }
        }
    }

    /// Most elements one chunk may hold, from the binding and buffer limits.
    pub(crate) fn max_chunk_elements(&self, spec: &KernelSpec) -> usize {
        let per_binding = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            .min(MAX_CHUNK_BYTES);
        let widest = spec
            .outputs
            .iter()
            .map(|o| o.words)
            .chain([spec.input_words])
            .max()
            .unwrap_or(1)
            .max(1) as u64;
        let by_bytes = per_binding / (widest * 4);
        let by_dispatch = spec.max_workgroups_per_dim as u64
            * spec.max_workgroups_per_dim as u64
            * spec.workgroup_size as u64;
        by_bytes.min(by_dispatch).max(1) as usize
    }

    /// Runs `spec` over `n` elements (lengths already checked), chunk by chunk.
    pub(crate) fn launch(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        n: usize,
        outputs: &mut [&mut [f32]],
    ) -> Result<(), Error> {
        self.check_lost()?;
        let pipeline = self.pipeline(spec)?;
        let chunk = self.max_chunk_elements(spec);
        let in_words = spec.input_words as usize;
        let mut start = 0;
        while start < n {
            let m = chunk.min(n - start);
            self.launch_chunk(
                spec,
                &pipeline,
                &input[start * in_words..(start + m) * in_words],
                m,
                start,
                outputs,
            )?;
            start += m;
        }
        Ok(())
    }

    fn launch_chunk(
        &self,
        spec: &'static KernelSpec,
        pipeline: &Pipeline,
        input: &[f32],
        m: usize,
        start: usize,
        outputs: &mut [&mut [f32]],
    ) -> Result<(), Error> {
        use wgpu::BufferUsages as U;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);

        let in_bytes = (input.len() * 4) as u64;
        let input_buf = self.take_buffer(U::STORAGE | U::COPY_DST, in_bytes);
        let params = self.take_buffer(U::UNIFORM | U::COPY_DST, 16);
        let out_bytes: Vec<u64> = spec
            .outputs
            .iter()
            .map(|o| (m * o.words as usize * 4) as u64)
            .collect();
        let out_bufs: Vec<wgpu::Buffer> = out_bytes
            .iter()
            .map(|b| self.take_buffer(U::STORAGE | U::COPY_SRC, *b))
            .collect();
        let staging: Vec<wgpu::Buffer> = out_bytes
            .iter()
            .map(|b| self.take_buffer(U::MAP_READ | U::COPY_DST, *b))
            .collect();

        self.queue
            .write_buffer(&input_buf, 0, bytemuck::cast_slice(input));
        let count = [m as u32, 0, 0, 0];
        self.queue
            .write_buffer(&params, 0, bytemuck::cast_slice(&count));

        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: spec.params_binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &params,
                    offset: 0,
                    size: wgpu::BufferSize::new(16),
                }),
            },
            wgpu::BindGroupEntry {
                binding: spec.input_binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &input_buf,
                    offset: 0,
                    size: wgpu::BufferSize::new(in_bytes),
                }),
            },
        ];
        for ((o, buf), bytes) in spec.outputs.iter().zip(&out_bufs).zip(&out_bytes) {
            entries.push(wgpu::BindGroupEntry {
                binding: o.binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: buf,
                    offset: 0,
                    size: wgpu::BufferSize::new(*bytes),
                }),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(spec.label),
            layout: &pipeline.layout,
            entries: &entries,
        });
        let groups = (m as u64).div_ceil(spec.workgroup_size as u64);
        let x = groups.min(spec.max_workgroups_per_dim as u64) as u32;
        let y = groups.div_ceil(x as u64) as u32;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(spec.label),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(spec.label),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
        for ((buf, st), bytes) in out_bufs.iter().zip(&staging).zip(&out_bytes) {
            encoder.copy_buffer_to_buffer(buf, 0, st, 0, *bytes);
        }
        self.queue.submit([encoder.finish()]);

        let (tx, rx) = std::sync::mpsc::channel();
        for (k, (st, bytes)) in staging.iter().zip(&out_bytes).enumerate() {
            let tx = tx.clone();
            st.slice(..*bytes).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send((k, r));
            });
        }
        drop(tx);
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
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
        polled.map_err(|e| {
            self.check_lost()
                .err()
                .unwrap_or_else(|| Error::Readback(e.to_string()))
        })?;
        for (k, r) in rx.iter() {
            r.map_err(|e| Error::Readback(format!("{e} (output {k})")))?;
        }
        for (((st, bytes), out), o) in staging
            .iter()
            .zip(&out_bytes)
            .zip(outputs.iter_mut())
            .zip(spec.outputs)
        {
            {
                let view = st
                    .slice(..*bytes)
                    .get_mapped_range()
                    .map_err(|e| Error::Readback(e.to_string()))?;
                let w = o.words as usize;
                out[start * w..(start + m) * w].copy_from_slice(bytemuck::cast_slice(&view));
            }
            st.unmap();
        }
        let mut used = vec![input_buf, params];
        used.extend(out_bufs);
        used.extend(staging);
        self.give_back(used);
        Ok(())
    }
}
