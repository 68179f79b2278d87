//! Launch sets: the buffers and bind groups of one launch of up to `capacity` elements,
//! created once and reused.

use super::pipelines::Pipelines;
use super::{Gpu, MIN_CAPACITY, PARAMS_BYTES, SETS_PER_KEY, key, lock};
use crate::error::Error;
use crate::spec::{KernelSpec, SharedSpec, args_binding_bytes};

/// Largest launch set, in bytes of its upload and staging buffers together, whose kernel
/// binds them rather than device buffers: a few elements' launch, where the copies cost
/// more than the kernel reading its arguments from host-visible memory.
const MAX_DIRECT_BYTES: u64 = 256 << 10;

/// Everything one launch of up to `capacity` elements needs, created once and reused: an
/// upload buffer (the uniforms, the shared words, the arguments) that stays mapped between
/// uses, one staging buffer that receives every output, and the bind groups. A launch is
/// two memcpys, one submit and one wait, with no allocation.
///
/// A large set binds device buffers the upload is copied into and the results copied out
/// of (`copies`). A small one, on a device that lets mapped buffers be bound
/// (`MAPPABLE_PRIMARY_BUFFERS`), binds the upload and staging buffers themselves: its
/// launch records one dispatch and nothing else, where four copies in, their barriers and
/// one copy per output made a one-element launch 2.1-2.5x the empty round trip on the
/// H100 (BENCHMARKS.md, "Launches of a few elements").
pub(super) struct LaunchSet {
    pub(super) capacity: usize,
    pub(super) layout: SetLayout,
    pub(super) upload: wgpu::Buffer,
    pub(super) staging: wgpu::Buffer,
    pub(super) bind_group: wgpu::BindGroup,
    /// The second pass of the shared gradients' reduction, for an adjoint that has one.
    pub(super) reduce_bind_group: Option<wgpu::BindGroup>,
    /// The device buffers the kernel binds, where it does not bind the mapped ones.
    pub(super) copies: Option<DeviceBuffers>,
    /// Whether it is a launch's whose input and outputs are all in pinned memory: its
    /// upload and staging buffers hold the uniforms, shared words and sums alone.
    pub(super) pinned: bool,
}

/// The device buffers of a launch set that copies its upload in and its results out.
pub(super) struct DeviceBuffers {
    pub(super) params: wgpu::Buffer,
    pub(super) input: wgpu::Buffer,
    pub(super) outputs: Vec<wgpu::Buffer>,
    /// The `#[shared]` words, for a kernel that has them.
    pub(super) shared: Option<wgpu::Buffer>,
    /// The reduction's second pass: its uniform and its sums.
    pub(super) reduce_params: Option<wgpu::Buffer>,
    pub(super) sums: Option<wgpu::Buffer>,
}

/// Byte offsets of a launch set's regions: in the upload buffer the element count's
/// uniform (at 0), the second pass's uniform, the shared words and the arguments; in the
/// staging buffer each output (for the set's full capacity) and the shared gradient's
/// sums. A set whose kernel binds these regions aligns them to the device's binding
/// offsets; one that copies them aligns to 16 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SetLayout {
    pub(super) reduce_at: u64,
    pub(super) shared_at: u64,
    pub(super) args_at: u64,
    pub(super) upload_bytes: u64,
    pub(super) outputs_at: Vec<u64>,
    pub(super) sums_at: u64,
    pub(super) staging_bytes: u64,
}

