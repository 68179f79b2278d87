//! The stores of a kernel's outputs: straight from registers, or through workgroup memory
//! so that consecutive threads store consecutive words (staged gradients, chunks, rounds).

use super::body::{Ctx, scaled_index};
use super::plan::KernelPlan;
use super::plus;
use crate::abi;
use crate::abi::KernelKind;
use crate::ir::{Function, Op, ValueId};
use crate::names::element_name;
use crate::signature::Precision;
use std::fmt::Write;

/// The stores of every element's outputs: the first element's at `i`, each other's in a
/// block of its own where `i` and `in_batch` are that element's. Output `stored` is
/// already stored among the statements ([`jacobian_chunks_as_computed`]).
pub(super) fn emit_stores(
    plan: &KernelPlan,
    f: &Function,
    ctx: &mut Ctx,
    body: &mut String,
    stored: Option<&str>,
) {
    ctx.for_each_element(|ctx, e| {
        if e == 0 {
            emit_element_stores(plan, f, ctx, stored, body);
            return;
        }
        if plan.staged {
            let _ = writeln!(
                body,
                "    // The stage is free again once the last element's words are stored.\n    workgroupBarrier();"
            );
        }
        let mut block = String::new();
        emit_element_stores(plan, f, ctx, stored, &mut block);
        // Only while the element's run is this workgroup's: the stores of a staged or
        // chunked output guard with the run's bounds, not with `in_batch`.
        let _ = writeln!(
            body,
            "    if (nth + {e}u < per_thread) {{\n        let i = {};\n        let in_batch = {};",
            element_name("i", e),
            element_name("in_batch", e)
        );
        for line in block.lines() {
            let _ = writeln!(body, "    {line}");
        }
        let _ = writeln!(body, "    }}");
    });
}

/// The stores of every output buffer of the element being written, in the order of
/// [`KernelKind::outputs`].
fn emit_element_stores(
    plan: &KernelPlan,
    f: &Function,
    ctx: &Ctx,
    stored: Option<&str>,
    body: &mut String,
) {
    let mut out_idx = 0usize;
    for &(_, w, name) in &plan.outputs {
        let outputs = &f.outputs[out_idx..out_idx + w as usize];
        if stored == Some(name) {
            out_idx += w as usize;
            continue;
        }
        if w == 1 {
            let v = ctx.operand(outputs[0]);
            if plan.guarded {
                let _ = writeln!(
                    body,
                    "    if (in_batch) {{\n        {name}[i] = {v};\n    }}"
                );
            } else {
                let _ = writeln!(body, "    {name}[i] = {v};");
            }
        } else if plan.staged && name == "grads" {
            store_staged(plan, ctx, outputs, name, body);
        } else if let (Some(per_round), "grads") = (plan.grads_in_reduce_stage, name) {
            let stage = (name, per_round, "reduce_stage", 1);
            store_rounds(plan, ctx, outputs, stage, body);
        } else if plan.stages_output(w) {
            match KernelPlan::rounds_of(plan.kind, w, plan.layout.precision) {
                Some(per_round) => {
                    let stage = (name, per_round, "out_stage", plan.chunk_lanes);
                    store_rounds(plan, ctx, outputs, stage, body)
                }
                None => store_chunked(plan, ctx, outputs, name, body),
            }
        } else {
            store_words(plan, ctx, outputs, name, body);
        }
        out_idx += w as usize;
    }
}

/// Gradients through workgroup memory: every thread writes its words to `grad_stage`,
/// then consecutive threads store consecutive words of the group's gradients.
fn store_staged(plan: &KernelPlan, ctx: &Ctx, outputs: &[ValueId], name: &str, body: &mut String) {
    let w = outputs.len() as u32;
    let wg = plan.workgroup_size();
    for (k, out) in outputs.iter().enumerate() {
        let arg = plan.grad_label(k as u32);
        let v = ctx.operand(*out);
        let _ = writeln!(
            body,
            "    grad_stage[lid * {w}u + {k}u] = {v}; // d/d {arg}"
        );
    }
    let _ = writeln!(body, "    workgroupBarrier();");
    let _ = writeln!(
        body,
        "    // The group's gradients are contiguous in {name}: consecutive threads store\n    \
         // consecutive words."
    );
    let _ = writeln!(body, "    let group_base = (i - lid) * {w}u;");
    let _ = writeln!(body, "    for (var part = 0u; part < {w}u; part++) {{");
    let _ = writeln!(body, "        let word = part * {wg} + lid;");
    let _ = writeln!(body, "        if (group_base + word < params.n * {w}u) {{");
    let _ = writeln!(
        body,
        "            {name}[group_base + word] = grad_stage[word];"
    );
    let _ = writeln!(body, "        }}\n    }}");
}

