//! How arguments, results and gradients map to buffers: the one place both emitters (and,
//! through the `KernelSpec` the Rust emitter writes, the runtime) read.
//!
//! Each batch element's arguments are its parameters' f32 words in declaration order, with
//! no padding (`f::Args` is `#[repr(C)]` of f32 and `[f32; N]` fields, so this is also its
//! memory layout). A batch is one `array<f32>` of `n * words` floats: thread `i` reads the
//! contiguous words `i * words ..`, so a warp reads one contiguous range and every fetched
//! cache line is used. Gradients use the same layout as the arguments without the words of
//! `#[constant]` arguments (`f::Grad`).

use crate::signature::{Precision, Shape, Signature};

/// Threads per workgroup of every generated kernel (256: measured on the H100 against 64,
/// with the hand-written kernels of `benches/gpu.rs`); a kernel whose size the runtime
/// chooses ([`crate::names::WORKGROUP_SIZE_OVERRIDE`]) declares it as its default.
pub const WORKGROUP_SIZE: u32 = 256;
/// Workgroups per dispatch dimension that WebGPU guarantees; dispatches wider than this
/// use the second dimension.
pub const MAX_WORKGROUPS_PER_DIM: u32 = 65535;
/// Binding of the uniform `Params { n }` (the element count of this launch).
pub const PARAMS_BINDING: u32 = 0;
/// Binding of the arguments (`array<f32>`, read only).
pub const ARGS_BINDING: u32 = 1;
/// Binding of the values (`array<f32>`, one per element).
pub const VALUE_BINDING: u32 = 2;
/// Binding of the gradients (`array<f32>`, one per differentiable argument word per element).
pub const GRAD_BINDING: u32 = 3;
/// Binding of the `#[shared]` words (`array<f32>`, read only), where there are any.
pub const SHARED_BINDING: u32 = 4;
/// Most `#[shared]` words a kernel reads from a uniform buffer (64 KiB, the uniform
/// binding size WebGPU guarantees); more are read from a storage buffer. Every thread
/// reads the same shared words: from a uniform buffer they come through the constant
/// cache, as operands of the arithmetic itself on NVIDIA, instead of one load each.
pub const MAX_UNIFORM_SHARED_WORDS: u32 = 16384;

/// Whether a kernel with `shared_words` `#[shared]` scalars of `precision` reads them from
/// a uniform buffer (16-byte elements, [`uniform_lanes`] scalars each: uniform arrays have
/// a 16-byte stride) rather than a storage buffer (`array<f32>` or `array<f64>`).
pub fn shared_in_uniform(shared_words: u32, precision: Precision) -> bool {
    shared_words * precision.words_per_scalar() <= MAX_UNIFORM_SHARED_WORDS
}

/// Scalars of `precision` in one 16-byte element of a uniform array: `vec4<f32>` or
/// `vec2<f64>`.
pub fn uniform_lanes(precision: Precision) -> u32 {
    4 / precision.words_per_scalar()
}

/// Binding, in an adjoint kernel with `#[shared]` arguments, of the per-workgroup partial
/// sums of their gradients (`array<f32>`, `shared_words` per workgroup).
pub const PARTIALS_BINDING: u32 = 5;
/// Binding, in a Hessian kernel ([`KernelKind::Hessian`]), of the Hessians (`array<f32>`,
/// gradient words squared per element, row-major).
pub const HESSIAN_BINDING: u32 = 6;
/// Bytes of workgroup memory the shared-gradient reduction stages in (8 KiB: half of the
/// 16 KiB WebGPU guarantees, room left for staged gradients).
pub const REDUCE_STAGE_BYTES: u32 = 8192;

/// Shared gradient words of `precision` a workgroup reduces at once, the slots of its
/// stage of [`REDUCE_STAGE_BYTES`]: 8 f32 or 4 f64 (fewer barriers than one word at a
/// time).
pub fn reduce_lanes(precision: Precision) -> u32 {
    REDUCE_STAGE_BYTES / (WORKGROUP_SIZE * 4 * precision.words_per_scalar())
}

/// Slots of the wide stage of a kernel that keeps its streamed sums in workgroup memory
/// ([`MAX_WORKGROUP_SUMS_BYTES`]): 32 f32 or 16 f64, each of 257 lanes (256 and one of
/// padding, so that a warp reading one lane of each of 32 slots hits 32 banks).
pub fn wide_stage_slots(precision: Precision) -> u32 {
    32 / precision.words_per_scalar()
}

/// Lanes between two slots of the wide stage ([`wide_stage_slots`]).
pub const WIDE_STAGE_STRIDE: u32 = WORKGROUP_SIZE + 1;

