//! What a kernel is made of, decided once before any text is written: which buffers it
//! binds, whether its shared words come from a uniform buffer, whether it sums shared
//! gradients over the batch, whether its gradients are staged through workgroup memory.

use crate::abi::{self, ArgLayout, KernelKind};
use crate::ir::{Function, Op};
use crate::ops::Func;
use crate::signature::Precision;
use std::collections::HashMap;

/// The decisions behind one kernel's text.
pub(super) struct KernelPlan<'a> {
    /// Which kernel.
    pub kind: KernelKind,
    /// The argument layout.
    pub layout: &'a ArgLayout,
    /// Argument words per load (`args` is an array of this many lanes).
    pub lanes: u32,
    /// Shared words come from a uniform buffer (`array<vec4<f32>, _>` or
    /// `array<vec2<f64>, _>`), else storage.
    pub shared_uniform: bool,
    /// An adjoint that sums shared gradients over the batch: each thread takes several
    /// elements and its workgroup sums their shared gradients.
    pub reduces: bool,
    /// Gradients go through workgroup memory so that consecutive threads store
    /// consecutive words.
    pub staged: bool,
    /// An adjoint whose shared sums stay in registers until its last element stores its
    /// gradients through the reduction's stage, this many elements a round
    /// ([`abi::reduce_stage_rounds`]).
    pub grads_in_reduce_stage: Option<u32>,
    /// Some outputs go through workgroup memory in chunks of [`abi::output_stage_words`]
    /// words (a Hessian kernel's, where [`abi::chunk_output`] says so).
    pub chunked: bool,
    /// Every thread reaches the barriers: threads past the end compute on the last
    /// element and store nothing, instead of returning early.
    pub guarded: bool,
    /// Argument words with a gradient.
    pub grad_words: Vec<u32>,
    /// Output buffers: `(binding, words per element, name)`.
    pub outputs: Vec<(u32, u32, &'static str)>,
    /// For each input word of `f`, the node that reads it, if one does.
    pub loads: Vec<Option<usize>>,
    /// A gathered kernel: each per-element argument from a buffer of its own (see
    /// [`abi::FIELDS_BINDING`]), instead of one interleaved row per element.
    pub gathered: bool,
    /// Batch elements each thread computes side by side (see
    /// [`super::emit_kernel_with_elements`]): 1 unless the kernel sums shared gradients
    /// from rows of interleaved words.
    pub elements: u32,
    /// Argument rows loaded through workgroup memory, where they are wide
    /// ([`abi::RowStage`]), and the workgroup array that stages them.
    pub row_stage: Option<(abi::RowStage, StageArray)>,
    /// Arrays of the element's argument words read from `args` at their index, never
    /// copied (by node, their first word; [`super::arrays::element_arrays`]): their words
    /// are not loaded at the top.
    pub element_arrays: HashMap<usize, u32>,
    /// The words of one access to `out_stage` and to the outputs stored through it: 4
    /// (`vec4<f32>`) where every staged output of 4 words or more has a multiple of 4
    /// words and all are stored in chunks or all in rounds, else 1 ([`chunk_lanes`]).
    pub chunk_lanes: u32,
    /// Whether the kernel computes `tanh` without branches: it stages rows it maps through
    /// `tanh` ([`abi::rows_mapped_by_tanh`]), or reads them as `vec4`s.
    pub branch_free_tanh: bool,
    /// An adjoint that reads its rows as `vec4`s from their aligned start instead of
    /// staging them ([`abi::mapped_rows_as_vec4s`]): `args` is an array of `vec4`s.
    pub rows_as_vec4s: bool,
}

/// The workgroup array through which a kernel loads its argument rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StageArray {
    /// `in_stage`, the loads' own.
    Own,
    /// The array that later stages the kernel's stores (`out_stage` or `grad_stage`): the
    /// loads are done with it before the first store, past a barrier.
    Stores(&'static str),
}

impl StageArray {
    /// The array's name in WGSL.
    pub fn name(self) -> &'static str {
        match self {
            StageArray::Own => "in_stage",
            StageArray::Stores(name) => name,
        }
    }
}

