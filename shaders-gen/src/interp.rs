//! An f64 interpreter of the IR: the oracle the tests compare every generated version with.
//!
//! It shares only the IR and the value semantics of [`Func::eval`](crate::ops::Func::eval)
//! with the code under test; derivatives are checked against it by finite differences.
//! Booleans are 0 and 1, loop indices are exact integers in f64.

use crate::ir::{Function, LoopKind, Op};
use std::collections::HashMap;

/// Evaluates `f` at `inputs` (one f64 per input word) and returns its outputs.
///
/// # Panics
/// If `inputs.len()` is not `f.num_inputs`.
pub fn eval(f: &Function, inputs: &[f64]) -> Vec<f64> {
    assert_eq!(inputs.len(), f.num_inputs as usize, "input count");
    let mut vals: Vec<f64> = Vec::with_capacity(f.nodes.len());
    // Final carried values of each loop node, and the tapes of recording loops.
    let mut results: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut tapes: HashMap<usize, Vec<Vec<f64>>> = HashMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let v = match &node.op {
            Op::Input(w) => inputs[*w as usize],
            Op::Const(c) => *c,
            Op::Call(func, args) => {
                let a: Vec<f64> = args.iter().map(|v| vals[v.index()]).collect();
                func.eval(&a)
            }
            Op::Cmp(c, a, b) => f64::from(c.apply(vals[a.index()], vals[b.index()])),
            Op::Not(a) => f64::from(vals[a.index()] == 0.0),
            Op::And(a, b) => f64::from(vals[a.index()] != 0.0 && vals[b.index()] != 0.0),
            Op::Or(a, b) => f64::from(vals[a.index()] != 0.0 || vals[b.index()] != 0.0),
            Op::Int(v) => *v as f64,
            Op::IntBin(o, a, b) => o.apply(vals[a.index()] as i64, vals[b.index()] as i64) as f64,
            Op::IntToF32(a) => vals[a.index()],
            Op::Index { elems, index } => {
                let k = (vals[index.index()] as i64).clamp(0, elems.len() as i64 - 1);
                vals[elems[k as usize].index()]
            }
            Op::Loop(l) => {
                let mut carried: Vec<f64> = l.init.iter().map(|v| vals[v.index()]).collect();
                let captures: Vec<f64> = l.captures.iter().map(|v| vals[v.index()]).collect();
                let run = |index: i64, carried: &[f64], taped: &[f64]| {
                    let mut args = vec![index as f64];
                    args.extend_from_slice(carried);
                    args.extend_from_slice(&captures);
                    args.extend_from_slice(taped);
                    eval(&l.body, &args)
                };
                match l.kind {
                    LoopKind::Forward | LoopKind::Recording => {
                        let mut tape = Vec::new();
                        for index in l.start..l.end {
                            // Every loop records here: a reverse loop may read the values
                            // of a forward loop the optimizer stopped recording (it then
                            // uses none of them).
                            tape.push(carried.clone());
                            carried = run(index, &carried, &[]);
                        }
                        tapes.insert(i, tape);
                    }
                    LoopKind::Reverse { tape, .. } => {
                        let tape = &tapes[&tape.index()];
                        for index in (l.start..l.end).rev() {
                            carried = run(index, &carried, &tape[(index - l.start) as usize]);
                        }
                    }
                }
                results.insert(i, carried);
                f64::NAN
            }
            Op::Result(l, k) => results[&l.index()][*k as usize],
            Op::CustomGrad { value, .. } => vals[value.index()],
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                if vals[cond.index()] != 0.0 {
                    vals[then.index()]
                } else {
                    vals[otherwise.index()]
                }
            }
        };
        vals.push(v);
    }
    f.outputs.iter().map(|o| vals[o.index()]).collect()
}

/// The gradient of output 0 by central finite differences with relative step `h`,
/// evaluated in f64: the derivative oracle independent of the AD transforms.
pub fn finite_difference_gradient(f: &Function, inputs: &[f64], h: f64) -> Vec<f64> {
    (0..inputs.len())
        .map(|i| {
            let step = h * inputs[i].abs().max(1.0);
            let mut plus = inputs.to_vec();
            let mut minus = inputs.to_vec();
            plus[i] += step;
            minus[i] -= step;
            (eval(f, &plus)[0] - eval(f, &minus)[0]) / (2.0 * step)
        })
        .collect()
}