impl SetLayout {
    /// The layout of a set of `capacity` elements of `spec`, its regions aligned to `align`
    /// bytes (a power of two, at least 16).
    pub(super) fn new(spec: &KernelSpec, capacity: usize, align: u64) -> SetLayout {
        let block = |bytes: u64| bytes.next_multiple_of(align);
        let mut at = block(PARAMS_BYTES);
        let (reduce_at, shared_at) = match spec.shared {
            Some(sh) => {
                let reduce_at = at;
                at += block(PARAMS_BYTES);
                let shared_at = at;
                at += block((sh.words as u64 * 4).next_multiple_of(16));
                (reduce_at, shared_at)
            }
            None => (0, 0),
        };
        let args_at = at;
        let upload_bytes = args_at + args_binding_bytes(capacity, spec.input_words);
        let mut at = 0;
        let outputs_at = spec
            .outputs
            .iter()
            .map(|o| {
                let here = at;
                at += block(capacity as u64 * o.words as u64 * 4);
                here
            })
            .collect();
        let sums_at = at;
        // (A pinned launch's set holds no elements: its buffer still has some bytes.)
        let staging_bytes = (sums_at + spec.shared_grad_words() as u64 * 4).max(16);
        SetLayout {
            reduce_at,
            shared_at,
            args_at,
            upload_bytes,
            outputs_at,
            sums_at,
            staging_bytes: staging_bytes.max(16),
        }
    }

    /// The bytes of the staging buffer a chunk of `m` elements reads back: up to the end
    /// of its sums, or of its last output where the kernel has no shared gradient.
    pub(super) fn read_bytes(&self, spec: &KernelSpec, m: usize) -> u64 {
        match spec.shared_grad_words() {
            0 => match (self.outputs_at.last(), spec.outputs.last()) {
                (Some(at), Some(o)) => at + m as u64 * o.words as u64 * 4,
                _ => 16,
            },
            words => self.sums_at + words as u64 * 4,
        }
    }
}

impl Gpu {
    /// A launch set for at least `m` elements: a cached one, or a new one; `pinned` for a
    /// launch whose input and outputs are all in pinned memory (device buffers always, and
    /// no elements in its mapped buffers).
    pub(super) fn take_set(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        m: usize,
        pinned: bool,
    ) -> Result<LaunchSet, Error> {
        let chunk = self.chunk_elements_of(spec, pinned);
        let capacity = m.next_power_of_two().max(MIN_CAPACITY).min(chunk.max(m));
        if let Some(set) = lock(&self.sets)
            .get_mut(&(key(spec), capacity, pinned))
            .and_then(Vec::pop)
        {
            return Ok(set);
        }
        // Creating buffers is where memory runs out: the only error scopes of a launch.
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let copies = (pinned || !self.binds_mapped(spec, capacity))
            .then(|| self.device_buffers(spec, capacity));
        let staged = if pinned { 0 } else { capacity };
        let mut set = self.build_set(spec, pipelines, (capacity, staged), copies.as_ref(), true);
        set.copies = copies;
        set.pinned = pinned;
        self.pop_scopes(spec, oom, validation)?;
        Ok(set)
    }

    /// A launch set of exactly `n` elements (timing wants no spare capacity), not cached,
    /// and its device buffers. Timing uploads once, with `write_buffer`, and reads nothing
    /// back: its upload and staging buffers are placeholders.
    pub(super) fn take_set_exact(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        n: usize,
    ) -> (LaunchSet, DeviceBuffers) {
        let copies = self.device_buffers(spec, n);
        let set = self.build_set(spec, pipelines, (n, n), Some(&copies), false);
        (set, copies)
    }

    /// Whether a set of `capacity` elements binds its mapped buffers (see [`LaunchSet`]).
    fn binds_mapped(&self, spec: &KernelSpec, capacity: usize) -> bool {
        let layout = SetLayout::new(spec, capacity, self.binding_alignment());
        self.mappable_bindings && layout.upload_bytes + layout.staging_bytes <= MAX_DIRECT_BYTES
    }

    /// The alignment of a binding's offset into a buffer, uniform or storage.
    fn binding_alignment(&self) -> u64 {
        (self.limits.min_uniform_buffer_offset_alignment as u64)
            .max(self.limits.min_storage_buffer_offset_alignment as u64)
            .max(16)
            .next_power_of_two()
    }

