//! What a generated kernel tells the runtime about itself.
//!
//! The runtime knows nothing of Rust syntax or of the functions it runs: the generated code
//! describes each kernel with a [`KernelSpec`] whose numbers all come from the compiler's
//! ABI module (`gradfuse-shaders-gen::abi`), the one place the buffer layout is defined.

/// The environment variable that opens GPUs without 64-bit floats in shaders, as on an
/// adapter that lacks them (Apple's, most mobile ones): f64 launches then return
/// [`crate::Error::Unsupported`]. For testing what users of such adapters see.
pub const DISABLE_F64_ENV: &str = "GRADFUSE_DISABLE_F64";

/// The pipeline-overridable constant a kernel declares (`override gf_workgroup_bytes: u32`)
/// when its workgroup memory may grow with the device's: the runtime sets it to the
/// device's `max_compute_workgroup_storage_size` (its default in the WGSL is the 16 KiB
/// WebGPU guarantees). The compiler's `names::WORKGROUP_BYTES_OVERRIDE` is the same name.
pub const WORKGROUP_BYTES_OVERRIDE: &str = "gf_workgroup_bytes";

/// The pipeline-overridable constant a kernel declares (`override gf_workgroup_size: u32`)
/// when the runtime may choose its workgroup size: the kernel computes the same results at
/// any power of two from 32 to 256, and the runtime sets it to [`KernelSpec::workgroup_size`]
/// of the spec it launches (see [`crate::Device::workgroup_size_of`]). The compiler's
/// `names::WORKGROUP_SIZE_OVERRIDE` is the same name.
pub const WORKGROUP_SIZE_OVERRIDE: &str = "gf_workgroup_size";

/// Bytes every binding of a kernel's argument rows (`args`) is a whole number of. A kernel
/// may read its rows as `vec4`s from each row's 16-byte-aligned start and take the words
/// it needs from them (the compiler's `abi::ARGS_BINDING_ALIGN`): the last element's last
/// `vec4` then reaches past its row, into the padding, which such a binding must cover.
pub const ARGS_BINDING_ALIGN: u64 = 16;

/// The bytes of a binding of `elements` rows of `words` words: whole
/// [`ARGS_BINDING_ALIGN`]s, and never empty (a kernel without per-element arguments still
/// binds an input it never reads).
#[cfg(feature = "gpu")]
pub(crate) fn args_binding_bytes(elements: usize, words: u32) -> u64 {
    (elements as u64 * words as u64 * 4)
        .next_multiple_of(ARGS_BINDING_ALIGN)
        .max(ARGS_BINDING_ALIGN)
}

/// Whether the environment flag `name` is set (to anything but empty or `0`).
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The float type a kernel computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// 32-bit floats: every adapter.
    #[default]
    F32,
    /// 64-bit floats: adapters with `SHADER_F64` (NVIDIA's, lavapipe); the CPU fallback
    /// always.
    F64,
}

impl Precision {
    /// 4-byte words per scalar: 1 for f32, 2 for f64.
    pub fn words_per_scalar(self) -> usize {
        match self {
            Precision::F32 => 1,
            Precision::F64 => 2,
        }
    }

    /// `sum += g`, as the scalars the words hold: f32 words, or pairs of words holding an
    /// f64 each (read unaligned: the slices are f32 words). Adding an f64's halves as two
    /// f32s would quiet a half that reads as a signalling NaN, flipping a bit.
    pub(crate) fn add_words(self, sum: &mut [f32], g: &[f32]) {
        match self {
            Precision::F32 => {
                for (s, g) in sum.iter_mut().zip(g) {
                    *s += g;
                }
            }
            Precision::F64 => {
                for (s, g) in sum.chunks_exact_mut(2).zip(g.chunks_exact(2)) {
                    let a: f64 = bytemuck::pod_read_unaligned(bytemuck::cast_slice(s));
                    let b: f64 = bytemuck::pod_read_unaligned(bytemuck::cast_slice(g));
                    s.copy_from_slice(bytemuck::cast_slice(&[a + b]));
                }
            }
        }
    }
}