/// Most bytes of `#[shared]` gradient sums a kernel that streams them keeps in workgroup
/// memory, beside its wide stage (33 KiB; 48 KiB in all, Vulkan's usual limit): each
/// staged slot's sum is added there by one thread, where owned sums make every thread look
/// through every slot for its words. On the H100, a 1,024-word table's adjoint at 2^24
/// took 148.8 ms with owned sums and 8 slots, 59.4 ms this way (BENCHMARKS.md).
pub const MAX_WORKGROUP_SUMS_BYTES: u32 = 12 * 1024;

/// Most `#[shared]` gradient words an adjoint kernel sums per thread, over the thread's
/// elements, in registers of their own; the words past them are streamed into the
/// workgroup's sums as they are computed. Registers are the fastest sum while they fit: on
/// the H100 the 161 words of an 8-16-1 network's adjoint took 0.96 ms at 2^24 elements in
/// registers and 8.0 ms streamed; but an 8-32-32-1 network's 1,377 words summed per
/// thread took 35 ms at 2^20 (spilled), streamed 7.7 ms, and 8-64-64-1 failed to launch.
pub const MAX_REGISTER_SUMS: u32 = 256;

/// Most `#[shared]` gradient words summed per thread in registers plus the values the
/// adjoint keeps alive at once beside them (`opt::max_live_within`: its gradient words
/// are consumed as they are made); past it the kernel streams its shared gradient. The
/// sums and the values share a thread's registers. The bound lies between two
/// measurements on the H100 at 2^24: the 8-16-1 network's adjoint (161 sums, 172 values
/// alive) takes 0.96 ms with sums in registers against 8.0 streamed; a 256-trip loop
/// unrolled (256 sums, 517 values alive: its reverse pass reads every value of its
/// forward one) 5.09 ms with sums in registers against 3.07 streamed (BENCHMARKS.md,
/// "Sums in registers only where they fit beside the values alive").
pub const MAX_REGISTER_SUMS_WITH_VALUES: u32 = 512;

/// Most sums a thread of a kernel that streams its shared gradient keeps for the words it
/// owns (word `w` is owned by thread `w % 256`), in a function-scope array: adding a staged
/// slot into it costs a thread no trip to memory, where an add into the workgroup's row of
/// partials waits for a load (and the whole workgroup for that thread). Kernels with more
/// shared words add into the row.
pub const MAX_OWNED_SUMS: u32 = 256;

/// How many sums each thread of a kernel streaming `shared_words` words keeps, if it keeps
/// them (see [`MAX_OWNED_SUMS`]).
pub fn owned_sums(shared_words: u32) -> Option<u32> {
    let m = shared_words.div_ceil(WORKGROUP_SIZE);
    (m <= MAX_OWNED_SUMS).then_some(m)
}

/// Longest array gradient (a loop's accumulator) an adjoint kernel sums per thread, in an
/// array; a longer one is streamed into the workgroup's sums add by add.
pub const MAX_ARRAY_SUM: u32 = 64;
/// Bindings of the second pass of the reduction: its `Params { n }` (partials per word),
/// the partial sums, the sums.
pub const REDUCE_PARAMS_BINDING: u32 = 0;
/// See [`REDUCE_PARAMS_BINDING`].
pub const REDUCE_INPUT_BINDING: u32 = 1;
/// See [`REDUCE_PARAMS_BINDING`].
pub const REDUCE_OUTPUT_BINDING: u32 = 2;

/// Shared words each workgroup of the reduction's second pass sums
/// (`emit_wgsl::emit_reduce_kernel`). Specs carry it (`ReductionSpec::words_per_workgroup`):
/// the runtime dispatches that many fewer workgroups, and an optimizer step takes the pass
/// over only where its own sums are of as many words (`runtime/src/gpu/optim.rs`).
pub const REDUCE_WORDS_PER_WORKGROUP: u32 = 8;

/// First binding of the argument buffers of a *gathered* kernel, which reads each
/// per-element argument from a buffer of its own instead of one interleaved row: argument
/// `k`'s rows at `FIELDS_BINDING + 2k` (`array<f32>`, or a vector view), its index at
/// `FIELDS_BINDING + 2k + 1` (`array<u32>`). Element `i` reads row `index[i]` of argument
/// `k` if bit `k` of `params.gathered` is set, else row `i`: the runtime binds a parameter
/// block and its index array, or the argument's own buffer twice. Gathering in the
/// kernel's loads spares a launch the passes that would assemble the rows first.
pub const FIELDS_BINDING: u32 = 8;
/// Most per-element arguments a function may have for a gathered kernel to be generated (one
/// bit each of `params.gathered`, two storage bindings each); a function with more is
/// gathered by assembling its argument rows first.
pub const MAX_GATHERED_FIELDS: u32 = 16;

/// The bindings of argument `k`'s rows and index in a gathered kernel (see
/// [`FIELDS_BINDING`]).
pub fn field_bindings(k: u32) -> (u32, u32) {
    (FIELDS_BINDING + 2 * k, FIELDS_BINDING + 2 * k + 1)
}

