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
        let m = |v: &ValueId| map[v.index()];
        let op = match &node.op {
            Op::Input(w) => Op::Input(w + input_offset),
            Op::Const(c) => Op::Const(*c),
            Op::Call(func, args) => Op::Call(*func, args.iter().map(m).collect()),
            Op::Cmp(c, a, x) => Op::Cmp(*c, m(a), m(x)),
            Op::Select {
                cond,
                then,
                otherwise,
            } => Op::Select {
                cond: m(cond),
                then: m(then),
                otherwise: m(otherwise),
            },
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

/// Reverse mode for a function with one output.
///
/// The result has the same inputs and the outputs `[value, d value / d input_0, ...]`:
/// one gradient per input word, in input order. Adjoints are accumulated sparsely: a value
/// that does not influence the output gets no adjoint node, and a partial derivative that
/// is identically zero (`floor`, `signum`, ...) contributes no term, so no `0 * inf` NaN
/// can appear from a derivative that is zero by definition.
pub fn reverse(f: &Function) -> Function {
    assert_eq!(f.outputs.len(), 1, "reverse mode seeds one scalar output");
    let mut b = Builder::new(f.num_inputs);
    let map = copy_primal(f, &mut b, 0);
    let out = f.outputs[0];
    let mut adj: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    adj[out.index()] = Some(b.constant(1.0, f.node(out).span));
    let mut input_adj: Vec<Option<ValueId>> = vec![None; f.num_inputs as usize];
    for i in (0..f.nodes.len()).rev() {
        let Some(a) = adj[i] else { continue };
        let node = &f.nodes[i];
        let span = node.span;
        if let Some(name) = &node.name {
            b.name(a, &format!("d_{name}"));
        }
        match &node.op {
            Op::Input(w) => input_adj[*w as usize] = Some(a),
            Op::Const(_) | Op::Cmp(..) => {}
            Op::Call(func, args) => {
                let margs: Vec<ValueId> = args.iter().map(|v| map[v.index()]).collect();
                let partials = func.partials(&mut b, &margs, map[i], span);
                for (arg, p) in args.iter().zip(partials) {
                    if is_zero(&b, p) {
                        continue;
                    }
                    let term = b.call(Func::Mul, vec![a, p], span);
                    adj[arg.index()] = Some(accumulate(&mut b, adj[arg.index()], term, span));
                }
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let zero = b.constant(0.0, span);
                let c = map[cond.index()];
                let to_then = b.select(c, a, zero, span);
                let to_other = b.select(c, zero, a, span);
                adj[then.index()] = Some(accumulate(&mut b, adj[then.index()], to_then, span));
                adj[otherwise.index()] =
                    Some(accumulate(&mut b, adj[otherwise.index()], to_other, span));
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
    let n = f.num_inputs;
    let mut b = Builder::new(2 * n);
    let map = copy_primal(f, &mut b, 0);
    let mut tan: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        let span = node.span;
        let t = match &node.op {
            Op::Input(w) => {
                let name = node.name.as_ref().map(|s| format!("t_{s}"));
                Some(b.input(n + w, span, name))
            }
            Op::Const(_) | Op::Cmp(..) => None,
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