/// A plain-data type made of floats of one precision: what an optimizer steps, so that it
/// knows whether the words are f32 or f64. Implemented for `f32`, `f64`, arrays of them, and
/// the types `#[differentiable]` generates (`Args`, `Grad`, `Shared`, `SharedGrad`).
pub trait Floats: bytemuck::Pod {
    /// The precision of every float of the type.
    const PRECISION: Precision;
}

impl Floats for f32 {
    const PRECISION: Precision = Precision::F32;
}

impl Floats for f64 {
    const PRECISION: Precision = Precision::F64;
}

impl<T: Floats, const N: usize> Floats for [T; N]
where
    [T; N]: bytemuck::Pod,
{
    const PRECISION: Precision = T::PRECISION;
}

/// One output buffer of a kernel.
#[derive(Clone, Copy, Debug)]
pub struct OutputSpec {
    /// Its binding in group 0.
    pub binding: u32,
    /// 4-byte words per batch element (an f64 is two).
    pub words: u32,
}

/// Batch-uniform (`#[shared]`) arguments of a kernel: one copy for the whole launch.
#[derive(Clone, Copy, Debug)]
pub struct SharedSpec {
    /// Binding of the shared words (`array<f32>` or `array<f64>`, read only) in the kernel.
    pub binding: u32,
    /// How many 4-byte words (an f64 is two).
    pub words: u32,
    /// Whether the kernel reads them from a uniform buffer (`array<vec4<f32>, _>` or
    /// `array<vec2<f64>, _>`, read through the constant cache) rather than a read-only
    /// storage buffer.
    pub uniform: bool,
    /// For an adjoint kernel: how the gradient of the sum over the batch is reduced.
    pub reduction: Option<ReductionSpec>,
}

/// The deterministic two-pass reduction of shared gradients: the kernel writes one partial
/// sum per workgroup and shared word (a workgroup tree, fixed order), then a second kernel
/// sums the partials of each word (again in a fixed order). No float atomics: the same
/// inputs give the same bits on every run.
#[derive(Clone, Copy, Debug)]
pub struct ReductionSpec {
    /// Binding, in the main kernel, of the partial sums (`groups * words` f32).
    pub partials_binding: u32,
    /// The second pass: its label, WGSL module and entry point. A workgroup per
    /// `words_per_workgroup` shared words; its uniform holds the number of groups.
    pub label: &'static str,
    /// The second pass's WGSL module.
    pub wgsl: &'static str,
    /// Its entry point.
    pub entry_point: &'static str,
    /// Binding of its uniform `Params { n }` (`n`: partial sums per word).
    pub params_binding: u32,
    /// Binding of the partial sums it reads.
    pub input_binding: u32,
    /// Binding of the sums it writes (`words` f32).
    pub output_binding: u32,
    /// Shared words each of its workgroups sums: it runs `words / words_per_workgroup`
    /// workgroups, rounded up.
    pub words_per_workgroup: u32,
    /// Batch elements each thread of the main kernel computes side by side (runs of a
    /// workgroup's elements, one per element): a launch gives each workgroup a multiple of
    /// this many runs, so that no thread computes an element it then discards.
    pub elements_per_thread: u32,
    /// Whether the main kernel divides a launch's elements among the workgroups dispatched
    /// itself (from `n` and `num_workgroups`; the cooperative network adjoints, in chunks
    /// of their workgroup's size or less): a launch then dispatches as many workgroups as
    /// it may, not a whole number of runs each, so that no multiprocessor of a launch in
    /// one wave takes a run more than the rest.
    pub divides_chunks: bool,
}