impl<'a> KernelPlan<'a> {
    /// The plan of kernel `kind` of `f`; `streamed`: an adjoint that streams its shared
    /// gradient into the reduction's stage as it computes it (the stage is never free).
    pub fn new(
        layout: &'a ArgLayout,
        kind: KernelKind,
        f: &Function,
        gathered: bool,
        (elements, streamed): (u32, bool),
    ) -> Self {
        let mut loads = vec![None; f.num_inputs as usize];
        for (i, node) in f.nodes.iter().enumerate() {
            if let Op::Input(w) = node.op {
                loads[w as usize] = Some(i);
            }
        }
        let element_arrays = if gathered {
            HashMap::new()
        } else {
            super::arrays::element_arrays(f, layout.words)
        };
        for &a in element_arrays.keys() {
            for e in f.nodes[a].op.operands() {
                if let Op::Input(w) = f.node(e).op {
                    loads[w as usize] = None;
                }
            }
        }
        let shared_words = layout.shared_words;
        let reduces = kind == KernelKind::Adjoint && shared_words > 0;
        if reduces {
            assert_eq!(
                f.num_inputs,
                layout.words + shared_words + 1,
                "an adjoint that sums shared gradients takes its seed as its last input"
            );
        }
        let grad_words = layout.grad_words();
        let precision = layout.precision;
        let elements = if reduces && !gathered {
            elements.clamp(1, crate::names::MAX_ELEMENTS as u32)
        } else {
            1
        };
        let staged = kind == KernelKind::Adjoint
            && abi::stage_gradients(
                grad_words.len() as u32,
                reduces.then_some(elements),
                precision,
            );
        let work = f.weighted_work(&|op| match op {
            Op::Call(func, _) => func.gpu_cost(),
            _ => 1.0,
        });
        let grads_in_reduce_stage = (reduces && !gathered && !staged && !streamed)
            .then(|| abi::reduce_stage_rounds(grad_words.len() as u32, work, precision))
            .flatten();
        let outputs = kind.outputs(layout);
        // Wide outputs go through the workgroup's stage in runs. An adjoint that reduces
        // shared gradients needs half the workgroup memory for the reduction's stage, and
        // one whose gradients are staged whole already stores runs.
        let stages_outputs = match kind {
            KernelKind::Hessian => true,
            KernelKind::Adjoint | KernelKind::Jacobian => !reduces && !staged,
            KernelKind::Forward | KernelKind::Tangent => false,
        };
        let chunked = stages_outputs
            && outputs
                .iter()
                .any(|o| Self::stages_output_of(o.1, precision));
        let lanes = abi::vector_lanes(layout.words);
        let tanh_calls = (f.nodes.iter())
            .filter(|n| matches!(n.op, Op::Call(Func::Tanh, _)))
            .count();
        let mapped = abi::rows_mapped_by_tanh(tanh_calls, layout.words, precision);
        let row_stage = if gathered || reduces {
            None
        } else {
            let store_stage = if chunked {
                Some(("out_stage", abi::output_stage_words(precision)))
            } else if staged {
                Some(("grad_stage", grad_words.len() as u32))
            } else {
                None
            };
            row_stage(layout, (lanes, work, mapped), store_stage)
        };
        let rows_as_vec4s = row_stage.is_some()
            && element_arrays.is_empty()
            && abi::mapped_rows_as_vec4s(kind, mapped, lanes);
        let row_stage = row_stage.filter(|_| !rows_as_vec4s);
        let chunk_lanes = chunk_lanes(kind, &outputs, chunked, row_stage, precision);
        KernelPlan {
            kind,
            chunked,
            chunk_lanes,
            layout,
            lanes,
            shared_uniform: abi::shared_in_uniform(shared_words, precision),
            reduces,
            staged,
            grads_in_reduce_stage,
            guarded: staged || reduces || chunked || row_stage.is_some(),
            grad_words,
            outputs,
            loads,
            gathered,
            elements,
            row_stage,
            element_arrays,
            branch_free_tanh: mapped && (row_stage.is_some() || rows_as_vec4s),
            rows_as_vec4s,
        }
    }

