//! Automatic differentiation on the IR: forward (tangent) and reverse (adjoint) transforms.
//!
//! Both transforms take a [`Function`] and return a new one that computes the primal
//! outputs and the derivatives, built through a [`Builder`] (so shared subexpressions of
//! primal and derivative code are computed once). Partial derivatives come from
//! [`Func::partials`](crate::ops::Func::partials), the one table both modes read.

use crate::ir::{Builder, Function, Op, ValueId};
use crate::ops::Func;

/// Copies `f`'s nodes into `b`, returning the new id of each old node.
fn copy_primal(f: &Function, b: &mut Builder, input_offset: u32) -> Vec<ValueId> {
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    for node in &f.nodes {
        let op = match &node.op {
            Op::Input(w) => Op::Input(w + input_offset),
            op => op.map_operands(|v| map[v.index()]),
        };
        let id = b.push(op, node.span, node.name.clone());
        map.push(id);
    }
    map
}

/// `acc + term`, where a missing accumulator is zero.
fn accumulate(
    b: &mut Builder,
    acc: Option<ValueId>,
    term: ValueId,
    span: proc_macro2::Span,
) -> ValueId {
    match acc {
        None => term,
        Some(a) => b.call(Func::Add, vec![a, term], span),
    }
}

fn is_zero(b: &Builder, v: ValueId) -> bool {
    b.const_value(v) == Some(0.0)
}

/// When a node's adjoint flows: always, or only where a condition (a bool in the output
/// function) holds.
#[derive(Clone, Copy, PartialEq)]
enum Guard {
    Always,
    When(ValueId),
}

fn guard_or(b: &mut Builder, g: Option<Guard>, h: Guard, span: proc_macro2::Span) -> Guard {
    match (g, h) {
        (None, h) => h,
        (Some(Guard::Always), _) | (_, Guard::Always) => Guard::Always,
        (Some(Guard::When(x)), Guard::When(y)) if x == y => Guard::When(x),
        (Some(Guard::When(x)), Guard::When(y)) => {
            let either = b.or(x, y, span);
            if is_tautology(b, either) {
                Guard::Always
            } else {
                Guard::When(either)
            }
        }
    }
}

/// Whether a condition built of `! && ||` over comparisons holds whatever the comparisons
/// give: a value used on every path of an `if`/`else` chain gets the guard `c || !c` (or
/// longer), and needs no mask. Decided by the truth table over its atoms; conditions with
/// more than [`MAX_ATOMS`] atoms are taken as not always true (masking stays correct).
fn is_tautology(b: &Builder, cond: ValueId) -> bool {
    const MAX_ATOMS: usize = 10;
    fn atoms(b: &Builder, v: ValueId, out: &mut Vec<ValueId>) -> bool {
        match b.node(v).op {
            Op::Not(a) => atoms(b, a, out),
            Op::And(x, y) | Op::Or(x, y) => atoms(b, x, out) && atoms(b, y, out),
            _ => {
                if !out.contains(&v) {
                    out.push(v);
                }
                out.len() <= MAX_ATOMS
            }
        }
    }
    fn holds(b: &Builder, v: ValueId, atoms: &[ValueId], bits: u32) -> bool {
        match b.node(v).op {
            Op::Not(a) => !holds(b, a, atoms, bits),
            Op::And(x, y) => holds(b, x, atoms, bits) && holds(b, y, atoms, bits),
            Op::Or(x, y) => holds(b, x, atoms, bits) || holds(b, y, atoms, bits),
            _ => {
                let k = atoms.iter().position(|a| *a == v).unwrap_or(0);
                bits & (1 << k) != 0
            }
        }
    }
    let mut list = Vec::new();
    atoms(b, cond, &mut list) && (0..1u32 << list.len()).all(|bits| holds(b, cond, &list, bits))
}

fn guard_and(b: &mut Builder, g: Guard, c: ValueId, span: proc_macro2::Span) -> Guard {
    match g {
        Guard::Always => Guard::When(c),
        Guard::When(x) => Guard::When(b.and(x, c, span)),
    }
}