/// An output of several words per element through workgroup memory, a chunk of
/// [`abi::output_stage_words`] words of every element of the group at a time: each thread
/// writes its chunk to `out_stage`, then consecutive threads store the group's chunks,
/// runs of consecutive words. Stored by each thread from registers, 7 or 49 words apart,
/// a Hessian kernel's words ran at 8% of the copy bandwidth on the H100.
///
/// A chunk of a power-of-two width sits in the stage with its words permuted per element
/// (`chunk_swizzle`): written at `lid * width + j`, the threads of a warp would fall in
/// as few as two banks.
fn store_chunked(plan: &KernelPlan, ctx: &Ctx, outputs: &[ValueId], name: &str, body: &mut String) {
    let _ = writeln!(body, "{}", chunks_group(name, outputs.len()));
    for chunk in chunks_of(plan, outputs) {
        store_chunk(plan, ctx, (name, outputs.len()), chunk, body);
    }
}

/// The first word of the workgroup's first element in an output of `w` words per
/// element, which every chunk's stores count from.
fn chunks_group(name: &str, w: usize) -> String {
    format!("    let {name}_group = (i - lid) * {w}u;")
}

/// One chunk of an output: its index, its first word and its words.
struct Chunk<'a> {
    index: usize,
    first: usize,
    words: &'a [ValueId],
}

/// Every name the stores of `plan`'s outputs may declare, for no local to take.
pub(super) fn declared_names(plan: &KernelPlan) -> Vec<String> {
    let c = abi::output_stage_words(plan.layout.precision) as usize;
    let mut names = Vec::new();
    for &(_, w, name) in &plan.outputs {
        names.push(format!("{name}_base"));
        names.push(format!("{name}_group"));
        // A round's element and where its words sit (`store_rounds`): declared before the
        // element's values are written, which a local of that name would shadow.
        names.push(format!("{name}_e"));
        names.push(format!("{name}_at"));
        names.push(format!("{name}_per_round"));
        for k in 0..(w as usize).div_ceil(c) {
            for part in ["swizzle", "e", "j", "to", "left"] {
                names.push(format!("{name}_{part}_{k}"));
            }
            names.extend((0..c).map(|o| format!("{name}_from_{k}_{o}")));
        }
    }
    names
}

/// The chunks [`store_chunked`] stores `outputs` in.
fn chunks_of<'a>(plan: &KernelPlan, outputs: &'a [ValueId]) -> impl Iterator<Item = Chunk<'a>> {
    let c = (abi::output_stage_words(plan.layout.precision) as usize).min(outputs.len());
    outputs
        .chunks(c)
        .enumerate()
        .map(move |(index, words)| Chunk {
            index,
            first: index * c,
            words,
        })
}