    /// The device buffers a launch set of `capacity` elements copies into and out of.
    fn device_buffers(&self, spec: &KernelSpec, capacity: usize) -> DeviceBuffers {
        use wgpu::BufferUsages as U;
        let words = |w: u32| (capacity * w as usize * 4) as u64;
        let reduction = spec.shared.and_then(|sh| sh.reduction.as_ref());
        DeviceBuffers {
            params: self.buffer(spec.label, U::UNIFORM | U::COPY_DST, PARAMS_BYTES),
            input: self.buffer(
                spec.label,
                U::STORAGE | U::COPY_DST,
                args_binding_bytes(capacity, spec.input_words),
            ),
            outputs: spec
                .outputs
                .iter()
                .map(|o| self.buffer(spec.label, U::STORAGE | U::COPY_SRC, words(o.words)))
                .collect(),
            shared: spec.shared.map(|sh| {
                let (usage, bytes) = shared_binding(sh);
                self.buffer(spec.label, usage | U::COPY_DST, bytes)
            }),
            reduce_params: reduction
                .map(|r| self.buffer(r.label, U::UNIFORM | U::COPY_DST, PARAMS_BYTES)),
            sums: reduction.map(|r| {
                let bytes = spec.shared_grad_words() as u64 * 4;
                self.buffer(r.label, U::STORAGE | U::COPY_SRC, bytes)
            }),
        }
    }

    /// A launch set for `capacity` elements whose kernel binds `copies`, or where there are
    /// none the mapped buffers themselves, which hold `staged` elements' arguments and
    /// outputs (`capacity` but for a pinned launch's set); with `mapped`, its upload buffer
    /// is mapped and both it and the staging buffer are full size (else placeholders). The
    /// set does not own `copies`: the caller keeps them, or puts them in
    /// [`LaunchSet::copies`].
    pub(super) fn build_set(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        (capacity, staged): (usize, usize),
        copies: Option<&DeviceBuffers>,
        mapped: bool,
    ) -> LaunchSet {
        use wgpu::BufferUsages as U;
        let direct = copies.is_none();
        let align = if direct { self.binding_alignment() } else { 16 };
        let layout = SetLayout::new(spec, staged, align);
        let (up_usage, down_usage) = if direct {
            (U::UNIFORM | U::STORAGE, U::STORAGE)
        } else {
            (U::COPY_SRC, U::COPY_DST)
        };
        let full = |bytes: u64| if mapped { bytes } else { 16 };
        let upload = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(spec.label),
            size: full(layout.upload_bytes),
            usage: U::MAP_WRITE | up_usage,
            mapped_at_creation: mapped,
        });
        let staging = self.buffer(
            spec.label,
            U::MAP_READ | down_usage,
            full(layout.staging_bytes),
        );
        let bindings = match copies {
            Some(c) => SetBindings::of_copies(c),
            None => SetBindings::of_mapped(spec, capacity, &layout, &upload, &staging),
        };
        // One partial per dispatched workgroup and word, for any launch this set takes (the
        // dispatch of its full capacity has the most workgroups).
        let partials = spec
            .shared
            .and_then(|sh| Some((sh.reduction.as_ref()?, sh)))
            .map(|(r, sh)| {
                let groups = self.max_groups(spec, capacity) as u64;
                let buf = self.buffer(spec.label, U::STORAGE, groups * sh.words as u64 * 4);
                (r, buf)
            });
        let mut entries = vec![
            entry(spec.params_binding, bindings.params.clone()),
            entry(spec.input_binding, bindings.input.clone()),
        ];
        for (o, b) in spec.outputs.iter().zip(&bindings.outputs) {
            entries.push(entry(o.binding, b.clone()));
        }
        if let (Some(sh), Some(b)) = (spec.shared, &bindings.shared) {
            entries.push(entry(sh.binding, b.clone()));
        }
        if let Some((r, buf)) = &partials {
            entries.push(entry(r.partials_binding, buf.as_entire_buffer_binding()));
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(spec.label),
            layout: &pipelines.main.layout,
            entries: &entries,
        });
        let reduce_bind_group =
            partials
                .as_ref()
                .zip(pipelines.reduce)
                .and_then(|((r, buf), p)| {
                    let (params, sums) = (bindings.reduce_params.clone()?, bindings.sums.clone()?);
                    Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(r.label),
                        layout: &p.layout,
                        entries: &[
                            entry(r.params_binding, params),
                            entry(r.input_binding, buf.as_entire_buffer_binding()),
                            entry(r.output_binding, sums),
                        ],
                    }))
                });
        LaunchSet {
            capacity,
            layout,
            upload,
            staging,
            bind_group,
            reduce_bind_group,
            copies: None,
            pinned: false,
        }
    }

    /// Keeps an idle launch set for the next launch of its kernel and kind, unless
    /// [`SETS_PER_KEY`] are kept.
    pub(super) fn return_set(&self, spec: &'static KernelSpec, set: LaunchSet) {
        let mut sets = lock(&self.sets);
        let list = sets
            .entry((key(spec), set.capacity, set.pinned))
            .or_default();
        if list.len() < SETS_PER_KEY {
            list.push(set);
        }
    }
}