/// Reverse mode for a function with one output.
///
/// The result has the same inputs and the outputs `[value, d value / d input_0, ...]`:
/// one gradient per input word, in input order. Adjoints are accumulated sparsely: a value
/// that does not influence the output gets no adjoint node, and a partial derivative that
/// is identically zero (`floor`, `signum`, ...) contributes no term, so no `0 * inf` NaN
/// can appear from a derivative that is zero by definition.
///
/// `if`/`else` arrives as [`Op::Select`], both branches computed. The branch not taken may
/// hold NaN or infinite partials (`if x > 0.0 { x.sqrt() } else { 0.0 }` at `x = -1`), and
/// a zero adjoint times a NaN partial is NaN. So each node carries a guard, the condition
/// under which its adjoint flows at all (the `or` over its uses of the use's guard `and`
/// the select condition on the way); every term a guarded node sends to its operands is
/// `select(term, 0, guard)`. Nodes used unconditionally cost nothing extra (a guard that
/// always holds, such as `c || !c`, is recognized), and the derivative is exactly that of
/// the branch taken.
pub fn reverse(f: &Function) -> Function {
    assert_eq!(f.outputs.len(), 1, "reverse mode seeds one scalar output");
    let mut b = Builder::new(f.num_inputs);
    let map = copy_primal(f, &mut b, 0);
    let out = f.outputs[0];
    let mut adj: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    let mut guard: Vec<Option<Guard>> = vec![None; f.nodes.len()];
    adj[out.index()] = Some(b.constant(1.0, f.node(out).span));
    guard[out.index()] = Some(Guard::Always);
    let mut input_adj: Vec<Option<ValueId>> = vec![None; f.num_inputs as usize];
    for i in (0..f.nodes.len()).rev() {
        let Some(a) = adj[i] else { continue };
        let g = guard[i].unwrap_or(Guard::Always);
        let node = &f.nodes[i];
        let span = node.span;
        if let Some(name) = &node.name {
            b.name(a, &format!("d_{name}"));
        }
        match &node.op {
            Op::Input(w) => input_adj[*w as usize] = Some(a),
            Op::Const(_) | Op::Cmp(..) | Op::Not(_) | Op::And(..) | Op::Or(..) => {}
            Op::Call(func, args) => {
                let margs: Vec<ValueId> = args.iter().map(|v| map[v.index()]).collect();
                let partials = func.partials(&mut b, &margs, map[i], span);
                for (arg, p) in args.iter().zip(partials) {
                    if is_zero(&b, p) {
                        continue;
                    }
                    let mut term = b.call(Func::Mul, vec![a, p], span);
                    if let Guard::When(c) = g {
                        let zero = b.constant(0.0, span);
                        term = b.select(c, term, zero, span);
                    }
                    adj[arg.index()] = Some(accumulate(&mut b, adj[arg.index()], term, span));
                    guard[arg.index()] = Some(guard_or(&mut b, guard[arg.index()], g, span));
                }
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let zero = b.constant(0.0, span);
                let c = map[cond.index()];
                let not_c = b.not(c, span);
                for (branch, taken) in [(then, c), (otherwise, not_c)] {
                    let (t, e) = if taken == c { (a, zero) } else { (zero, a) };
                    let to_branch = b.select(c, t, e, span);
                    adj[branch.index()] =
                        Some(accumulate(&mut b, adj[branch.index()], to_branch, span));
                    let h = guard_and(&mut b, g, taken, span);
                    guard[branch.index()] = Some(guard_or(&mut b, guard[branch.index()], h, span));
                }
            }
        }
    }
    let span = f.node(out).span;
    let mut outputs = vec![map[out.index()]];
    for a in input_adj {
        outputs.push(a.unwrap_or_else(|| b.constant(0.0, span)));
    }
    b.finish(outputs)
}

/// Forward mode: the result takes `2 * n` inputs (the primal words, then one tangent word
/// per primal word) and has the outputs `[outputs..., tangent of each output...]`.
pub fn forward(f: &Function) -> Function {
    forward_active(f, &vec![true; f.num_inputs as usize])
}

/// Forward mode with tangents only for the inputs marked in `active` (the others, such as
/// `#[constant]` arguments, have tangent zero): the result takes the primal words, then one
/// tangent word per active input, in order.
pub fn forward_active(f: &Function, active: &[bool]) -> Function {
    let n = f.num_inputs;
    let mut tangent_input = Vec::with_capacity(active.len());
    let mut k = n;
    for &a in active {
        tangent_input.push(a.then(|| {
            k += 1;
            k - 1
        }));
    }
    let mut b = Builder::new(k);
    let map = copy_primal(f, &mut b, 0);
    let mut tan: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        let span = node.span;
        let t = match &node.op {
            Op::Input(w) => tangent_input[*w as usize].map(|t| {
                let name = node.name.as_ref().map(|s| format!("t_{s}"));
                b.input(t, span, name)
            }),
            Op::Const(_) | Op::Cmp(..) | Op::Not(_) | Op::And(..) | Op::Or(..) => None,
            Op::Call(func, args) => {
                let margs: Vec<ValueId> = args.iter().map(|v| map[v.index()]).collect();
                let partials = func.partials(&mut b, &margs, map[i], span);
                let mut acc = None;
                for (arg, p) in args.iter().zip(partials) {
                    if let Some(ta) = tan[arg.index()]
                        && !is_zero(&b, p)
                    {
                        let term = b.call(Func::Mul, vec![p, ta], span);
                        acc = Some(accumulate(&mut b, acc, term, span));
                    }
                }
                acc
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => match (tan[then.index()], tan[otherwise.index()]) {
                (None, None) => None,
                (t, o) => {
                    let zero = b.constant(0.0, span);
                    Some(b.select(
                        map[cond.index()],
                        t.unwrap_or(zero),
                        o.unwrap_or(zero),
                        span,
                    ))
                }
            },
        };
        if let (Some(t), Some(name)) = (t, &node.name) {
            b.name(t, &format!("t_{name}"));
        }
        tan[i] = t;
    }
    let mut outputs: Vec<ValueId> = f.outputs.iter().map(|o| map[o.index()]).collect();
    for o in &f.outputs {
        let t = tan[o.index()].unwrap_or_else(|| b.constant(0.0, f.node(*o).span));
        outputs.push(t);
    }
    b.finish(outputs)
}