    /// Whether an output of `w` words per element goes through the workgroup's stage
    /// (for a kernel whose outputs are `chunked`; not one narrower than the stage's
    /// blocks, which [`chunk_lanes`] leaves in registers).
    pub fn stages_output(&self, w: u32) -> bool {
        self.chunked
            && Self::stages_output_of(w, self.layout.precision)
            && !(self.chunk_lanes > 1 && w < self.chunk_lanes)
    }

    /// Whether a kernel stages an output of `w` words of `precision`: past one
    /// chunk or without a vector view ([`abi::chunk_output`]). On the H100
    /// (`benches/corpus/`), staging took adjoints of 17-66 gradient words from 15-22% to
    /// 34-69% of the roofline and a 24-word Jacobian from 15% to 41%. Jacobians of 68-132
    /// words, stored in rounds of whole elements at the end, fell from 16-25% to 9-19%;
    /// they are stored in chunks as their rows are computed instead
    /// ([`super::stores::jacobian_chunks_as_computed`]).
    fn stages_output_of(w: u32, precision: Precision) -> bool {
        abi::chunk_output(w, precision)
    }

    /// The words per element of one access to output buffer `name`, `w` words wide, as
    /// every entry point declares and stores it: the stage's blocks where it is staged
    /// (single words where the reduction's stage takes it), else its vector view
    /// ([`abi::vector_lanes`]).
    pub fn output_lanes(&self, w: u32, name: &str) -> u32 {
        if name == "grads" && self.grads_in_reduce_stage.is_some() {
            1
        } else if self.stages_output(w) {
            self.chunk_lanes
        } else {
            abi::vector_lanes(w)
        }
    }

    /// Word `index` (a WGSL expression) of the stage `name` through which the argument rows
    /// are loaded: where that stage is the output stage of `vec4`s ([`chunk_lanes`] 4, the
    /// outputs in rounds), the word's lane of its `vec4`.
    pub fn row_stage_word(&self, name: &str, index: &str) -> String {
        match self.row_stage {
            Some((_, StageArray::Stores("out_stage"))) if self.chunk_lanes > 1 => {
                let lanes = self.chunk_lanes;
                format!("{name}[({index}) / {lanes}u][({index}) % {lanes}u]")
            }
            _ => format!("{name}[{index}]"),
        }
    }

    /// Whether the runtime chooses this kernel's workgroup size
    /// ([`crate::names::WORKGROUP_SIZE_OVERRIDE`]): where it computes every element alone,
    /// its loads and stores through workgroup memory written for any size. Kernels that
    /// sum shared gradients (whose sums' order must not change) and gathered kernels keep
    /// [`abi::WORKGROUP_SIZE`].
    pub fn sized_by_runtime(&self) -> bool {
        !self.gathered && !self.reduces
    }

    /// Whether an output goes through the stage in rounds of whole elements, which take
    /// the whole stage whatever the workgroup's size.
    pub fn stores_rounds(&self) -> bool {
        let precision = self.layout.precision;
        self.outputs.iter().any(|&(_, w, _)| {
            self.stages_output(w) && Self::rounds_of(self.kind, w, precision).is_some()
        })
    }

    /// The override naming the workgroup size, where the runtime chooses it.
    pub fn size_override(&self) -> Option<&'static str> {
        self.sized_by_runtime()
            .then_some(crate::names::WORKGROUP_SIZE_OVERRIDE)
    }

    /// The workgroup size as the kernel's text writes it: the override where the runtime
    /// chooses it, else the constant.
    pub fn workgroup_size(&self) -> String {
        self.size_override()
            .map_or_else(|| format!("{}u", abi::WORKGROUP_SIZE), str::to_string)
    }

    /// Elements per round where an output of `w` words, staged, is stored in rounds of
    /// whole elements ([`abi::elements_per_round`]); `None` where it goes in chunks. A
    /// Jacobian's rows are stored as they are computed, so always in chunks.
    pub fn rounds_of(kind: KernelKind, w: u32, precision: Precision) -> Option<u32> {
        abi::elements_per_round(w, precision).filter(|_| kind != KernelKind::Jacobian)
    }

    /// The element a thread's loads read: `elem` where threads past the end compute on the
    /// last element, else `i`.
    pub fn element(&self) -> &'static str {
        if self.guarded { "elem" } else { "i" }
    }

    /// How many argument words have a gradient.
    pub fn grad_count(&self) -> u32 {
        self.grad_words.len() as u32
    }

    /// The label of gradient word `k` in comments.
    pub fn grad_label(&self, k: u32) -> String {
        self.layout.word_label(self.grad_words[k as usize])
    }
}

