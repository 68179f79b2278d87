//! The shared gradient's sums in a kernel that reduces over the batch. Each workgroup
//! owns a row of `shared_partials`, zeroed first; the workgroup adds its sums into it in a
//! fixed order (deterministic, no atomics), and a second kernel sums the rows.
//!
//! Up to [`abi::MAX_REGISTER_SUMS`] gradient words are summed per thread over the thread's
//! elements, each in a register of its own, and an array gradient (a loop's accumulator)
//! of up to [`abi::MAX_ARRAY_SUM`] words in an array of sums; the workgroup sums them once
//! at the end, 8 words at a time. Past those bounds the words are streamed (see
//! `streams`): every gradient word, and every add of a long accumulator array, goes into
//! the workgroup's sums as soon as it is computed, so no thread holds a sum per word.

use super::body::{Ctx, THIS_VALUE};
use super::outer_sums;
use super::static_runs::static_runs;
use super::streams::{Streams, SumsIn, accumulator, sum_stage};
use crate::abi;
use crate::emit_wgsl::plan::KernelPlan;
use crate::ir::{Function, Op};
use crate::names::Taken;
use crate::names::{REDUCE_RUN_FN, fresh};
use std::fmt::Write;

/// How one shared word's per-thread sum is kept.
#[derive(Clone, PartialEq)]
enum WordSum {
    /// No gradient flows to it: its partials stay zeros.
    Zero,
    /// Added into the workgroup's sums as it is computed.
    Streamed,
    /// In a register of its own.
    Register(String),
    /// Word `k` of a per-thread array of sums `name` of `len` words; a patched word (see
    /// [`crate::ir::OutputArray`]) is summed in the register `patch` instead, copied into
    /// the array before the workgroup sums it.
    InArray {
        name: String,
        k: u32,
        len: u32,
        patch: Option<String>,
    },
}

/// The per-thread sums of the shared gradient and the workgroup sum after them.
#[derive(Default)]
pub(super) struct SharedSums {
    /// The sums' declarations, before the loop over the thread's elements.
    pub(super) declarations: String,
    /// The statements that sum over the workgroup, a stage's slots at a time.
    pub(super) workgroup_sum: String,
    /// Whether any word is streamed.
    pub(super) streams: bool,
    /// Whether the kernel knows the words of its staged slots (`static_runs`): it sums
    /// them with `gf_sum_run`, not `gf_reduce_stage`.
    pub(super) static_runs: bool,
    /// Where the workgroup's sums of staged slots go (unless it is [`SumsIn::Row`], the
    /// row is written whole at the end: no row to zero first).
    pub(super) sums_in: SumsIn,
    /// Where some loop's rows are summed as outer products (see `outer_sums`): the most
    /// scalars of the stage its chunks use.
    pub(super) outer: Option<u32>,
}

