//! The pipeline cache: each kernel's WGSL compiled once per device, and its reduction's
//! second pass.

use super::{Gpu, PipelineKey, key, lock, module_key};
use crate::error::Error;
use crate::spec::{
    GatheredSpec, KernelSpec, Precision, WORKGROUP_BYTES_OVERRIDE, WORKGROUP_SIZE_OVERRIDE,
};
use std::sync::Arc;
use wgpu::BufferBindingType as B;

/// A compiled pipeline and its bind group layout.
pub(super) struct Pipeline {
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) layout: wgpu::BindGroupLayout,
}

/// A module to compile: its label, WGSL and entry point, and whether it keeps wgpu's
/// bounds checks ([`KernelSpec::bounds_checks`]; the runtime's own kernels keep them).
pub(super) struct Module {
    label: &'static str,
    wgsl: &'static str,
    entry_point: &'static str,
    bounds_checks: bool,
}

impl Module {
    fn of(spec: &'static KernelSpec) -> Module {
        Module {
            label: spec.label,
            wgsl: spec.wgsl,
            entry_point: spec.entry_point,
            bounds_checks: spec.bounds_checks,
        }
    }
}

/// The pipelines of one launch: the kernel and the second pass of its reduction.
pub(super) struct Pipelines<'a> {
    pub(super) main: &'a Pipeline,
    pub(super) reduce: Option<&'a Pipeline>,
}

impl Gpu {
    /// The pipeline of `spec`, compiled on first use.
    pub(super) fn pipeline(&self, spec: &'static KernelSpec) -> Result<Arc<Pipeline>, Error> {
        if let Some(p) = self.compiled(key(spec)) {
            return Ok(p);
        }
        self.check_precision(spec)?;
        let module = Module::of(spec);
        let entries = plain_bindings(spec);
        self.compile_sized(key(spec), module, &entries, Some(spec.workgroup_size))
    }

