//! An f64 interpreter of the IR: the oracle the tests compare every generated version with.
//!
//! It shares only the IR and the value semantics of [`Func::eval`](crate::ops::Func::eval)
//! with the code under test; derivatives are checked against it by finite differences.

use crate::ir::{Function, Op};

/// Evaluates `f` at `inputs` (one f64 per input word) and returns its outputs.
///
/// # Panics
/// If `inputs.len()` is not `f.num_inputs`.
pub fn eval(f: &Function, inputs: &[f64]) -> Vec<f64> {
    assert_eq!(inputs.len(), f.num_inputs as usize, "input count");
    let mut vals: Vec<f64> = Vec::with_capacity(f.nodes.len());
    for node in &f.nodes {
        let v = match &node.op {
            Op::Input(w) => inputs[*w as usize],
            Op::Const(c) => *c,
            Op::Call(func, args) => {
                let a: Vec<f64> = args.iter().map(|v| vals[v.index()]).collect();
                func.eval(&a)
            }
            Op::Cmp(c, a, b) => {
                if c.apply(vals[a.index()], vals[b.index()]) {
                    1.0
                } else {
                    0.0
                }
            }
            Op::Not(a) => f64::from(vals[a.index()] == 0.0),
            Op::And(a, b) => f64::from(vals[a.index()] != 0.0 && vals[b.index()] != 0.0),
            Op::Or(a, b) => f64::from(vals[a.index()] != 0.0 || vals[b.index()] != 0.0),
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
