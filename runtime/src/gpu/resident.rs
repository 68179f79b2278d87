//! Device-resident buffers on the GPU: creating, reading and writing them, and recording
//! launches over them into a command encoder (one submission, no host round trip).

use super::bind_cache::StorageBinding;
use super::passes::PendingSum;
use super::pipelines::Pipeline;
use super::{Gpu, key, lock, module_key};
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::gather::Field;
use crate::gather_launch::GatherOutputs;
use crate::recording::Bindings;
use crate::spec::{FieldSpec, GatheredSpec, KernelSpec, args_binding_bytes};
use std::num::NonZeroU64;
use std::sync::Arc;
use wgpu::util::DeviceExt;

/// Elements of a resident launch's chunks are a multiple of this: with 4-byte words,
/// every chunk's binding offset is then a multiple of 256 bytes, the largest storage offset
/// alignment WebGPU allows.
const CHUNK_ALIGN: usize = 64;

impl Gpu {
    /// A storage buffer holding `words` (padded to 16 bytes: a uniform binding of
    /// `vec4`s reads whole strides).
    #[cfg(test)]
    pub(crate) fn resident_buffer(&self, words: &[u32]) -> Result<wgpu::Buffer, Error> {
        self.resident_buffer_of(words.len(), Some(bytemuck::cast_slice(words)))
    }

