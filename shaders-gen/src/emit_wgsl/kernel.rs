//! One kernel's text, phase by phase: loads, shared-gradient sums, the body, stores, then
//! the header, the declarations and the entry point around them.

use super::body::{Ctx, scaled_index};
use super::fields::{FieldNames, emit_field_loads, field_declarations, field_header, field_names};
use super::float_literal;
use super::hoist;
use super::loads::{self, emit_loads};
use super::plan::{KernelPlan, StageArray};
use super::reduce::reduce_stage_fn;
use super::rows::{ROWS_NAMES, acc, has_rows_entry, rows_declarations, rows_entry, rows_stores};
use super::shared_sums::{SharedSums, shared_sums};
use super::stores::{self, emit_stores, jacobian_chunks_as_computed};
use super::streams::SumsIn;
use crate::abi::{self, ArgLayout, KernelKind};
use crate::ir::Function;
use crate::names::{HOISTED_ARRAY, REDUCE_DISTINCT_FN, element_name, reserved};
use crate::ops::{WGSL_TANH_BRANCH_FREE, wgsl_helper, wgsl_helper_source, wgsl_helpers};
use crate::signature::Precision;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Emits the WGSL module of one kernel of a function.
///
/// `signature` is the Rust signature for the header comment; `f` is the (optimized) IR
/// whose outputs are, for [`KernelKind::Forward`], the value, and for
/// [`KernelKind::Adjoint`] the value followed by one gradient word per argument word. An
/// adjoint with `#[shared]` arguments sums their gradients over the batch, and takes the
/// reverse pass's seed as one more input ([`crate::ad::vjp`]): the kernel seeds 1 for
/// elements in the batch and 0 past its end.
pub fn emit_kernel(signature: &str, layout: &ArgLayout, kind: KernelKind, f: &Function) -> String {
    let elements = super::shared_sums::elements_per_thread(layout, kind, f);
    emit(signature, layout, kind, f, false, elements)
}

/// Emits a kernel ([`emit_kernel`], which takes [`super::elements_per_thread`]) whose
/// threads each compute `elements` batch elements side by side (at most 8), where the
/// kernel sums shared gradients over the batch (others take one element per thread
/// whatever `elements` says): the shared words are read, and the integer work done, once
/// for all of them, and each shared gradient word is summed over them in registers before
/// the workgroup sums it.
pub fn emit_kernel_with_elements(
    signature: &str,
    layout: &ArgLayout,
    kind: KernelKind,
    f: &Function,
    elements: u32,
) -> String {
    emit(signature, layout, kind, f, false, elements)
}

/// Emits the gathered variant of a kernel ([`emit_kernel`]): each per-element argument read
/// from a buffer of its own, directly or through an index (see [`abi::FIELDS_BINDING`]).
pub fn emit_gathered_kernel(
    signature: &str,
    layout: &ArgLayout,
    kind: KernelKind,
    f: &Function,
) -> String {
    emit(signature, layout, kind, f, true, 1)
}

