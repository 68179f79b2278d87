//! Recordings: launches and optimizer steps over device-resident buffers, recorded in order
//! and submitted together, with no host round trip between them.
//!
//! On a GPU a recording is one command encoder and [`Recording::submit`] one queue
//! submission that does not wait; on the CPU device the recorded work runs, in order, at
//! submit. Nothing recorded runs before `submit`, and a recording dropped unsubmitted runs
//! nothing, on either device.

use crate::buffer::RawBuffer;
use crate::device::{Backend, Device};
use crate::error::{Error, mismatch};
use crate::spec::KernelSpec;
use std::sync::Arc;

/// Work recorded for one submission. Made by [`Device::record`].
#[must_use = "recorded work runs only once submitted"]
pub struct Recording<'d> {
    device: &'d Device,
    work: Work,
}

impl std::fmt::Debug for Recording<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("device", &self.device.describe())
            .finish_non_exhaustive()
    }
}

/// A step of CPU work, run at submit.
pub(crate) type CpuStep = Box<dyn FnOnce() + Send>;

enum Work {
    Cpu(Vec<CpuStep>),
    #[cfg(feature = "gpu")]
    Gpu(Box<crate::gpu::GpuWork>),
}

/// The buffers of one recorded launch of a kernel (see [`Recording::launch`]).
#[doc(hidden)]
pub struct Bindings<'b> {
    /// The per-element arguments: `n * spec.input_words` words.
    pub input: &'b Arc<RawBuffer>,
    /// The `#[shared]` arguments, for a kernel that has them.
    pub shared: Option<&'b Arc<RawBuffer>>,
    /// One buffer per output of the kernel, `n * words` words each.
    pub outputs: &'b [&'b Arc<RawBuffer>],
    /// The gradient of the batch sum in the shared arguments, for a kernel that reduces it.
    pub shared_grad: Option<&'b Arc<RawBuffer>>,
}

impl Device {
    /// An empty recording on this device.
    pub fn record(&self) -> Recording<'_> {
        self.recording(false)
    }

    /// An empty recording whose passes are timed on the GPU ([`Recording::submit_timed`]),
    /// for the benches. Not a stable API.
    #[doc(hidden)]
    pub fn record_timed(&self) -> Recording<'_> {
        self.recording(true)
    }

    fn recording(&self, timed: bool) -> Recording<'_> {
        let work = match &self.backend {
            Backend::Cpu => Work::Cpu(Vec::new()),
            #[cfg(feature = "gpu")]
            Backend::Gpu(g) => Work::Gpu(Box::new(g.work(timed))),
        };
        let _ = timed;
        Recording { device: self, work }
    }
}