/// Each thread adds up the shared gradients of several elements, each word (or array) as
/// soon as it is computed (fewer values live at once); the workgroup sums them once after
/// its last element.
pub(super) fn shared_sums(
    plan: &KernelPlan,
    f: &Function,
    ctx: &mut Ctx,
    taken: &mut Taken,
    body: &mut String,
) -> SharedSums {
    let (words, shared_words, layout) = (plan.layout.words, plan.layout.shared_words, plan.layout);
    let mut sums: Vec<WordSum> = Vec::with_capacity(shared_words as usize);
    let mut declarations = String::new();
    let Chains {
        slots,
        chains,
        stream,
    } = Chains::of(layout, f);
    let first = f.outputs.len() - shared_words as usize;
    let outs_of = |slot: &crate::abi::ParamSlot| {
        let (k0, n) = (slot.offset as usize, slot.len.unwrap_or(1));
        &f.outputs[first + k0..first + k0 + n]
    };
    for (slot, chain) in slots.into_iter().zip(chains) {
        let (k0, n) = (slot.offset, slot.len.unwrap_or(1) as u32);
        let outs = outs_of(slot);
        let whole = slot.len.and_then(|_| f.output_array(outs));
        if stream && let Some(chain) = chain {
            ctx.streams.merge(chain);
            // Its words are added as they are computed: the array is never read whole.
            ctx.skip.extend(outs.iter().map(|o| o.index()));
            sums.extend((0..n).map(|_| WordSum::Streamed));
            continue;
        }
        if let Some(whole) = whole.filter(|_| !stream && n <= abi::MAX_ARRAY_SUM) {
            let array = ArraySum { slot, whole, outs };
            sums.extend(array.sums(plan, f, ctx, taken, &mut declarations, body));
            continue;
        }
        for (j, out) in outs.iter().enumerate() {
            let w = words + k0 + j as u32;
            // A word no gradient flows to (a large table read at a few places) needs no
            // sum: its partials stay the zeros the row starts with.
            if is_zero(f, *out) {
                sums.push(WordSum::Zero);
                continue;
            }
            if stream {
                let staged = (w - words, layout.word_label(w));
                ctx.streams
                    .words
                    .entry(out.index())
                    .or_default()
                    .push(staged);
                sums.push(WordSum::Streamed);
                continue;
            }
            let name = register_sum(layout, w, *out, f, ctx, taken, &mut declarations, body);
            sums.push(WordSum::Register(name));
        }
    }
    // The workgroup's 16 KiB hold the reduction's stage and the outer products' (none
    // left where the kernel stages its outputs or gradients too).
    let mut most = None;
    let spans = if plan.staged || plan.chunked {
        Vec::new()
    } else {
        let shared = plan.layout.words..plan.layout.words + plan.layout.shared_words;
        let column_ok = |v: crate::ir::ValueId| {
            outer_sums::not_shared(f, shared.clone(), v)
                && !ctx.shared_word.contains_key(&v.index())
                && !ctx.shared_array.contains_key(&v.index())
                && !ctx.element_array.contains_key(&v.index())
        };
        let mut streams = std::mem::take(&mut ctx.streams);
        let planned = outer_sums::plan(
            f,
            &mut streams,
            (ctx.elements, ctx.precision),
            column_ok,
            taken,
        );
        ctx.streams = streams;
        declarations.push_str(&planned.declarations);
        most = planned
            .loops
            .iter()
            .map(|(_, l)| l.most_words(ctx.elements))
            .max();
        ctx.outer.extend(planned.loops);
        planned.spans
    };
    finish(plan, &sums, (declarations, &spans, most), ctx, taken)
}

/// The shared arguments' gradients of an adjoint that sums them, and how they are summed.
struct Chains<'a> {
    /// The shared arguments.
    slots: Vec<&'a crate::abi::ParamSlot>,
    /// Each one's accumulator chain, where its gradient is one.
    chains: Vec<Option<Streams>>,
    /// Whether the whole gradient is streamed ([`streams_all`]).
    stream: bool,
}

impl<'a> Chains<'a> {
    fn of(layout: &'a crate::abi::ArgLayout, f: &Function) -> Self {
        let first = f.outputs.len() - layout.shared_words as usize;
        let slots: Vec<_> = layout.slots.iter().filter(|s| s.shared).collect();
        let outs_of = |slot: &crate::abi::ParamSlot| {
            let (k0, n) = (slot.offset as usize, slot.len.unwrap_or(1));
            &f.outputs[first + k0..first + k0 + n]
        };
        let chains: Vec<Option<Streams>> = slots
            .iter()
            .map(|slot| {
                let outs = outs_of(slot);
                let whole = slot.len.and_then(|_| f.output_array(outs))?;
                whole.patches.is_empty().then_some(())?;
                accumulator(f, whole.array, outs, slot.offset, &slot.name)
            })
            .collect();
        let stream = streams_all(f, &slots, &chains, outs_of);
        Chains {
            slots,
            chains,
            stream,
        }
    }
}