    /// Compiles the pipelines of `specs` that are not compiled yet side by side, each on a
    /// thread of its own (wgpu's error scopes are per thread), and caches them. Choosing a
    /// kernel's workgroup size compiles it at three more sizes: one after another, a large
    /// kernel's took 3.7 s on the H100.
    pub(super) fn compile_side_by_side(&self, specs: &[&'static KernelSpec]) -> Result<(), Error> {
        let todo: Vec<&'static KernelSpec> = (specs.iter().copied())
            .filter(|spec| self.compiled(key(spec)).is_none())
            .collect();
        let built: Vec<Result<Arc<Pipeline>, Error>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (todo.iter().copied())
                .map(|spec| {
                    scope.spawn(move || {
                        self.check_precision(spec)?;
                        let module = Module::of(spec);
                        self.build(module, &plain_bindings(spec), Some(spec.workgroup_size))
                    })
                })
                .collect();
            (todo.iter().zip(threads))
                .map(|(spec, t)| {
                    t.join().unwrap_or_else(|_| {
                        Err(Error::Validation {
                            label: spec.label.to_string(),
                            message: "the thread compiling it panicked".to_string(),
                        })
                    })
                })
                .collect()
        });
        let mut cache = lock(&self.pipelines);
        for (spec, p) in todo.iter().zip(built) {
            cache.entry(key(spec)).or_insert(p?);
        }
        Ok(())
    }

    /// An f64 kernel on a device without 64-bit floats in shaders: an error that says so,
    /// before any WGSL reaches the driver.
    fn check_precision(&self, spec: &KernelSpec) -> Result<(), Error> {
        if spec.precision == Precision::F64 && !self.has_f64() {
            return Err(Error::Unsupported(format!(
                "{}: an f64 kernel needs 64-bit floats in shaders (wgpu's SHADER_F64), which \
                 {} does not have; run it with Device::cpu(), or write the function over f32",
                spec.label,
                self.describe()
            )));
        }
        Ok(())
    }

    /// The pipeline of a gathered kernel, compiled on first use.
    pub(super) fn gathered_pipeline(
        &self,
        g: &'static GatheredSpec,
    ) -> Result<Arc<Pipeline>, Error> {
        let spec = &g.kernel;
        if let Some(p) = self.compiled(key(spec)) {
            return Ok(p);
        }
        self.check_precision(spec)?;
        let mut entries = kernel_bindings(spec);
        for f in g.fields {
            entries.push((f.rows_binding, B::Storage { read_only: true }));
            entries.push((f.index_binding, B::Storage { read_only: true }));
        }
        self.compile_sized(key(spec), Module::of(spec), &entries, None)
    }

    /// The second pass of `spec`'s shared-gradient reduction, if it has one.
    pub(super) fn reduce_pipeline(
        &self,
        spec: &'static KernelSpec,
    ) -> Result<Option<Arc<Pipeline>>, Error> {
        let Some(r) = spec.shared.and_then(|sh| sh.reduction.as_ref()) else {
            return Ok(None);
        };
        let entries = [
            (r.params_binding, B::Uniform),
            (r.input_binding, B::Storage { read_only: true }),
            (r.output_binding, B::Storage { read_only: false }),
        ];
        let key = module_key(r.wgsl, r.entry_point);
        self.compile(key, r.label, r.wgsl, r.entry_point, &entries)
            .map(Some)
    }

    /// The pipeline `key` if it is compiled: a recorded step looks its pipelines up before
    /// it builds their bindings' descriptions, which only a first compilation needs.
    fn compiled(&self, key: PipelineKey) -> Option<Arc<Pipeline>> {
        lock(&self.pipelines).get(&key).cloned()
    }

    /// A pipeline compiled on first use.
    ///
    /// Compiled under the cache's lock, so that concurrent first launches of one kernel make
    /// one pipeline; its bind group layout is explicit (from the spec's bindings), not derived
    /// from the shader, so launch sets are valid for it whatever pipeline made them.
    pub(super) fn compile(
        &self,
        key: PipelineKey,
        label: &'static str,
        wgsl: &'static str,
        entry_point: &'static str,
        bindings: &[(u32, wgpu::BufferBindingType)],
    ) -> Result<Arc<Pipeline>, Error> {
        let module = Module {
            label,
            wgsl,
            entry_point,
            bounds_checks: true,
        };
        self.compile_sized(key, module, bindings, None)
    }

    /// [`Gpu::compile`] of `module`, with `workgroup_size` the value of
    /// [`WORKGROUP_SIZE_OVERRIDE`] where the module declares it (else its default).
    pub(super) fn compile_sized(
        &self,
        key: PipelineKey,
        module: Module,
        bindings: &[(u32, wgpu::BufferBindingType)],
        workgroup_size: Option<u32>,
    ) -> Result<Arc<Pipeline>, Error> {
        let mut cache = lock(&self.pipelines);
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let p = self.build(module, bindings, workgroup_size)?;
        cache.insert(key, p.clone());
        Ok(p)
    }

    /// A pipeline of `(label, wgsl, entry_point)` with `bindings`, compiled now and not
    /// cached (see [`Gpu::compile_sized`]).
    fn build(
        &self,
        module: Module,
        bindings: &[(u32, wgpu::BufferBindingType)],
        workgroup_size: Option<u32>,
    ) -> Result<Arc<Pipeline>, Error> {
        let Module {
            label,
            wgsl,
            entry_point,
            bounds_checks,
        } = module;
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
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        };
        // Every loop of the WGSL the runtime compiles terminates (a generated kernel's loops
        // run over constant ranges, the runtime's own over counts it computes), so wgpu's
        // loop bounding, a counter and a branch in every iteration of every loop that also
        // keeps the driver from unrolling, is left out: the 8-32-32-1 network's value and the
        // FMA ceiling's kernel ran 1.5x and 2.4x faster without it on the H100 (BENCHMARKS.md).
        // Bounds checks stay, except where the module's spec promises its indices in range.
        let checks = wgpu::ShaderRuntimeChecks {
            force_loop_bounding: false,
            bounds_checks,
            ..wgpu::ShaderRuntimeChecks::checked()
        };
        // SAFETY: `force_loop_bounding: false` asks that no loop be infinite, which holds for
        // every module compiled here (above; `KernelSpec::wgsl` states it for a spec written
        // by hand). `bounds_checks: false` asks that no index leave its array or buffer,
        // which `KernelSpec::bounds_checks` promises where it is false.
        let shader = unsafe { self.device.create_shader_module_trusted(desc, checks) };
        // A kernel whose workgroup memory grows with the device's gets all of it; one whose
        // workgroup size the runtime chooses gets the size it is launched at.
        let mut constants = Vec::new();
        if wgsl.contains(&format!("override {WORKGROUP_BYTES_OVERRIDE}:")) {
            let limit = f64::from(self.device.limits().max_compute_workgroup_storage_size);
            constants.push((WORKGROUP_BYTES_OVERRIDE, limit));
        }
        if let Some(size) = workgroup_size
            && wgsl.contains(&format!("override {WORKGROUP_SIZE_OVERRIDE}:"))
        {
            constants.push((WORKGROUP_SIZE_OVERRIDE, f64::from(size)));
        }
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&pipeline_layout),
                module: &shader,
                entry_point: Some(entry_point),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    ..Default::default()
                },
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Validation {
                label: label.to_string(),
                message: e.to_string(),
            });
        }
        Ok(Arc::new(Pipeline { pipeline, layout }))
    }
}

