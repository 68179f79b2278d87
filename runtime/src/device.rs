//! Where kernels run: a GPU through wgpu, or the CPU with rayon.

use crate::error::Error;
use crate::spec::{KernelSpec, KernelTime};
use std::time::{Duration, Instant};

/// The environment variable that turns the CPU fallback of [`Device::auto`] into an error.
pub const REQUIRE_GPU_ENV: &str = "GRADFUSE_REQUIRE_GPU";

/// A device that runs batched kernels.
pub struct Device {
    /// Unique among devices: buffers remember which device made them.
    id: u64,
    pub(crate) backend: Backend,
    /// Intermediate rows of gathered launches, reused from launch to launch (see
    /// [`Device::scratch`]).
    pub(crate) scratch: crate::raw::ScratchPool,
}

pub(crate) enum Backend {
    Cpu,
    #[cfg(feature = "gpu")]
    Gpu(Box<crate::gpu::Gpu>),
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Device").field(&self.describe()).finish()
    }
}

fn next_device_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Whether `GRADFUSE_REQUIRE_GPU` turns a missing GPU into an error.
pub(crate) fn gpu_required() -> bool {
    crate::spec::env_flag(REQUIRE_GPU_ENV)
}

impl Device {
    /// The first GPU adapter (high-performance preferred), or an error if there is none.
    pub fn gpu() -> Result<Device, Error> {
        #[cfg(feature = "gpu")]
        {
            Ok(Device {
                id: next_device_id(),
                backend: Backend::Gpu(Box::new(crate::gpu::Gpu::open()?)),
                scratch: Default::default(),
            })
        }
        #[cfg(not(feature = "gpu"))]
        {
            Err(Error::GpuNotCompiled)
        }
    }

    /// The CPU: each kernel's CPU version over the batch, in parallel with rayon.
    pub fn cpu() -> Device {
        Device {
            id: next_device_id(),
            backend: Backend::Cpu,
            scratch: Default::default(),
        }
    }

    /// A GPU if there is one; otherwise the CPU, with a log line saying so. With
    /// `GRADFUSE_REQUIRE_GPU=1` in the environment, no GPU is an error instead.
    pub fn auto() -> Result<Device, Error> {
        match Device::gpu() {
            Ok(d) => Ok(d),
            Err(e) if gpu_required() => Err(Error::GpuRequired(e.to_string())),
            Err(e) => {
                let msg = format!(
                    "gradfuse: no GPU ({e}); running kernels on the CPU with {} threads \
                     (set {REQUIRE_GPU_ENV}=1 to make this an error)",
                    rayon::current_num_threads()
                );
                // Without a logger installed, `log` drops everything: say it on stderr.
                if log::max_level() >= log::LevelFilter::Warn {
                    log::warn!("{msg}");
                } else {
                    eprintln!("{msg}");
                }
                Ok(Device::cpu())
            }
        }
    }

    /// Unique among the devices of this process.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether this device runs f64 kernels (functions written over `f64`): the CPU always,
    /// a GPU where its adapter has 64-bit floats in shaders (wgpu's `SHADER_F64`: NVIDIA's
    /// and lavapipe have it; many mobile and Apple GPUs do not). Elsewhere an f64 launch
    /// returns [`Error::Unsupported`].
    pub fn has_f64(&self) -> bool {
        match &self.backend {
            Backend::Cpu => true,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.has_f64(),
        }
    }