fn emit(
    signature: &str,
    layout: &ArgLayout,
    kind: KernelKind,
    f: &Function,
    gathered: bool,
    elements: u32,
) -> String {
    let streamed =
        kind == KernelKind::Adjoint && super::shared_sums::streams_shared_gradient(layout, f);
    let plan = KernelPlan::new(layout, kind, f, gathered, (elements, streamed));
    let mut taken = reserved();
    let fields = if gathered {
        field_names(layout, &mut taken)
    } else {
        Vec::new()
    };
    let by_rows = has_rows_entry(&plan);
    if by_rows {
        taken.extend(ROWS_NAMES.map(str::to_string));
        taken.extend((0..layout.words).map(acc));
    }
    taken.extend(stores::declared_names(&plan));
    taken.extend(loads::declared_names(&plan));
    taken.extend(other_element_names(&plan));
    let mut ctx = Ctx::new(f, &mut taken);
    ctx.shared_uniform = plan.shared_uniform;
    ctx.precision = layout.precision;
    ctx.element_array = plan.element_arrays.clone();
    ctx.row_lanes = plan.lanes;
    if plan.elements > 1 {
        // The shared words are the same for every element; the element's words and the
        // seed are not.
        let (words, shared) = (layout.words as usize, layout.shared_words as usize);
        let uniform: Vec<bool> = (0..f.num_inputs as usize)
            .map(|w| w >= words && w < words + shared)
            .collect();
        ctx.set_elements(plan.elements as usize, &uniform, &mut taken);
    }
    let mut helpers = BTreeSet::new();
    // The by-rows entry has no prologue: a kernel with one computes everything itself.
    let hoisted = if by_rows {
        None
    } else {
        hoist::hoisted(&plan, f)
    };
    let prologue = (hoisted.as_ref())
        .map(|h| hoist::emit_prologue(&plan, &mut ctx, h, &mut taken, &mut helpers));
    let mut body = String::new();
    if gathered {
        emit_field_loads(&plan, &fields, &ctx, &mut body);
    }
    emit_loads(&plan, &mut ctx, &mut taken, &mut body);
    let sums = if plan.reduces {
        shared_sums(&plan, f, &mut ctx, &mut taken, &mut body)
    } else {
        SharedSums::default()
    };
    let early = if by_rows {
        None
    } else {
        jacobian_chunks_as_computed(&plan, f, &ctx)
    };
    let mut before_any = String::new();
    if let Some(early) = &early {
        let _ = writeln!(body, "{}", early.group);
        for (after, text) in &early.stores {
            match after {
                Some(i) => ctx.after.entry(*i).or_default().push_str(text),
                None => before_any.push_str(text),
            }
        }
        body.push_str(&before_any);
    }
    ctx.emit_nodes(&mut taken, "    ", &mut body, &mut helpers);
    let compute = by_rows.then(|| body.clone());
    let rows = by_rows.then(|| rows_stores(&plan, f, &ctx, &fields));
    emit_stores(&plan, f, &mut ctx, &mut body, early.map(|e| e.buffer));
    let mut s = header(&plan, &fields, signature);
    declarations(&plan, &fields, &helpers, &sums, &mut s);
    if let Some(h) = &hoisted {
        let t = plan.layout.precision;
        let _ = writeln!(
            s,
            "var<workgroup> {HOISTED_ARRAY}: array<{t}, {}>;\n",
            h.exported.len().max(1)
        );
    }
    if plan.reduces {
        reducing_entry(&plan, &sums, prologue.as_deref(), &body, &mut s);
    } else {
        plain_entry(&plan, prologue.as_deref(), &body, &mut s);
    }
    if let (Some(compute), Some(stores)) = (compute, rows) {
        rows_entry(&plan, &fields, &compute, &stores, &mut s);
    }
    s
}

/// The header comment: which function, and a map of every buffer word to the user's names.
fn header(plan: &KernelPlan, fields: &[FieldNames], signature: &str) -> String {
    let (words, shared_words, layout) = (plan.layout.words, plan.layout.shared_words, plan.layout);
    let wg = abi::WORKGROUP_SIZE;
    let mut s = String::new();
    let what = match plan.kind {
        KernelKind::Forward => "forward (value) kernel",
        KernelKind::Adjoint => "adjoint (value and gradient) kernel",
        KernelKind::Jacobian => "Jacobian (values and Jacobian) kernel",
        KernelKind::Tangent => "tangent (values and directional derivatives) kernel",
        KernelKind::Hessian => "Hessian (value, gradient and Hessian) kernel",
    };
    let _ = writeln!(s, "// gradfuse {what} of `{signature}`.");
    let threads = if plan.reduces {
        format!("Each thread takes params.per_thread batch elements i, {wg} apart.")
    } else {
        "One thread per batch element i.".to_string()
    };
    if plan.gathered {
        let _ = writeln!(
            s,
            "// {threads}\n// Element i's words, each argument from a buffer of its own, at row r = i or, where\n\
             // its bit of params.gathered is set, at row r = its index[i]:"
        );
    } else {
        let _ = writeln!(s, "// {threads} Element i's words:");
    }
    if plan.gathered {
        field_header(layout, fields, &mut s);
    } else {
        let _ = writeln!(
            s,
            "//   args[{words}i ..]: {}",
            layout.words_label(0, words)
        );
    }
    if shared_words > 0 {
        let names = layout.words_label(words, words + shared_words);
        let _ = writeln!(
            s,
            "// and the whole batch's {shared_words} shared words{}: {}",
            if plan.shared_uniform {
                let u = abi::uniform_lanes(plan.layout.precision);
                format!(" (shared_args, a uniform buffer, {u} to a vec{u})")
            } else {
                " (shared_args)".to_string()
            },
            names
        );
        if plan.reduces {
            let _ = writeln!(
                s,
                "//   shared_partials[{shared_words}g ..]: workgroup g's sum of d/d shared_args"
            );
        }
    }
    for &(_, w, name) in &plan.outputs {
        let _ = writeln!(s, "//   {}", output_line(plan, w, name));
    }
    let _ = writeln!(s);
    s
}