/// A compiled kernel: its WGSL, its buffers, and its CPU version.
///
/// Thread `i` of a launch of `n` elements reads the `input_words` words of element `i` from
/// the input buffer and writes `words` words of element `i` to each output buffer; the
/// uniform at `params_binding` holds `n` as its first u32.
#[derive(Debug)]
pub struct KernelSpec {
    /// A name for errors and GPU debuggers, e.g. `rosen::adjoint`.
    pub label: &'static str,
    /// The WGSL module. Every loop in it must terminate: the runtime compiles it without
    /// wgpu's loop bounding (generated kernels loop over constant ranges; a spec written by
    /// hand keeps that promise itself).
    pub wgsl: &'static str,
    /// Its entry point.
    pub entry_point: &'static str,
    /// Threads per workgroup (the kernel's `@workgroup_size`).
    pub workgroup_size: u32,
    /// Workgroups per dispatch dimension; wider launches use the second dimension.
    pub max_workgroups_per_dim: u32,
    /// Binding of the uniform holding the element count.
    pub params_binding: u32,
    /// Binding of the input buffer.
    pub input_binding: u32,
    /// 4-byte words per element in the input buffer (an f64 is two).
    pub input_words: u32,
    /// The output buffers.
    pub outputs: &'static [OutputSpec],
    /// Batch-uniform arguments, if the function has `#[shared]` ones.
    pub shared: Option<&'static SharedSpec>,
    /// Operations one element costs, each loop counted by its trip count: a launch is cut
    /// into submissions of at most [`KernelSpec::WORK_PER_SUBMISSION`] operations, so that
    /// no submission runs long enough to trip a driver's watchdog.
    pub work_per_element: u64,
    /// The float type of its words: an f64 kernel runs only on a device with 64-bit
    /// floats in shaders ([`crate::Device::has_f64`]); its word counts above are still of
    /// 4-byte words (two per f64).
    pub precision: Precision,
    /// The same computation for one element on the CPU: reads `input_words` words (then
    /// the shared words, if any) and writes every output's words, concatenated in the
    /// order of `outputs` (then this element's shared gradient words, if the kernel
    /// reduces them).
    pub cpu: fn(&[f32], &mut [f32]),
    /// Whether the runtime compiles the module with wgpu's bounds checks, an index clamp
    /// on every array access. `false` promises that no index the module computes leaves
    /// its array or buffer for any launch the runtime makes of it: the generator says so
    /// only of kernels whose indices are in range by construction (the cooperative network
    /// adjoint, 1.3x faster without them); a spec written by hand should keep `true`.
    pub bounds_checks: bool,
    /// Bytes of workgroup memory a device must have to run the kernel: 0 for a kernel that
    /// declares no more than the 16 KiB WebGPU guarantees every device (or sizes what it
    /// declares by the device's, [`WORKGROUP_BYTES_OVERRIDE`]); the cooperative network
    /// kernels' matrices take up to 48 KiB, which Apple's and many mobile GPUs lack
    /// (32 KiB). wgpu does not check it, and a driver given more than it has may fail in
    /// any way, so the runtime checks it before it launches ([`KernelSpec::fallback`]).
    pub workgroup_bytes: u32,
    /// The same computation from a kernel that needs less workgroup memory (one element a
    /// thread, with bindings and outputs as this one's): what a launch runs on a device with
    /// less than [`KernelSpec::workgroup_bytes`]. Where there is none, such a launch returns
    /// [`crate::Error::Unsupported`].
    pub fallback: Option<&'static KernelSpec>,
}

/// The gathered variant of a kernel: each per-element argument read from a buffer of its
/// own, at the element's row, or at the row its index array names where bit `k` (argument
/// `k`) of the uniform's third word is set. A launch whose arguments come from parameter
/// blocks then runs no pass that assembles argument rows first.
#[derive(Debug)]
pub struct GatheredSpec {
    /// The kernel (its `input_binding` is unused: the arguments are at `fields`).
    pub kernel: KernelSpec,
    /// The per-element arguments, in order.
    pub fields: &'static [FieldSpec],
    /// The by-rows entry point of an adjoint without `#[shared]` arguments: one thread per
    /// row of a block, summing the gradients of the elements that read the row itself.
    pub rows: Option<RowsEntry>,
}