/// The stores of one chunk of output `name`, `w` words per element (after
/// [`chunks_group`]).
fn store_chunk(
    plan: &KernelPlan,
    ctx: &Ctx,
    (name, w): (&str, usize),
    chunk: Chunk,
    body: &mut String,
) {
    let Chunk {
        index: chunk,
        first,
        words,
    } = chunk;
    let cw = words.len();
    if cw == 1 {
        // A last chunk of one word is one word per thread: no run to gather.
        let label = store_label(plan, name, first as u32);
        let v = ctx.operand(words[0]);
        let _ = writeln!(
            body,
            "    if (in_batch) {{\n        {name}[i * {w}u + {first}u] = {v}; // {label}\n    }}"
        );
        return;
    }
    let _ = writeln!(body, "    workgroupBarrier();");
    if plan.chunk_lanes == 4 {
        store_chunk_vectors(plan, ctx, (name, w), (chunk, first, words), body);
        return;
    }
    let swizzle = chunk_swizzle(cw as u32, plan.layout.precision);
    if let Some(shift) = swizzle {
        let _ = writeln!(
            body,
            "    // The chunk's words permuted per element: each store a word of every thread,\n    \
             // the warp's threads in every bank.\n    \
             let {name}_swizzle_{chunk} = (lid / {shift}u) % {cw}u;"
        );
    }
    for (j, out) in words.iter().enumerate() {
        let label = store_label(plan, name, (first + j) as u32);
        let label = if name == "grads" {
            format!("d/d {label}")
        } else {
            label
        };
        let v = ctx.operand(*out);
        let at = match (swizzle, j) {
            (Some(_), j) => format!(" + ({j}u ^ {name}_swizzle_{chunk})"),
            (None, j) => plus(j),
        };
        let _ = writeln!(body, "    out_stage[lid * {cw}u{at}] = {v}; // {label}");
    }
    let _ = writeln!(body, "    workgroupBarrier();");
    let shift = swizzle.map(|s| s as usize);
    let wg = plan.size_override();
    stores_out_of_stage((name, w, chunk), (first, cw, 1), (shift, wg), body);
}

/// One chunk through a stage of `vec4`s into an output declared as `vec4`s
/// ([`KernelPlan::chunk_lanes`]): each thread writes its element's `q = cw / 4` blocks
/// (permuted per element by `(e / (8 / q)) % q` where `q` is a power of two, so that the
/// 8 threads of a quarter warp, whose 16-byte accesses are served together, hit 8
/// different 16-byte slots), then in `q` parts each thread stores block `lid % q` of
/// element `lid / q + part * (256 / q)` (where `q` is 3, in a loop over the stage's
/// slots). A quarter of the stage's and the buffer's accesses of single words.
fn store_chunk_vectors(
    plan: &KernelPlan,
    ctx: &Ctx,
    (name, w): (&str, usize),
    (chunk, first, words): (usize, usize, &[ValueId]),
    body: &mut String,
) {
    let q = words.len() / 4;
    let shift = (8 / q).max(1);
    let swizzle = q > 1 && q.is_power_of_two();
    let vec = abi::vector_type(4, plan.layout.precision);
    if swizzle {
        let _ = writeln!(
            body,
            "    // The chunk's blocks permuted per element, so that a quarter warp's blocks\n    \
             // fall in 8 different slots.\n    \
             let {name}_swizzle_{chunk} = (lid / {shift}u) % {q}u;"
        );
    }
    for (b, block) in words.chunks(4).enumerate() {
        let at = if swizzle {
            format!(" + ({b}u ^ {name}_swizzle_{chunk})")
        } else {
            plus(b)
        };
        let vals: Vec<String> = block.iter().map(|v| ctx.operand(*v)).collect();
        let first_word = first + 4 * b;
        let _ = writeln!(
            body,
            "    out_stage[lid * {q}u{at}] = {vec}({}); // {} ..",
            vals.join(", "),
            store_label(plan, name, first_word as u32)
        );
    }
    let _ = writeln!(body, "    workgroupBarrier();");
    let shift = swizzle.then_some(shift);
    let wg = plan.size_override();
    stores_out_of_stage((name, w, chunk), (first, q, 4), (shift, wg), body);
}

