//! Launch sets: the buffers and bind groups of one launch of up to `capacity` elements,
//! created once and reused.

use super::pipelines::Pipelines;
use super::{Gpu, MIN_CAPACITY, PARAMS_BYTES, SETS_PER_KEY, key, lock};
use crate::error::Error;
use crate::spec::KernelSpec;

/// Everything one launch of up to `capacity` elements needs, created once and reused: the
/// buffers, the bind group over them, an upload buffer (the element count, then the
/// arguments) that stays mapped between uses, and one staging buffer that receives every
/// output. A launch is two memcpys, one submit and one wait, with no allocation.
pub(super) struct LaunchSet {
    pub(super) capacity: usize,
    pub(super) upload: wgpu::Buffer,
    pub(super) input: wgpu::Buffer,
    pub(super) params: wgpu::Buffer,
    pub(super) outputs: Vec<wgpu::Buffer>,
    pub(super) staging: wgpu::Buffer,
    pub(super) bind_group: wgpu::BindGroup,
    pub(super) shared: Option<SharedSet>,
}

/// The buffers of a kernel's `#[shared]` arguments: their words, and for an adjoint kernel
/// the per-workgroup partial sums, the second pass's uniform, its sums and its bind group.
pub(super) struct SharedSet {
    pub(super) values: wgpu::Buffer,
    pub(super) reduction: Option<ReductionSet>,
}

pub(super) struct ReductionSet {
    pub(super) params: wgpu::Buffer,
    pub(super) sums: wgpu::Buffer,
    pub(super) bind_group: wgpu::BindGroup,
}

/// Byte offsets in a launch set's upload buffer of the second pass's uniform, of the
/// shared words and of the arguments; the element count's uniform is at 0.
pub(super) fn upload_offsets(spec: &KernelSpec) -> (u64, u64, u64) {
    match spec.shared {
        None => (0, 0, PARAMS_BYTES),
        Some(sh) => {
            let shared_at = 2 * PARAMS_BYTES;
            let args_at = shared_at + (sh.words as u64 * 4).next_multiple_of(16);
            (PARAMS_BYTES, shared_at, args_at)
        }
    }
}

impl Gpu {
    /// A launch set for at least `m` elements: a cached one, or a new one.
    pub(super) fn take_set(
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

    /// A launch set of exactly `n` elements (timing wants no spare capacity), not cached.
    /// Timing uploads once, with `write_buffer`, and reads nothing back: its upload and
    /// staging buffers are placeholders.
    pub(super) fn take_set_exact(
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

    /// A new launch set for `capacity` elements, the upload buffer mapped.
    pub(super) fn create_set(
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
    pub(super) fn build_set(
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

    pub(super) fn return_set(&self, spec: &'static KernelSpec, set: LaunchSet) {
        let mut sets = lock(&self.sets);
        let list = sets.entry((key(spec), set.capacity)).or_default();
        if list.len() < SETS_PER_KEY {
            list.push(set);
        }
    }
}