/// [`KernelPlan::chunk_lanes`]: 4 where every output staged of 4 words or more is a
/// multiple of 4 words of f32 and is stored either all in chunks, the loads not sharing the
/// stage, or all in rounds of whole elements (whose stage the loads may share, as single
/// words of its `vec4`s: [`KernelPlan::row_stage_word`]). On the H100, 4-word accesses to the
/// stage and the buffer took Jacobians of 32, 64 and 72 words from 79%, 65% and 41% of the
/// roofline to 90%, 76% and 47%, against single words (BENCHMARKS.md, "Jacobian rows stored
/// as they are computed"); and rounds of `vec4`s took adjoints of 36 to 128 gradient words
/// from 82-91% to 94-100%, `stencil_64`'s from 70% to 95%, and a 196-word Hessian from 36%
/// to 95% of the copy bandwidth (BENCHMARKS.md, "Rounds of `vec4`s").
fn chunk_lanes(
    kind: KernelKind,
    outputs: &[(u32, u32, &'static str)],
    chunked: bool,
    row_stage: Option<(abi::RowStage, StageArray)>,
    precision: Precision,
) -> u32 {
    // Outputs narrower than a block (3 values beside a Jacobian) are stored from registers
    // instead (`KernelPlan::stages_output`): 3 words a thread in 3 strided stores cost
    // less than holding the wide output to single words.
    let staged: Vec<u32> = outputs
        .iter()
        .map(|o| o.1)
        .filter(|&w| KernelPlan::stages_output_of(w, precision) && w >= 4)
        .collect();
    let in_rounds = |w: u32| KernelPlan::rounds_of(kind, w, precision).is_some();
    let loads_apart = !matches!(row_stage, Some((_, StageArray::Stores(_))));
    let fits = chunked
        && precision == Precision::F32
        && !staged.is_empty()
        && staged.iter().all(|&w| w % 4 == 0)
        && (staged.iter().all(|&w| in_rounds(w))
            || (loads_apart && staged.iter().all(|&w| !in_rounds(w))));
    if fits { 4 } else { 1 }
}

/// How a kernel of `work` weighted operations per element (`mapped`: through `tanh`,
/// [`abi::rows_mapped_by_tanh`]) whose other workgroup array is `store_stage` (its name
/// and words per thread) loads argument rows: through an array of its own in the memory
/// the other leaves, or through the other where that gives longer rounds.
fn row_stage(
    layout: &ArgLayout,
    (lanes, work, mapped): (u32, f64, bool),
    store_stage: Option<(&'static str, u32)>,
) -> Option<(abi::RowStage, StageArray)> {
    let (words, precision) = (layout.words, layout.precision);
    let words = (words, work, mapped);
    let guaranteed = abi::GUARANTEED_WORKGROUP_BYTES / (4 * precision.words_per_scalar());
    let other = store_stage.map_or(0, |(_, w)| w * abi::WORKGROUP_SIZE);
    let own = abi::RowStage::for_rows(words, lanes, guaranteed - other, precision)
        .map(|r| (r, StageArray::Own));
    let shared = store_stage.and_then(|(name, _)| {
        abi::RowStage::for_rows(words, lanes, other, precision)
            .map(|r| (r, StageArray::Stores(name)))
    });
    match (own, shared) {
        (Some(o), Some(s)) if s.0.words > o.0.words => Some(s),
        (o, s) => o.or(s),
    }
}
