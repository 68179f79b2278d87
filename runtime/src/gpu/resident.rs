//! Device-resident buffers on the GPU: creating, reading and writing them, and recording
//! launches over them into a command encoder (one submission, no host round trip).

use super::{Gpu, key, lock};
use crate::error::Error;
use crate::recording::Bindings;
use crate::spec::KernelSpec;
use std::num::NonZeroU64;
use wgpu::util::DeviceExt;

/// Elements of a resident launch's chunks are a multiple of this: with 4-byte words,
/// every chunk's binding offset is then a multiple of 256 bytes, the largest storage offset
/// alignment WebGPU allows.
const CHUNK_ALIGN: usize = 64;

impl Gpu {
    /// A storage buffer holding `words` (padded to 16 bytes: a uniform binding of
    /// `vec4`s reads whole strides).
    pub(crate) fn resident_buffer(&self, words: &[u32]) -> Result<wgpu::Buffer, Error> {
        use wgpu::BufferUsages as U;
        let bytes = (std::mem::size_of_val(words) as u64)
            .next_multiple_of(16)
            .max(16);
        if bytes > self.limits.max_buffer_size {
            return Err(Error::Unsupported(format!(
                "a buffer of {bytes} bytes is larger than the device's largest ({} bytes)",
                self.limits.max_buffer_size
            )));
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gradfuse buffer"),
            size: bytes,
            usage: U::STORAGE | U::UNIFORM | U::COPY_SRC | U::COPY_DST,
            mapped_at_creation: true,
        });
        // wgpu zeroes new buffers: the padding needs no writes.
        let fill = if words.is_empty() {
            Ok(())
        } else {
            buffer
                .slice(..std::mem::size_of_val(words) as u64)
                .get_mapped_range_mut()
                .map(|mut view| view.copy_from_slice(bytemuck::cast_slice(words)))
                .map_err(|e| Error::Readback(e.to_string()))
        };
        buffer.unmap();
        if let Some(e) = pollster::block_on(oom.pop()) {
            return Err(Error::OutOfMemory(e.to_string()));
        }
        fill?;
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

    /// The first `words` words of `buffer`, once the work submitted before has run.
    pub(crate) fn read_resident(
        &self,
        buffer: &wgpu::Buffer,
        words: usize,
    ) -> Result<Vec<u32>, Error> {
        self.check_lost()?;
        if words == 0 {
            return Ok(Vec::new());
        }
        let bytes = words as u64 * 4;
        let staging = self.buffer(
            "gradfuse read",
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            bytes,
        );
        let mut encoder = self.encoder("gradfuse read");
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
        let submission = self.queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging
            .slice(..bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        self.wait_for(submission)?;
        self.await_map(&rx)?;
        self.take_uncaptured("gradfuse read")?;
        let view = staging
            .slice(..bytes)
            .get_mapped_range()
            .map_err(|e| Error::Readback(e.to_string()))?;
        Ok(bytemuck::pod_collect_to_vec(&view))
    }

    /// Overwrites the start of `buffer` with `bytes`, ordered after the work submitted
    /// before.
    pub(crate) fn write_resident(&self, buffer: &wgpu::Buffer, bytes: &[u8]) -> Result<(), Error> {
        self.check_lost()?;
        if !bytes.is_empty() {
            self.queue.write_buffer(buffer, 0, bytes);
            // Submitted now, so that it is ordered before later recordings.
            self.queue.submit([]);
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
        (self.max_binding_elements(spec) / CHUNK_ALIGN * CHUNK_ALIGN).max(CHUNK_ALIGN)
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
        encoder: &mut wgpu::CommandEncoder,
        spec: &'static KernelSpec,
        n: usize,
        b: &Bindings<'_>,
    ) -> Result<(), Error> {
        self.check_lost()?;
        let main = self.pipeline(spec)?;
        let reduce = self.reduce_pipeline(spec)?;
        let chunk = self.resident_chunk(spec);
        let words = spec.shared_grad_words() as u64;
        let partials = reduce.as_ref().map(|_| {
            let groups = Self::max_groups(spec, chunk.min(n)) as u64;
            self.scratch(spec, groups * words * 4)
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(spec.label),
            timestamp_writes: None,
        });
        let mut start = 0;
        while start < n {
            let m = chunk.min(n - start);
            let shape = Self::launch_shape(spec, m);
            let params = self.uniform(spec.label, &shape.params(m));
            let range = |buffer, w| words_range(buffer, w, start, m);
            let mut entries = vec![
                wgpu::BindGroupEntry {
                    binding: spec.params_binding,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: spec.input_binding,
                    resource: range(b.input.gpu(), spec.input_words),
                },
            ];
            for (o, buf) in spec.outputs.iter().zip(b.outputs) {
                entries.push(wgpu::BindGroupEntry {
                    binding: o.binding,
                    resource: range(buf.gpu(), o.words),
                });
            }
            if let (Some(sh), Some(values)) = (spec.shared, b.shared) {
                entries.push(wgpu::BindGroupEntry {
                    binding: sh.binding,
                    resource: values.gpu().as_entire_binding(),
                });
            }
            if let (Some(r), Some(p)) = (spec.shared.and_then(|s| s.reduction.as_ref()), &partials)
            {
                entries.push(wgpu::BindGroupEntry {
                    binding: r.partials_binding,
                    resource: p.as_entire_binding(),
                });
            }
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(spec.label),
                layout: &main.layout,
                entries: &entries,
            });
            pass.set_pipeline(&main.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(shape.x, shape.y, 1);
            if let (Some(rp), Some(parts), Some(sums)) = (&reduce, &partials, b.shared_grad) {
                self.record_second_pass(
                    &mut pass,
                    spec,
                    rp,
                    parts,
                    sums.gpu(),
                    [shape.groups(), u32::from(start > 0), 0, 0],
                );
            }
            start += m;
        }
        Ok(())
    }
}

impl Gpu {
    /// The second pass of a chunk's shared-gradient reduction; its uniform `[groups,
    /// accumulate, 0, 0]`: writes the sums of `groups` partials per word, or adds them
    /// (`accumulate` nonzero, for the later chunks).
    fn record_second_pass(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        spec: &'static KernelSpec,
        pipeline: &super::pipelines::Pipeline,
        partials: &wgpu::Buffer,
        sums: &wgpu::Buffer,
        params: [u32; 4],
    ) {
        let Some(r) = spec.shared.and_then(|s| s.reduction.as_ref()) else {
            return;
        };
        let params = self.uniform(r.label, &params);
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(r.label),
            layout: &pipeline.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: r.params_binding,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: r.input_binding,
                    resource: partials.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: r.output_binding,
                    resource: sums.as_entire_binding(),
                },
            ],
        });
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &group, &[]);
        // One workgroup per word, in rows of at most the per-dimension limit.
        let words = spec.shared_grad_words() as u32;
        let y = words.div_ceil(spec.max_workgroups_per_dim);
        pass.dispatch_workgroups(words.div_ceil(y), y, 1);
    }
}

/// The binding of elements `start..start + m` of a buffer of `w` words per element.
fn words_range(buffer: &wgpu::Buffer, w: u32, start: usize, m: usize) -> wgpu::BindingResource<'_> {
    let bytes = (m * w as usize * 4) as u64;
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset: (start * w as usize * 4) as u64,
        size: NonZeroU64::new(bytes),
    })
}