/// Batch elements each thread of kernel `kind` of `f` computes side by side: more than
/// one only in an f32 adjoint that sums shared gradients, where the shared words are read
/// once for all of them (and work on them alone done once) and each gradient word is
/// summed over them before the workgroup sums it (and `MAX_OPS_FOR_TWO_ELEMENTS` below).
/// Streamed gradients take 2, whose extra arrays still fit the thread's registers (on the
/// H100 at 2^20, an 8-32-32-1 network's 1,377 words 1.9x faster with 2 than with one,
/// 1.1x with 4; an 8-64-64-1's 4,801 words 1.7x with 2, 0.6x with 4). A kernel that sums a
/// kept loop's rows as outer products (`outer_sums`) takes one: its records and the
/// stage's chunk are per element (8-32-32-1 2.14 ms with one, 2.45 with 2; 8-64-64-1 4.69
/// with one, 7.94 with 2). A kernel that records a tape takes 2 when its tapes hold at most
/// [`crate::opt::MAX_TAPE_WORDS`] words per element (a checkpointed loop's do), else one:
/// each element's tape lives in the thread's private memory, and a loop of 1,024 trips
/// recorded whole once failed to launch on the H100 with 4. Screened on eight such
/// adjoints at 2^24 (`benches/corpus/screens/elements_tapes.rs`, BENCHMARKS.md "Elements
/// side by side for adjoints with tapes"), 2 are within 1.37x of each one's best count
/// (geometric mean 1.20x), one up to 2.14x slower (a 1,024-tap filter) and 4 up to 1.48x
/// (a recurrent scan through `tanh`), though 4 was the best on six of the eight
/// (geometric mean 1.06x): the worst case decides, as below.
///
/// Gradients summed in registers take 2. No fact of the kernel screened predicts the best
/// count (1, 2 or 4) for them: shared words, arithmetic per word, `opt::max_live_within`,
/// values alive per element, operations over the longest chain, and the share of the
/// work done on the shared words alone each contradicted a pair (the last one checked on
/// eight functions written before they were timed: a mixture's softmax and shared logits
/// wanted fewer elements, not more). So the count is the one whose worst case is least:
/// over 21 adjoints on the H100 at 2^24 (`benches/corpus/h100_2026-11-27_elements_rule.md`,
/// BENCHMARKS.md "The element count by its worst case"), 2 elements are within 1.26x of
/// each function's best count (geometric mean 1.08x), where 4, the rule before, was up to
/// 3.4x slower (20 shared spheres: 2.16 ms against 0.63; geometric mean 1.18x) and one up
/// to 1.7x (the bench's soft gate). Timing the counts on the device, as workgroup sizes
/// are chosen, would change the order of the shared sums from one machine to the next:
/// the gradients would not be the same bits.
pub fn elements_per_thread(
    layout: &crate::abi::ArgLayout,
    kind: crate::abi::KernelKind,
    f: &Function,
) -> u32 {
    let reduces = kind == crate::abi::KernelKind::Adjoint && layout.shared_words > 0;
    if !reduces || layout.precision != crate::signature::Precision::F32 {
        return 1;
    }
    let chains = Chains::of(layout, f);
    let tape = tape_words(f);
    let one = if chains.stream {
        summed_loops(layout, f, chains) > 0
    } else {
        tape == 0 && f.dynamic_op_count() > MAX_OPS_FOR_TWO_ELEMENTS
    };
    if one || tape > crate::opt::MAX_TAPE_WORDS {
        1
    } else {
        2
    }
}

/// How many loops of the adjoint kernel `f` (of a function with `#[shared]` arguments,
/// in f32) sum their rows of the shared gradient as outer products (`outer_sums`).
pub fn outer_summed_loops(layout: &crate::abi::ArgLayout, f: &Function) -> usize {
    if layout.shared_words == 0 || layout.precision != crate::signature::Precision::F32 {
        return 0;
    }
    let chains = Chains::of(layout, f);
    if chains.stream {
        summed_loops(layout, f, chains)
    } else {
        0
    }
}