/// The entry point a gathered adjoint kernel without `#[shared]` arguments has besides
/// `adjoint`: one thread per row of a parameter block, which computes every element that
/// reads the row (through one or two arguments' indices, in each index's order) and sums
/// those arguments' gradients into the row itself, so that the block's gradient needs no
/// per-element gradient rows and no segmented-sum pass. Its `Params` go on past
/// `gathered` ([`ROWS_PARAMS_WORDS`]): `first` (the dispatch's first row), `field0` and
/// `field1` (the arguments whose gradients it sums), `sides` (1 or 2: how many of them),
/// `store_grads` (nonzero: store every element's gradient row too, for the scatters of
/// the other arguments' gradients). It writes the block's gradient, so it is the first
/// to write that sink.
pub const ROWS_ENTRY_POINT: &str = "adjoint_rows";
/// `Params` words of a gathered adjoint kernel with a [`ROWS_ENTRY_POINT`] (32 bytes).
pub const ROWS_PARAMS_WORDS: u32 = 8;
/// First binding of the by-rows entry's own buffers (after the last field's): the first
/// argument's index grouped by row (`order0`, then `starts0`, as the runtime's `Index`
/// holds them), the second's (`order1`, `starts1`), then `sink`, the block's gradient.
pub const ROWS_BINDING: u32 = FIELDS_BINDING + 2 * MAX_GATHERED_FIELDS;

/// Size in bytes of the uniform `Params` block: `n`, the elements of the launch, then, in an
/// adjoint kernel that reduces `#[shared]` gradients, `per_thread`, the elements each thread
/// takes (runs of [`WORKGROUP_SIZE`] consecutive elements per workgroup), then, in a
/// gathered kernel, `gathered`, one bit per argument read through its index; padded to 16
/// (a gathered adjoint with a [`ROWS_ENTRY_POINT`] has [`ROWS_PARAMS_WORDS`]).
pub const PARAMS_BYTES: u64 = 16;

/// Where one parameter's words sit in an element's argument words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSlot {
    /// The parameter's name.
    pub name: String,
    /// `None` for an `f32`, `Some(n)` for `[f32; n]`.
    pub len: Option<usize>,
    /// Index of its first word (among the element's words, or among the shared words).
    pub offset: u32,
    /// Whether it has a gradient (`false` for a `#[constant]` argument).
    pub differentiable: bool,
    /// A `#[shared]` argument: one value for the whole batch.
    pub shared: bool,
}

/// The argument words of one batch element, and the shared words of the batch.
///
/// The IR's inputs are the element's words (`0..words`), then the shared words
/// (`words..words + shared_words`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgLayout {
    /// One slot per parameter, in declaration order.
    pub slots: Vec<ParamSlot>,
    /// Words per element (the `f::Args` struct).
    pub words: u32,
    /// Words of the `#[shared]` arguments (the `f::Shared` struct).
    pub shared_words: u32,
    /// Words of the result: 1 for `f32`, `M` for `[f32; M]`.
    pub results: u32,
    /// The type of every word (the counts above are of these words; the runtime's are of
    /// 4-byte words, [`Precision::words_per_scalar`] times as many).
    pub precision: Precision,
}

impl ArgLayout {
    /// The layout of a signature's parameters.
    pub fn of(sig: &Signature) -> Self {
        let (mut element, mut shared) = (0u32, 0u32);
        let slots = sig
            .params
            .iter()
            .map(|p| {
                let len = match p.kind {
                    Shape::Scalar => None,
                    Shape::Array(n) => Some(n),
                };
                let offset = if p.shared { &mut shared } else { &mut element };
                let slot = ParamSlot {
                    name: p.name.to_string(),
                    len,
                    offset: *offset,
                    differentiable: !p.constant,
                    shared: p.shared,
                };
                *offset += len.unwrap_or(1) as u32;
                slot
            })
            .collect();
        ArgLayout {
            slots,
            words: element,
            shared_words: shared,
            results: sig.result.words() as u32,
            precision: sig.precision,
        }
    }

    fn slot_words(&self, shared: bool) -> Vec<(&ParamSlot, Option<usize>)> {
        self.slots
            .iter()
            .filter(|s| s.shared == shared)
            .flat_map(|s| match s.len {
                None => vec![(s, None)],
                Some(n) => (0..n).map(|j| (s, Some(j))).collect(),
            })
            .collect()
    }

    /// The per-element parameters, in order: the arguments of a gathered kernel.
    pub fn fields(&self) -> Vec<&ParamSlot> {
        self.slots.iter().filter(|s| !s.shared).collect()
    }