/// The header's line for output `name` of `w` words per element.
fn output_line(plan: &KernelPlan, w: u32, name: &str) -> String {
    let words = plan.layout.words;
    if name == "tangents" {
        let what = if w == 1 {
            "the value's"
        } else {
            "each result word's"
        };
        let at = if w == 1 {
            "[i]".to_string()
        } else {
            format!("[{w}i ..]")
        };
        format!("{name}{at}: {what} directional derivative along the t_ words")
    } else if w == 1 {
        format!("{name}[i]: the value")
    } else if name == "values" {
        format!("{name}[{w}i ..]: the result's {w} words")
    } else if name == "hessians" {
        format!(
            "{name}[{w}i ..]: the Hessian, row-major (symmetric: each mirrored pair of \
             entries is one value), in the {} argument words with a gradient",
            plan.grad_count()
        )
    } else if name == "jacobians" {
        format!(
            "{name}[{w}i ..]: the Jacobian, row-major: for each result word, its \
             derivative in each of the {} argument words with a gradient",
            plan.grad_count()
        )
    } else if w == words {
        format!("{name}[{w}i ..]: its derivative in each argument word, in the same order")
    } else {
        let names: Vec<String> = (0..w).map(|k| plan.grad_label(k)).collect();
        format!(
            "{name}[{w}i ..]: its derivative in {} (#[constant] words have none)",
            names.join(", ")
        )
    }
}

/// `Params`, the bindings, workgroup memory and the helper functions the body calls
/// (`sums`: how the body sums the shared gradient).
fn declarations(
    plan: &KernelPlan,
    fields: &[FieldNames],
    helpers: &BTreeSet<&'static str>,
    sums: &SharedSums,
    s: &mut String,
) {
    bindings(plan, fields, s);
    workgroup_arrays(plan, sums, s);
    if plan.reduces {
        let _ = write!(
            s,
            "\n{}",
            reduce_stage_fn(
                plan.layout.shared_words,
                (
                    sums.streams,
                    helpers.contains(REDUCE_DISTINCT_FN),
                    sums.static_runs
                ),
                sums.sums_in,
                plan.layout.precision
            )
        );
    }
    let precision = plan.layout.precision;
    let branch_free = precision == Precision::F32
        && matches!(
            plan.kind,
            KernelKind::Forward | KernelKind::Tangent | KernelKind::Jacobian
        );
    for (name, _, src) in wgsl_helpers(precision) {
        if helpers.contains(name) {
            let src = if *name == "gf_tanh" && plan.branch_free_tanh {
                WGSL_TANH_BRANCH_FREE
            } else {
                wgsl_helper_source(name, src, branch_free)
            };
            let _ = write!(s, "\n{src}\n");
        }
    }
    if plan.rows_as_vec4s {
        let _ = write!(s, "\n{}\n", super::loads::WGSL_SHIFT4);
    }
    debug_assert!(
        (helpers.iter()).all(|h| *h == REDUCE_DISTINCT_FN || wgsl_helper(h, precision).is_some())
    );
    let _ = writeln!(s);
}