/// The stores out of the stage of chunk `chunk` of output `name` (`w` words per element,
/// the chunk from word `first`): `units` units of `lanes` words per element, each unit a
/// slot of the stage, the units of element `e` permuted by `(e / shift) % units` where
/// `shift` is given. Where `units` is a power of two, so that it divides the workgroup,
/// in each of `units` parts a thread stores unit `lid % units` of element
/// `lid / units + part * (256 / units)`, written out part by part: every index is the
/// thread's first one plus a constant, and the permutation takes at most two values. As
/// a loop, the index arithmetic of every part (divisions, the permutation) cost more than
/// the stores: a 4 x 16 Jacobian, compute-bound, ran 1.5 times slower than with its words
/// stored straight from registers as if coalesced. Otherwise a part's threads start
/// inside an element: a loop over the stage's slots.
fn stores_out_of_stage(
    (name, w, chunk): (&str, usize, usize),
    (first, units, lanes): (usize, usize, usize),
    (shift, sized): (Option<usize>, Option<&str>),
    body: &mut String,
) {
    let wg = abi::WORKGROUP_SIZE as usize;
    // Where the runtime sizes the workgroup, the size is the override's: every offset
    // below is written as a constant expression of it, which the driver folds.
    let size = sized.map_or_else(|| format!("{wg}u"), str::to_string);
    let (first, unit) = (plus(first), if lanes == 1 { "word" } else { "block" });
    // The output's index of unit `j` of element `e`.
    let at = |e: &str, j: &str| match lanes {
        1 => format!("{name}_group + {e} * {w}u{first} + {j}"),
        _ => format!("({name}_group + {e} * {w}u{first}) / {lanes}u + {j}"),
    };
    if !units.is_power_of_two() {
        let slot = if lanes == 1 { "word" } else { "slot" };
        let _ = writeln!(body, "    for (var part = 0u; part < {units}u; part++) {{");
        let _ = writeln!(body, "        let {slot} = part * {size} + lid;");
        let _ = writeln!(body, "        let e = {slot} / {units}u;");
        let _ = writeln!(body, "        if (i - lid + e < params.n) {{");
        let to = at("e", &format!("{slot} % {units}u"));
        let _ = writeln!(body, "            {name}[{to}] = out_stage[{slot}];");
        let _ = writeln!(body, "        }}\n    }}");
        return;
    }
    let (e, j) = (format!("{name}_e_{chunk}"), format!("{name}_j_{chunk}"));
    let per_part_text = match sized {
        Some(s) => format!("{s} / {units}"),
        None => (wg / units).to_string(),
    };
    let _ = writeln!(
        body,
        "    // Thread `lid` stores {unit} `lid % {units}` of elements `lid / {units}`, `+ {per_part_text}`, ...\n    \
         let {e} = lid / {units}u;\n    \
         let {j} = lid % {units}u;\n    \
         let {name}_to_{chunk} = {};\n    \
         let {name}_left_{chunk} = params.n - min(params.n, i - lid + {e});",
        at(&e, &j)
    );
    match sized {
        Some(s) => sized_parts((name, w, chunk), (units, lanes), (shift, s), body),
        None => fixed_parts((name, w, chunk), (units, lanes), shift, body),
    }
}

/// The parts of [`stores_out_of_stage`] in a workgroup of [`abi::WORKGROUP_SIZE`]: a part
/// moves `e` on by `per_part`, a multiple of `shift`, so the permutation takes at most a
/// few constant values, one `from` index each.
fn fixed_parts(
    (name, w, chunk): (&str, usize, usize),
    (units, lanes): (usize, usize),
    shift: Option<usize>,
    body: &mut String,
) {
    let wg = abi::WORKGROUP_SIZE as usize;
    let per_part = wg / units;
    let (e, j) = (format!("{name}_e_{chunk}"), format!("{name}_j_{chunk}"));
    let turn = |part: usize| shift.map_or(0, |shift| part * per_part / shift % units);
    let offsets: std::collections::BTreeSet<usize> = (0..units).map(turn).collect();
    for &o in &offsets {
        let from = match shift {
            Some(shift) => format!("({j} ^ (({e} / {shift}u{}) % {units}u))", plus(o)),
            None => j.clone(),
        };
        let _ = writeln!(
            body,
            "    let {name}_from_{chunk}_{o} = {e} * {units}u + {from};"
        );
    }
    for part in 0..units {
        let (to, from) = (plus(part * per_part * w / lanes), plus(part * wg));
        let _ = writeln!(
            body,
            "    if ({name}_left_{chunk} > {}u) {{ {name}[{name}_to_{chunk}{to}] = out_stage[{name}_from_{chunk}_{}{from}]; }}",
            part * per_part,
            turn(part)
        );
    }
}