/// The by-rows entry point of a gathered adjoint kernel, in the same module: thread `t`
/// takes row `first + t` of the block that one or two arguments read through their indices,
/// computes every element that reads the row (in each index's order, as the segmented sum
/// adds them) and writes the row of the block's gradient, so that the launch needs no
/// per-element gradient rows for those arguments and no scatter pass. Its uniform is
/// `[rows, 0, gathered mask, first, field0, field1, sides, store_grads]` (`store_grads`:
/// store every element's gradient row too, for the other arguments' scatters); it writes
/// the sink, never adds to it; bindings: the kernel's, then from
/// `order_binding` the first index's `order` and `starts`, the second's, and the sink.
#[derive(Clone, Copy, Debug)]
pub struct RowsEntry {
    /// Its name in the module.
    pub entry_point: &'static str,
    /// Names its dispatches.
    pub label: &'static str,
    /// Binding of the first index's `order`; its `starts`, the second index's `order` and
    /// `starts` and the sink follow.
    pub order_binding: u32,
}

/// One per-element argument of a gathered kernel.
#[derive(Clone, Copy, Debug)]
pub struct FieldSpec {
    /// Binding of its rows (read-only storage).
    pub rows_binding: u32,
    /// Binding of its index array (read-only storage; when its bit is clear, the rows are
    /// bound here too, and not read).
    pub index_binding: u32,
    /// 4-byte words per row (an f64 is two).
    pub words: u32,
}

impl KernelSpec {
    /// Most operations one submission of a launch runs (2^32: a few milliseconds on the
    /// H100 for arithmetic, some tens for loops over memory; a kernel whose every element
    /// costs more than 2^24 runs one workgroup per submission).
    pub const WORK_PER_SUBMISSION: u64 = 1 << 32;

    /// Most elements one submission takes by its work (at least one workgroup).
    pub fn elements_per_submission(&self) -> usize {
        let by_work = Self::WORK_PER_SUBMISSION / self.work_per_element.max(1);
        by_work
            .max(self.workgroup_size as u64)
            .min(usize::MAX as u64) as usize
    }

    /// Output words per element, all outputs together.
    pub fn output_words(&self) -> usize {
        self.outputs.iter().map(|o| o.words as usize).sum()
    }

    /// The kernel a device with `workgroup_bytes` of workgroup memory runs for this spec:
    /// this one where it fits, else the first of its fallbacks that does
    /// ([`KernelSpec::fallback`]); an error where none does.
    pub fn for_workgroup_bytes(
        &'static self,
        workgroup_bytes: u32,
    ) -> Result<&'static KernelSpec, crate::Error> {
        let mut spec = self;
        while spec.workgroup_bytes > workgroup_bytes {
            spec = spec.fallback.ok_or_else(|| {
                crate::Error::Unsupported(format!(
                    "{}: needs {} bytes of workgroup memory, and the device has {} \
                     (and the kernel has no fallback that needs less)",
                    self.label, spec.workgroup_bytes, workgroup_bytes
                ))
            })?;
        }
        Ok(spec)
    }

    /// Shared argument words (0 without `#[shared]` arguments).
    pub fn shared_words(&self) -> usize {
        self.shared.map_or(0, |s| s.words as usize)
    }

    /// Shared gradient words the kernel reduces over the batch (0 if none).
    pub fn shared_grad_words(&self) -> usize {
        self.shared
            .filter(|s| s.reduction.is_some())
            .map_or(0, |s| s.words as usize)
    }

    /// Shared gradient scalars the kernel reduces over the batch: the words of an f64 kernel
    /// pair up. The reduction's second pass takes one workgroup per scalar.
    pub fn shared_grad_scalars(&self) -> usize {
        self.shared_grad_words() / self.precision.words_per_scalar()
    }
}