/// The kernel's `Params` struct and its bindings: the uniforms, the arguments (or the
/// gathered kernel's fields), the outputs, the shared words and the shared partials.
fn bindings(plan: &KernelPlan, fields: &[FieldNames], s: &mut String) {
    let t = plan.layout.precision;
    if has_rows_entry(plan) {
        let _ = writeln!(
            s,
            "struct Params {{\n    n: u32,\n    per_thread: u32,\n    gathered: u32,\n    \
             // The by-rows entry's (see there):\n    first: u32,\n    field0: u32,\n    \
             field1: u32,\n    sides: u32,\n    store_grads: u32,\n}}\n"
        );
    } else if plan.gathered {
        let _ = writeln!(
            s,
            "struct Params {{\n    n: u32,\n    per_thread: u32,\n    gathered: u32,\n}}\n"
        );
    } else if plan.reduces {
        let _ = writeln!(
            s,
            "struct Params {{\n    n: u32,\n    per_thread: u32,\n}}\n"
        );
    } else {
        let _ = writeln!(s, "struct Params {{\n    n: u32,\n}}\n");
    }
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<uniform> params: Params;",
        abi::PARAMS_BINDING
    );
    if plan.gathered {
        field_declarations(fields, t, s);
        if has_rows_entry(plan) {
            rows_declarations(plan, s);
        }
    } else {
        let lanes = if plan.rows_as_vec4s { 4 } else { plan.lanes };
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> args: array<{}>;",
            abi::ARGS_BINDING,
            abi::vector_type(lanes, t)
        );
    }
    for &(binding, w, name) in &plan.outputs {
        let _ = writeln!(
            s,
            "@group(0) @binding({binding}) var<storage, read_write> {name}: array<{}>;",
            abi::vector_type(plan.output_lanes(w, name), t)
        );
    }
    if plan.shared_uniform && plan.layout.shared_words > 0 {
        let u = abi::uniform_lanes(plan.layout.precision);
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<uniform> shared_args: array<vec{u}<{t}>, {}>;",
            abi::SHARED_BINDING,
            plan.layout.shared_words.div_ceil(u)
        );
    } else if plan.layout.shared_words > 0 {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> shared_args: array<{t}>;",
            abi::SHARED_BINDING
        );
    }
    if plan.reduces {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read_write> shared_partials: array<{t}>;",
            abi::PARTIALS_BINDING
        );
    }
}

/// The length of a workgroup stage of `per_thread` scalars a thread: a constant expression
/// of the size override where the runtime sizes the stage, else of
/// [`abi::WORKGROUP_SIZE`].
fn stage_length(sized: Option<&str>, per_thread: u32) -> String {
    match sized {
        Some(size) => format!("{size} * {per_thread}u"),
        None => (abi::WORKGROUP_SIZE * per_thread).to_string(),
    }
}

/// The kernel's workgroup arrays: the staged gradients, the argument rows' stage, the
/// output stage and the reduction's stages.
fn workgroup_arrays(plan: &KernelPlan, sums: &SharedSums, s: &mut String) {
    let t = plan.layout.precision;
    // A kernel the runtime sizes has its stages sized by the override (a smaller
    // workgroup, a smaller stage: more workgroups fit an SM), but for rounds, which fill
    // the whole stage at any size.
    let sized = plan.size_override();
    if plan.staged {
        let words = stage_length(sized, plan.grad_count());
        let _ = writeln!(s, "var<workgroup> grad_stage: array<{t}, {words}>;");
    }
    if let Some((stage, StageArray::Own)) = plan.row_stage {
        let words = stage_length(sized, stage.stride);
        let _ = writeln!(s, "var<workgroup> in_stage: array<{t}, {words}>;");
    }
    if plan.chunked {
        let per_thread = abi::output_stage_words(t) / plan.chunk_lanes;
        let words = stage_length(sized.filter(|_| !plan.stores_rounds()), per_thread);
        let _ = writeln!(
            s,
            "var<workgroup> out_stage: array<{}, {words}>;",
            abi::vector_type(plan.chunk_lanes, t)
        );
    }
    if plan.reduces {
        let precision = plan.layout.precision;
        let reduce_scalars = sums.sums_in.slots(precision) * sums.sums_in.stride();
        let _ = writeln!(
            s,
            "var<workgroup> reduce_stage: array<{t}, {reduce_scalars}>;"
        );
        if sums.sums_in == SumsIn::Workgroup {
            let _ = writeln!(
                s,
                "var<workgroup> word_sums: array<{t}, {}>;",
                plan.layout.shared_words,
            );
        }
        // The marks of repeated words, where the kernel does not know its slots' words.
        if sums.sums_in == SumsIn::Workgroup && !sums.static_runs {
            let _ = writeln!(
                s,
                "var<workgroup> stage_marks: array<atomic<u32>, {}>;\n\
                 var<workgroup> stage_repeats: atomic<u32>;",
                plan.layout.shared_words.div_ceil(32)
            );
        }
        if let Some(most) = sums.outer {
            // The reduction's stage is the kernel's other workgroup array: one that stages
            // outputs or gradients sums no rows as outer products.
            let other = reduce_scalars * 4 * precision.words_per_scalar();
            let _ = writeln!(
                s,
                "{}",
                super::outer_sums::outer_stage_declaration(precision, other, most)
            );
        }
    }
}