/// The parts of [`stores_out_of_stage`] in a workgroup of `size` (the override's name):
/// part `p` moves `e` on by `p * size / units`, which for every size the runtime takes
/// (32 to 256) is a multiple of `shift` (`shift * units` divides 32), so its permutation is
/// `(e / shift + p * size / units / shift) % units`, one `from` index a part.
fn sized_parts(
    (name, w, chunk): (&str, usize, usize),
    (units, lanes): (usize, usize),
    (shift, size): (Option<usize>, &str),
    body: &mut String,
) {
    let (e, j) = (format!("{name}_e_{chunk}"), format!("{name}_j_{chunk}"));
    let per_part = format!("({size} / {units}u)");
    let parts = if shift.is_some() { units } else { 1 };
    for part in 0..parts {
        let from = match shift {
            Some(shift) if part > 0 => {
                format!("({j} ^ (({e} / {shift}u + {part}u * {per_part} / {shift}u) % {units}u))")
            }
            Some(shift) => format!("({j} ^ (({e} / {shift}u) % {units}u))"),
            None => j.clone(),
        };
        let _ = writeln!(
            body,
            "    let {name}_from_{chunk}_{part} = {e} * {units}u + {from};"
        );
    }
    for part in 0..units {
        let from_part = if shift.is_some() { part } else { 0 };
        let (left, to, from) = match part {
            0 => ("0u".to_string(), String::new(), String::new()),
            _ => (
                format!("{part}u * {per_part}"),
                format!(" + {}u * {per_part}", part * w / lanes),
                format!(" + {part}u * {size}"),
            ),
        };
        let _ = writeln!(
            body,
            "    if ({name}_left_{chunk} > {left}) {{ {name}[{name}_to_{chunk}{to}] = out_stage[{name}_from_{chunk}_{from_part}{from}]; }}"
        );
    }
}

/// A Jacobian kernel's `jacobians` stored a chunk at a time as soon as the chunk's words
/// are computed (where its nodes are ordered result by result, see
/// `opt::outputs_in_groups`), rather than all at the end: a row's words then live no
/// longer than the row's sweep. `None` for any other kernel, or where the Jacobian is not
/// stored in chunks.
pub(super) fn jacobian_chunks_as_computed(
    plan: &KernelPlan,
    f: &Function,
    ctx: &Ctx,
) -> Option<EarlyStores> {
    if plan.kind != KernelKind::Jacobian || plan.elements != 1 {
        return None;
    }
    let k = plan.outputs.iter().position(|o| o.2 == "jacobians")?;
    let (_, w, name) = plan.outputs[k];
    if !plan.stages_output(w) {
        return None;
    }
    let at: usize = plan.outputs[..k].iter().map(|o| o.1 as usize).sum();
    let outputs = &f.outputs[at..at + w as usize];
    let mut stores = Vec::new();
    for chunk in chunks_of(plan, outputs) {
        // After the last of its words that is computed (not an input or a constant).
        let after = chunk
            .words
            .iter()
            .filter(|v| !matches!(f.node(**v).op, Op::Input(_) | Op::Const(_) | Op::Int(_)))
            .map(|v| v.index())
            .max();
        let mut text = String::new();
        store_chunk(plan, ctx, (name, w as usize), chunk, &mut text);
        stores.push((after, text));
    }
    Some(EarlyStores {
        buffer: name,
        group: chunks_group(name, w as usize),
        stores,
    })
}

/// Stores written among a kernel's statements ([`jacobian_chunks_as_computed`]).
pub(super) struct EarlyStores {
    /// The output buffer they store.
    pub buffer: &'static str,
    /// The statement before any of them.
    pub group: String,
    /// Each store's statements, after the node it follows (`None`: before any node).
    pub stores: Vec<(Option<usize>, String)>,
}