/// The GPU time of one timed launch (`Device::time_kernel`, for the benches).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelTime {
    /// The kernel (for an adjoint with `#[shared]` arguments: including the per-workgroup
    /// sums of the shared gradient). Without timestamp queries, the wall clock of the
    /// whole launch.
    pub main: std::time::Duration,
    /// The reduction's second pass (zero without one, or without timestamp queries).
    pub reduce: std::time::Duration,
}

impl KernelTime {
    /// Both passes.
    pub fn total(&self) -> std::time::Duration {
        self.main + self.reduce
    }
}

/// The input rows of a tangent kernel: each element's argument words followed by its
/// tangent words (`rows` elements; `args` and `tangents` hold `rows` rows each, the
/// tangents' row possibly empty). Called by generated `jvp` launchers.
#[doc(hidden)]
pub fn tangent_rows(
    rows: usize,
    args: &[f32],
    tangent_rows: usize,
    tangents: &[f32],
) -> Result<Vec<f32>, crate::Error> {
    if tangent_rows != rows {
        return Err(crate::Error::ShapeMismatch {
            what: "tangents (one per element)".into(),
            expected: rows,
            got: tangent_rows,
        });
    }
    if rows == 0 {
        return Ok(Vec::new());
    }
    let (a, t) = (args.len() / rows, tangents.len() / rows);
    let mut words = Vec::with_capacity(rows * (a + t));
    for k in 0..rows {
        words.extend_from_slice(&args[k * a..(k + 1) * a]);
        words.extend_from_slice(&tangents[k * t..(k + 1) * t]);
    }
    Ok(words)
}

/// A spec of no module and no outputs, one input word, for the runtime's unit tests to
/// take the fields they test from.
#[cfg(test)]
pub(crate) const TEST_SPEC: KernelSpec = KernelSpec {
    label: "test",
    wgsl: "",
    entry_point: "main",
    workgroup_size: 256,
    max_workgroups_per_dim: 65535,
    params_binding: 0,
    input_binding: 1,
    input_words: 1,
    outputs: &[],
    shared: None,
    work_per_element: 1,
    precision: Precision::F32,
    cpu: |_, _| {},
    bounds_checks: true,
    workgroup_bytes: 0,
    fallback: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel of no work that needs `workgroup_bytes`, falling back to `fallback`.
    const fn needing(
        label: &'static str,
        workgroup_bytes: u32,
        fallback: Option<&'static KernelSpec>,
    ) -> KernelSpec {
        KernelSpec {
            label,
            workgroup_bytes,
            fallback,
            ..TEST_SPEC
        }
    }

    static PER_ELEMENT: KernelSpec = needing("per element", 0, None);
    static MIDDLE: KernelSpec = needing("32 KiB", 32 << 10, Some(&PER_ELEMENT));
    static WIDE: KernelSpec = needing("48 KiB", 48 << 10, Some(&MIDDLE));
    static ALONE: KernelSpec = needing("alone", 48 << 10, None);

    /// A device runs the first kernel of the chain that fits its workgroup memory: the
    /// kernel itself where it fits exactly, a fallback's fallback where the first is too
    /// large too, and an error naming the sizes where none fits.
    #[test]
    fn a_device_runs_the_first_kernel_of_the_chain_that_fits() {
        let runs = |spec: &'static KernelSpec, bytes| spec.for_workgroup_bytes(bytes);
        assert!(std::ptr::eq(runs(&WIDE, 48 << 10).unwrap(), &WIDE));
        assert!(std::ptr::eq(runs(&WIDE, 40 << 10).unwrap(), &MIDDLE));
        assert!(std::ptr::eq(runs(&WIDE, 16 << 10).unwrap(), &PER_ELEMENT));
        assert!(std::ptr::eq(runs(&PER_ELEMENT, 0).unwrap(), &PER_ELEMENT));
        match runs(&ALONE, 32 << 10) {
            Err(crate::Error::Unsupported(m)) => {
                assert!(
                    m.contains("alone") && m.contains("49152") && m.contains("32768"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
