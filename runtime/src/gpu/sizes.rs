//! Workgroup sizes chosen on the device.
//!
//! A kernel that declares [`WORKGROUP_SIZE_OVERRIDE`] computes the same results at any of
//! [`WORKGROUP_SIZES`]; which runs fastest depends on the driver. NVIDIA's compiler gives a
//! kernel more or fewer registers by its workgroup size, and a register-heavy kernel in
//! workgroups of 256 leaves an SM idle until the slowest of a workgroup's 8 warps is done.
//! On the H100, `array_64`'s adjoint of the performance corpus ran 1.48x faster in
//! workgroups of 128, its tangent 1.22x faster in workgroups of 32, while light kernels ran
//! up to 2.4x slower in workgroups of 32 (`BENCHMARKS.md`). So no size is right for every
//! kernel, and none can be told from the WGSL: the first launch of at least
//! [`TUNE_MIN_ELEMENTS`] elements times each size on its own arguments (a recorded launch,
//! on its resident rows as they are when it is recorded) and keeps the fastest for every
//! later launch of the kernel on this device. The sizes are compiled
//! side by side before any is timed: compiled in turn, choosing took up to 4.8 s, and a
//! size timed right after its own compilation, the GPU idle meanwhile, ran up to 4x slower
//! than after all of them.

use super::{Gpu, key, lock};
use crate::error::Error;
use crate::spec::{KernelSpec, WORKGROUP_SIZE_OVERRIDE};
use std::sync::atomic::Ordering;

/// The sizes tried, the kernel's own (256) first.
pub(crate) const WORKGROUP_SIZES: [u32; 4] = [256, 128, 64, 32];

/// Launches of fewer elements run at the kernel's own size and choose nothing: they fill
/// too little of a large GPU for the times to say which size is fastest on a full one.
pub(crate) const TUNE_MIN_ELEMENTS: usize = 1 << 18;

/// Elements a size is timed on: the launch's first ones.
const SAMPLE_ELEMENTS: usize = 1 << 20;

/// Rows of a resident argument buffer read back for a recorded launch's timing: enough
/// for its data's branches, a small readback (at most 16,384 rows).
const RESIDENT_SAMPLE_ROWS: usize = 1 << 14;

/// Timed launches per size (after the timing's own warm-up); the fastest counts.
const TIMED_LAUNCHES: usize = 3;

/// Another size is kept only where it runs at most this fraction of the kernel's own
/// size's time: noise between rounds (a few percent on the H100) must not move a kernel.
const MARGIN: f64 = 0.97;

/// What is known of one kernel's sizes on this device.
#[derive(Default)]
pub(super) struct KernelSizes {
    /// The spec at each size other than its own, made on first use (leaked: specs are
    /// `'static`, and there are at most three per kernel).
    at: Vec<&'static KernelSpec>,
    /// The size its launches run at, once chosen.
    chosen: Option<&'static KernelSpec>,
}

/// Whether the runtime may launch `spec` at other workgroup sizes.
pub(crate) fn sized_by_runtime(spec: &KernelSpec) -> bool {
    spec.shared_grad_words() == 0
        && spec
            .wgsl
            .contains(&format!("override {WORKGROUP_SIZE_OVERRIDE}:"))
}

