//! Values the same for the whole batch, computed once per workgroup.
//!
//! A value computed from `#[shared]` words and constants alone is the same in every
//! element: a softmax's maximum and exponentials over shared logits, a normalization of
//! shared weights. A kernel that computes it in every thread does the batch's work once
//! per element. Where such values cost at least [`HOIST_MIN_COST`] FMAs, the kernel
//! computes them in its workgroup's first thread, before anything else, hands them to the
//! others through workgroup memory, and the body reads them from there: the same
//! operations in the same order, so the same bits.
//!
//! Only top-level scalar values are taken (a loop's results are per element, and an array
//! has no slot); a boolean goes through its slot as `0.0` or `1.0`. Value and tangent
//! kernels hoist (a tangent kernel's shared tangent is the same for every element too),
//! and so do adjoints, once before the loop over their runs, where they move no element
//! rows or gradients through workgroup memory: the reverse pass reads the hoisted values
//! (a maximum's ties route its adjoint), and an adjoint that stages its element's words
//! measured level or 1.3x slower with them, where the others gained up to 2.5x
//! (BENCHMARKS.md, "Shared values hoisted in adjoints").

use super::body::{Ctx, uniform_nodes};
use super::float_literal;
use super::loads::shared_word_read;
use super::plan::KernelPlan;
use crate::abi::KernelKind;
use crate::ir::{Function, Op, Ty};
use crate::names::{HOISTED_ARRAY, Taken};
use std::collections::BTreeSet;
use std::fmt::Write;

/// The least cost, in FMAs ([`crate::ops::Func::gpu_cost`]), of the values a kernel hoists:
/// below it, the workgroup's barrier and the reads back cost more than they save.
pub const HOIST_MIN_COST: f64 = 16.0;

/// The nodes a kernel computes once per workgroup, and those of them the rest of the
/// kernel reads (each a slot of [`HOISTED_ARRAY`], in this order).
#[derive(Debug)]
pub(super) struct Hoisted {
    /// Computed in the prologue, skipped by the body.
    pub nodes: BTreeSet<usize>,
    /// Read by the body (or a result of the function).
    pub exported: Vec<usize>,
}

/// The nodes of `f` the kernel of `plan` hoists, if any: top-level `F32` and `Bool` values
/// computed from shared words and constants alone, each of whose operands is hoisted too
/// (or a shared word, or a constant), costing at least [`HOIST_MIN_COST`] in all.
pub(super) fn hoisted(plan: &KernelPlan, f: &Function) -> Option<Hoisted> {
    let layout = plan.layout;
    // A tangent kernel's shared words include the shared tangent (`tangent_layout`): the
    // same for every element too.
    let kind_takes = match plan.kind {
        KernelKind::Forward | KernelKind::Tangent => true,
        KernelKind::Adjoint => !stages_element_words(plan),
        KernelKind::Jacobian | KernelKind::Hessian => false,
    };
    if !kind_takes || plan.gathered || layout.shared_words == 0 {
        return None;
    }
    let (words, shared) = (layout.words as usize, layout.shared_words as usize);
    let inputs: Vec<bool> = (0..f.num_inputs as usize)
        .map(|w| w >= words && w < words + shared)
        .collect();
    let uniform = uniform_nodes(f, &inputs);
    let nodes = closed_uniform_nodes(f, &uniform);
    let exported = exported(f, &nodes);
    let cost: f64 = (nodes.iter())
        .map(|&i| match &f.nodes[i].op {
            Op::Call(func, _) => func.gpu_cost(),
            _ => 0.0,
        })
        .sum();
    if cost < HOIST_MIN_COST {
        return None;
    }
    Some(Hoisted { nodes, exported })
}

/// Whether the kernel of `plan` moves element rows or gradients through workgroup memory,
/// where hoisted values would be read beside them.
fn stages_element_words(plan: &KernelPlan) -> bool {
    plan.staged || plan.grads_in_reduce_stage.is_some() || plan.row_stage.is_some() || plan.chunked
}