/// Whether the adjoint kernel `f` (of a function with `#[shared]` arguments) streams its
/// shared gradient through the workgroup word by word, rather than summing it per thread
/// in registers (a gradient of a few hundred words at most).
pub fn streams_shared_gradient(layout: &crate::abi::ArgLayout, f: &Function) -> bool {
    layout.shared_words > 0 && Chains::of(layout, f).stream
}

/// [`outer_summed_loops`] of a kernel whose gradient is streamed (`chains.stream`).
fn summed_loops(layout: &crate::abi::ArgLayout, f: &Function, chains: Chains) -> usize {
    let mut streams = Streams::default();
    chains
        .chains
        .into_iter()
        .flatten()
        .for_each(|c| streams.merge(c));
    let shared = layout.words..layout.words + layout.shared_words;
    let column_ok = |v| outer_sums::not_shared(f, shared.clone(), v);
    outer_sums::summed_loops(f, &streams, layout.precision, column_ok)
}

/// Most operations per element of an adjoint summing its shared gradient in registers that
/// computes 2 elements per thread; a longer one, straight-line code whose every forward
/// value the reverse pass reads, computes one: on the H100 a loop of 256 trips unrolled
/// (2,554 operations, 256 words summed) took 4.6 ms at 2^24 with one element, 13.2 with 2
/// or 4 (it streams its gradient now: 3.07 ms, [`abi::MAX_REGISTER_SUMS_WITH_VALUES`]),
/// and two adjoints of 1,039 and 1,679 operations ran 1.03x and 1.7x slower with 2.
const MAX_OPS_FOR_TWO_ELEMENTS: usize = 1024;

/// Words the recording loops of `f` (at any depth) record per element: each one's trips
/// times the words of its tape's layout (`Function::tape_layout`, the emitters'), 0 where
/// `f` records none.
fn tape_words(f: &Function) -> usize {
    f.nodes
        .iter()
        .enumerate()
        .map(|(i, node)| match &node.op {
            Op::Loop(l) => {
                let own = if l.kind == crate::ir::LoopKind::Recording {
                    let (_, words) = f.tape_layout(crate::ir::ValueId(i as u32));
                    l.trip_count() as usize * words
                } else {
                    0
                };
                own + tape_words(&l.body)
            }
            _ => 0,
        })
        .sum()
}

/// A shared array of at most [`abi::MAX_ARRAY_SUM`] words whose gradient is one array
/// value: summed per thread in an array of the same length, by a loop.
struct ArraySum<'a> {
    slot: &'a crate::abi::ParamSlot,
    whole: crate::ir::OutputArray,
    outs: &'a [crate::ir::ValueId],
}

