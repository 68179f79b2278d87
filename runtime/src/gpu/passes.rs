//! A recording's command encoder, and the timestamps of its compute passes where the
//! recording asks for them (for the benches: the GPU time of each kernel, assembly, scatter
//! and optimizer pass of a recorded step, side by side).

use super::Gpu;
use crate::error::Error;
use std::time::Duration;

/// Passes of one recording that get timestamps; later ones run untimed.
const MAX_TIMED_PASSES: u32 = 2048;

/// The work of a recording on a GPU. Untimed, consecutive dispatches share one compute
/// pass (wgpu puts the barriers between them that their buffers need): a pass of its own
/// per dispatch costs the host several µs each, as much as the GPU needs for a small
/// dispatch. Timed, each dispatch is a pass between two timestamps.
pub(crate) struct GpuWork {
    encoder: wgpu::CommandEncoder,
    open: Option<wgpu::ComputePass<'static>>,
    timer: Option<PassTimer>,
    /// Operations recorded since the last submission (see [`Gpu::flush_long_work`]).
    work: u64,
    /// A launch's last dispatch, the second pass of its shared-gradient reduction, held
    /// back one operation: an optimizer step of the sums it writes takes it over and does
    /// both in one dispatch ([`GpuWork::take_pending_sum`]); anything else records it first.
    pending: Option<PendingSum>,
}

/// A reduction's second pass not yet recorded: what it dispatches and the sums it writes.
pub(crate) struct PendingSum {
    pub(crate) label: &'static str,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) group: wgpu::BindGroup,
    pub(crate) workgroups: (u32, u32),
    /// The first pass's partial sums, one row of `words` per workgroup.
    pub(crate) partials: wgpu::Buffer,
    /// How many rows of partial sums.
    pub(crate) rows: u32,
    /// Whether it adds to the sums (a later chunk of a launch) rather than writing them.
    pub(crate) accumulate: bool,
    /// The buffer it writes, whole.
    pub(crate) sums: wgpu::Buffer,
    /// The floats it sums.
    pub(crate) precision: crate::spec::Precision,
    /// Words each of its workgroups sums (`ReductionSpec::words_per_workgroup`), which
    /// fixes the order of its sums.
    pub(crate) words_per_workgroup: u32,
}

/// The timestamps of a recording's passes: two per pass, in the order recorded.
struct PassTimer {
    queries: wgpu::QuerySet,
    labels: Vec<&'static str>,
}

impl GpuWork {
    /// The compute pass for the next dispatches, named `label`: the open one, or, when
    /// timed (or none is open), a new one (between two timestamps if timed).
    pub(crate) fn pass(&mut self, label: &'static str) -> &mut wgpu::ComputePass<'static> {
        self.record_pending();
        self.open_pass(label)
    }

    /// Defers `sum` until the next operation ([`GpuWork::pending`]).
    pub(crate) fn defer_sum(&mut self, sum: PendingSum) {
        self.record_pending();
        self.pending = Some(sum);
    }

    /// The pending second pass, if it writes `sums` in floats of `precision`, for its
    /// caller to do in its own dispatch; else `None` (and the pending pass stays, recorded
    /// by the next pass).
    pub(crate) fn take_pending_sum(
        &mut self,
        sums: &wgpu::Buffer,
        precision: crate::spec::Precision,
        words_per_workgroup: u32,
    ) -> Option<PendingSum> {
        match &self.pending {
            Some(p)
                if &p.sums == sums
                    && p.precision == precision
                    && p.words_per_workgroup == words_per_workgroup =>
            {
                self.pending.take()
            }
            _ => None,
        }
    }

    /// Records the pending second pass, if any.
    fn record_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            let pass = self.open_pass(p.label);
            pass.set_pipeline(&p.pipeline);
            pass.set_bind_group(0, &p.group, &[]);
            pass.dispatch_workgroups(p.workgroups.0, p.workgroups.1, 1);
        }
    }

    /// The open compute pass, or a new one (see [`GpuWork::pass`]).
    fn open_pass(&mut self, label: &'static str) -> &mut wgpu::ComputePass<'static> {
        let timed = self
            .timer
            .as_ref()
            .is_some_and(|t| (t.labels.len() as u32) < MAX_TIMED_PASSES);
        if timed || self.open.is_none() {
            self.open = None;
            let timestamp_writes = match &mut self.timer {
                Some(t) if timed => {
                    let k = t.labels.len() as u32;
                    t.labels.push(label);
                    Some(wgpu::ComputePassTimestampWrites {
                        query_set: &t.queries,
                        beginning_of_pass_write_index: Some(2 * k),
                        end_of_pass_write_index: Some(2 * k + 1),
                    })
                }
                _ => None,
            };
            let pass = self
                .encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes,
                })
                .forget_lifetime();
            self.open = Some(pass);
        }
        self.open.as_mut().expect("a compute pass was just opened")
    }

    /// The encoder, for commands outside compute passes (the open pass is ended first).
    pub(crate) fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.record_pending();
        self.open = None;
        &mut self.encoder
    }

    /// One dispatch of `pipeline` over `workgroups`, in the pass for `label`.
    pub(crate) fn dispatch(
        &mut self,
        label: &'static str,
        pipeline: &wgpu::ComputePipeline,
        group: &wgpu::BindGroup,
        workgroups: (u32, u32),
    ) {
        let pass = self.pass(label);
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, group, &[]);
        pass.dispatch_workgroups(workgroups.0, workgroups.1, 1);
    }
}