/// The top-level `F32` and `Bool` computations `uniform` marks, each of whose operands is a
/// shared word, a constant or one of them (one pass: the nodes are in order).
fn closed_uniform_nodes(f: &Function, uniform: &[bool]) -> BTreeSet<usize> {
    let leaf = |op: &Op| matches!(op, Op::Input(_) | Op::Const(_) | Op::Int(_));
    let mut nodes = BTreeSet::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let takes = uniform[i]
            && matches!(node.ty, Ty::F32 | Ty::Bool)
            && matches!(
                node.op,
                Op::Call(..)
                    | Op::Cmp(..)
                    | Op::Not(_)
                    | Op::And(..)
                    | Op::Or(..)
                    | Op::Select { .. }
            )
            && (node.op.operands().iter())
                .all(|v| nodes.contains(&v.index()) || leaf(&f.node(*v).op));
        if takes {
            nodes.insert(i);
        }
    }
    nodes
}

/// The nodes of `nodes` read by a node outside them, or results of `f`.
fn exported(f: &Function, nodes: &BTreeSet<usize>) -> Vec<usize> {
    let mut read = vec![false; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        if !nodes.contains(&i) {
            for v in node.op.operands() {
                read[v.index()] = true;
            }
        }
    }
    for o in &f.outputs {
        read[o.index()] = true;
    }
    nodes.iter().copied().filter(|&i| read[i]).collect()
}

/// The prologue of a kernel that hoists `h`: the first thread loads the shared words the
/// hoisted nodes read, computes them and stores those the body reads; past a barrier,
/// every thread reads them back under their names. Marks the nodes for the body to skip.
/// Written before the kernel's bounds check (an adjoint's: before its loop over its runs),
/// so that every thread reaches the barrier.
pub(super) fn emit_prologue(
    plan: &KernelPlan,
    ctx: &mut Ctx,
    h: &Hoisted,
    taken: &mut Taken,
    helpers: &mut BTreeSet<&'static str>,
) -> String {
    let f = ctx.f;
    let mut s = String::from(
        "    // Values of the shared words alone, the same for every element: computed once\n    \
         // per workgroup, by its first thread.\n    if (lid == 0u) {\n",
    );
    let words = plan.layout.words as usize;
    let shared_loads = &plan.loads[words..words + plan.layout.shared_words as usize];
    let read: BTreeSet<usize> = (h.nodes.iter())
        .flat_map(|&i| f.nodes[i].op.operands())
        .map(|v| v.index())
        .collect();
    for (k, load) in shared_loads.iter().enumerate() {
        if let Some(j) = load
            && read.contains(j)
        {
            let _ = writeln!(
                s,
                "        let {} = {};",
                ctx.names[*j],
                shared_word_read(plan, k as u32)
            );
        }
    }
    for &i in &h.nodes {
        ctx.emit_single(i, taken, "        ", &mut s, helpers);
    }
    let t = plan.layout.precision;
    let (zero, one) = (float_literal(0.0, t), float_literal(1.0, t));
    for (slot, &i) in h.exported.iter().enumerate() {
        let name = &ctx.names[i];
        let _ = match f.nodes[i].ty {
            Ty::Bool => writeln!(
                s,
                "        {HOISTED_ARRAY}[{slot}] = select({zero}, {one}, {name});"
            ),
            _ => writeln!(s, "        {HOISTED_ARRAY}[{slot}] = {name};"),
        };
    }
    s.push_str("    }\n    workgroupBarrier();\n");
    for (slot, &i) in h.exported.iter().enumerate() {
        let name = &ctx.names[i];
        let _ = match f.nodes[i].ty {
            Ty::Bool => writeln!(s, "    let {name} = {HOISTED_ARRAY}[{slot}] != {zero};"),
            _ => writeln!(s, "    let {name} = {HOISTED_ARRAY}[{slot}];"),
        };
    }
    ctx.skip.extend(h.nodes.iter().copied());
    ctx.hoisted.extend(h.nodes.iter().copied());
    s
}