impl ArraySum<'_> {
    /// Declares the array of sums, adds the gradient into it once computed, and returns
    /// how each word is summed (a patched word in a register of its own).
    fn sums(
        &self,
        plan: &KernelPlan,
        f: &Function,
        ctx: &mut Ctx,
        taken: &mut Taken,
        declarations: &mut String,
        body: &mut String,
    ) -> Vec<WordSum> {
        let (slot, whole, outs) = (self.slot, &self.whole, self.outs);
        let (words, layout) = (plan.layout.words, plan.layout);
        let (k0, n) = (slot.offset, outs.len() as u32);
        let read_by_node = f.read_by_node();
        let d = whole.array;
        let name = fresh(taken, &format!("sum_{}", slot.name));
        let t = plan.layout.precision.name();
        let _ = writeln!(declarations, "    var {name}: array<{t}, {n}>;");
        let k = fresh(taken, "k");
        // The array's name is known once it is written (an update in place, or a
        // loop's result, takes the name of the variable it lives in).
        let add = format!(
            "    for (var {k} = 0i; {k} < {n}i; {k}++) {{ {name}[{k}] += {THIS_VALUE}[{k}]; }} // d/d {}\n",
            slot.name
        );
        ctx.after.entry(d.index()).or_default().push_str(&add);
        // The words are summed as the array: their reads need no `let`. A patched word is
        // summed in a register of its own, from its value: that one is written.
        for (j, o) in outs.iter().enumerate() {
            let patched = whole.patches.iter().any(|(k, _)| *k == j);
            if !read_by_node[o.index()] && !patched {
                ctx.skip.insert(o.index());
            }
        }
        let mut patch: Vec<Option<String>> = vec![None; n as usize];
        for (j, p) in &whole.patches {
            let w = words + k0 + *j as u32;
            patch[*j] = Some(register_sum(
                layout,
                w,
                *p,
                f,
                ctx,
                taken,
                declarations,
                body,
            ));
        }
        patch
            .into_iter()
            .enumerate()
            .map(|(k, patch)| WordSum::InArray {
                name: name.clone(),
                k: k as u32,
                len: n,
                patch,
            })
            .collect()
    }
}

/// The sums' declarations and the workgroup sum after the element loop, once every word
/// knows how it is summed (`outer`: the stage the outer products' chunks use at most).
fn finish(
    plan: &KernelPlan,
    sums: &[WordSum],
    (mut declarations, spans, outer): (String, &[outer_sums::Span], Option<u32>),
    ctx: &mut Ctx,
    taken: &mut Taken,
) -> SharedSums {
    let shared_words = plan.layout.shared_words;
    let streams = sums.contains(&WordSum::Streamed);
    let precision = plan.layout.precision;
    let sums_in = sums_in(plan, streams, outer);
    let owned = (sums_in == SumsIn::Owned)
        .then(|| abi::owned_sums(shared_words))
        .flatten();
    ctx.streams.sums_in = sums_in;
    ctx.streams.lanes = sums_in.slots(precision);
    if streams {
        let skipped = |i: usize| ctx.skip.contains(&i) || ctx.streams.skip.contains(&i);
        ctx.static_runs = static_runs(ctx.f, &ctx.streams, skipped);
    }
    if streams && ctx.static_runs.is_some() {
        let _ = writeln!(
            declarations,
            "    // Slots of reduce_stage filled so far (their words are known: see gf_sum_run's calls).\n    \
             var stage_count = 0u;"
        );
    } else if streams {
        let _ = writeln!(
            declarations,
            "    // Slots of reduce_stage filled so far, and the shared word of each.\n    \
             var stage_count = 0u;\n    var stage_words: array<u32, {}>;",
            ctx.streams.lanes
        );
    }
    if let Some(m) = owned {
        let _ = writeln!(
            declarations,
            "    // The sums of the words this thread owns: lid, lid + {wg}, ..\n    \
             var owned_sums: array<{t}, {m}>;",
            wg = abi::WORKGROUP_SIZE,
            t = precision.name(),
        );
    }
    let mut workgroup_sum = workgroup_sum(plan, sums, taken);
    if streams {
        let last = match &ctx.static_runs {
            Some(runs) => runs.last.call(),
            None => sum_stage(sums_in),
        };
        workgroup_sum.insert_str(
            0,
            &format!(
                "    // The last slots staged.\n    if (stage_count > 0u) {{\n        {last};\n    }}\n"
            ),
        );
    }
    if let Some(m) = owned {
        let wg = abi::WORKGROUP_SIZE;
        let _ = writeln!(
            workgroup_sum,
            "    // Each thread stores the sums of the words it owns.\n    \
             for (var k = 0u; k < {m}u; k++) {{\n        \
             let word = lid + k * {wg}u;\n        \
             if (word < {shared_words}u) {{\n            \
             shared_partials[group * {shared_words}u + word] = owned_sums[k];\n        \
             }}\n    }}"
        );
    }
    if sums_in == SumsIn::Workgroup {
        let wg = abi::WORKGROUP_SIZE;
        let _ = writeln!(
            workgroup_sum,
            "    // The workgroup's sums, once every slot's thread has added its sum.\n    \
             workgroupBarrier();\n    \
             for (var word = lid; word < {shared_words}u; word += {wg}u) {{\n        \
             shared_partials[group * {shared_words}u + word] = word_sums[word];\n    }}"
        );
    }
    // Blocks of outer-product sums are not their threads' own words: they go in last.
    workgroup_sum.push_str(&outer_sums::flush(spans, shared_words, taken));
    SharedSums {
        declarations,
        workgroup_sum,
        streams,
        static_runs: ctx.static_runs.is_some(),
        sums_in,
        outer,
    }
}