    /// Whether a gathered kernel is generated for this layout (see [`FIELDS_BINDING`]).
    pub fn has_gathered_kernel(&self) -> bool {
        let fields = self.fields().len() as u32;
        (1..=MAX_GATHERED_FIELDS).contains(&fields)
    }

    /// Whether the gathered kernel `kind` has the by-rows entry point
    /// ([`ROWS_ENTRY_POINT`]): an adjoint with gradient words and no `#[shared]` arguments
    /// (whose sums over the batch need every element in a workgroup's fixed order).
    pub fn has_rows_entry(&self, kind: KernelKind) -> bool {
        self.has_gathered_kernel()
            && kind == KernelKind::Adjoint
            && self.shared_words == 0
            && !self.grad_words().is_empty()
    }

    /// For each element word: its parameter slot and the element index (`None` for a
    /// scalar).
    pub fn words(&self) -> Vec<(&ParamSlot, Option<usize>)> {
        self.slot_words(false)
    }

    /// For each shared word: its parameter slot and the element index.
    pub fn shared_word_list(&self) -> Vec<(&ParamSlot, Option<usize>)> {
        self.slot_words(true)
    }

    /// The slot and element index of IR input `input` (element words, then shared words).
    ///
    /// # Panics
    /// If `input` is past the shared words.
    pub fn input_slot(&self, input: u32) -> (&ParamSlot, Option<usize>) {
        // Found among the few slots, not by listing every word: callers ask once per word.
        let (shared, word) = if input < self.words {
            (false, input)
        } else {
            (true, input - self.words)
        };
        let slot = self
            .slots
            .iter()
            .find(|s| {
                s.shared == shared
                    && (s.offset..s.offset + s.len.unwrap_or(1) as u32).contains(&word)
            })
            .expect("every input word belongs to a parameter");
        (slot, slot.len.map(|_| (word - slot.offset) as usize))
    }

    /// The IR input of a slot's first word.
    pub fn first_input(&self, slot: &ParamSlot) -> u32 {
        if slot.shared {
            self.words + slot.offset
        } else {
            slot.offset
        }
    }

    /// The argument words that have a gradient, in order: the words of `f::Grad`, of the
    /// adjoint kernel's `grads` and of `jvp`'s tangent (`#[constant]` arguments have none).
    pub fn grad_words(&self) -> Vec<u32> {
        self.slots
            .iter()
            .filter(|s| s.differentiable && !s.shared)
            .flat_map(|s| s.offset..s.offset + s.len.unwrap_or(1) as u32)
            .collect()
    }

    /// Whether IR input `input` has a gradient (shared words always do).
    pub fn is_differentiable(&self, input: u32) -> bool {
        self.input_slot(input).0.differentiable
    }

    /// The layout of the tangent kernel ([`KernelKind::Tangent`]): each element's words, then
    /// its tangent (one word per gradient word, `f::Grad`'s layout, as `t_x` slots); the
    /// shared words, then the shared tangent (`f::SharedGrad`'s layout, as `t_w` slots).
    /// The tangent words are `#[constant]`: the kernel differentiates nothing itself.
    pub fn tangent_layout(&self) -> ArgLayout {
        let mut slots = Vec::new();
        for shared in [false, true] {
            let own: Vec<&ParamSlot> = self.slots.iter().filter(|s| s.shared == shared).collect();
            let mut offset = own.iter().map(|s| s.len.unwrap_or(1) as u32).sum();
            slots.extend(own.iter().map(|s| ParamSlot {
                differentiable: false,
                ..(*s).clone()
            }));
            for s in own.iter().filter(|s| s.differentiable) {
                slots.push(ParamSlot {
                    name: format!("t_{}", s.name),
                    len: s.len,
                    offset,
                    differentiable: false,
                    shared,
                });
                offset += s.len.unwrap_or(1) as u32;
            }
        }
        let words = |shared: bool| {
            slots
                .iter()
                .filter(|s: &&ParamSlot| s.shared == shared)
                .map(|s| s.len.unwrap_or(1) as u32)
                .sum()
        };
        ArgLayout {
            words: words(false),
            shared_words: words(true),
            results: self.results,
            precision: self.precision,
            slots,
        }
    }

    /// An IR input as the source spells it, for comments in generated code: `x` or `p[2]`.
    pub fn word_label(&self, word: u32) -> String {
        let (slot, elem) = self.input_slot(word);
        match elem {
            None => slot.name.clone(),
            Some(j) => format!("{}[{j}]", slot.name),
        }
    }

    /// The labels of words `from..to`, for comments: word by word, but an array of more
    /// than 16 words wholly inside the range as one `w[0..n]`, so a comment does not grow
    /// with array lengths.
    pub fn words_label(&self, from: u32, to: u32) -> String {
        self.label_words(from, to, false)
    }

