//! The by-rows entry point of a gathered adjoint kernel ([`abi::ROWS_ENTRY_POINT`]).
//!
//! A block read through an index gets its gradient, in the plain entry point, as every
//! element's gradient row written out and then summed per block row by the runtime's
//! segmented sum: 2 × (gradient words) × 4 bytes per element through memory, and a second
//! pass. By rows, one thread per block row computes the elements that read its row (the
//! index's grouping by row tells which, in the order the segmented sum adds them) and sums
//! their gradients in registers: no gradient rows, no second pass. An element read through
//! two indices into one block (an edge's two vertices) is computed once from each side.

use super::body::Ctx;
use super::fields::FieldNames;
use super::float_literal;
use super::plan::KernelPlan;
use super::stores::store_words;
use crate::abi;
use crate::ir::Function;
use std::fmt::Write;

/// The entry point's own names, taken before the body is named.
pub(super) const ROWS_NAMES: [&str; 14] = [
    "rows_thread",
    "row",
    "side",
    "field",
    "first_entry",
    "last_entry",
    "entry",
    "order0",
    "starts0",
    "order1",
    "starts1",
    "sink",
    "sink_at",
    "elem",
];

/// Whether a kernel gets the by-rows entry point ([`crate::abi::ArgLayout::has_rows_entry`]).
pub(super) fn has_rows_entry(plan: &KernelPlan) -> bool {
    plan.gathered && plan.layout.has_rows_entry(plan.kind)
}

/// The name of accumulator `j` (taken with [`ROWS_NAMES`], up to the widest argument).
pub(super) fn acc(j: u32) -> String {
    format!("acc_{j}")
}

/// For each argument with a gradient: its index among the arguments, and for each of its
/// words, its position in the gradient row.
fn grad_fields(plan: &KernelPlan, fields: &[FieldNames]) -> Vec<(usize, Vec<usize>)> {
    fields
        .iter()
        .enumerate()
        .filter_map(|(k, f)| {
            let at: Option<Vec<usize>> = (f.first..f.first + f.words)
                .map(|w| plan.grad_words.iter().position(|&g| g == w))
                .collect();
            at.map(|at| (k, at))
        })
        .collect()
}

/// The bindings of the index groupings and the sink.
pub(super) fn rows_declarations(plan: &KernelPlan, s: &mut String) {
    let b = abi::ROWS_BINDING;
    for (k, name) in ["order0", "starts0", "order1", "starts1"]
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> {name}: array<u32>;",
            b + k as u32
        );
    }
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<storage, read_write> sink: array<{}>;",
        b + 4,
        plan.layout.precision
    );
}

/// What one element does in the by-rows loop: from the first side, its value (and, where
/// `params.store_grads` is set, its gradient row); from either, the words of the summed
/// argument's gradient added to the accumulators.
pub(super) fn rows_stores(
    plan: &KernelPlan,
    f: &Function,
    ctx: &Ctx,
    fields: &[FieldNames],
) -> String {
    let mut s = String::new();
    let value = ctx.operand(f.outputs[0]);
    let _ = writeln!(s, "    if (side == 0u) {{\n        values[i] = {value};");
    let grads = &f.outputs[1..];
    if let Some(&(_, _, name)) = plan.outputs.iter().find(|o| o.2 == "grads") {
        let _ = writeln!(s, "        if (params.store_grads != 0u) {{");
        let mut stores = String::new();
        // In the lanes the plain entry declares the buffer with (`vec4`s where its chunks
        // are, single words where it stages them in words).
        store_words(plan, ctx, grads, name, &mut stores);
        for line in stores.lines() {
            let _ = writeln!(s, "        {line}");
        }
        let _ = writeln!(s, "        }}");
    }
    let _ = writeln!(s, "    }}");
    let _ = writeln!(s, "    switch (field) {{");
    for (k, at) in grad_fields(plan, fields) {
        let _ = writeln!(s, "        case {k}u: {{");
        for (j, &g) in at.iter().enumerate() {
            let v = ctx.operand(grads[g]);
            let _ = writeln!(s, "            {} += {v};", acc(j as u32));
        }
        let _ = writeln!(s, "        }}");
    }
    let _ = writeln!(s, "        default: {{}}\n    }}");
    s
}