    /// Which adapter or CPU this is.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Cpu => format!("CPU ({} rayon threads)", rayon::current_num_threads()),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.describe(),
        }
    }

    /// Sets the longest any launch, submission or readback waits for the GPU before it
    /// returns [`Error::Timeout`] (60 s unless set; at least 1 ms). The work itself is not
    /// stopped (no GPU API can): its results are dropped, the caller's data is untouched,
    /// and the device stays usable. Every launch is cut into submissions of bounded work
    /// ([`KernelSpec::WORK_PER_SUBMISSION`]), so a limit above a few seconds is reached only
    /// by a hung device. No effect on the CPU.
    pub fn set_timeout(&self, timeout: Duration) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.set_timeout(timeout);
        }
        let _ = timeout;
    }

    /// Whether a gathered adjoint may launch by rows on this GPU (the default; see
    /// [`crate::RowsEntry`]): turned off, every gathered launch stores per-element gradient
    /// rows and sums them in a pass of its own, so that the benches can measure that path
    /// and the tests compare the two. No effect on the CPU.
    #[doc(hidden)]
    pub fn set_gather_by_rows(&self, on: bool) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.by_rows.store(on, std::sync::atomic::Ordering::Relaxed);
        }
        let _ = on;
    }

    /// How many wgpu objects of each kind are alive (`None` on the CPU): for tests that
    /// launch many times and check that nothing accumulates.
    #[doc(hidden)]
    pub fn resource_counts(&self) -> Option<ResourceCounts> {
        match &self.backend {
            Backend::Cpu => None,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.resource_counts(),
        }
    }

    /// Destroys the GPU device under the runtime, as a driver reset or a removed GPU would
    /// (wgpu's own tests inject device loss this way): every later use of this `Device`
    /// returns [`Error::DeviceLost`]. No effect on the CPU.
    #[doc(hidden)]
    pub fn destroy_for_test(&self) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.destroy();
        }
    }

    /// The workgroup size launches of `spec` run at on this device: the size chosen for it
    /// (a kernel with [`crate::WORKGROUP_SIZE_OVERRIDE`] is timed at several sizes on its
    /// first launch of at least 2^18 elements, from the host or recorded, on a GPU that is
    /// not a CPU adapter), else its own [`KernelSpec::workgroup_size`].
    pub fn workgroup_size_of(&self, spec: &'static KernelSpec) -> u32 {
        let spec = self.kernel_for(spec).unwrap_or(spec);
        match &self.backend {
            Backend::Cpu => spec.workgroup_size,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.as_chosen(spec).workgroup_size,
        }
    }

    /// The kernel launches of `spec` run on this device: `spec` itself, or on a GPU with
    /// less workgroup memory than it needs ([`KernelSpec::workgroup_bytes`]: the cooperative
    /// network kernels' 48 KiB on a GPU of 32 KiB) its fallback of one element a thread
    /// ([`KernelSpec::fallback`]); [`Error::Unsupported`] where it has none. On the CPU,
    /// `spec`: its CPU version runs.
    pub fn kernel_for(&self, spec: &'static KernelSpec) -> Result<&'static KernelSpec, Error> {
        match &self.backend {
            Backend::Cpu => Ok(spec),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.runnable(spec),
        }
    }

    /// Takes this GPU to have `bytes` of workgroup memory in place of its adapter's limit
    /// when [`Device::kernel_for`] picks a kernel or its fallback: for tests, which run the
    /// fallbacks a smaller GPU would, and which run the cooperative network kernels on
    /// lavapipe, which reports 32 KiB and runs their 48 KiB (its workgroup memory is the
    /// host's). No effect on the CPU device.
    #[doc(hidden)]
    pub fn set_workgroup_bytes(&self, bytes: u32) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.set_workgroup_bytes(bytes);
        }
        let _ = bytes;
    }

    /// Takes this GPU to have `count` multiprocessors (0: unknown) in place of what its
    /// driver reports, when a launch that reduces shared gradients of a kernel that declares
    /// its workgroup memory is cut into one wave of workgroups (`gpu/waves.rs`): for tests,
    /// on drivers that report none. Set it before the first launch: launch sets keep the
    /// partial sums their count made. No effect on the CPU device.
    #[doc(hidden)]
    pub fn set_multiprocessors(&self, count: u32) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.set_multiprocessors(count);
        }
        let _ = count;
    }

    /// The workgroups a launch of `spec` over `n` elements dispatches on this device (of
    /// the kernel it runs, [`Device::kernel_for`]); 0 on the CPU device. For tests and
    /// benchmarks.
    #[doc(hidden)]
    pub fn launch_workgroups(&self, spec: &'static KernelSpec, n: usize) -> u32 {
        match &self.backend {
            Backend::Cpu => {
                let _ = (spec, n);
                0
            }
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.launch_workgroups(spec, n),
        }
    }

    /// Whether large uploads (`Device::write`, `Device::buffer` of 128 MiB or more) stage
    /// through host memory where the device has it (on by default), or through the
    /// buffers wgpu maps, for a bench and tests that compare the two. No effect on the CPU
    /// device.
    #[doc(hidden)]
    pub fn set_host_staging(&self, on: bool) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            g.set_host_staging(on);
        }
        let _ = on;
    }

    /// Whether this device can stage uploads in host memory (a Vulkan device with
    /// host-visible memory outside it, or whose memory is all one); false on the CPU
    /// device.
    #[doc(hidden)]
    pub fn has_host_staging(&self) -> bool {
        match &self.backend {
            Backend::Cpu => false,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.has_host_memory(),
        }
    }

    /// The workgroup size chosen for `spec` on this device, if a launch has chosen one
    /// (its own size included); `None` before, and on the CPU device.
    #[doc(hidden)]
    pub fn chosen_workgroup_size(&self, spec: &'static KernelSpec) -> Option<u32> {
        // Read only by the GPU backend (a build without it has the CPU alone).
        let _ = spec;
        match &self.backend {
            Backend::Cpu => None,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.chosen(spec).map(|s| s.workgroup_size),
        }
    }

    /// Makes large launches choose their kernels' workgroup sizes on a CPU adapter too
    /// (lavapipe), where the times say nothing of a GPU's but the tests exercise the
    /// choosing. No effect on the CPU device.
    #[doc(hidden)]
    pub fn choose_sizes_on_any_adapter(&self) {
        #[cfg(feature = "gpu")]
        if let Backend::Gpu(g) = &self.backend {
            (g.sizes_on_any_adapter).store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// `spec` launched in workgroups of `size` threads, for tests and benches that compare
    /// sizes: an error unless the kernel declares [`crate::WORKGROUP_SIZE_OVERRIDE`] and
    /// `size` is 32, 64, 128 or 256 (on the CPU device, `spec` itself).
    #[doc(hidden)]
    pub fn at_workgroup_size(
        &self,
        spec: &'static KernelSpec,
        size: u32,
    ) -> Result<&'static KernelSpec, Error> {
        // Read only by the GPU backend (a build without it has the CPU alone).
        let _ = size;
        match &self.backend {
            Backend::Cpu => Ok(spec),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.at_size(spec, size),
        }
    }

    /// Times `spec` over `input` at each workgroup size it may run at and keeps the
    /// fastest for its later launches, as its first large launch does, on any adapter (a
    /// CPU one included): each size's fastest time in seconds. Nothing on the CPU device
    /// or for a kernel of one size.
    #[doc(hidden)]
    pub fn choose_workgroup_size(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
    ) -> Result<Vec<(u32, f64)>, Error> {
        // Read only by the GPU backend (a build without it has the CPU alone).
        let _ = (spec, input);
        match &self.backend {
            Backend::Cpu => Ok(Vec::new()),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => {
                if !crate::gpu::sized_by_runtime(spec) {
                    return Ok(Vec::new());
                }
                let times = g.time_sizes(spec, input)?;
                g.keep_fastest(spec, &times);
                Ok(times)
            }
        }
    }

    /// Whether kernels run on a GPU adapter (lavapipe included).
    pub fn is_gpu(&self) -> bool {
        !matches!(self.backend, Backend::Cpu)
    }

    /// Whether this is a GPU adapter implemented on the CPU (lavapipe and the like).
    pub fn is_software_gpu(&self) -> bool {
        match &self.backend {
            Backend::Cpu => false,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.is_software(),
        }
    }

    /// How many elements of `spec` one launch takes at most: a batch larger than this is
    /// split into several launches (by the storage binding size, the buffer size and the
    /// dispatch limits of the device). Unlimited on the CPU.
    pub fn chunk_elements(&self, spec: &KernelSpec) -> usize {
        // Read only by the GPU backend (a build without it has the CPU alone).
        let _ = spec;
        match &self.backend {
            Backend::Cpu => usize::MAX,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.max_chunk_elements(spec),
        }
    }

    /// Runs a kernel over a batch: `input` holds `n * spec.input_words` words, output `k`
    /// receives `n * spec.outputs[k].words` words. Generated launchers call this; it checks
    /// every length and returns [`Error::ShapeMismatch`] rather than panicking.
    pub fn launch(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        outputs: &mut [&mut [f32]],
    ) -> Result<(), Error> {
        self.launch_shared(spec, input, &[], outputs, &mut [])
    }

    /// [`Device::launch`] for a kernel with `#[shared]` arguments: `shared` holds their
    /// `spec.shared_words()` words, and `shared_grad` receives the
    /// `spec.shared_grad_words()` words of the gradient of the sum over the batch (reduced
    /// deterministically: the same inputs give the same bits on every run).
    pub fn launch_shared(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        shared: &[f32],
        outputs: &mut [&mut [f32]],
        shared_grad: &mut [f32],
    ) -> Result<(), Error> {
        if shared.len() != spec.shared_words() {
            return Err(Error::ShapeMismatch {
                what: format!("{}: shared argument words", spec.label),
                expected: spec.shared_words(),
                got: shared.len(),
            });
        }
        if shared_grad.len() != spec.shared_grad_words() {
            return Err(Error::ShapeMismatch {
                what: format!("{}: shared gradient words", spec.label),
                expected: spec.shared_grad_words(),
                got: shared_grad.len(),
            });
        }
        let in_words = spec.input_words as usize;
        if in_words == 0 || !input.len().is_multiple_of(in_words) {
            return Err(Error::ShapeMismatch {
                what: format!("{}: input words (a multiple of {in_words})", spec.label),
                expected: input.len().div_ceil(in_words.max(1)) * in_words,
                got: input.len(),
            });
        }
        let n = input.len() / in_words;
        if outputs.len() != spec.outputs.len() {
            return Err(Error::ShapeMismatch {
                what: format!("{}: number of output buffers", spec.label),
                expected: spec.outputs.len(),
                got: outputs.len(),
            });
        }
        for (k, (out, o)) in outputs.iter().zip(spec.outputs).enumerate() {
            let expected = n * o.words as usize;
            if out.len() != expected {
                return Err(Error::ShapeMismatch {
                    what: format!(
                        "{}: output {k} words ({n} elements × {})",
                        spec.label, o.words
                    ),
                    expected,
                    got: out.len(),
                });
            }
        }
        shared_grad.fill(0.0);
        if n == 0 {
            return Ok(());
        }
        match &self.backend {
            Backend::Cpu => {
                crate::cpu::launch(spec, input, shared, n, outputs, shared_grad);
                Ok(())
            }
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.surface(g.launch(spec, input, shared, n, outputs, shared_grad)),
        }
    }

    /// Whether [`Device::time_kernel`] reads GPU timestamps (else it uses the wall clock).
    #[doc(hidden)] // Benchmark-only; not a stable API.
    pub fn has_timestamps(&self) -> bool {
        match &self.backend {
            Backend::Cpu => false,
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.has_timestamps(),
        }
    }

    /// Measurement, for benchmarks: runs `spec` `launches` times over `input` with the data
    /// already on the device, and returns each launch's kernel time (GPU timestamps where
    /// the adapter has them, else the wall clock of submit and wait; on the CPU device, the
    /// wall clock of the rayon launch). With timestamps, the second pass of a shared
    /// gradient's reduction is timed apart ([`KernelTime::reduce`]). The batch must fit one
    /// storage binding.
    #[doc(hidden)] // Benchmark-only; not a stable API.
    pub fn time_kernel(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        launches: usize,
    ) -> Result<Vec<KernelTime>, Error> {
        match &self.backend {
            Backend::Cpu => {
                let n = input.len() / (spec.input_words.max(1) as usize);
                let mut outs: Vec<Vec<f32>> = spec
                    .outputs
                    .iter()
                    .map(|o| vec![0.0; n * o.words as usize])
                    .collect();
                let mut times = Vec::new();
                for _ in 0..launches.max(1) {
                    let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
                    let t = Instant::now();
                    self.launch(spec, input, &mut views)?;
                    times.push(KernelTime {
                        main: t.elapsed(),
                        reduce: Duration::ZERO,
                    });
                }
                Ok(times)
            }
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.time_kernel(spec, input, launches),
        }
    }

    /// Measurement, for benchmarks: `repeats` samples of uploading `bytes` (the path of
    /// [`Device::write`], then a wait) and of reading them back (the path of
    /// [`Device::read_into`]). Zero on the CPU device.
    #[doc(hidden)] // Benchmark-only; not a stable API.
    pub fn time_transfers(
        &self,
        bytes: usize,
        repeats: usize,
    ) -> Result<(Vec<Duration>, Vec<Duration>), Error> {
        let _ = bytes;
        match &self.backend {
            Backend::Cpu => Ok((vec![Duration::ZERO; repeats], vec![Duration::ZERO; repeats])),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.time_transfers(bytes, repeats),
        }
    }

    /// Measurement, for benchmarks: `repeats` samples of the cheapest possible round trip,
    /// one submit of a 4-byte copy and one map: the floor of any launch's latency. Zero on
    /// the CPU device.
    #[doc(hidden)] // Benchmark-only; not a stable API.
    pub fn time_roundtrip(&self, repeats: usize) -> Result<Vec<Duration>, Error> {
        match &self.backend {
            Backend::Cpu => Ok(vec![Duration::ZERO; repeats]),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => g.time_roundtrip(repeats),
        }
    }
}

/// Live wgpu objects of a device's instance, by kind ([`Device::resource_counts`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    /// Buffers.
    pub buffers: usize,
    /// Bind groups.
    pub bind_groups: usize,
    /// Bind group layouts.
    pub bind_group_layouts: usize,
    /// Compute pipelines: one per kernel compiled.
    pub compute_pipelines: usize,
    /// Shader modules.
    pub shader_modules: usize,
    /// Command encoders.
    pub command_encoders: usize,
    /// Command buffers.
    pub command_buffers: usize,
    /// Query sets.
    pub query_sets: usize,
}