    /// Words `from..to` as runs of their arguments: `u[12..24]`, `k[0..4], s`.
    pub fn words_runs_label(&self, from: u32, to: u32) -> String {
        self.label_words(from, to, true)
    }

    /// Words `from..to`, each array's words as one run (`runs`), or only whole arrays of
    /// more than 16 words.
    fn label_words(&self, from: u32, to: u32, runs: bool) -> String {
        let mut parts = Vec::new();
        let mut w = from;
        while w < to {
            let (slot, elem) = self.input_slot(w);
            match (elem, slot.len) {
                (Some(k), Some(n)) if runs || (k == 0 && n > 16 && w + n as u32 <= to) => {
                    let end = (n - k).min((to - w) as usize) + k;
                    parts.push(if end == k + 1 {
                        self.word_label(w)
                    } else {
                        format!("{}[{k}..{end}]", slot.name)
                    });
                    w += (end - k) as u32;
                }
                _ => {
                    parts.push(self.word_label(w));
                    w += 1;
                }
            }
        }
        parts.join(", ")
    }

    /// A readable name for an IR input: `x` or `p_2`.
    pub fn word_name(&self, word: u32) -> String {
        let (slot, elem) = self.input_slot(word);
        match elem {
            None => slot.name.clone(),
            Some(j) => format!("{}_{j}", slot.name),
        }
    }
}

/// How many f32 words a kernel moves per load or store for an element of `words` words:
/// 4 (`vec4<f32>`) or 2 (`vec2<f32>`) where the count allows, else 1. The buffers stay flat
/// f32 words (the layout above); only the kernel's view of them widens, so that a thread's
/// accesses are 16-byte transactions instead of strided 4-byte ones.
pub fn vector_lanes(words: u32) -> u32 {
    if words.is_multiple_of(4) {
        4
    } else if words.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Bytes of workgroup memory every device has (what WebGPU guarantees): the stages whose
/// shape is fixed in a kernel's text fit in it.
pub const GUARANTEED_WORKGROUP_BYTES: u32 = 16384;

/// Argument rows of at least this many bytes per element are loaded through workgroup
/// memory ([`RowStage`]). Loaded by each thread from its own row, a row of 128 words is a
/// 512-byte stride between neighbouring threads' loads: 18-27% of the copy bandwidth on
/// the H100 (`benches/corpus/`, stencil_64).
pub const STAGE_ROWS_FROM_BYTES: u32 = 128;

/// Rows are staged ([`RowStage`]) only for kernels of at most this much work per row word
/// (operations weighted by [`crate::ops::Func::gpu_cost`]): a kernel that computes more
/// overlaps its strided loads with its arithmetic, and the stage's barriers and copies
/// only slow it. On the H100 (`benches/corpus/`, 2^24), every staged kernel of at most
/// 10 (the stencils': 4-10) ran 1.05-4.35x faster, and every one of 15 or more (the
/// array loops' and random programs' tangents, the Jacobians': 15-190) 0.58-0.98x.
pub const STAGE_ROWS_MAX_WORK_PER_WORD: f64 = 12.0;

/// The bound of [`STAGE_ROWS_MAX_WORK_PER_WORD`] for a kernel that maps its rows through
/// `tanh` ([`rows_mapped_by_tanh`]). The array loops it was measured on do 16-31 weighted
/// operations per word; networks of 32 and 40 inputs through `tanh` layers over shared
/// weights (1,000-3,250 a word) ran their value kernels up to 1.39x slower staged with the
/// branch-free `tanh` on the H100 (BENCHMARKS.md, "Rows mapped through `tanh`"), and keep
/// their rows unstaged.
pub const STAGE_MAPPED_ROWS_MAX_WORK_PER_WORD: f64 = 64.0;

/// Whether a kernel of `precision` with `tanh_calls` calls to `tanh` maps its rows of
/// `row_words` words through it, a call for every four words or more
/// (`b[i] = (a[i] * s).tanh()`, whose tangent kernel's rows are twice as wide): such a
/// kernel stages its rows ([`RowStage`]) up to [`STAGE_MAPPED_ROWS_MAX_WORK_PER_WORD`] (an
/// adjoint may read them as `vec4`s instead, [`mapped_rows_as_vec4s`]), and
/// computes `tanh` without branches (`ops::WGSL_TANH_BRANCH_FREE`). Where a warp's calls
/// fall on both sides of the branch, the branching `tanh` runs both paths, a branch each;
/// without branches, the driver spreads the row's loads from memory through the arithmetic
/// and the warps wait on each, unless the loads read the stage. On the H100 (BENCHMARKS.md,
/// "Rows mapped through `tanh`"), the stage alone or the branch-free `tanh` alone left
/// `array_32` and `array_64` level or slower; both together took their adjoints from 76%
/// and 53% of the roofline to 89% and 66%, their tangents from 82% and 62% to 86% and 76%,
/// their value kernels from 82% and 80% to 91% and 81%. Random programs (one to three calls
/// for 16 to 40 words) gained nothing from either, and keep their rows unstaged.
pub fn rows_mapped_by_tanh(tanh_calls: usize, row_words: u32, precision: Precision) -> bool {
    precision == Precision::F32 && 4 * tanh_calls >= row_words as usize
}

/// Whether a kernel of `kind` whose rows of `lanes`-word loads would be staged because
/// they are mapped through `tanh` ([`rows_mapped_by_tanh`]) reads them as `vec4`s from
/// each row's 16-byte-aligned start instead, taking each word from two neighbouring
/// `vec4`s by the row's offset (three selects a word): an adjoint of single-word loads. An
/// adjoint stages its gradients through workgroup memory as well, and its rows' stage
/// shares that memory or halves it; on the H100 (BENCHMARKS.md, "Rows mapped through
/// `tanh`", call 3, side by side), `array_32`'s and `array_64`'s adjoints ran at 92% and
/// 75% of the roofline reading `vec4`s, 89% and 66% staged. Their value and tangent
/// kernels ran faster staged (`array_32`'s at 91% and 86% against 85% and 80%), and keep
/// their stage; rows of `vec2` loads were measured in tangents only.
///
/// Such a kernel reads up to 15 bytes past the last element's row: every binding of
/// argument rows is a whole number of [`ARGS_BINDING_ALIGN`] bytes.
pub fn mapped_rows_as_vec4s(kind: KernelKind, mapped: bool, lanes: u32) -> bool {
    mapped && kind == KernelKind::Adjoint && lanes == 1
}

/// Bytes every binding of argument rows is a whole number of, so that a kernel may read
/// its rows as `vec4`s ([`mapped_rows_as_vec4s`]); the runtime's `ARGS_BINDING_ALIGN`.
pub const ARGS_BINDING_ALIGN: u32 = 16;

/// How a kernel loads argument rows of [`STAGE_ROWS_FROM_BYTES`] or more through
/// workgroup memory: in rounds, each a slice of `words` words of every element of the
/// workgroup, which consecutive threads load as consecutive words (runs of `words` words
/// of one row, then the next row's), into a stage that holds element `e`'s slice at `e *
/// stride`; then each thread takes its own element's slice. The stride is odd so that the
/// threads' reads of their slices fall in different banks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowStage {
    /// Words of each element per round: a multiple of the loads' lanes.
    pub words: u32,
    /// Scalars between consecutive elements' slices in the stage.
    pub stride: u32,
}

