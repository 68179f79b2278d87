//! The arguments of a gathered kernel (see [`abi::FIELDS_BINDING`]): each per-element
//! argument read from a buffer of its own, at the element's row or at the row its index
//! names, so that a launch whose arguments come from parameter blocks needs no pass that
//! assembles argument rows first.

use super::COMPONENTS;
use super::body::Ctx;
use super::plan::KernelPlan;
use crate::abi::{self, ArgLayout};
use crate::names::{Taken, fresh, sanitize};
use crate::signature::Precision;
use std::fmt::Write;

/// One argument of a gathered kernel: its buffers' names and where its words go.
pub(super) struct FieldNames {
    /// Its rows (`array<f32>` or a vector view).
    rows: String,
    /// Its index array.
    index: String,
    /// The row the element reads.
    row: String,
    /// Its first IR input.
    pub(super) first: u32,
    /// Its words per row.
    pub(super) words: u32,
    /// Words per load (see [`abi::vector_lanes`]).
    lanes: u32,
    /// The name of each vector load of its row, where `lanes > 1`.
    loads: Vec<String>,
}

/// The names of every per-element argument's buffers, taken so that no value of the body
/// is named alike.
pub(super) fn field_names(layout: &ArgLayout, taken: &mut Taken) -> Vec<FieldNames> {
    layout
        .fields()
        .into_iter()
        .map(|slot| {
            let base = sanitize(&slot.name);
            let words = slot.len.unwrap_or(1) as u32;
            let lanes = abi::vector_lanes(words);
            // Fresh, so that an argument named like a kernel's own name (`adjoint`, whose
            // `adjoint_rows` is an entry point) or like another's buffers renames its own.
            let rows = fresh(taken, &format!("{base}_rows"));
            let loads = match lanes {
                1 => Vec::new(),
                _ => (0..words / lanes)
                    .map(|c| fresh(taken, &format!("{rows}_{c}")))
                    .collect(),
            };
            FieldNames {
                index: fresh(taken, &format!("{base}_index")),
                row: fresh(taken, &format!("{base}_row")),
                rows,
                first: layout.first_input(slot),
                words,
                lanes,
                loads,
            }
        })
        .collect()
}

/// The loads of the words the body uses: per argument its row (from its index where its
/// bit of `params.gathered` is set), then its words, several to a vector load.
pub(super) fn emit_field_loads(
    plan: &KernelPlan,
    fields: &[FieldNames],
    ctx: &Ctx,
    body: &mut String,
) {
    let elem = plan.element();
    for (bit, f) in fields.iter().enumerate() {
        let used = |w: u32| plan.loads[(f.first + w) as usize];
        if !(0..f.words).any(|w| used(w).is_some()) {
            continue;
        }
        let _ = writeln!(
            body,
            "    var {row} = {elem};\n    if ((params.gathered & {mask}u) != 0u) {{\n        \
             {row} = {index}[{elem}];\n    }}",
            row = f.row,
            mask = 1u32 << bit,
            index = f.index,
        );
        let chunks = f.words / f.lanes;
        for chunk in 0..chunks {
            let loaded: Vec<(u32, usize)> = (chunk * f.lanes..(chunk + 1) * f.lanes)
                .filter_map(|w| used(w).map(|node| (w, node)))
                .collect();
            if loaded.is_empty() {
                continue;
            }
            let at = match (chunks, chunk) {
                (1, _) => f.row.clone(),
                (_, 0) => format!("{} * {chunks}u", f.row),
                _ => format!("{} * {chunks}u + {chunk}u", f.row),
            };
            if f.lanes == 1 {
                let name = &ctx.names[loaded[0].1];
                let _ = writeln!(body, "    let {name} = {}[{at}];", f.rows);
            } else {
                let load = &f.loads[chunk as usize];
                let _ = writeln!(body, "    let {load} = {}[{at}];", f.rows);
                for (w, node) in loaded {
                    let c = COMPONENTS[(w % f.lanes) as usize];
                    let _ = writeln!(body, "    let {} = {load}.{c};", ctx.names[node]);
                }
            }
        }
    }
}

/// The bindings of the arguments' rows and indices.
pub(super) fn field_declarations(fields: &[FieldNames], precision: Precision, s: &mut String) {
    for (k, f) in fields.iter().enumerate() {
        let (rows, index) = abi::field_bindings(k as u32);
        let _ = writeln!(
            s,
            "@group(0) @binding({rows}) var<storage, read> {}: array<{}>;",
            f.rows,
            abi::vector_type(f.lanes, precision)
        );
        let _ = writeln!(
            s,
            "@group(0) @binding({index}) var<storage, read> {}: array<u32>;",
            f.index
        );
    }
}

/// The header's lines on where each argument's words are.
pub(super) fn field_header(layout: &ArgLayout, fields: &[FieldNames], s: &mut String) {
    for (bit, f) in fields.iter().enumerate() {
        let at = if f.words == 1 {
            format!("{}[r]", f.rows)
        } else {
            format!("{}[{}r ..]", f.rows, f.words)
        };
        let words = layout.words_label(f.first, f.first + f.words);
        let _ = writeln!(s, "//   {at}: {words} (bit {bit}: r = {}[i])", f.index);
    }
}