/// The usage and size of a kernel's `#[shared]` words' buffer: a uniform array of `vec4`s
/// binds whole 16-byte strides.
fn shared_binding(sh: &SharedSpec) -> (wgpu::BufferUsages, u64) {
    if sh.uniform {
        (
            wgpu::BufferUsages::UNIFORM,
            (sh.words as u64 * 4).next_multiple_of(16),
        )
    } else {
        (wgpu::BufferUsages::STORAGE, sh.words as u64 * 4)
    }
}

/// A bind group's entry for a buffer binding.
fn entry(binding: u32, buffer: wgpu::BufferBinding<'_>) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: wgpu::BindingResource::Buffer(buffer),
    }
}

/// What each binding of a set's kernels reads or writes.
struct SetBindings<'a> {
    params: wgpu::BufferBinding<'a>,
    input: wgpu::BufferBinding<'a>,
    outputs: Vec<wgpu::BufferBinding<'a>>,
    shared: Option<wgpu::BufferBinding<'a>>,
    reduce_params: Option<wgpu::BufferBinding<'a>>,
    sums: Option<wgpu::BufferBinding<'a>>,
}

impl<'a> SetBindings<'a> {
    /// Each of a set's own device buffers, whole.
    fn of_copies(c: &'a DeviceBuffers) -> Self {
        let whole = |b: &'a wgpu::Buffer| b.as_entire_buffer_binding();
        SetBindings {
            params: whole(&c.params),
            input: whole(&c.input),
            outputs: c.outputs.iter().map(whole).collect(),
            shared: c.shared.as_ref().map(whole),
            reduce_params: c.reduce_params.as_ref().map(whole),
            sums: c.sums.as_ref().map(whole),
        }
    }

    /// The regions of the upload and staging buffers that `layout` places.
    fn of_mapped(
        spec: &KernelSpec,
        capacity: usize,
        layout: &SetLayout,
        upload: &'a wgpu::Buffer,
        staging: &'a wgpu::Buffer,
    ) -> Self {
        let region = |buffer: &'a wgpu::Buffer, offset: u64, bytes: u64| wgpu::BufferBinding {
            buffer,
            offset,
            size: std::num::NonZeroU64::new(bytes.max(4)),
        };
        let reduction = spec.shared.and_then(|sh| sh.reduction.as_ref());
        let grad_bytes = spec.shared_grad_words() as u64 * 4;
        SetBindings {
            params: region(upload, 0, PARAMS_BYTES),
            input: region(upload, layout.args_at, layout.upload_bytes - layout.args_at),
            outputs: spec
                .outputs
                .iter()
                .zip(&layout.outputs_at)
                .map(|(o, &at)| region(staging, at, capacity as u64 * o.words as u64 * 4))
                .collect(),
            shared: spec
                .shared
                .map(|sh| region(upload, layout.shared_at, shared_binding(sh).1)),
            reduce_params: reduction.map(|_| region(upload, layout.reduce_at, PARAMS_BYTES)),
            sums: reduction.map(|_| region(staging, layout.sums_at, grad_bytes)),
        }
    }
}
