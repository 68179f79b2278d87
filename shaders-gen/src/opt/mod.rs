//! Optimization: constant folding, algebraic identities that hold in IEEE arithmetic,
//! common-subexpression elimination (by rebuilding through a hash-consing [`Builder`]) and
//! dead-code elimination.
//!
//! Identities that change IEEE results are not applied: `x * 0` stays (it is NaN for an
//! infinite `x`), `x - x` stays. The AD transforms never create a term for a derivative that
//! is zero by definition, so those products do not arise from differentiation.

mod checkpoint;
pub mod recompute;
mod schedule;

pub use checkpoint::{MAX_TAPE_WORDS, checkpoint_long_loops};
pub use schedule::{for_value_kernel, max_live, max_live_within, outputs_in_groups};

use crate::ir::{Builder, Function, IntOp, LoopKind, Op, ValueId};
use crate::ops::Func;
use std::collections::HashMap;

/// Folds, simplifies, shares and prunes `f`. The result computes the same outputs.
pub fn optimize(f: &Function) -> Function {
    prune(&simplify(f))
}

fn simplify(f: &Function) -> Function {
    let mut b = Builder::like(f);
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    let mut known = HashMap::new();
    for node in &f.nodes {
        let m = |v: &ValueId| map[v.index()];
        let span = node.span;
        let id = match &node.op {
            Op::Input(w) => b.input(*w, span, node.name.clone()),
            Op::Const(c) => b.constant(*c, span),
            Op::Call(func, args) => {
                let args: Vec<ValueId> = args.iter().map(m).collect();
                let id = fold_call(&mut b, *func, args, span);
                if let Some(name) = &node.name {
                    b.name(id, name);
                }
                id
            }
            Op::Cmp(c, x, y) => b.cmp(*c, m(x), m(y), span),
            Op::Not(x) => match b.node(m(x)).op {
                Op::Not(inner) => inner,
                _ => b.not(m(x), span),
            },
            Op::And(x, y) if m(x) == m(y) => m(x),
            Op::Or(x, y) if m(x) == m(y) => m(x),
            Op::And(x, y) => b.and(m(x), m(y), span),
            Op::Or(x, y) => b.or(m(x), m(y), span),
            Op::Int(v) => b.int(*v, span),
            Op::IntBin(o, x, y) => {
                let int = |b: &Builder, v: ValueId| match b.node(v).op {
                    Op::Int(c) => Some(c),
                    _ => None,
                };
                match (int(&b, m(x)), int(&b, m(y)), o) {
                    (Some(p), Some(q), _) => b.int(o.apply(p, q), span),
                    (_, Some(0), IntOp::Add | IntOp::Sub) => m(x),
                    (Some(0), _, IntOp::Add) => m(y),
                    (_, Some(1), IntOp::Mul) => m(x),
                    (Some(1), _, IntOp::Mul) => m(y),
                    _ => b.push(Op::IntBin(*o, m(x), m(y)), span, None),
                }
            }
            Op::IntToF32(x) => match b.node(m(x)).op {
                Op::Int(c) => b.constant(c as f64, span),
                _ => b.push(Op::IntToF32(m(x)), span, node.name.clone()),
            },
            Op::Loop(l) => {
                let mut op = node.op.map_operands(|v| map[v.index()]);
                if let Op::Loop(nl) = &mut op {
                    nl.body = optimize(&l.body);
                }
                b.push(op, span, node.name.clone())
            }
            Op::Result(l, k) => b.push(Op::Result(m(l), *k), span, node.name.clone()),
            Op::CustomGrad { .. }
            | Op::ArrayNew(_)
            | Op::ArrayGet { .. }
            | Op::ArraySet { .. }
            | Op::ArrayAdd(..) => b.push(
                node.op.map_operands(|v| map[v.index()]),
                span,
                node.name.clone(),
            ),
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let (c, mut t, mut o) = (m(cond), m(then), m(otherwise));
                // Under `c`, `select(c, a, _)` is `a`; under `!c` it is the other one.
                if let Op::Select { cond, then, .. } = b.node(t).op
                    && cond == c
                {
                    t = then;
                }
                if let Op::Select {
                    cond, otherwise, ..
                } = b.node(o).op
                    && cond == c
                {
                    o = otherwise;
                }
                if t == o {
                    t
                } else if let Some(known) = known_bool(&b, c, &mut known) {
                    if known { t } else { o }
                } else if let Op::Not(inner) = b.node(c).op {
                    // `select(!c, t, o)` is `select(c, o, t)`: one node for both spellings.
                    b.select(inner, o, t, span)
                } else {
                    b.select(c, t, o, span)
                }
            }
        };
        map.push(id);
    }
    let outputs = f.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(outputs)
}

