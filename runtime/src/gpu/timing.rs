//! Timing for the benches: kernels by GPU timestamps (or the wall clock), transfers and
//! an empty round trip. Not part of the public API (`Device::time_kernel` is `#[doc(hidden)]`).

use super::Gpu;
use super::pipelines::Pipelines;
use super::sets::LaunchSet;
use crate::error::Error;
use crate::spec::{KernelSpec, KernelTime};
use std::time::{Duration, Instant};

impl Gpu {
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
        // The kernel as launches run it: at the workgroup size chosen for it.
        let n = input.len() / spec.input_words.max(1) as usize;
        let spec = self.choose_size(self.runnable(spec)?, input, n)?;
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
    pub(super) fn time_kernel_batch(
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
        let shape = self.launch_shape(spec, n);
        let (set, copies) = self.take_set_exact(spec, &pipelines, n.max(1));
        self.queue
            .write_buffer(&copies.input, 0, bytemuck::cast_slice(input));
        self.queue
            .write_buffer(&copies.params, 0, bytemuck::cast_slice(&shape.params(n)));
        // Shared words stay zero (buffers start zeroed); the reduction runs as in a launch.
        if let Some(params) = &copies.reduce_params {
            self.queue
                .write_buffer(params, 0, bytemuck::cast_slice(&shape.reduce_params()));
        }
        let timed = TimedLaunches {
            spec,
            pipelines: &pipelines,
            set: &set,
            groups: (shape.x, shape.y),
            launches: launches.max(1) as u32,
        };
        if self.timestamps {
            self.time_by_timestamps(&timed, (oom, validation))
        } else {
            self.time_by_wall_clock(&timed, (oom, validation))
        }
    }

    /// Each of `t`'s launches timed by timestamp queries around its kernel and around its
    /// reduction's second pass, after 3 untimed launches, in one submission.
    fn time_by_timestamps(
        &self,
        t: &TimedLaunches<'_>,
        (oom, validation): (wgpu::ErrorScopeGuard, wgpu::ErrorScopeGuard),
    ) -> Result<Vec<KernelTime>, Error> {
        let TimedLaunches {
            spec,
            pipelines,
            set,
            groups: (x, y),
            launches,
        } = *t;
        let mut times = Vec::with_capacity(launches as usize);
        let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("gradfuse timing"),
            ty: wgpu::QueryType::Timestamp,
            count: 4 * launches,
        });
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
            Self::record(&mut pass, spec, pipelines, set, (x, y));
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
            Self::record_main(&mut pass, pipelines, set, (x, y));
            drop(pass);
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(spec.label),
                timestamp_writes: writes(2 * l + 1),
            });
            reduced = Self::record_reduce(&mut pass, spec, pipelines, set);
        }
        let readback = self.resolve_timestamps(&mut encoder, &queries, 4 * launches);
        self.queue.submit([encoder.finish()]);
        let (tx, mapped) = std::sync::mpsc::channel();
        readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.finish(spec, oom, validation)?;
        self.await_map(&mapped)?;
        // Pairs of timestamps: each launch's kernel, then its reduction's second pass.
        let spans = self.timestamp_spans(&readback)?;
        for pair in spans.chunks_exact(2) {
            times.push(KernelTime {
                main: pair[0],
                reduce: if reduced { pair[1] } else { Duration::ZERO },
            });
        }
        Ok(times)
    }

    /// Records, at the end of `encoder`, the resolve of `queries`' first `count` timestamps
    /// and their copy into a buffer the host can map, and returns that buffer.
    pub(super) fn resolve_timestamps(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queries: &wgpu::QuerySet,
        count: u32,
    ) -> wgpu::Buffer {
        use wgpu::BufferUsages as U;
        let bytes = 8 * count as u64;
        let resolve = self.buffer("gradfuse timing", U::QUERY_RESOLVE | U::COPY_SRC, bytes);
        let readback = self.buffer("gradfuse timing", U::MAP_READ | U::COPY_DST, bytes);
        encoder.resolve_query_set(queries, 0..count, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &readback, 0, bytes);
        readback
    }

    /// The time between each pair of timestamps in `readback` (mapped; from
    /// [`Gpu::resolve_timestamps`]), in order; unmaps it.
    pub(super) fn timestamp_spans(&self, readback: &wgpu::Buffer) -> Result<Vec<Duration>, Error> {
        let period = self.queue.get_timestamp_period() as f64;
        let spans = {
            let view = readback
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Readback(e.to_string()))?;
            let ticks: &[u64] = bytemuck::cast_slice(&view);
            (ticks.chunks_exact(2))
                .map(|t| Duration::from_nanos((t[1].saturating_sub(t[0]) as f64 * period) as u64))
                .collect()
        };
        readback.unmap();
        Ok(spans)
    }

    /// Each of `t`'s launches timed by the wall clock around its submission and a wait.
    fn time_by_wall_clock(
        &self,
        t: &TimedLaunches<'_>,
        (oom, validation): (wgpu::ErrorScopeGuard, wgpu::ErrorScopeGuard),
    ) -> Result<Vec<KernelTime>, Error> {
        let TimedLaunches {
            spec,
            pipelines,
            set,
            groups: (x, y),
            launches,
        } = *t;
        let mut times = Vec::with_capacity(launches as usize);
        for _ in 0..launches {
            let t = Instant::now();
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
                Self::record(&mut pass, spec, pipelines, set, (x, y));
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
        Ok(times)
    }

    /// Samples of moving `bytes` to the device and back the way device buffers are written
    /// and read ([`Gpu::upload`], then a wait; [`Gpu::download`] into host memory already
    /// touched): the transfers every end-to-end launch pays.
    pub(crate) fn time_transfers(
        &self,
        bytes: usize,
        repeats: usize,
    ) -> Result<(Vec<Duration>, Vec<Duration>), Error> {
        use wgpu::BufferUsages as U;
        let bytes = bytes.max(4).next_multiple_of(4);
        let data = vec![0u8; bytes];
        let mut host = vec![1u8; bytes];
        let device_buf = self.buffer(
            "gradfuse transfer",
            U::STORAGE | U::COPY_DST | U::COPY_SRC,
            bytes as u64,
        );
        let mut up = Vec::new();
        let mut down = Vec::new();
        for _ in 0..repeats.max(1) {
            let t = Instant::now();
            self.upload(&device_buf, 0, &data)?;
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Readback(e.to_string()))?;
            up.push(t.elapsed());
            let t = Instant::now();
            self.download(&device_buf, 0, &mut host)?;
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

/// The launches one timing runs: a kernel over a launch set, and how many.
#[derive(Clone, Copy)]
struct TimedLaunches<'a> {
    spec: &'static KernelSpec,
    pipelines: &'a Pipelines<'a>,
    set: &'a LaunchSet,
    groups: (u32, u32),
    launches: u32,
}