/// For a chunk `width` words wide, the threads `shift` apart whose words a chunk permutes
/// alike: element `e`'s word `j` sits at `e * width + (j ^ (e / shift) % width)`, so that
/// the 32 banks (16 eight-byte ones in f64) each take one thread's store. `None` where the
/// width is not a power of two: an odd width is conflict-free unpermuted.
fn chunk_swizzle(width: u32, precision: Precision) -> Option<u32> {
    let banks = 32 / precision.words_per_scalar();
    (width > 1 && width.is_power_of_two() && width <= banks).then_some(banks / width)
}

/// An output of more words per element than one chunk, whole elements at a time: in each
/// round `per_round` threads write their elements' words to `stage` (`out_stage`, or a
/// reducing adjoint's `reduce_stage` while its sums are in registers), then the group
/// stores those elements, `per_round * w` consecutive words, every store part of a full
/// run. (In chunks of 16 words, 49-word Hessians were runs of 64 bytes 196 bytes apart:
/// 33% of the copy bandwidth on the H100.) Each access moves `lanes` words: 4 through
/// `out_stage` of `vec4`s ([`KernelPlan::chunk_lanes`] 4), to the stage and to the output,
/// a quarter of the instructions.
///
/// An even count of slots (words, or `vec4`s) puts the slots a warp writes at once, one per
/// element, `w` slots apart: in one bank for a multiple of 32 (`stencil_64`'s 64 gradient
/// words: 32-way conflicts, 47% of the roofline on the H100). There element `e`'s slot `j`
/// sits at `e * w + (j + e) % w`, one bank a thread (for `vec4`s, each quarter warp's eight
/// in distinct banks), and the stores read each slot back from where it sits (69%).
fn store_rounds(
    plan: &KernelPlan,
    ctx: &Ctx,
    outputs: &[ValueId],
    (name, per_round, stage, lanes): (&str, u32, &str, u32),
    body: &mut String,
) {
    let w = outputs.len() as u32 / lanes;
    let wg = plan.workgroup_size();
    let _ = writeln!(body, "    let {name}_group = (i - lid) * {w}u;");
    let what = if lanes > 1 { "vec4s" } else { "words" };
    // Where the runtime sizes the workgroup, a round is the workgroup when it is smaller
    // than `per_round` elements.
    let (rounds, per_round, round_words) = if plan.sized_by_runtime() {
        let _ = writeln!(
            body,
            "    // Rounds of {per_round} elements (of the workgroup, if smaller): each round's \
             elements are consecutive {what}.\n    \
             let {name}_per_round = min({per_round}u, {wg});"
        );
        (
            format!("{wg} / {name}_per_round"),
            format!("{name}_per_round"),
            format!("{name}_per_round * {w}u"),
        )
    } else {
        let rounds = abi::WORKGROUP_SIZE / per_round;
        let _ = writeln!(
            body,
            "    // {rounds} rounds of {per_round} elements: each round's elements are {} \
             consecutive {what}.",
            per_round * w
        );
        (
            format!("{rounds}u"),
            format!("{per_round}u"),
            format!("{}u", per_round * w),
        )
    };
    let _ = writeln!(
        body,
        "    for (var round = 0u; round < {rounds}; round++) {{"
    );
    let _ = writeln!(body, "        workgroupBarrier();");
    let _ = writeln!(body, "        if (lid / {per_round} == round) {{");
    let rotated = w.is_multiple_of(2);
    write_round_slots(
        plan,
        ctx,
        outputs,
        (name, stage, lanes),
        (&per_round, rotated),
        body,
    );
    let _ = writeln!(body, "        }}");
    let _ = writeln!(body, "        workgroupBarrier();");
    let _ = writeln!(body, "        let first = round * {per_round};");
    let _ = writeln!(
        body,
        "        for (var word = lid; word < {round_words}; word += {wg}) {{"
    );
    let _ = writeln!(
        body,
        "            if (i - lid + first + word / {w}u < params.n) {{"
    );
    let from = if rotated {
        format!("word / {w}u * {w}u + (word % {w}u + word / {w}u) % {w}u")
    } else {
        "word".to_string()
    };
    let _ = writeln!(
        body,
        "                {name}[{name}_group + first * {w}u + word] = {stage}[{from}];"
    );
    let _ = writeln!(body, "            }}\n        }}\n    }}");
}