impl RowStage {
    /// The stage for rows of `row_words` words read `lanes` at a time by a kernel of
    /// `work` weighted operations per element, in a stage of at most `stage_scalars`
    /// scalars; `None` where the rows are narrower than [`STAGE_ROWS_FROM_BYTES`], the
    /// kernel computes more than [`STAGE_ROWS_MAX_WORK_PER_WORD`] per word (or, where it
    /// maps its rows through `tanh`, `mapped`, [`STAGE_MAPPED_ROWS_MAX_WORK_PER_WORD`]), or
    /// the stage holds too little for a round to pay.
    pub fn for_rows(
        (row_words, work, mapped): (u32, f64, bool),
        lanes: u32,
        stage_scalars: u32,
        precision: Precision,
    ) -> Option<RowStage> {
        let bytes = 4 * precision.words_per_scalar();
        let most_work = if mapped {
            STAGE_MAPPED_ROWS_MAX_WORK_PER_WORD
        } else {
            STAGE_ROWS_MAX_WORK_PER_WORD
        };
        if row_words * bytes < STAGE_ROWS_FROM_BYTES || work > most_work * f64::from(row_words) {
            return None;
        }
        let most_stride = stage_scalars / WORKGROUP_SIZE;
        // The largest multiple of the lanes whose odd stride fits.
        let words = (1..=most_stride)
            .rev()
            .map(|w| w - w % lanes)
            .find(|&w| w > 0 && (w | 1) <= most_stride)?;
        // A round should move at least 16 bytes of each row.
        (words * bytes >= 16).then_some(RowStage {
            words,
            stride: words | 1,
        })
    }

    /// Rounds for a row of `row_words` words.
    pub fn rounds(self, row_words: u32) -> u32 {
        row_words.div_ceil(self.words)
    }
}

/// 4-byte words of each element a Hessian kernel stages through workgroup memory at a
/// time (its stage, `WORKGROUP_SIZE` times this many, is the 16 KiB WebGPU guarantees):
/// its outputs of many words per element are stored in runs of consecutive words instead
/// of one strided word per thread.
pub const OUTPUT_STAGE_WORDS: u32 = 16;

/// Words of `precision` per element of one chunk of staged outputs (8 f64 or 16 f32).
pub fn output_stage_words(precision: Precision) -> u32 {
    OUTPUT_STAGE_WORDS / precision.words_per_scalar()
}