impl<'d> Recording<'d> {
    /// The device it records for.
    pub fn device(&self) -> &'d Device {
        self.device
    }

    /// Submits the recorded work. On a GPU this does not wait for it: a later
    /// [`Device::read`] waits for what it reads.
    pub fn submit(self) -> Result<(), Error> {
        self.submit_timed().map(|_| ())
    }

    /// Submits the recorded work; for a recording made by [`Device::record_timed`] on a GPU
    /// with timestamp queries, waits for it and returns the GPU time of each compute pass
    /// with its label (a kernel's label, `assemble`, `scatter_rows`, ...), in order (empty
    /// otherwise). Not a stable API.
    #[doc(hidden)]
    pub fn submit_timed(self) -> Result<Vec<(&'static str, std::time::Duration)>, Error> {
        match self.work {
            Work::Cpu(steps) => {
                for step in steps {
                    step();
                }
                Ok(Vec::new())
            }
            #[cfg(feature = "gpu")]
            Work::Gpu(work) => match &self.device.backend {
                Backend::Gpu(g) => g.surface(g.submit_work(*work)),
                Backend::Cpu => unreachable!("a GPU recording is made by a GPU device"),
            },
        }
    }

    /// Records a launch of `spec` over the `n` elements of `bindings.input`. Generated
    /// launchers call this with typed buffers; it checks every length and binding and
    /// returns an error, recording nothing, on any mismatch.
    #[doc(hidden)]
    pub fn launch(
        &mut self,
        kernel_device: &Device,
        spec: &'static KernelSpec,
        b: Bindings<'_>,
    ) -> Result<(), Error> {
        self.check_kernel_device(kernel_device, spec)?;
        let n = self.check_launch(spec, &b)?;
        if n == 0 {
            return self.zero_shared_grad(b.shared_grad);
        }
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_launch(work, spec, n, &b);
        }
        if let Some(steps) = self.cpu_steps() {
            steps.push(cpu_launch(spec, n, &b));
        }
        Ok(())
    }

    /// An error unless the kernel was made for the recording's device.
    pub(crate) fn check_kernel_device(
        &self,
        kernel_device: &Device,
        spec: &KernelSpec,
    ) -> Result<(), Error> {
        if kernel_device.id() == self.device.id() {
            return Ok(());
        }
        Err(Error::WrongDevice(format!(
            "{}: the kernel was made for another device than the recording's ({})",
            spec.label,
            self.device.describe()
        )))
    }

    /// The CPU device's list of steps, run in order at submit (None on a GPU).
    pub(crate) fn cpu_steps(&mut self) -> Option<&mut Vec<CpuStep>> {
        match &mut self.work {
            Work::Cpu(steps) => Some(steps),
            #[cfg(feature = "gpu")]
            Work::Gpu(_) => None,
        }
    }

    /// A GPU's work, which records at once (None on the CPU device).
    #[cfg(feature = "gpu")]
    pub(crate) fn gpu_work(&mut self) -> Option<(&'d crate::gpu::Gpu, &mut crate::gpu::GpuWork)> {
        match (&mut self.work, &self.device.backend) {
            (Work::Gpu(work), Backend::Gpu(g)) => Some((&**g, work)),
            _ => None,
        }
    }

    /// An empty batch's gradient of the batch sum is zero.
    fn zero_shared_grad(&mut self, shared_grad: Option<&Arc<RawBuffer>>) -> Result<(), Error> {
        let Some(g) = shared_grad.cloned() else {
            return Ok(());
        };
        #[cfg(feature = "gpu")]
        if let Some((_, work)) = self.gpu_work() {
            work.encoder().clear_buffer(g.gpu(), 0, None);
            return Ok(());
        }
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || g.cpu_write().fill(0)));
        }
        Ok(())
    }

    /// The element count of a launch, or why its bindings do not fit `spec`.
    fn check_launch(&self, spec: &KernelSpec, b: &Bindings<'_>) -> Result<usize, Error> {
        let label = spec.label;
        let mut all: Vec<(&RawBuffer, &str)> = vec![(b.input, "the arguments")];
        all.extend(b.shared.map(|s| (&**s, "the shared arguments")));
        all.extend(b.outputs.iter().map(|o| (&***o, "an output")));
        all.extend(b.shared_grad.map(|s| (&**s, "the shared gradient")));
        for (buf, what) in &all {
            self.device
                .check_owns(buf, format_args!("{label}: {what}"))?;
        }
        // Every written buffer is bound once, and never also read.
        for (i, (w, what)) in all.iter().enumerate().skip(1 + b.shared.is_some() as usize) {
            if all[..i].iter().any(|(o, _)| o.id == w.id) {
                return Err(Error::Aliased(format!(
                    "{label}: {what} is also bound to another argument or output of the launch"
                )));
            }
        }
        let in_words = spec.input_words as usize;
        if in_words == 0 || !b.input.words.is_multiple_of(in_words) {
            return Err(Error::ShapeMismatch {
                what: format!("{label}: argument words (a multiple of {in_words})"),
                expected: b.input.words.div_ceil(in_words.max(1)) * in_words,
                got: b.input.words,
            });
        }
        let n = b.input.words / in_words;
        mismatch(
            format_args!("{label}: output buffers"),
            spec.outputs.len(),
            b.outputs.len(),
        )?;
        for (k, (out, o)) in b.outputs.iter().zip(spec.outputs).enumerate() {
            let what = format_args!("{label}: output {k} words ({n} elements × {})", o.words);
            mismatch(what, n * o.words as usize, out.words)?;
        }
        let words = |s: Option<&Arc<RawBuffer>>| s.map_or(0, |s| s.words);
        let what = format_args!("{label}: shared argument words");
        mismatch(what, spec.shared_words(), words(b.shared))?;
        let what = format_args!("{label}: shared gradient words");
        mismatch(what, spec.shared_grad_words(), words(b.shared_grad))?;
        Ok(n)
    }
}

/// A launch on the CPU device, run at submit over the buffers' words.
fn cpu_launch(spec: &'static KernelSpec, n: usize, b: &Bindings<'_>) -> CpuStep {
    let input = b.input.clone();
    let shared = b.shared.cloned();
    let outputs: Vec<Arc<RawBuffer>> = b.outputs.iter().map(|o| (*o).clone()).collect();
    let shared_grad = b.shared_grad.cloned();
    Box::new(move || {
        let input = input.cpu_read();
        let shared = shared.as_ref().map(|s| s.cpu_read());
        let mut outs: Vec<_> = outputs.iter().map(|o| o.cpu_write()).collect();
        let mut views: Vec<&mut [f32]> = outs
            .iter_mut()
            .map(|o| bytemuck::cast_slice_mut(&mut o[..]))
            .collect();
        let mut grad = shared_grad.as_ref().map(|g| g.cpu_write());
        let grad: &mut [f32] = match &mut grad {
            Some(g) => bytemuck::cast_slice_mut(&mut g[..]),
            None => &mut [],
        };
        let shared: &[f32] = shared
            .as_ref()
            .map_or(&[], |s| bytemuck::cast_slice(&s[..]));
        crate::cpu::launch(
            spec,
            bytemuck::cast_slice(&input[..]),
            shared,
            n,
            &mut views,
            grad,
        );
    })
}