/// The bindings of a kernel launched over argument rows: its own, and the rows.
fn plain_bindings(spec: &KernelSpec) -> Vec<(u32, wgpu::BufferBindingType)> {
    let mut entries = kernel_bindings(spec);
    entries.push((spec.input_binding, B::Storage { read_only: true }));
    entries
}

/// One of the runtime's own WGSL modules written over `alias T = f32;`, in either
/// precision: the f64 text (the alias changed) is made on first use.
pub(crate) struct PrecisionModule {
    /// Its names in f32 and in f64.
    names: [&'static str; 2],
    wgsl: &'static str,
    f64: std::sync::OnceLock<String>,
}

impl PrecisionModule {
    /// The module named `names` (f32, f64) of text `wgsl`, which declares `alias T = f32;`.
    pub(crate) const fn new(names: [&'static str; 2], wgsl: &'static str) -> Self {
        PrecisionModule {
            names,
            wgsl,
            f64: std::sync::OnceLock::new(),
        }
    }

    /// Its name and text over `precision`'s floats.
    pub(crate) fn get(&'static self, precision: Precision) -> (&'static str, &'static str) {
        match precision {
            Precision::F32 => (self.names[0], self.wgsl),
            Precision::F64 => (
                self.names[1],
                self.f64
                    .get_or_init(|| self.wgsl.replace("alias T = f32;", "alias T = f64;")),
            ),
        }
    }
}

/// An entry point of one of the runtime's own WGSL modules (gather, vectors, products,
/// least squares), as [`Gpu::record_entry`] dispatches it.
pub(crate) struct EntryPoint {
    /// Names the module's pipelines and bind groups.
    pub(crate) module: &'static str,
    pub(crate) wgsl: &'static str,
    pub(crate) entry: &'static str,
    /// Names its dispatches (a timed recording reports their times by it).
    pub(crate) pass: &'static str,
}

impl Gpu {
    /// Records one dispatch of `at` over `workgroups`: `uniform` at binding 0, and
    /// `storage` as (binding, buffer, read-only). Its pipeline is compiled on first use and
    /// its bind group made once for the same bindings.
    pub(crate) fn record_entry(
        &self,
        work: &mut super::GpuWork,
        at: &EntryPoint,
        uniform: &[u32],
        storage: &[(u32, &wgpu::Buffer, bool)],
        workgroups: (u32, u32),
    ) -> Result<(), Error> {
        let layout: Vec<(u32, B)> = std::iter::once((0, B::Uniform))
            .chain(
                storage
                    .iter()
                    .map(|&(b, _, read_only)| (b, B::Storage { read_only })),
            )
            .collect();
        let key = module_key(at.wgsl, at.entry);
        let pipeline = self.compile(key, at.module, at.wgsl, at.entry, &layout)?;
        let buffers: Vec<_> = storage
            .iter()
            .map(|&(binding, buffer, _)| (binding, buffer, 0, None))
            .collect();
        let group =
            self.cached_bind_group(key, &pipeline.layout, at.module, (0, uniform), &buffers);
        work.dispatch(at.pass, &pipeline.pipeline, &group, workgroups);
        Ok(())
    }
}

/// The bindings of a kernel but its arguments': its uniform, outputs, shared words and
/// partial sums.
fn kernel_bindings(spec: &KernelSpec) -> Vec<(u32, B)> {
    let mut entries = vec![(spec.params_binding, B::Uniform)];
    for o in spec.outputs {
        entries.push((o.binding, B::Storage { read_only: false }));
    }
    if let Some(sh) = spec.shared {
        let ty = if sh.uniform {
            B::Uniform
        } else {
            B::Storage { read_only: true }
        };
        entries.push((sh.binding, ty));
        if let Some(r) = &sh.reduction {
            entries.push((r.partials_binding, B::Storage { read_only: false }));
        }
    }
    entries
}