/// Whether a Hessian kernel stores an output of `words` words of `precision` per element
/// in chunks through workgroup memory ([`output_stage_words`]): where no vector view
/// exists, or past one chunk (64 bytes). On the H100 (`benches/hessian.rs`), chunks took
/// 7-word gradients and 49-word Hessians from 8% to 34% of the copy bandwidth, but 4-word
/// gradients and 16-word Hessians, stored as vectors, from 60% down to 52%.
pub fn chunk_output(words: u32, precision: Precision) -> bool {
    words > 1 && (vector_lanes(words) == 1 || words > output_stage_words(precision))
}

/// Elements per round when a Hessian kernel stores an output of `words` words of
/// `precision` whole elements at a time (`emit_wgsl`'s `store_rounds`): as many as the
/// stage holds, a power of two so that rounds divide the workgroup. Only past two chunks
/// and for at most [`MAX_STORE_ROUNDS`] rounds; else `None`, and chunks. On the H100
/// (`benches/hessian.rs`): 49-word Hessians went from 33% to 94% of the copy bandwidth
/// (4 rounds), 196-word ones from 32% to 35% (16 rounds); 16-word f64 ones lost (92% in two
/// chunks, 72% in two rounds) and a 576-word one ran 3.4 times slower in 64 rounds, whose
/// writes to the stage are one warp's at a time.
pub fn elements_per_round(words: u32, precision: Precision) -> Option<u32> {
    let stage = output_stage_words(precision);
    if words <= 2 * stage {
        return None;
    }
    whole_element_rounds(words, stage, MAX_STORE_ROUNDS)
}

/// Elements per round, a power of two, where `words` words per element go through a stage
/// of `lanes` words per thread of the workgroup; `None` where not one element fits or the
/// rounds would be more than `max_rounds`.
fn whole_element_rounds(words: u32, lanes: u32, max_rounds: u32) -> Option<u32> {
    let fit = (WORKGROUP_SIZE * lanes / words).min(WORKGROUP_SIZE);
    let per_round = (fit > 0).then(|| 1u32 << fit.ilog2())?;
    (WORKGROUP_SIZE / per_round <= max_rounds).then_some(per_round)
}

/// Most rounds [`elements_per_round`] takes: past it the stage's writes, a few threads'
/// at a time, cost more than the runs save.
pub const MAX_STORE_ROUNDS: u32 = 16;

/// Whether an adjoint kernel stages an element's `words` gradient words through workgroup
/// memory and stores the group's gradients contiguously: where no vector view exists (an
/// odd count) the per-thread stores would be strided 4-byte writes (34% of the copy
/// bandwidth on the H100 for 7 words). Up to 16 words, so that the stage
/// (`WORKGROUP_SIZE * words` f32) fits the 16 KiB of workgroup memory WebGPU guarantees.
///
/// `reduce_elements`: where the kernel sums shared gradients, the elements each thread
/// computes side by side. The reduction's stage then takes half of the memory, and the
/// stage's two barriers per element stall threads that have arithmetic left to overlap:
/// on the H100 at 2^24 (`benches/corpus/h100_2026-11-27_small_shared.md`), direct stores
/// took 3-word gradients from 53-73% of the roofline to 60-92% with one or two elements,
/// 5-word ones from 55-63% to 71-72%, and 7-word ones from 63% to 81% with one, but from
/// 73% to 68% with two (and from 84% to 75% with 4). Such a kernel, at 2 elements
/// (`emit_wgsl::elements_per_thread`), stages only from [`MIN_STAGED_WORDS_WITH_SUMS`]
/// words: of odd counts within the budget, 7. An f64 word takes 8 bytes.
pub fn stage_gradients(words: u32, reduce_elements: Option<u32>, precision: Precision) -> bool {
    let budget = GUARANTEED_WORKGROUP_BYTES
        - if reduce_elements.is_some() {
            REDUCE_STAGE_BYTES
        } else {
            0
        };
    let bytes = 4 * precision.words_per_scalar();
    let worth_its_barriers =
        reduce_elements.is_none_or(|e| e >= 2 && words >= MIN_STAGED_WORDS_WITH_SUMS);
    vector_lanes(words) == 1
        && words > 1
        && WORKGROUP_SIZE * words * bytes <= budget
        && worth_its_barriers
}