/// The value of a condition that does not depend on the inputs (comparisons of constants,
/// as unrolled loops leave behind: `2 == 1`), if it is one. `known` keeps the answer of
/// every condition asked about: conditions share their parts, and a walk of the tree they
/// spell would be exponential in their depth.
fn known_bool(b: &Builder, v: ValueId, known: &mut HashMap<ValueId, Option<bool>>) -> Option<bool> {
    if let Some(&k) = known.get(&v) {
        return k;
    }
    let number = |v: ValueId| match b.node(v).op {
        Op::Const(c) => Some(c),
        Op::Int(i) => Some(i as f64),
        _ => None,
    };
    let k = match b.node(v).op {
        Op::Cmp(c, x, y) => number(x).zip(number(y)).map(|(x, y)| c.apply(x, y)),
        Op::Not(x) => known_bool(b, x, known).map(|k| !k),
        Op::And(x, y) => match (known_bool(b, x, known), known_bool(b, y, known)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Op::Or(x, y) => match (known_bool(b, x, known), known_bool(b, y, known)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        _ => None,
    };
    known.insert(v, k);
    k
}

fn fold_call(b: &mut Builder, func: Func, args: Vec<ValueId>, span: proc_macro2::Span) -> ValueId {
    let consts: Option<Vec<f64>> = args.iter().map(|a| b.const_value(*a)).collect();
    if let Some(vals) = consts {
        return b.constant(func.eval(&vals), span);
    }
    let c = |i: usize| b.const_value(args[i]);
    let neg_arg = |b: &Builder, v: ValueId| match &b.node(v).op {
        Op::Call(Func::Neg, inner) => Some(inner[0]),
        _ => None,
    };
    match func {
        Func::Add if c(1) == Some(0.0) => return args[0],
        Func::Add if c(0) == Some(0.0) => return args[1],
        Func::Add => {
            if let Some(y) = neg_arg(b, args[1]) {
                return b.call(Func::Sub, vec![args[0], y], span);
            }
            if let Some(x) = neg_arg(b, args[0]) {
                return b.call(Func::Sub, vec![args[1], x], span);
            }
        }
        Func::Sub if c(1) == Some(0.0) => return args[0],
        Func::Sub if c(0) == Some(0.0) => return b.call(Func::Neg, vec![args[1]], span),
        Func::Sub => {
            if let Some(y) = neg_arg(b, args[1]) {
                return b.call(Func::Add, vec![args[0], y], span);
            }
        }
        Func::Mul if c(1) == Some(1.0) => return args[0],
        Func::Mul if c(0) == Some(1.0) => return args[1],
        Func::Mul if c(1) == Some(-1.0) => return b.call(Func::Neg, vec![args[0]], span),
        Func::Mul if c(0) == Some(-1.0) => return b.call(Func::Neg, vec![args[1]], span),
        Func::Mul => {
            // (-x) * (-y) = x * y; (-x) * y = -(x * y): keeps negations outermost, where
            // they fold into a subtraction.
            match (neg_arg(b, args[0]), neg_arg(b, args[1])) {
                (Some(x), Some(y)) => return b.call(Func::Mul, vec![x, y], span),
                (Some(x), None) => {
                    let p = b.call(Func::Mul, vec![x, args[1]], span);
                    return b.call(Func::Neg, vec![p], span);
                }
                (None, Some(y)) => {
                    let p = b.call(Func::Mul, vec![args[0], y], span);
                    return b.call(Func::Neg, vec![p], span);
                }
                (None, None) => {}
            }
        }
        Func::Div if c(1) == Some(1.0) => return args[0],
        Func::Neg => {
            if let Some(x) = neg_arg(b, args[0]) {
                return x;
            }
        }
        _ => {}
    }
    b.call(func, args, span)
}

/// The most operations (counted per iteration, [`Function::dynamic_op_count`]) a loop nest
/// may execute and still be unrolled by [`unroll_indexed_loops`].
///
/// Only the kernels are unrolled (the CPU versions keep their loops: see
/// [`crate::CpuIr`]). 2,048 bounds the straight-line code a kernel gets from one nest; it
/// dates from when the CPU versions were unrolled too, and rustc crashed (SIGSEGV in
/// LLVM's debug info, debug builds) on a reverse pass unrolled from 3,200 operations.
/// `tests/shared.rs` compiles and runs a nest just under this budget.
pub const UNROLL_BUDGET: usize = 2048;

/// Unrolls the loops whose bodies index an array at a computed index, when the whole nest
/// executes at most [`UNROLL_BUDGET`] operations; every other loop stays a loop.
///
/// An index computed from a loop index costs a memory access in a loop: the array lives
/// in function memory, not registers, and its adjoint is an array too. Unrolled, every
/// index is a constant, the read folds to the element itself, the array disappears into
/// registers and the adjoint adds into one word. The budget
/// keeps the promise that code does not grow with the trip count beyond a fixed size:
/// long loops, and loops without computed indices, stay loops.
pub fn unroll_indexed_loops(f: &Function) -> Function {
    optimize(&unroll(f, &|_, _| false, &|_, _| false))
}

/// The most operations the top-level loop nests of a value kernel that
/// [`unroll_indexed_loops_wider`]'s `wider` picks may execute, all together, and still be
/// unrolled: an 8-64-64-1 network's layers (about 20,000 operations), not an
/// 8-128-128-1's (about 80,000), nor all three of an 8-64-64-64-1's. A budget for each nest
/// alone let code grow with a network's depth: the 8-64-64-64-1's value kernel was 953 KB
/// of WGSL, 13.7 s to build on lavapipe against 4.4 s for the 8-64-64-1's.
pub const VALUE_UNROLL_BUDGET: usize = 32_768;

/// [`unroll_indexed_loops`], but top-level nests for which `wider(f, loop)` holds are
/// unrolled up to [`VALUE_UNROLL_BUDGET`] operations in all, first come first unrolled.
pub fn unroll_indexed_loops_wider(
    f: &Function,
    wider: &dyn Fn(&Function, &crate::ir::Loop) -> bool,
) -> Function {
    optimize(&unroll(f, &|_, _| false, wider))
}

/// [`unroll_indexed_loops`], but the top-level loops for which `keep(f, loop)` holds stay
/// loops (`keep` is asked only of a loop the budget would unroll).
pub fn unroll_indexed_loops_keeping(
    f: &Function,
    keep: &dyn Fn(&Function, &crate::ir::Loop) -> bool,
) -> Function {
    optimize(&unroll(f, keep, &|_, _| false))
}

/// Unrolls `f`'s loops as [`unroll_indexed_loops`] says, but for the top-level ones that
/// `keep` (asked only of a loop the budget would unroll) keeps, and for the top-level ones
/// that `wider` picks, unrolled up to [`VALUE_UNROLL_BUDGET`].
fn unroll(
    f: &Function,
    keep: &dyn Fn(&Function, &crate::ir::Loop) -> bool,
    wider: &dyn Fn(&Function, &crate::ir::Loop) -> bool,
) -> Function {
    let mut b = Builder::like(f);
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    // The final carried values of each unrolled loop, by its node.
    let mut unrolled: Vec<Option<Vec<ValueId>>> = vec![None; f.nodes.len()];
    // Operations of the nests unrolled past the base budget so far.
    let mut wider_spent = 0;
    for (i, node) in f.nodes.iter().enumerate() {
        let m = |v: ValueId| map[v.index()];
        let id = match &node.op {
            Op::Loop(l) => {
                let body = unroll(&l.body, &|_, _| false, &|_, _| false);
                let indexes = body.nodes.iter().any(|n| match n.op {
                    Op::ArrayGet { index, .. } | Op::ArraySet { index, .. } => {
                        !matches!(body.node(index).op, Op::Int(_))
                    }
                    _ => false,
                });
                let cost = l.trip_count() as usize * body.dynamic_op_count();
                let widened = cost > UNROLL_BUDGET
                    && wider_spent + cost <= VALUE_UNROLL_BUDGET
                    && wider(f, l);
                let within = cost <= UNROLL_BUDGET || widened;
                if l.kind == LoopKind::Forward && indexes && within && !keep(f, l) {
                    if widened {
                        wider_spent += cost;
                    }
                    let init: Vec<ValueId> = l.init.iter().map(|v| m(*v)).collect();
                    let captures: Vec<ValueId> = l.captures.iter().map(|v| m(*v)).collect();
                    let trips = (l.start..l.end, node.span);
                    unrolled[i] = Some(inline_trips(&mut b, &body, trips, init, &captures));
                    // The loop node itself is never read but through its results.
                    b.constant(0.0, node.span)
                } else {
                    let mut op = node.op.map_operands(m);
                    if let Op::Loop(nl) = &mut op {
                        nl.body = body;
                    }
                    b.push(op, node.span, node.name.clone())
                }
            }
            Op::Result(l, k) if unrolled[l.index()].is_some() => {
                let finals = unrolled[l.index()].as_deref().unwrap_or_default();
                unrolled_result(&mut b, finals, *k, node.name.as_deref())
            }
            op => b.push(op.map_operands(m), node.span, node.name.clone()),
        };
        map.push(id);
    }
    let outputs = f.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(outputs)
}

/// What `Op::Result(l, k)` reads once loop `l` is unrolled: the `k`th of its final
/// carried values `finals`, under the result's name.
pub(crate) fn unrolled_result(
    b: &mut Builder,
    finals: &[ValueId],
    k: u32,
    name: Option<&str>,
) -> ValueId {
    let id = finals[k as usize];
    if let Some(name) = name {
        b.name(id, name);
    }
    id
}

/// The carried values after `body`'s trips `indexes` (a forward loop's body: inputs the
/// index, the carried values, the captures), copied into `b` one trip after another from
/// `carried`.
pub(crate) fn inline_trips(
    b: &mut Builder,
    body: &Function,
    (indexes, span): (std::ops::Range<i64>, proc_macro2::Span),
    mut carried: Vec<ValueId>,
    captures: &[ValueId],
) -> Vec<ValueId> {
    for index in indexes {
        let inputs: Vec<ValueId> = std::iter::once(b.int(index, span))
            .chain(carried.iter().copied())
            .chain(captures.iter().copied())
            .collect();
        let values = crate::ad::inline(body, b, &inputs, false);
        carried = body.outputs.iter().map(|o| values[o.index()]).collect();
    }
    carried
}

/// Whether a reverse loop's body uses any of its taped inputs (its last ones).
pub fn reads_tape(l: &crate::ir::Loop) -> bool {
    match l.kind {
        LoopKind::Reverse { taped, .. } => {
            let used = l.body.used_inputs();
            used[used.len() - taped as usize..].iter().any(|u| *u)
        }
        _ => false,
    }
}

/// Drops nodes no output depends on.
fn prune(f: &Function) -> Function {
    let mut live = vec![false; f.nodes.len()];
    for o in &f.outputs {
        live[o.index()] = true;
    }
    for i in (0..f.nodes.len()).rev() {
        if live[i] {
            for v in f.nodes[i].op.operands() {
                live[v.index()] = true;
            }
        }
    }
    // Recording loops whose tape no live reverse loop reads run as plain loops: the
    // per-case choice between recording and not. A reverse loop whose body does not use
    // the carried values (`s += x[i] * w[i]`: its adjoint needs only `x` and `w`) needs no
    // tape at all.
    let read_tapes: Vec<ValueId> = f
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| live[*i])
        .filter_map(|(_, n)| match &n.op {
            Op::Loop(l) => match l.kind {
                LoopKind::Reverse { tape, .. } if reads_tape(l) => Some(tape),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let mut b = Builder::like(f);
    let mut map: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let mut op = node
            .op
            .map_operands(|v| map[v.index()].expect("operands of live nodes are live"));
        if let Op::Loop(l) = &mut op
            && l.kind == LoopKind::Recording
            && !read_tapes.contains(&crate::ir::ValueId(i as u32))
        {
            l.kind = LoopKind::Forward;
        }
        map[i] = Some(b.push(op, node.span, node.name.clone()));
    }
    let outputs = f
        .outputs
        .iter()
        .map(|o| map[o.index()].expect("outputs are live"))
        .collect();
    b.finish(outputs)
}