/// What the reducing entry calls a thread's element `e` past the first: its index, whether
/// it is in the batch, the element it reads, its row.
const ELEMENT_NAMES: [&str; 4] = ["i", "in_batch", "elem", "in_base"];

/// The names [`ELEMENT_NAMES`] take for a thread's other elements (`i_b`, `in_base_c`..),
/// taken before any value is named so that a user's local of that name is renamed.
fn other_element_names(plan: &KernelPlan) -> Vec<String> {
    (1..plan.elements as usize)
        .flat_map(|e| ELEMENT_NAMES.map(|b| element_name(b, e)))
        .collect()
}

/// The entry point of a kernel that sums shared gradients: a loop over the thread's
/// elements around the body, then the workgroup sum.
fn reducing_entry(
    plan: &KernelPlan,
    sums: &SharedSums,
    prologue: Option<&str>,
    body: &str,
    s: &mut String,
) {
    let wg = abi::WORKGROUP_SIZE;
    let _ = writeln!(s, "@compute @workgroup_size({wg})");
    let _ = writeln!(
        s,
        "fn {}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{",
        plan.kind.entry_point(),
    );
    let _ = writeln!(
        s,
        "    // Workgroup `group` takes params.per_thread runs of {wg} consecutive elements (wide\n    \
         // dispatches use the second dimension, at most {} groups per dimension). It adds\n    \
         // up the shared gradients of its elements, in a fixed order (deterministic, no\n    \
         // atomics), into its row of shared_partials; a second kernel sums the rows.",
        abi::MAX_WORKGROUPS_PER_DIM
    );
    let _ = writeln!(s, "    let group = wid.x + wid.y * groups.x;");
    let _ = writeln!(s, "    let per_thread = params.per_thread;");
    let words = plan.layout.shared_words;
    if sums.sums_in == SumsIn::Row {
        let _ = writeln!(
            s,
            "    // The row starts at zero. Thread lid owns its words lid, lid + {wg}, ..: only the\n    \
         // owner writes a word, so no two threads race on one.\n    \
         for (var word = lid; word < {words}u; word += {wg}u) {{\n        \
         shared_partials[group * {words}u + word] = {zero};\n    }}",
            zero = float_literal(0.0, plan.layout.precision),
        );
    }
    s.push_str(&sums.declarations);
    // Once for all of the workgroup's runs.
    s.push_str(prologue.unwrap_or_default());
    let step = match plan.elements {
        1 => "nth++".to_string(),
        e => format!("nth += {e}u"),
    };
    let _ = writeln!(
        s,
        "    for (var nth = 0u; nth < per_thread; {step}) {{\n        \
         let group_first = (group * per_thread + nth) * {wg}u;\n        \
         // Runs wholly past the end are skipped by the whole workgroup at once.\n        \
         if (group_first >= params.n) {{\n            break;\n        }}\n        \
         let i = group_first + lid;\n        \
         // Every thread reaches the barriers: threads past the end compute on the last\n        \
         // element and store and add nothing.\n        \
         let in_batch = i < params.n;\n        \
         let elem = min(i, params.n - 1u);",
    );
    if !plan.gathered {
        let _ = writeln!(
            s,
            "        let in_base = elem * {}u;",
            plan.layout.words / plan.lanes
        );
    }
    if plan.elements > 1 {
        let _ = writeln!(
            s,
            "        // The thread's other elements, side by side with this one: the same lane of\n        \
             // the next runs, part of the batch while those runs are this workgroup's."
        );
    }
    for e in 1..plan.elements as usize {
        let [i, in_batch, elem, in_base] = ELEMENT_NAMES.map(|b| element_name(b, e));
        let _ = writeln!(
            s,
            "        let {i} = i + {}u;\n        \
             let {in_batch} = nth + {e}u < per_thread && {i} < params.n;\n        \
             let {elem} = min({i}, params.n - 1u);\n        \
             let {in_base} = {elem} * {}u;",
            e as u32 * wg,
            plan.layout.words / plan.lanes
        );
    }
    for line in body.lines() {
        if line.is_empty() {
            s.push('\n');
        } else {
            let _ = writeln!(s, "    {line}");
        }
    }
    if plan.staged {
        let _ = writeln!(
            s,
            "        // The next element's gradients wait until these are stored.\n        \
             workgroupBarrier();"
        );
    }
    s.push_str("    }\n");
    if plan.grads_in_reduce_stage.is_some() {
        debug_assert!(
            !sums.streams && sums.outer.is_none(),
            "the stage holds no sums in the loop"
        );
        let _ = writeln!(
            s,
            "    // The sums' writes wait until the last gradients are read out of the stage.\n    \
             workgroupBarrier();"
        );
    }
    s.push_str(&sums.workgroup_sum);
    s.push_str("}\n");
}