/// A round's writes to `stage`: the thread's element's words of output `name`, a slot of
/// `lanes` words at a time, at `e * w + j` (`w` slots an element), or rotated by the
/// element, `e * w + (j + e) % w` ([`store_rounds`]).
fn write_round_slots(
    plan: &KernelPlan,
    ctx: &Ctx,
    outputs: &[ValueId],
    (name, stage, lanes): (&str, &str, u32),
    (per_round, rotated): (&str, bool),
    body: &mut String,
) {
    let w = outputs.len() as u32 / lanes;
    if rotated {
        let _ = writeln!(body, "            let {name}_e = lid % {per_round};");
        let _ = writeln!(body, "            let {name}_at = {name}_e * {w}u;");
    } else {
        let _ = writeln!(
            body,
            "            let {name}_at = (lid % {per_round}) * {w}u;"
        );
    }
    for (j, slot) in outputs.chunks(lanes as usize).enumerate() {
        let first = j as u32 * lanes;
        let labels: Vec<String> = (first..first + lanes)
            .map(|k| store_label(plan, name, k))
            .collect();
        let v = lanes_value(ctx, slot);
        let at = if rotated {
            format!("{name}_at + ({j}u + {name}_e) % {w}u")
        } else {
            format!("{name}_at{}", plus(j))
        };
        let _ = writeln!(
            body,
            "            {stage}[{at}] = {v}; // {}",
            labels.join(", ")
        );
    }
}

/// What output word `k` of buffer `name` is, for the comment on its store.
pub(super) fn store_label(plan: &KernelPlan, name: &str, k: u32) -> String {
    let grad_count = plan.grad_count().max(1);
    match name {
        "values" if plan.layout.results == 1 => "the value".to_string(),
        "values" => format!("result[{k}]"),
        "tangents" if plan.layout.results == 1 => "the value's tangent".to_string(),
        "tangents" => format!("tangent of result[{k}]"),
        "hessians" => format!(
            "d2 / d {} d {}",
            plan.grad_label(k / grad_count),
            plan.grad_label(k % grad_count)
        ),
        "jacobians" => format!(
            "d result[{}] / d {}",
            k / grad_count,
            plan.grad_label(k % grad_count)
        ),
        _ => plan.grad_label(k),
    }
}

/// Several words per element, stored straight from registers, in the lanes the output is
/// declared with ([`KernelPlan::output_lanes`]).
pub(super) fn store_words(
    plan: &KernelPlan,
    ctx: &Ctx,
    outputs: &[ValueId],
    name: &str,
    body: &mut String,
) {
    let w = outputs.len() as u32;
    let glanes = plan.output_lanes(w, name);
    let indent = if plan.guarded {
        let _ = writeln!(body, "    if (in_batch) {{");
        "        "
    } else {
        "    "
    };
    // `out_base` for the gradients (the common case), `values_base`... for others.
    let base = if name == "grads" {
        "out_base".to_string()
    } else {
        format!("{name}_base")
    };
    let _ = writeln!(body, "{indent}let {base} = {};", scaled_index(w / glanes));
    for (chunk, slot) in outputs.chunks(glanes as usize).enumerate() {
        let idx = format!("{base}{}", plus(chunk));
        let first = chunk as u32 * glanes;
        let args: Vec<String> = (first..first + glanes)
            .map(|k| store_label(plan, name, k))
            .collect();
        let value = lanes_value(ctx, slot);
        let _ = writeln!(
            body,
            "{indent}{name}[{idx}] = {value}; // {}{}",
            if name == "grads" { "d/d " } else { "" },
            args.join(", ")
        );
    }
    if plan.guarded {
        let _ = writeln!(body, "    }}");
    }
}

/// The WGSL value of `words` stored at once: the word itself, or a vector of them.
fn lanes_value(ctx: &Ctx, words: &[ValueId]) -> String {
    let vals: Vec<String> = words.iter().map(|&w| ctx.operand(w)).collect();
    match vals.len() {
        1 => vals[0].clone(),
        lanes => format!(
            "{}({})",
            abi::vector_type(lanes as u32, ctx.precision),
            vals.join(", ")
        ),
    }
}
