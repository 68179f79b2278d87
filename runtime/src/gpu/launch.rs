//! Launching a batch: cut into chunks that fit the device's bindings and dispatch limits,
//! each uploaded, dispatched (with its reduction), and read back while the next runs
//! (the waits for submissions and maps are `transfer.rs`'s).

use super::pinned::{Route, Routes};
use super::pipelines::Pipelines;
use super::sets::{DeviceBuffers, LaunchSet};
use super::transfer::{MapReceiver, copy_parallel, write_mapped};
use super::{Gpu, MAX_BINDING_BYTES, MAX_CHUNK_BYTES, MAX_PINNED_CHUNK_BYTES, PARAMS_BYTES, lock};
use crate::error::Error;
use crate::spec::KernelSpec;

/// How a launch of `m` elements is dispatched: workgroups in x and y, and the elements each
/// thread takes (1 but for kernels that reduce shared gradients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaunchShape {
    pub(super) x: u32,
    pub(super) y: u32,
    pub(super) per_thread: u32,
}

impl LaunchShape {
    /// Workgroups dispatched: one partial sum each, for a reducing kernel.
    pub(super) fn groups(&self) -> u32 {
        self.x * self.y
    }

    /// The kernel's uniform `Params`: the element count, the elements per thread.
    pub(super) fn params(&self, m: usize) -> [u32; 4] {
        [m as u32, self.per_thread, 0, 0]
    }

    /// The uniform `Params` of the reduction's second pass: one partial per workgroup.
    pub(super) fn reduce_params(&self) -> [u32; 4] {
        [self.groups(), 0, 0, 0]
    }
}

/// A submitted chunk: its launch set, where its results go, and the two map requests
/// (results to read, upload buffer to re-arm) that complete with its submission.
pub(super) struct InFlight {
    pub(super) set: LaunchSet,
    pub(super) start: usize,
    pub(super) m: usize,
    /// The bytes of its staging buffer read back (`start..end`) and their map request;
    /// none where every output went to pinned memory and there are no sums.
    pub(super) read: Option<(std::ops::Range<u64>, MapReceiver)>,
    pub(super) submission: wgpu::SubmissionIndex,
    pub(super) rearm: MapReceiver,
    /// Whether its pinned slices were copied straight (its set has device buffers).
    pub(super) direct: bool,
}

impl Gpu {
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
    /// together, no buffer exceeds [`MAX_CHUNK_BYTES`], and its submission runs at most
    /// [`KernelSpec::WORK_PER_SUBMISSION`] operations (a watchdog's limit).
    pub(crate) fn max_chunk_elements(&self, spec: &KernelSpec) -> usize {
        self.chunk_elements_of(spec, false)
    }

    /// [`Gpu::max_chunk_elements`], or for a launch whose input and outputs are all in
    /// pinned memory (`pinned`) with buffers of up to [`MAX_PINNED_CHUNK_BYTES`].
    pub(super) fn chunk_elements_of(&self, spec: &KernelSpec, pinned: bool) -> usize {
        let widest = (spec.output_words() as u32).max(spec.input_words);
        let most = if pinned {
            MAX_PINNED_CHUNK_BYTES
        } else {
            MAX_CHUNK_BYTES
        };
        let bytes = self.binding_bytes().min(most).min(self.chunk_bytes_cap());
        self.elements_within(spec, widest, bytes)
            .min(spec.elements_per_submission())
    }