/// The entry point of a kernel with one thread per element.
fn plain_entry(plan: &KernelPlan, prologue: Option<&str>, body: &str, s: &mut String) {
    let in_words = plan.layout.words / plan.lanes;
    let wg = plan.workgroup_size();
    if let Some(size) = plan.size_override() {
        let _ = writeln!(
            s,
            "// Threads per workgroup: the runtime times the kernel at several sizes on the\n\
             // device and keeps the fastest (a register-heavy kernel keeps more warps busy in\n\
             // smaller workgroups); every size gives the same results.\n\
             override {size}: u32 = {};\n",
            abi::WORKGROUP_SIZE
        );
        let _ = writeln!(s, "@compute @workgroup_size({size})");
    } else {
        let _ = writeln!(s, "@compute @workgroup_size({})", abi::WORKGROUP_SIZE);
    }
    let _ = writeln!(
        s,
        "fn {}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>{}) {{",
        plan.kind.entry_point(),
        if plan.guarded || prologue.is_some() {
            ", @builtin(local_invocation_index) lid: u32"
        } else {
            ""
        }
    );
    s.push_str(prologue.unwrap_or_default());
    let _ = writeln!(
        s,
        "    // Wide batches use the second dispatch dimension (at most {} groups per dimension).",
        abi::MAX_WORKGROUPS_PER_DIM
    );
    let _ = writeln!(s, "    let i = gid.x + gid.y * groups.x * {wg};");
    if plan.guarded {
        let _ = writeln!(
            s,
            "    // Every thread reaches the barrier: threads past the end compute on the last\n    \
             // element and store nothing.\n    \
             let in_batch = i < params.n;\n    \
             let elem = min(i, params.n - 1u);"
        );
        // Staged rows are read from the group's first row, not the element's (but for
        // the arrays read from the row at their index).
        if !plan.gathered && (plan.row_stage.is_none() || !plan.element_arrays.is_empty()) {
            let _ = writeln!(s, "    let in_base = elem * {in_words}u;");
        }
    } else {
        let _ = writeln!(s, "    if (i >= params.n) {{\n        return;\n    }}");
        if !plan.gathered {
            let _ = writeln!(s, "    let in_base = {};", scaled_index(in_words));
        }
    }
    s.push_str(body);
    s.push_str("}\n");
}