impl Gpu {
    /// The work of a new recording; `timed`: its passes get timestamps, where the device
    /// has timestamp queries.
    pub(crate) fn work(&self, timed: bool) -> GpuWork {
        let timer = (timed && self.timestamps).then(|| PassTimer {
            queries: self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gradfuse pass timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * MAX_TIMED_PASSES,
            }),
            labels: Vec::new(),
        });
        GpuWork {
            encoder: self.encoder("gradfuse recording"),
            open: None,
            timer,
            work: 0,
            pending: None,
        }
    }

    /// Counts `operations` more recorded into `work`, and once an untimed recording holds
    /// more than [`crate::KernelSpec::WORK_PER_SUBMISSION`], submits what it holds and goes
    /// on in a new encoder: a recording of long kernels is several submissions in order,
    /// none long enough for a driver's watchdog. (A timed recording stays one submission:
    /// its timestamps are one query set's.)
    pub(crate) fn flush_long_work(&self, work: &mut GpuWork, operations: u64) -> Result<(), Error> {
        work.work = work.work.saturating_add(operations);
        if work.timer.is_some() || work.work <= crate::KernelSpec::WORK_PER_SUBMISSION {
            return Ok(());
        }
        work.record_pending();
        work.open = None;
        let done = std::mem::replace(&mut work.encoder, self.encoder("gradfuse recording"));
        work.work = 0;
        self.submit(done)
    }

    /// Submits a recording's work. Untimed, it does not wait; timed, it waits and returns
    /// the GPU time of each timed pass, with its label.
    pub(crate) fn submit_work(
        &self,
        work: GpuWork,
    ) -> Result<Vec<(&'static str, Duration)>, Error> {
        let mut work = work;
        work.record_pending();
        let GpuWork {
            mut encoder,
            open,
            timer,
            work: _,
            pending: _,
        } = work;
        drop(open);
        let Some(timer) = timer.filter(|t| !t.labels.is_empty()) else {
            self.submit(encoder)?;
            return Ok(Vec::new());
        };
        let count = 2 * timer.labels.len() as u32;
        let readback = self.resolve_timestamps(&mut encoder, &timer.queries, count);
        let submission = {
            self.check_lost()?;
            self.queue.submit([encoder.finish()])
        };
        let (tx, mapped) = std::sync::mpsc::channel();
        readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait_for(submission)?;
        self.await_map(&mapped)?;
        self.take_uncaptured("gradfuse recording")?;
        let spans = self.timestamp_spans(&readback)?;
        Ok(timer.labels.iter().copied().zip(spans).collect())
    }
}