/// Elements per round where an adjoint whose shared sums stay in registers until its last
/// element stores its `words` gradient words per element through the reduction's stage
/// (free until then), `per_round` whole elements at a time as [`elements_per_round`]'s
/// rounds do; `None` where it stores them from registers. Only gradients that would go
/// through a stage without the reduction ([`chunk_output`]: no vector view, or past 16
/// words), that [`stage_gradients`] cannot stage beside it (past the stage's
/// [`reduce_lanes`] words per lane), in at most [`MAX_REDUCE_STAGE_ROUNDS`] rounds.
/// Measured on the H100 (`benches/corpus/h100_2026-11-27_reduce_stage_stores.md`): from
/// registers, 9 and 13 odd words per element ran at 37% and 23% of the copy roofline at
/// 2^24, in two rounds of 128 elements at 90% and 89%; 32 words (8 `vec4` stores) went
/// from 51% to 60% in 4 rounds of 64.
///
/// `work`: the kernel's weighted operations per element. A kernel of at most
/// [`STAGE_ROWS_MAX_WORK_PER_WORD`] a gradient word has no arithmetic to hide strided
/// stores behind, nor many values alive across the rounds' barriers: it takes up to
/// [`MAX_STORE_ROUNDS`] rounds.
pub fn reduce_stage_rounds(words: u32, work: f64, precision: Precision) -> Option<u32> {
    let lanes = reduce_lanes(precision);
    if !chunk_output(words, precision) || words <= lanes {
        return None;
    }
    let light = work <= STAGE_ROWS_MAX_WORK_PER_WORD * f64::from(words);
    let most = if light {
        MAX_STORE_ROUNDS
    } else {
        MAX_REDUCE_STAGE_ROUNDS
    };
    whole_element_rounds(words, lanes, most)
}

/// Most rounds [`reduce_stage_rounds`] takes for a kernel of more work than a light one:
/// 48 words (12 `vec4` stores) in 8 rounds of 32 elements ran 1.33x slower than from
/// registers on the H100 (`scan_48`: 1.70 against 2.26 ms at 2^22), two barriers a round
/// holding a kernel of many values alive.
pub const MAX_REDUCE_STAGE_ROUNDS: u32 = 4;

/// Fewest gradient words an adjoint that sums shared gradients stages ([`stage_gradients`]).
pub const MIN_STAGED_WORDS_WITH_SUMS: u32 = 7;

/// The WGSL type of `lanes` words of `precision`.
pub fn vector_type(lanes: u32, precision: Precision) -> String {
    let scalar = precision.name();
    match lanes {
        4 | 2 => format!("vec{lanes}<{scalar}>"),
        _ => scalar.to_string(),
    }
}

/// Which generated kernel a module is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Values only: outputs `values`.
    Forward,
    /// Value and full gradient from one pass: outputs `values` and `grads`.
    Adjoint,
    /// For an `[f32; M]` result: the values and the Jacobian (`M` rows of gradient words).
    Jacobian,
    /// Forward mode: the values and their directional derivatives along each element's
    /// tangent (and the batch's shared tangent), read as more argument words: its layout is
    /// [`ArgLayout::tangent_layout`]. Outputs `values` and `tangents`, `results` words each.
    Tangent,
    /// For an `f32` result: the value, the gradient and the Hessian in the element's
    /// gradient words (forward-over-reverse, [`crate::ad::hessian`]). Outputs `values`,
    /// `grads` and `hessians`.
    Hessian,
}

impl KernelKind {
    /// The output buffers: `(binding, words per element, WGSL name)`.
    pub fn outputs(self, layout: &ArgLayout) -> Vec<(u32, u32, &'static str)> {
        match self {
            KernelKind::Forward => vec![(VALUE_BINDING, layout.results, "values")],
            KernelKind::Tangent => vec![
                (VALUE_BINDING, layout.results, "values"),
                (GRAD_BINDING, layout.results, "tangents"),
            ],
            KernelKind::Jacobian => vec![
                (VALUE_BINDING, layout.results, "values"),
                (
                    GRAD_BINDING,
                    layout.results * layout.grad_words().len() as u32,
                    "jacobians",
                ),
            ],
            KernelKind::Hessian => {
                let grads = layout.grad_words().len() as u32;
                vec![
                    (VALUE_BINDING, 1, "values"),
                    (GRAD_BINDING, grads, "grads"),
                    (HESSIAN_BINDING, grads * grads, "hessians"),
                ]
            }
            KernelKind::Adjoint => {
                let grads = layout.grad_words().len() as u32;
                let mut outs = vec![(VALUE_BINDING, 1, "values")];
                // Every per-element argument may be #[constant] (a network's inputs, with
                // #[shared] weights): then there are no per-element gradients.
                if grads > 0 {
                    outs.push((GRAD_BINDING, grads, "grads"));
                }
                outs
            }
        }
    }

    /// The WGSL entry point.
    pub fn entry_point(self) -> &'static str {
        match self {
            KernelKind::Forward => "forward",
            KernelKind::Adjoint => "adjoint",
            KernelKind::Jacobian => "jacobian",
            KernelKind::Tangent => "tangent",
            KernelKind::Hessian => "hessian",
        }
    }
}