/// The entry point: the loop over the row's elements around `compute` (the loads and the
/// body, for element `i`) and `stores` ([`rows_stores`]), then the sink's row.
pub(super) fn rows_entry(
    plan: &KernelPlan,
    fields: &[FieldNames],
    compute: &str,
    stores: &str,
    s: &mut String,
) {
    let wg = abi::WORKGROUP_SIZE;
    let grad_fields = grad_fields(plan, fields);
    let words = grad_fields
        .iter()
        .map(|(_, at)| at.len())
        .max()
        .unwrap_or(0) as u32;
    let zero = float_literal(0.0, plan.layout.precision);
    let _ = writeln!(
        s,
        "\n// By rows: thread t takes row params.first + t of the block that argument params.field0\n\
         // (and, where params.sides is 2, argument params.field1) reads through its index. It\n\
         // computes every element that reads the row, side by side in each index's order, and\n\
         // sums that argument's gradient in registers, in the order of the runtime's segmented\n\
         // sum: the block's gradient row without per-element gradient rows or a second pass."
    );
    let _ = writeln!(s, "@compute @workgroup_size({wg})");
    let _ = writeln!(
        s,
        "fn {}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{",
        abi::ROWS_ENTRY_POINT
    );
    let _ = writeln!(
        s,
        "    let rows_thread = gid.x + gid.y * groups.x * {wg}u;\n    \
         if (rows_thread >= params.n) {{\n        return;\n    }}\n    \
         let row = params.first + rows_thread;"
    );
    for j in 0..words {
        let _ = writeln!(s, "    var {} = {zero};", acc(j));
    }
    let _ = writeln!(
        s,
        "    for (var side = 0u; side < params.sides; side++) {{\n        \
         var field = params.field0;\n        \
         var first_entry = starts0[row];\n        \
         var last_entry = starts0[row + 1u];\n        \
         if (side == 1u) {{\n            \
         field = params.field1;\n            \
         first_entry = starts1[row];\n            \
         last_entry = starts1[row + 1u];\n        \
         }}\n        \
         for (var entry = first_entry; entry < last_entry; entry++) {{\n            \
         var i = order0[entry];\n            \
         if (side == 1u) {{\n                i = order1[entry];\n            }}"
    );
    if plan.guarded {
        let _ = writeln!(
            s,
            "            let elem = i;\n            let in_batch = true;"
        );
    }
    for line in compute.lines().chain(stores.lines()) {
        if line.is_empty() {
            s.push('\n');
        } else {
            let _ = writeln!(s, "        {line}");
        }
    }
    let _ = writeln!(s, "        }}\n    }}");
    let _ = writeln!(s, "    switch (params.field0) {{");
    // One case per row width: the arguments of a width store alike.
    let mut widths: Vec<usize> = grad_fields.iter().map(|(_, at)| at.len()).collect();
    widths.sort_unstable();
    widths.dedup();
    for w in widths {
        let cases: Vec<String> = grad_fields
            .iter()
            .filter(|(_, at)| at.len() == w)
            .map(|(k, _)| format!("{k}u"))
            .collect();
        let _ = writeln!(
            s,
            "        case {}: {{\n            let sink_at = row * {w}u;",
            cases.join(", ")
        );
        for j in 0..w {
            let at = match j {
                0 => "sink_at".to_string(),
                _ => format!("sink_at + {j}u"),
            };
            let _ = writeln!(s, "            sink[{at}] = {};", acc(j as u32));
        }
        let _ = writeln!(s, "        }}");
    }
    let _ = writeln!(s, "        default: {{}}\n    }}\n}}");
}
