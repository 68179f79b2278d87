//! An f64 interpreter of the IR: the oracle the tests compare every generated version with.
//!
//! It shares only the IR and the value semantics of [`Func::eval`](crate::ops::Func::eval)
//! with the code under test; derivatives are checked against it by finite differences.
//! Booleans are 0 and 1, loop indices are exact integers in f64.

use crate::ir::{Function, LoopKind, Op, ValueId};
use crate::ops::Func;
use std::collections::HashMap;

/// A value: a word (floats, booleans as 0 and 1, integers) or an array of words.
#[derive(Clone, Debug)]
enum V {
    Word(f64),
    Array(Vec<f64>),
}

impl V {
    fn word(&self) -> f64 {
        match self {
            V::Word(x) => *x,
            V::Array(_) => f64::NAN,
        }
    }

    fn array(&self) -> &[f64] {
        match self {
            V::Array(a) => a,
            V::Word(_) => &[],
        }
    }

    fn push_words(&self, out: &mut Vec<f64>) {
        match self {
            V::Word(x) => out.push(*x),
            V::Array(a) => out.extend(a),
        }
    }
}

/// Evaluates `f` at `inputs` (one f64 per input word) and returns its outputs, an array
/// output as its words.
///
/// # Panics
/// If `inputs.len()` is not `f.num_inputs`.
pub fn eval(f: &Function, inputs: &[f64]) -> Vec<f64> {
    eval_with(f, inputs, Arith::EXACT)
}

/// [`eval`] with every operation's result and every constant rounded to f32, as f32
/// arithmetic computes them (not in the order or with the fused multiply-adds a driver
/// chooses): where it and [`eval`] differ by more than f32 explains, an f32 kernel cannot
/// be held to the f64 result (`floor(tanh(x))` where `tanh(x)` rounds to 1 in f32).
///
/// # Panics
/// If `inputs.len()` is not `f.num_inputs`.
pub fn eval_in_f32(f: &Function, inputs: &[f64]) -> Vec<f64> {
    eval_with(
        f,
        inputs,
        Arith {
            round: |x| x as f32 as f64,
            ..Arith::EXACT
        },
    )
}

/// [`eval`] under each liberty WGSL gives a driver, one result each: every zero computed
/// positive; every zero computed negative; `x - x` and `0 * x` taken as 0 (and `0 * x + y`
/// as `y`) whatever `x` is (a driver may assume arithmetic makes no infinities or NaNs).
/// Where one of them and [`eval`] differ, the result hangs on the sign of a computed zero
/// or on an infinity or NaN made and then cancelled (`(x - x).signum()`, `(v - v) *
/// v.ln()` at `v < 0`), and a kernel cannot be held to it: the README's "Not promised on
/// a GPU".
///
/// # Panics
/// If `inputs.len()` is not `f.num_inputs`.
pub fn eval_as_drivers_may(f: &Function, inputs: &[f64]) -> [Vec<f64>; 3] {
    let with = |arith| eval_with(f, inputs, arith);
    [
        with(Arith {
            round: |x| if x == 0.0 { 0.0 } else { x },
            ..Arith::EXACT
        }),
        with(Arith {
            round: |x| if x == 0.0 { -0.0 } else { x },
            ..Arith::EXACT
        }),
        with(Arith {
            fold_cancelled: true,
            ..Arith::EXACT
        }),
    ]
}

/// How the interpreter carries out arithmetic.
#[derive(Clone, Copy)]
struct Arith {
    /// Applied to every operation's result and every constant.
    round: fn(f64) -> f64,
    /// `x - x` and `0 * x` (either operand 0) give 0, and `0 * x + y` gives `y`, without
    /// looking at `x`.
    fold_cancelled: bool,
}

impl Arith {
    const EXACT: Arith = Arith {
        round: |x| x,
        fold_cancelled: false,
    };