/// Where a kernel adds its workgroup's sums of staged slots: into workgroup memory where
/// the words' sums fit beside the wide stage and the kernel stages nothing else (no
/// outputs or gradients staged, no outer products), else into the owners' own sums while
/// those fit, else into the row.
fn sums_in(plan: &KernelPlan, streams: bool, outer: Option<u32>) -> SumsIn {
    let words = plan.layout.shared_words;
    let bytes = words * 4 * plan.layout.precision.words_per_scalar();
    if !streams {
        SumsIn::Row
    } else if outer.is_none()
        && !plan.staged
        && !plan.chunked
        && bytes <= abi::MAX_WORKGROUP_SUMS_BYTES
    {
        SumsIn::Workgroup
    } else if abi::owned_sums(words).is_some() {
        SumsIn::Owned
    } else {
        SumsIn::Row
    }
}

/// Whether the kernel streams its whole shared gradient: where a long accumulator array
/// or too many words would be summed per thread, counting beside the sums the values the
/// kernel keeps alive at once (`opt::max_live_within`: each gradient word is added
/// into its sum as it is computed). Then it streams every word: a few sums kept in
/// registers next to streamed ones cost more registers than they save (on the H100 an
/// 8-32-32-1 network's adjoint took 11.9 ms with its last layer's 33 words in registers,
/// 7.7 ms with them streamed too). The values alive count because they share the
/// registers ([`abi::MAX_REGISTER_SUMS_WITH_VALUES`]).
fn streams_all<'a>(
    f: &Function,
    slots: &[&'a crate::abi::ParamSlot],
    chains: &[Option<Streams>],
    outs_of: impl Fn(&'a crate::abi::ParamSlot) -> &'a [crate::ir::ValueId],
) -> bool {
    let mut registers = 0;
    for (slot, chain) in slots.iter().zip(chains) {
        let outs = outs_of(slot);
        let n = outs.len() as u32;
        let array_sum = slot.len.is_some() && f.output_array(outs).is_some();
        if n > abi::MAX_ARRAY_SUM && chain.is_some() {
            return true;
        }
        if !(array_sum && n <= abi::MAX_ARRAY_SUM) {
            registers += outs.iter().filter(|o| !is_zero(f, **o)).count() as u32;
        }
    }
    registers > abi::MAX_REGISTER_SUMS
        || registers + crate::opt::max_live_within(f) as u32 > abi::MAX_REGISTER_SUMS_WITH_VALUES
}

/// Whether `v` is the constant zero (no gradient flows to its word).
fn is_zero(f: &Function, v: crate::ir::ValueId) -> bool {
    matches!(f.nodes[v.index()].op, Op::Const(c) if c == 0.0)
}

/// Writes `add` right after `out` is computed (at once if it is an input or constant).
fn after_or_now(
    f: &Function,
    out: crate::ir::ValueId,
    add: String,
    ctx: &mut Ctx,
    body: &mut String,
) {
    match f.nodes[out.index()].op {
        Op::Input(_) | Op::Const(_) | Op::Int(_) => {
            // Each element adds its own.
            ctx.for_each_element(|ctx, _| {
                body.push_str(&add.replace(THIS_VALUE, &ctx.operand(out)));
            });
        }
        _ => ctx.after.entry(out.index()).or_default().push_str(&add),
    }
}

/// A register summing shared word `w`'s gradient `out`, added right after `out` is
/// computed (at once if it is an input or constant); returns its name.
#[allow(clippy::too_many_arguments)]
fn register_sum(
    layout: &crate::abi::ArgLayout,
    w: u32,
    out: crate::ir::ValueId,
    f: &Function,
    ctx: &mut Ctx,
    taken: &mut Taken,
    declarations: &mut String,
    body: &mut String,
) -> String {
    let name = fresh(taken, &format!("sum_{}", layout.word_name(w)));
    let zero = super::float_literal(0.0, layout.precision);
    let _ = writeln!(declarations, "    var {name} = {zero};");
    let add = format!(
        "    {name} += {THIS_VALUE}; // d/d {}\n",
        layout.word_label(w)
    );
    after_or_now(f, out, add, ctx, body);
    name
}

/// Runs of consecutive shared words summed per thread: registers summed over the
/// workgroup a stage's slots at a time, arrays of sums in a loop over tiles as long. Zero and streamed words
/// need nothing here.
fn workgroup_sum(plan: &KernelPlan, sums: &[WordSum], taken: &mut Taken) -> String {
    let (words, shared_words, layout) = (plan.layout.words, plan.layout.shared_words, plan.layout);
    let wg = abi::WORKGROUP_SIZE;
    let lanes = abi::reduce_lanes(layout.precision);
    let zero = super::float_literal(0.0, layout.precision);
    let mut out = String::new();
    let mut k = 0u32;
    while k < shared_words {
        match &sums[k as usize] {
            WordSum::Zero | WordSum::Streamed => k += 1,
            WordSum::InArray { name, len, .. } => {
                let len = *len;
                for sum in &sums[k as usize..(k + len) as usize] {
                    if let WordSum::InArray {
                        k: j,
                        patch: Some(reg),
                        ..
                    } = sum
                    {
                        let _ = writeln!(out, "    {name}[{j}] = {reg};");
                    }
                }
                let (t, j) = (fresh(taken, "tile"), fresh(taken, "j"));
                let _ = writeln!(
                    out,
                    "    // d/d {}: {len} words, {lanes} at a time.\n    \
                     for (var {t} = 0u; {t} < {len}u; {t} += {lanes}u) {{\n        \
                     for (var {j} = 0u; {j} < {lanes}u; {j}++) {{\n            \
                     reduce_stage[{j} * {wg}u + lid] = select({zero}, {name}[min({t} + {j}, {}u)], {t} + {j} < {len}u);\n        \
                     }}\n        \
                     {REDUCE_RUN_FN}(lid, group, {k}u + {t}, min({lanes}u, {len}u - {t}));\n    \
                     }}",
                    layout
                        .word_label(words + k)
                        .split('[')
                        .next()
                        .unwrap_or_default(),
                    len - 1,
                );
                k += len;
            }
            WordSum::Register(_) => {
                let mut end = k + 1;
                while end < shared_words
                    && matches!(sums[end as usize], WordSum::Register(_))
                    && end - k < lanes
                {
                    end += 1;
                }
                for (j, sum) in sums[k as usize..end as usize].iter().enumerate() {
                    let WordSum::Register(sum) = sum else {
                        unreachable!("a run of registers")
                    };
                    let at = match j {
                        0 => "lid".to_string(),
                        j => format!("{}u + lid", j as u32 * wg),
                    };
                    let _ = writeln!(out, "    reduce_stage[{at}] = {sum};");
                }
                let _ = writeln!(out, "    {REDUCE_RUN_FN}(lid, group, {k}u, {}u);", end - k);
                k = end;
            }
        }
    }
    out
}