impl Gpu {
    /// `spec` launched in workgroups of `size` threads: the same kernel, compiled and
    /// dispatched for that size. An error unless the kernel lets the runtime size it and
    /// `size` is one of [`WORKGROUP_SIZES`].
    pub(crate) fn at_size(
        &self,
        spec: &'static KernelSpec,
        size: u32,
    ) -> Result<&'static KernelSpec, Error> {
        if size == spec.workgroup_size {
            return Ok(spec);
        }
        if !sized_by_runtime(spec) || !WORKGROUP_SIZES.contains(&size) {
            return Err(Error::Unsupported(format!(
                "{}: runs only in workgroups of {} threads (asked for {size})",
                spec.label, spec.workgroup_size
            )));
        }
        let mut sizes = lock(&self.sizes);
        let entry = sizes.entry(key(spec)).or_default();
        if let Some(s) = entry.at.iter().find(|s| s.workgroup_size == size) {
            return Ok(s);
        }
        let sized: &'static KernelSpec = Box::leak(Box::new(KernelSpec {
            workgroup_size: size,
            ..*spec
        }));
        entry.at.push(sized);
        Ok(sized)
    }

    /// `spec` at the size chosen for it on this device, if one is (its own included).
    pub(crate) fn chosen(&self, spec: &'static KernelSpec) -> Option<&'static KernelSpec> {
        lock(&self.sizes).get(&key(spec)).and_then(|k| k.chosen)
    }

    /// `spec` at the size chosen for it on this device, or as it is if none is chosen.
    pub(crate) fn as_chosen(&self, spec: &'static KernelSpec) -> &'static KernelSpec {
        self.chosen(spec).unwrap_or(spec)
    }

    /// `spec` at its chosen size, choosing it first where this launch of `n` elements over
    /// `input` is the kernel's first large enough ([`TUNE_MIN_ELEMENTS`]). A CPU adapter
    /// (lavapipe) chooses nothing: its times say nothing of a GPU's.
    pub(super) fn choose_size(
        &self,
        spec: &'static KernelSpec,
        input: &[f32],
        n: usize,
    ) -> Result<&'static KernelSpec, Error> {
        if let Some(chosen) = self.chosen(spec) {
            return Ok(chosen);
        }
        if !self.chooses(spec, n) {
            return Ok(spec);
        }
        let sample = &input[..n.min(SAMPLE_ELEMENTS) * spec.input_words as usize];
        Ok(self.keep_timed(spec, self.time_sizes(spec, sample)))
    }

    /// [`Gpu::choose_size`] for a launch recorded over `n` rows resident in `input`: the
    /// sizes are timed on its first [`RESIDENT_SAMPLE_ROWS`] rows as they are when the
    /// launch is recorded, repeated to the sample's length.
    pub(super) fn choose_size_resident(
        &self,
        spec: &'static KernelSpec,
        input: &wgpu::Buffer,
        n: usize,
    ) -> &'static KernelSpec {
        if let Some(chosen) = self.chosen(spec) {
            return chosen;
        }
        if !self.chooses(spec, n) {
            return spec;
        }
        let words = spec.input_words as usize;
        let mut rows = vec![0f32; n.min(RESIDENT_SAMPLE_ROWS) * words];
        let times = self
            .download(input, 0, bytemuck::cast_slice_mut(&mut rows))
            .and_then(|()| {
                let sample: Vec<f32> = (rows.iter().copied().cycle())
                    .take(n.min(SAMPLE_ELEMENTS) * words)
                    .collect();
                self.time_sizes(spec, &sample)
            });
        self.keep_timed(spec, times)
    }

    /// Whether a launch of `n` elements chooses `spec`'s size (one not chosen yet).
    fn chooses(&self, spec: &KernelSpec, n: usize) -> bool {
        let any_adapter = self.sizes_on_any_adapter.load(Ordering::Relaxed);
        sized_by_runtime(spec)
            && spec.input_words > 0
            && n >= TUNE_MIN_ELEMENTS
            && (any_adapter || !self.is_software())
    }

    /// [`Gpu::keep_fastest`] of `times`, or the kernel's own size where timing failed.
    fn keep_timed(
        &self,
        spec: &'static KernelSpec,
        times: Result<Vec<(u32, f64)>, Error>,
    ) -> &'static KernelSpec {
        match times {
            Ok(times) => self.keep_fastest(spec, &times),
            // Choosing is an optimization: where it fails, the kernel keeps its own size
            // and the launch goes on (a lost device fails it there, as it would have).
            Err(e) => {
                log::warn!("gradfuse: {}: keeps its workgroup size: {e}", spec.label);
                self.keep_fastest(spec, &[])
            }
        }
    }

    /// The fastest kernel time of `spec` over `sample` at each of [`WORKGROUP_SIZES`], in
    /// seconds.
    pub(crate) fn time_sizes(
        &self,
        spec: &'static KernelSpec,
        sample: &[f32],
    ) -> Result<Vec<(u32, f64)>, Error> {
        let sized: Vec<&'static KernelSpec> = (WORKGROUP_SIZES.iter())
            .map(|&size| self.at_size(spec, size))
            .collect::<Result<_, _>>()?;
        self.compile_side_by_side(&sized)?;
        let mut times = Vec::with_capacity(WORKGROUP_SIZES.len());
        for sized in sized {
            let size = sized.workgroup_size;
            let runs = self.time_kernel_batch(sized, sample, TIMED_LAUNCHES)?;
            let best = runs
                .iter()
                .map(|t| t.main.as_secs_f64())
                .fold(f64::MAX, f64::min);
            times.push((size, best));
        }
        Ok(times)
    }

    /// Records the fastest of `times` as `spec`'s size (its own unless another is faster
    /// by more than the margin; its own where `times` is empty) and returns `spec` at that
    /// size.
    pub(crate) fn keep_fastest(
        &self,
        spec: &'static KernelSpec,
        times: &[(u32, f64)],
    ) -> &'static KernelSpec {
        let own = times
            .iter()
            .find(|t| t.0 == spec.workgroup_size)
            .map_or(f64::MAX, |t| t.1);
        let (size, fastest) = times
            .iter()
            .copied()
            .fold((spec.workgroup_size, own), |best, t| {
                if t.1 < best.1 { t } else { best }
            });
        let size = if fastest <= own * MARGIN {
            size
        } else {
            spec.workgroup_size
        };
        let chosen = self.at_size(spec, size).unwrap_or(spec);
        lock(&self.sizes).entry(key(spec)).or_default().chosen = Some(chosen);
        chosen
    }
}