    /// What `func` of `a` (the operands `args`) gives.
    fn call(self, func: Func, args: &[ValueId], a: &[f64]) -> f64 {
        let folded = match func {
            _ if !self.fold_cancelled => None,
            Func::Sub if args[0] == args[1] => Some(0.0),
            Func::Mul if a[0] == 0.0 || a[1] == 0.0 => Some(0.0),
            Func::MulAdd if a[0] == 0.0 || a[1] == 0.0 => Some(a[2]),
            _ => None,
        };
        (self.round)(folded.unwrap_or_else(|| func.eval(a)))
    }
}

fn eval_with(f: &Function, inputs: &[f64], arith: Arith) -> Vec<f64> {
    assert_eq!(inputs.len(), f.num_inputs as usize, "input count");
    let inputs: Vec<V> = inputs.iter().map(|x| V::Word((arith.round)(*x))).collect();
    let mut out = Vec::new();
    for v in eval_values(f, &inputs, arith) {
        v.push_words(&mut out);
    }
    out
}

/// The position an index reads or writes in an array of `len`: clamped into range.
fn clamp_index(index: f64, len: usize) -> usize {
    (index as i64).clamp(0, len as i64 - 1) as usize
}

fn eval_values(f: &Function, inputs: &[V], arith: Arith) -> Vec<V> {
    let round = arith.round;
    let mut vals: Vec<V> = Vec::with_capacity(f.nodes.len());
    // Final carried values of each loop node, and the tapes of recording loops.
    let mut results: HashMap<usize, Vec<V>> = HashMap::new();
    let mut tapes: HashMap<usize, Vec<Vec<V>>> = HashMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let w = |v: &ValueId| vals[v.index()].word();
        let v = match &node.op {
            Op::Input(w) => inputs[*w as usize].clone(),
            Op::Const(c) => V::Word(round(*c)),
            Op::Call(func, args) => {
                let a: Vec<f64> = args.iter().map(w).collect();
                V::Word(arith.call(*func, args, &a))
            }
            Op::Cmp(c, a, b) => V::Word(f64::from(c.apply(w(a), w(b)))),
            Op::Not(a) => V::Word(f64::from(w(a) == 0.0)),
            Op::And(a, b) => V::Word(f64::from(w(a) != 0.0 && w(b) != 0.0)),
            Op::Or(a, b) => V::Word(f64::from(w(a) != 0.0 || w(b) != 0.0)),
            Op::Int(v) => V::Word(*v as f64),
            Op::IntBin(o, a, b) => V::Word(o.apply(w(a) as i64, w(b) as i64) as f64),
            Op::IntToF32(a) => V::Word(w(a)),
            Op::ArrayNew(elems) => V::Array(elems.iter().map(w).collect()),
            Op::ArrayGet { array, index } => {
                let a = vals[array.index()].array();
                V::Word(a[clamp_index(w(index), a.len())])
            }
            Op::ArraySet {
                array,
                index,
                value,
            } => {
                let mut a = vals[array.index()].array().to_vec();
                let k = clamp_index(w(index), a.len());
                a[k] = w(value);
                V::Array(a)
            }
            Op::ArrayAdd(x, y) => V::Array(
                vals[x.index()]
                    .array()
                    .iter()
                    .zip(vals[y.index()].array())
                    .map(|(p, q)| round(p + q))
                    .collect(),
            ),
            Op::Loop(l) => {
                let mut carried: Vec<V> = l.init.iter().map(|v| vals[v.index()].clone()).collect();
                let captures: Vec<V> = l.captures.iter().map(|v| vals[v.index()].clone()).collect();
                let run = |index: i64, carried: &[V], taped: &[V]| {
                    let mut args = vec![V::Word(index as f64)];
                    args.extend_from_slice(carried);
                    args.extend_from_slice(&captures);
                    args.extend_from_slice(taped);
                    eval_values(&l.body, &args, arith)
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
                V::Word(f64::NAN)
            }
            Op::Result(l, k) => results[&l.index()][*k as usize].clone(),
            Op::CustomGrad { value, .. } => vals[value.index()].clone(),
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                if w(cond) != 0.0 {
                    vals[then.index()].clone()
                } else {
                    vals[otherwise.index()].clone()
                }
            }
        };
        vals.push(v);
    }
    f.outputs.iter().map(|o| vals[o.index()].clone()).collect()
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