    /// A storage buffer of `len` words holding `bytes` (the words' bytes), or zeros
    /// (`None`: no upload, wgpu zeroes new buffers).
    pub(crate) fn resident_buffer_of(
        &self,
        len: usize,
        bytes: Option<&[u8]>,
    ) -> Result<wgpu::Buffer, Error> {
        use wgpu::BufferUsages as U;
        self.check_lost()?;
        let bytes_len = (len as u64 * 4).next_multiple_of(16).max(16);
        if bytes_len > self.limits.max_buffer_size {
            return Err(Error::Unsupported(format!(
                "a buffer of {bytes_len} bytes is larger than the device's largest ({} bytes)",
                self.limits.max_buffer_size
            )));
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.buffer(
            "gradfuse buffer",
            U::STORAGE | U::UNIFORM | U::COPY_SRC | U::COPY_DST,
            bytes_len,
        );
        if let Some(e) = pollster::block_on(oom.pop()) {
            return Err(Error::OutOfMemory(e.to_string()));
        }
        // wgpu zeroes new buffers: the padding, and a buffer of zeros, need no writes.
        if let Some(bytes) = bytes.filter(|b| !b.is_empty()) {
            self.upload(&buffer, 0, bytes)?;
        }
        Ok(buffer)
    }

    /// A zeroed storage buffer of `words` words, with no upload (wgpu zeroes new buffers).
    pub(crate) fn scratch_buffer(&self, words: usize) -> Result<wgpu::Buffer, Error> {
        use wgpu::BufferUsages as U;
        let bytes = (words as u64 * 4).next_multiple_of(16).max(16);
        if bytes > self.binding_bytes() {
            return Err(Error::Unsupported(format!(
                "a launch with gathered arguments needs {bytes} bytes of argument or gradient \
                 rows, more than one binding holds ({} bytes); launch fewer elements at once",
                self.binding_bytes()
            )));
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.buffer("gradfuse scratch", U::STORAGE | U::COPY_SRC, bytes);
        if let Some(e) = pollster::block_on(oom.pop()) {
            return Err(Error::OutOfMemory(e.to_string()));
        }
        Ok(buffer)
    }

    /// Copies the start of `buffer` into `out`, once the work submitted before has run.
    pub(crate) fn read_resident(&self, buffer: &wgpu::Buffer, out: &mut [u8]) -> Result<(), Error> {
        self.check_lost()?;
        if !out.is_empty() {
            self.download(buffer, 0, out)?;
        }
        self.take_uncaptured("gradfuse read")
    }

    /// Overwrites the start of `buffer` with `bytes`, ordered after the work submitted
    /// before.
    pub(crate) fn write_resident(&self, buffer: &wgpu::Buffer, bytes: &[u8]) -> Result<(), Error> {
        self.check_lost()?;
        if !bytes.is_empty() {
            self.upload(buffer, 0, bytes)?;
        }
        self.take_uncaptured("gradfuse write")
    }

    /// A command encoder for a recording.
    pub(crate) fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Submits a recording without waiting for it.
    pub(crate) fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<(), Error> {
        self.check_lost()?;
        self.queue.submit([encoder.finish()]);
        self.take_uncaptured("gradfuse recording")
    }

    /// An error caught by the uncaptured-error handler since the last check.
    pub(crate) fn take_uncaptured(&self, label: &str) -> Result<(), Error> {
        match lock(&self.uncaptured).take() {
            Some(message) => Err(Error::Validation {
                label: label.to_string(),
                message,
            }),
            None => Ok(()),
        }
    }

    /// A small uniform buffer holding `words`, made for one recorded dispatch (recorded
    /// dispatches of one submission cannot share a uniform written between them).
    pub(crate) fn uniform(&self, label: &str, words: &[u32]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::cast_slice(words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// Elements of one chunk of a resident launch of `spec`: every binding fits the device's
    /// limit, and every chunk starts at an aligned offset.
    fn resident_chunk(&self, spec: &KernelSpec) -> usize {
        let elements = self
            .max_binding_elements(spec)
            .min(spec.elements_per_submission());
        (elements / CHUNK_ALIGN * CHUNK_ALIGN).max(CHUNK_ALIGN)
    }

    /// A scratch buffer of at least `bytes` for `spec`'s partial sums, kept for later
    /// launches (recorded launches of one kernel use it one after the other).
    fn scratch(&self, spec: &'static KernelSpec, bytes: u64) -> wgpu::Buffer {
        let mut cache = lock(&self.scratch);
        match cache.get(&key(spec)) {
            Some(b) if b.size() >= bytes => b.clone(),
            _ => {
                let b = self.buffer(spec.label, wgpu::BufferUsages::STORAGE, bytes);
                cache.insert(key(spec), b.clone());
                b
            }
        }
    }

    /// Records a launch of `spec` over `n` elements (lengths already checked): chunk by
    /// chunk, each bound at its offset into the caller's buffers; a reduction's second pass
    /// writes the first chunk's sums and adds each later chunk's, in order.
    pub(crate) fn record_launch(
        &self,
        work: &mut super::GpuWork,
        spec: &'static KernelSpec,
        n: usize,
        b: &Bindings<'_>,
    ) -> Result<(), Error> {
        self.check_lost()?;
        // Chosen on the rows as they are now: a recording may write them before this
        // launch runs, but what a size's speed depends on is the kernel, not the data.
        let spec = self.choose_size_resident(self.runnable(spec)?, b.input.gpu(), n);
        let main = self.pipeline(spec)?;
        let dispatch = Dispatch {
            args: ArgsIn::Rows(b.input),
            outputs: b.outputs,
            shared: b.shared,
            shared_grad: b.shared_grad,
        };
        self.record_chunks(work, spec, &main, n, &dispatch)
    }

    /// Whether a launch of gathered kernel `g` can bind `fields` as they are: every block
    /// read through an index within one binding, and the device's storage bindings enough.
    pub(crate) fn fits_gathered(&self, g: &GatheredSpec, fields: &[Field]) -> bool {
        let spec = &g.kernel;
        let shared = spec.shared.map_or(0, |s| {
            usize::from(!s.uniform) + usize::from(s.reduction.is_some())
        });
        let storage = 2 * g.fields.len() + spec.outputs.len() + shared;
        let blocks_fit = fields
            .iter()
            .filter(|f| f.index.is_some())
            .all(|f| f.source.words as u64 * 4 <= self.binding_bytes());
        g.fields.len() == fields.len()
            && storage <= self.limits.max_storage_buffers_per_shader_stage as usize
            && blocks_fit
    }

    /// Records a launch of gathered kernel `g` over `n` elements (bindings already checked,
    /// and [`Gpu::fits_gathered`]): each argument bound where it is, the kernel reading rows
    /// of blocks through their indices itself.
    pub(crate) fn record_gathered(
        &self,
        work: &mut super::GpuWork,
        g: &'static GatheredSpec,
        n: usize,
        fields: &[Field],
        b: &GatherOutputs<'_>,
        outputs: &[&Arc<RawBuffer>],
    ) -> Result<(), Error> {
        self.check_lost()?;
        let main = self.gathered_pipeline(g)?;
        let dispatch = Dispatch {
            args: ArgsIn::Fields(g.fields, fields),
            outputs,
            shared: b.shared,
            shared_grad: b.shared_grad,
        };
        self.record_chunks(work, &g.kernel, &main, n, &dispatch)
    }

    /// Records the dispatches of a launch, chunk by chunk (see [`Gpu::record_launch`]).
    fn record_chunks(
        &self,
        work: &mut super::GpuWork,
        spec: &'static KernelSpec,
        main: &Pipeline,
        n: usize,
        d: &Dispatch<'_>,
    ) -> Result<(), Error> {
        let reduce = self.reduce_pipeline(spec)?;
        let chunk = self.resident_chunk(spec);
        let words = spec.shared_grad_words() as u64;
        let partials = reduce.as_ref().map(|_| {
            let groups = self.max_groups(spec, chunk.min(n)) as u64;
            self.scratch(spec, groups * words * 4)
        });
        let mut start = 0;
        while start < n {
            let m = chunk.min(n - start);
            let pass = work.pass(spec.label);
            let shape = self.launch_shape(spec, m);
            let mut params = [0u32; 8];
            params[..4].copy_from_slice(&shape.params(m));
            params[2] = d.args.gathered_mask();
            // A gathered adjoint with a by-rows entry declares that entry's words too.
            let params = match d.args {
                ArgsIn::Rows(_) => &params[..4],
                ArgsIn::Fields(..) => &params[..],
            };
            let range = |buffer, w| words_range(buffer, w, start, m);
            let mut buffers = Vec::new();
            d.args.bindings(spec, start, m, &mut buffers);
            for (o, buf) in spec.outputs.iter().zip(d.outputs) {
                let (b, offset, size) = range(buf.gpu(), o.words);
                buffers.push((o.binding, b, offset, size));
            }
            if let (Some(sh), Some(values)) = (spec.shared, d.shared) {
                buffers.push((sh.binding, values.gpu(), 0, None));
            }
            if let (Some(r), Some(p)) = (spec.shared.and_then(|s| s.reduction.as_ref()), &partials)
            {
                buffers.push((r.partials_binding, p, 0, None));
            }
            let group = self.cached_bind_group(
                key(spec),
                &main.layout,
                spec.label,
                (spec.params_binding, params),
                &buffers,
            );
            pass.set_pipeline(&main.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(shape.x, shape.y, 1);
            if let (Some(rp), Some(parts), Some(sums)) = (&reduce, &partials, d.shared_grad) {
                let sum = self.second_pass(spec, rp, parts, sums.gpu(), shape.groups(), start > 0);
                work.defer_sum(sum);
            }
            start += m;
            self.flush_long_work(work, spec.work_per_element.saturating_mul(m as u64))?;
        }
        Ok(())
    }
}

/// Where a recorded launch's kernel reads its per-element arguments.
enum ArgsIn<'a> {
    /// One interleaved row of `spec.input_words` words per element.
    Rows(&'a Arc<RawBuffer>),
    /// Each argument from a buffer of its own (a gathered kernel), a block's rows through
    /// its index.
    Fields(&'static [FieldSpec], &'a [Field]),
}

impl ArgsIn<'_> {
    /// The gathered kernel's mask: bit `k` set where argument `k` is read through an index.
    fn gathered_mask(&self) -> u32 {
        match self {
            ArgsIn::Rows(_) => 0,
            ArgsIn::Fields(_, fields) => crate::gather::gathered_mask(fields),
        }
    }

    /// The bindings of elements `start..start + m`'s arguments: a block and its index's
    /// entries of those elements, or the argument's own words of those elements (bound
    /// again as the unread index).
    fn bindings<'b>(
        &'b self,
        spec: &KernelSpec,
        start: usize,
        m: usize,
        buffers: &mut Vec<StorageBinding<'b>>,
    ) {
        let at = |binding, (buffer, offset, size)| (binding, buffer, offset, size);
        match self {
            ArgsIn::Rows(input) => {
                // Whole `ARGS_BINDING_ALIGN`s past the rows: the buffer's length is rounded
                // to them, and a chunk starts at a multiple of them.
                let (buffer, offset, _) = words_range(input.gpu(), spec.input_words, start, m);
                let size = NonZeroU64::new(args_binding_bytes(m, spec.input_words));
                buffers.push((spec.input_binding, buffer, offset, size));
            }
            ArgsIn::Fields(specs, fields) => {
                for (fs, f) in specs.iter().zip(fields.iter()) {
                    let (rows, index) = match &f.index {
                        Some(index) => (
                            (f.source.gpu(), 0, None),
                            words_range(index.entries.gpu(), 1, start, m),
                        ),
                        None => {
                            let own = words_range(f.source.gpu(), fs.words, start, m);
                            (own, own)
                        }
                    };
                    buffers.push(at(fs.rows_binding, rows));
                    buffers.push(at(fs.index_binding, index));
                }
            }
        }
    }
}

/// The buffers of one recorded launch, its arguments wherever they are.
struct Dispatch<'a> {
    args: ArgsIn<'a>,
    outputs: &'a [&'a Arc<RawBuffer>],
    shared: Option<&'a Arc<RawBuffer>>,
    shared_grad: Option<&'a Arc<RawBuffer>>,
}

impl Gpu {
    /// The second pass of a chunk's shared-gradient reduction, to be recorded by the next
    /// operation or taken over by an optimizer step; its uniform `[rows, accumulate, 0,
    /// 0]`: writes the sums of `rows` partials per word, or adds them (for the later
    /// chunks).
    fn second_pass(
        &self,
        spec: &'static KernelSpec,
        pipeline: &super::pipelines::Pipeline,
        partials: &wgpu::Buffer,
        sums: &wgpu::Buffer,
        rows: u32,
        accumulate: bool,
    ) -> PendingSum {
        let r = spec
            .shared
            .and_then(|s| s.reduction.as_ref())
            .expect("a launch with a second pass has a reduction");
        let params = [rows, u32::from(accumulate), 0, 0];
        let group = self.cached_bind_group(
            module_key(r.wgsl, r.entry_point),
            &pipeline.layout,
            r.label,
            (r.params_binding, &params),
            &[
                (r.input_binding, partials, 0, None),
                (r.output_binding, sums, 0, None),
            ],
        );
        PendingSum {
            label: r.label,
            pipeline: pipeline.pipeline.clone(),
            group,
            workgroups: Self::reduce_workgroups(spec),
            partials: partials.clone(),
            rows,
            accumulate,
            sums: sums.clone(),
            precision: spec.precision,
            words_per_workgroup: r.words_per_workgroup,
        }
    }
}

/// The binding of elements `start..start + m` of a buffer of `w` words per element:
/// the buffer, the offset and the size in bytes.
fn words_range(
    buffer: &wgpu::Buffer,
    w: u32,
    start: usize,
    m: usize,
) -> (&wgpu::Buffer, u64, Option<NonZeroU64>) {
    let bytes = (m * w as usize * 4) as u64;
    (
        buffer,
        (start * w as usize * 4) as u64,
        NonZeroU64::new(bytes),
    )
}