    /// The largest storage binding the runtime makes: the device's limits, and never past
    /// 2^31 bytes, whatever a backend reports (wgpu issue 2361: on Vulkan a binding larger
    /// than that was accepted, then read as zeros; wgpu caps the limit at i32::MAX today,
    /// and this keeps it so).
    pub(super) fn binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            .min(MAX_BINDING_BYTES)
    }

    pub(super) fn elements_within(
        &self,
        spec: &KernelSpec,
        widest_words: u32,
        bytes: u64,
    ) -> usize {
        let by_bytes = bytes / (widest_words.max(1) as u64 * 4);
        let by_dispatch = spec.max_workgroups_per_dim as u64
            * spec.max_workgroups_per_dim as u64
            * spec.workgroup_size as u64;
        by_bytes.min(by_dispatch).max(1) as usize
    }

    /// Runs `spec` over `n` elements (lengths already checked), chunk by chunk, two chunks
    /// in flight: while the GPU works on one, the CPU copies the next one's arguments in
    /// and the previous one's results out. (Copying in and out at once, on threads of
    /// their own, measured no faster on the H100: 18.6-19.0 ms against 18.5-19.9 ms for
    /// 576 MiB moved.)
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
        let spec = self.choose_size(self.runnable(spec)?, input, n)?;
        let pipeline = self.pipeline(spec)?;
        let reduce = self.reduce_pipeline(spec)?;
        let pipelines = Pipelines {
            main: &pipeline,
            reduce: reduce.as_deref(),
        };
        let in_words = spec.input_words as usize;
        let routes = self.routes(input, outputs);
        let chunk = self.chunk_elements_of(spec, routes.all());
        let shared_bytes = std::mem::size_of_val(shared) as u64;
        let mut in_flight: std::collections::VecDeque<InFlight> = Default::default();
        let mut result = Ok(());
        let mut start = 0;
        while start < n && result.is_ok() {
            let m = chunk.min(n - start);
            let chunk_input = &input[start * in_words..(start + m) * in_words];
            match self.prepare_chunk(spec, &pipelines, chunk_input, shared, m, &routes) {
                Ok(set) => {
                    let chunk = (start, m);
                    let f = self.submit_chunk(spec, &pipelines, set, shared_bytes, chunk, &routes);
                    in_flight.push_back(f);
                }
                Err(e) => result = Err(e),
            }
            start += m;
            if in_flight.len() == 2
                && let Some(f) = in_flight.pop_front()
            {
                result = result.and(self.complete_chunk(spec, f, outputs, shared_grad, &routes));
            }
        }
        while let Some(f) = in_flight.pop_front() {
            let done = self.complete_chunk(spec, f, outputs, shared_grad, &routes);
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

    /// A launch set for `m` elements with a chunk's uniforms, shared words and arguments
    /// written into its upload buffer (but for arguments in pinned memory, `routes`, that
    /// a set with device buffers copies straight from there).
    pub(super) fn prepare_chunk(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        input: &[f32],
        shared: &[f32],
        m: usize,
        routes: &Routes,
    ) -> Result<LaunchSet, Error> {
        let set = self.take_set(spec, pipelines, m, routes.all())?;
        let pinned = routes.input.is_some();
        let layout = &set.layout;
        let shape = self.launch_shape(spec, m);
        write_mapped(&set.upload, 0, bytemuck::cast_slice(&shape.params(m)))?;
        if spec.shared.is_some() {
            // The second pass sums one partial per dispatched workgroup.
            let reduce = shape.reduce_params();
            write_mapped(&set.upload, layout.reduce_at, bytemuck::cast_slice(&reduce))?;
            write_mapped(&set.upload, layout.shared_at, bytemuck::cast_slice(shared))?;
        }
        if !(pinned && set.copies.is_some()) {
            write_mapped(&set.upload, layout.args_at, bytemuck::cast_slice(input))?;
        }
        Ok(set)
    }

    /// Submits a prepared chunk of `m` elements from `start`: the dispatch, and for a set
    /// with device buffers the copies out of its upload buffer (or the pinned input,
    /// `routes`) before it and of the results into the staging buffer (or the pinned
    /// outputs) after.
    pub(super) fn submit_chunk(
        &self,
        spec: &'static KernelSpec,
        pipelines: &Pipelines<'_>,
        set: LaunchSet,
        shared_bytes: u64,
        (start, m): (usize, usize),
        routes: &Routes,
    ) -> InFlight {
        let shape = self.launch_shape(spec, m);
        set.upload.unmap();
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(spec.label),
            });
        let direct = set.copies.is_some() && routes.any();
        if let Some(copies) = &set.copies {
            let pinned = routes.input.as_ref().map(|r| (r, start));
            Self::copy_in(&mut encoder, spec, &set, copies, shared_bytes, m, pinned);
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(spec.label),
                timestamp_writes: None,
            });
            Self::record(&mut pass, spec, pipelines, &set, (shape.x, shape.y));
        }
        if let Some(copies) = &set.copies {
            Self::copy_out(&mut encoder, spec, &set, copies, (start, m), routes);
        }
        if direct {
            self.count_pinned_copy();
        }
        let out_bytes = set.layout.read_bytes(spec, m);
        // With every output copied into pinned memory, only the sums (if any) are read.
        let all_pinned = direct && routes.outputs.iter().all(Option::is_some);
        // (A map's offset is a multiple of 8: the sums' region is aligned to 16.)
        let range = match (all_pinned, spec.shared_grad_words()) {
            (true, 0) => None,
            (true, _) => Some(set.layout.sums_at..out_bytes),
            (false, _) => Some(0..out_bytes),
        };
        let submission = self.queue.submit([encoder.finish()]);
        let read = range.map(|range| {
            let (tx, mapped) = std::sync::mpsc::channel();
            set.staging
                .slice(range.clone())
                .map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
            (range, mapped)
        });
        // Re-arm the upload buffer for the next use; it maps once this submission is done.
        let (tx, rearm) = std::sync::mpsc::channel();
        set.upload
            .slice(..)
            .map_async(wgpu::MapMode::Write, move |r| {
                let _ = tx.send(r);
            });
        InFlight {
            set,
            start,
            m,
            read,
            submission,
            rearm,
            direct,
        }
    }

    /// Records the copies of a chunk of `m` elements out of its upload buffer into the
    /// device buffers its kernel binds; its arguments from the launch's pinned input where
    /// `pinned` gives it and the chunk's first element.
    fn copy_in(
        encoder: &mut wgpu::CommandEncoder,
        spec: &KernelSpec,
        set: &LaunchSet,
        copies: &DeviceBuffers,
        shared_bytes: u64,
        m: usize,
        pinned: Option<(&Route, usize)>,
    ) {
        let layout = &set.layout;
        encoder.copy_buffer_to_buffer(&set.upload, 0, &copies.params, 0, PARAMS_BYTES);
        if let Some(values) = &copies.shared
            && shared_bytes > 0
        {
            encoder.copy_buffer_to_buffer(&set.upload, layout.shared_at, values, 0, shared_bytes);
        }
        if let Some(params) = &copies.reduce_params {
            encoder.copy_buffer_to_buffer(&set.upload, layout.reduce_at, params, 0, PARAMS_BYTES);
        }
        let row_bytes = spec.input_words as u64 * 4;
        let in_bytes = m as u64 * row_bytes;
        match pinned {
            Some((route, start)) => {
                let at = route.offset + start as u64 * row_bytes;
                encoder.copy_buffer_to_buffer(&route.buffer, at, &copies.input, 0, in_bytes);
            }
            None => {
                let upload = &set.upload;
                encoder.copy_buffer_to_buffer(upload, layout.args_at, &copies.input, 0, in_bytes);
            }
        }
    }

    /// Records the copies of a chunk's outputs and sums into its staging buffer, where
    /// its layout places them (one map reads them all), but for outputs in pinned memory
    /// (`routes`), copied there at the chunk's rows.
    fn copy_out(
        encoder: &mut wgpu::CommandEncoder,
        spec: &KernelSpec,
        set: &LaunchSet,
        copies: &DeviceBuffers,
        (start, m): (usize, usize),
        routes: &Routes,
    ) {
        let layout = &set.layout;
        for (((buf, o), &at), route) in (copies.outputs.iter())
            .zip(spec.outputs)
            .zip(&layout.outputs_at)
            .zip(&routes.outputs)
        {
            let row_bytes = o.words as u64 * 4;
            let bytes = m as u64 * row_bytes;
            match route {
                Some(r) => {
                    let to = r.offset + start as u64 * row_bytes;
                    encoder.copy_buffer_to_buffer(buf, 0, &r.buffer, to, bytes);
                }
                None => encoder.copy_buffer_to_buffer(buf, 0, &set.staging, at, bytes),
            }
        }
        if let Some(sums) = &copies.sums {
            let bytes = spec.shared_grad_words() as u64 * 4;
            encoder.copy_buffer_to_buffer(sums, 0, &set.staging, layout.sums_at, bytes);
        }
    }

    /// Waits for a chunk, copies its results out (but those its copies put in pinned
    /// memory, `routes`), and gives its launch set back.
    pub(super) fn complete_chunk(
        &self,
        spec: &'static KernelSpec,
        f: InFlight,
        outputs: &mut [&mut [f32]],
        shared_grad: &mut [f32],
        routes: &Routes,
    ) -> Result<(), Error> {
        self.wait_for(f.submission)?;
        // On an error the set may be in any state: it is dropped rather than reused.
        if let Some((range, mapped)) = &f.read {
            self.await_map(mapped)?;
            let view = (f.set.staging.slice(range.clone()))
                .get_mapped_range()
                .map_err(|e| Error::Readback(e.to_string()))?;
            let words: &[f32] = bytemuck::cast_slice(&view);
            // Offsets in the layout are from the buffer's start; the view's from its own.
            let skipped = range.start as usize / 4;
            let layout = &f.set.layout;
            for (((out, o), &at), route) in (outputs.iter_mut())
                .zip(spec.outputs)
                .zip(&layout.outputs_at)
                .zip(&routes.outputs)
            {
                if f.direct && route.is_some() {
                    continue;
                }
                let (w, at) = (o.words as usize, at as usize / 4 - skipped);
                copy_parallel(
                    &mut out[f.start * w..(f.start + f.m) * w],
                    &words[at..at + f.m * w],
                );
            }
            // Chunks complete in order: their sums are added in a fixed order too.
            if !shared_grad.is_empty() {
                let at = layout.sums_at as usize / 4 - skipped;
                let sums = &words[at..at + shared_grad.len()];
                spec.precision.add_words(shared_grad, sums);
            }
            drop(view);
            f.set.staging.unmap();
        }
        if self.await_map(&f.rearm).is_ok() {
            self.return_set(spec, f.set);
        }
        Ok(())
    }

    /// Records a launch's dispatches into a compute pass: the kernel, then the second pass
    /// of its shared-gradient reduction, if any (one workgroup per shared word).
    pub(super) fn record(
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
    pub(super) fn record_main(
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
    pub(super) fn record_reduce(
        pass: &mut wgpu::ComputePass<'_>,
        spec: &KernelSpec,
        pipelines: &Pipelines<'_>,
        set: &LaunchSet,
    ) -> bool {
        if let (Some(bind_group), Some(p)) = (&set.reduce_bind_group, pipelines.reduce) {
            pass.set_pipeline(&p.pipeline);
            pass.set_bind_group(0, bind_group, &[]);
            let (x, y) = Self::reduce_workgroups(spec);
            pass.dispatch_workgroups(x, y, 1);
            true
        } else {
            false
        }
    }

    /// The workgroups in x and y of `spec`'s second pass: a workgroup per
    /// `words_per_workgroup` shared words (scalars), in rows of at most the per-dimension
    /// limit.
    pub(super) fn reduce_workgroups(spec: &KernelSpec) -> (u32, u32) {
        let per_group = (spec.shared.and_then(|s| s.reduction.as_ref()))
            .map_or(1, |r| r.words_per_workgroup.max(1));
        let groups = (spec.shared_grad_scalars() as u32).div_ceil(per_group);
        let y = groups.div_ceil(spec.max_workgroups_per_dim);
        (groups.div_ceil(y), y)
    }

    /// Workgroups in x and y for `m` elements ([`Gpu::shape_within`], a reducing launch cut
    /// into at most [`Gpu::reduce_groups`] workgroups).
    pub(super) fn launch_shape(&self, spec: &KernelSpec, m: usize) -> LaunchShape {
        Self::shape_within(spec, m, self.reduce_groups(spec))
    }

    /// Workgroups in x and y for `m` elements: as few rows as the per-dimension limit
    /// allows, of equal length, so that at most `y - 1` workgroups lie past the end (with
    /// full rows, 2^24 elements took 65,535 x 2 workgroups: twice the work for an adjoint,
    /// whose threads past the end compute for the reduction's barriers).
    ///
    /// A kernel that reduces shared gradients gets at most `most` workgroups, each taking
    /// `per_thread` runs of consecutive elements; one that divides the elements itself
    /// ([`crate::ReductionSpec::divides_chunks`]) gets `most` wherever it has the runs.
    pub(super) fn shape_within(spec: &KernelSpec, m: usize, most: u64) -> LaunchShape {
        let runs = Self::runs(spec, m);
        let (per_thread, groups) = match spec.shared.and_then(|s| s.reduction.as_ref()) {
            // The kernel divides the elements among what it is given.
            Some(r) if spec.shared_grad_words() > 0 && r.divides_chunks => {
                let groups = runs.min(most.max(1));
                (runs.div_ceil(groups), groups)
            }
            Some(r) if spec.shared_grad_words() > 0 => {
                let per_thread = runs
                    .div_ceil(most)
                    .next_multiple_of(r.elements_per_thread.max(1) as u64);
                (per_thread, runs.div_ceil(per_thread))
            }
            _ => (1, runs),
        };
        let y = groups.div_ceil(spec.max_workgroups_per_dim as u64);
        LaunchShape {
            x: groups.div_ceil(y) as u32,
            y: y as u32,
            per_thread: per_thread as u32,
        }
    }

    /// The most workgroups of any launch of up to `capacity` elements (the partial sums a
    /// launch set must hold; [`Gpu::most_groups_within`]).
    pub(super) fn max_groups(&self, spec: &KernelSpec, capacity: usize) -> u32 {
        Self::most_groups_within(spec, capacity, self.reduce_groups(spec))
    }

    /// The most workgroups of any launch of up to `capacity` elements with reducing launches
    /// cut into at most `most`: not always the full capacity's, since a reducing launch
    /// just past `most` runs halves its workgroups.
    pub(super) fn most_groups_within(spec: &KernelSpec, capacity: usize, most: u64) -> u32 {
        if spec.shared_grad_words() > 0 {
            Self::runs(spec, capacity).min(most) as u32
        } else {
            Self::shape_within(spec, capacity, most).groups()
        }
    }

    /// Runs of a workgroup's size that `m` elements take (at least one).
    pub(super) fn runs(spec: &KernelSpec, m: usize) -> u64 {
        (m as u64).div_ceil(spec.workgroup_size as u64).max(1)
    }

    /// Waits for the queue, turning error scopes and device loss into errors.
    pub(super) fn finish(
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
}

#[cfg(test)]
mod tests {
    use super::super::REDUCE_GROUPS;
    use super::*;
    use crate::spec::{ReductionSpec, SharedSpec};

    fn spec(shared: Option<&'static SharedSpec>) -> KernelSpec {
        KernelSpec {
            label: "dispatch",
            shared,
            work_per_element: 10,
            ..crate::spec::TEST_SPEC
        }
    }

    /// A shared spec of 3 words whose adjoint reduces them, dividing its chunks itself or not.
    const fn reducing(divides_chunks: bool) -> SharedSpec {
        SharedSpec {
            binding: 4,
            words: 3,
            uniform: true,
            reduction: Some(ReductionSpec {
                elements_per_thread: 1,
                divides_chunks,
                partials_binding: 5,
                label: "reduce",
                wgsl: "",
                entry_point: "reduce",
                params_binding: 0,
                input_binding: 1,
                output_binding: 2,
                words_per_workgroup: 8,
            }),
        }
    }

    static REDUCING: SharedSpec = reducing(false);

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
            let shape = Gpu::shape_within(&spec, m, REDUCE_GROUPS);
            let (x, y) = (shape.x, shape.y);
            assert_eq!(shape.per_thread, 1);
            let groups = (m as u64).div_ceil(256);
            let dispatched = x as u64 * y as u64;
            assert!(x <= 65535, "{m}: {x} x {y}");
            assert!(
                dispatched >= groups && dispatched - groups < y as u64,
                "{m}: {x} x {y}"
            );
            assert_eq!(
                Gpu::most_groups_within(&spec, m, REDUCE_GROUPS),
                shape.groups()
            );
            // A launch set's partials are sized by its capacity's dispatch.
            assert!(dispatched >= last, "{m}: not monotone");
            last = dispatched;
        }
        // 2^24 elements: two rows of 32,768, not 65,535 and 65,535 (one past the end).
        let shape = Gpu::shape_within(&spec, 1 << 24, REDUCE_GROUPS);
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
            let shape = Gpu::shape_within(&spec, m, REDUCE_GROUPS);
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
        assert_eq!(
            Gpu::shape_within(&spec, 1 << 24, REDUCE_GROUPS).per_thread,
            128
        );
        // A launch set's partials hold any smaller launch's (not monotone in m: 513 runs
        // take 257 workgroups of 2, 512 runs 512 of 1).
        for capacity in [1024usize, 1 << 18, (1 << 18) + 256, 1 << 20, 1 << 22] {
            let most = Gpu::most_groups_within(&spec, capacity, REDUCE_GROUPS);
            for m in (1..=capacity).step_by(97).chain([capacity, 512 * 256]) {
                if m <= capacity {
                    let g = Gpu::shape_within(&spec, m, REDUCE_GROUPS).groups();
                    assert!(g <= most, "{m} in {capacity}: {g} > {most}");
                }
            }
        }
    }

    #[test]
    fn kernels_that_divide_their_chunks_get_the_whole_wave_wherever_they_have_the_runs() {
        static DIVIDING: SharedSpec = reducing(true);
        let dividing = spec(Some(&DIVIDING));
        // The H100's one wave of the 8-32-32-1's adjoint: 264. In whole runs a workgroup,
        // 2^20 elements (4,096 runs of 256) took 256 workgroups of 16 runs.
        let cases = [
            (1usize, 1u32),
            (256, 1),
            (257, 2),
            (264 * 256, 264),
            (264 * 256 + 1, 264),
            (1 << 20, 264),
            (1 << 24, 264),
        ];
        for (m, groups) in cases {
            let shape = Gpu::shape_within(&dividing, m, 264);
            assert_eq!(shape.groups(), groups, "{m}");
            assert_eq!(Gpu::most_groups_within(&dividing, m, 264), groups, "{m}");
            // A launch set's partials of any capacity hold a smaller launch's.
            assert!(Gpu::shape_within(&dividing, m / 2 + 1, 264).groups() <= groups);
        }
        let whole_runs = Gpu::shape_within(&spec(Some(&REDUCING)), 1 << 20, 264);
        assert_eq!(whole_runs.groups(), 256);
    }
}
