//! Random programs (straight-line code and `if`/`else` as selects) over the IR, for property tests and compile-time benches.
//!
//! A program is described by a list of [`Step`]s (plain numbers, so a property-testing
//! framework can generate and shrink them); [`build`] turns it into a [`Function`] whose every
//! operation is applied inside its domain: arguments of `ln`, `sqrt` and division are made
//! positive, those of `asin`/`acos` are squashed into (-0.9, 0.9), those of `exp`, `sinh`,
//! `cosh` and `tan` are bounded, so that values and derivatives stay finite.

use crate::abi::{ArgLayout, ParamSlot};
use crate::ir::{Builder, CmpOp, Function, IntOp, Loop, LoopKind, Op, Ty, ValueId};
use crate::ops::Func;
use proc_macro2::Span;

/// One operation of a random program: which function, and which earlier values it reads
/// (each index is taken modulo the number of values so far).
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Selects the function (modulo the number of candidates).
    pub op: u8,
    /// First operand.
    pub a: u16,
    /// Second operand.
    pub b: u16,
    /// Third operand.
    pub c: u16,
}

/// Functions that are smooth everywhere in the domains [`build`] keeps them in.
const SMOOTH: &[Func] = &[
    Func::Add,
    Func::Sub,
    Func::Mul,
    Func::Div,
    Func::Neg,
    Func::Sin,
    Func::Cos,
    Func::Tan,
    Func::Asin,
    Func::Acos,
    Func::Atan,
    Func::Atan2,
    Func::Sinh,
    Func::Cosh,
    Func::Tanh,
    Func::Exp,
    Func::Exp2,
    Func::Ln,
    Func::Log2,
    Func::Log10,
    Func::Sqrt,
    Func::Recip,
    Func::Powi(3),
    Func::Powi(-2),
    Func::Powf,
    Func::MulAdd,
    Func::Hypot,
];

/// Functions with kinks or jumps, where finite differences are not an oracle.
const NONSMOOTH: &[Func] = &[
    Func::Abs,
    Func::Signum,
    Func::Min,
    Func::Max,
    Func::Clamp,
    Func::Floor,
    Func::Ceil,
    Func::Round,
];

/// The layout of `n` scalar arguments named `x0`, `x1`, ...
pub fn scalar_layout(n: u32) -> ArgLayout {
    ArgLayout {
        slots: (0..n)
            .map(|i| ParamSlot {
                name: format!("x{i}"),
                len: None,
                offset: i,
                differentiable: true,
                shared: false,
            })
            .collect(),
        words: n,
        shared_words: 0,
        results: 1,
        precision: Default::default(),
    }
}

/// Builds the program: `inputs` scalar inputs, one node (plus domain guards) per step, and
/// as output the sum of the last three values (so that most of the program is live).
/// With `smooth_only`, only functions without kinks are used.
pub fn build(inputs: u32, steps: &[Step], smooth_only: bool) -> Function {
    let span = Span::call_site();
    let mut b = Builder::new(inputs.max(1));
    let mut vals: Vec<ValueId> = (0..inputs.max(1))
        .map(|i| b.input(i, span, Some(format!("x{i}"))))
        .collect();
    push_steps(&mut b, &mut vals, steps, smooth_only);
    let n = vals.len();
    let last = &vals[n.saturating_sub(3)..];
    let mut out = last[0];
    for v in &last[1..] {
        out = b.call(Func::Add, vec![out, *v], span);
    }
    b.finish(vec![out])
}

/// Pushes one value per step onto `vals`, each step reading earlier ones.
fn push_steps(b: &mut Builder, vals: &mut Vec<ValueId>, steps: &[Step], smooth_only: bool) {
    let span = Span::call_site();
    let candidates: Vec<Func> = if smooth_only {
        SMOOTH.to_vec()
    } else {
        SMOOTH.iter().chain(NONSMOOTH).copied().collect()
    };
    for s in steps {
        let pick = |i: u16| vals[i as usize % vals.len()];
        let (x, y, z) = (pick(s.a), pick(s.b), pick(s.c));
        let k = s.op as usize % (candidates.len() + BRANCHES);
        let v = match candidates.get(k) {
            Some(func) => apply(b, *func, x, y, z, span),
            None => branch(b, k - candidates.len(), x, y, z, span),
        };
        vals.push(v);
    }
}

/// A long loop around a random program: `inputs` scalar inputs; `carried` values, the
/// first ones starting from `tanh` of the inputs; `for i in 0..trips { c_k = 0.5 * c_k +
/// 0.5 * tanh(r_k) }`, where `r_k` is the `k`-th last value of the program `steps` over
/// `[0.01 * i, carried..., inputs...]`; then the sum of the carried values. Each iteration
/// is a contraction, so values and derivatives stay bounded however long the loop: the
/// shape that [`crate::opt::checkpoint_long_loops`] cuts into segments.
pub fn build_long_loop(
    inputs: u32,
    carried: usize,
    trips: i64,
    steps: &[Step],
    smooth_only: bool,
) -> Function {
    let span = Span::call_site();
    let inputs = inputs.max(1);
    let mut b = Builder::new(inputs);
    let xs: Vec<ValueId> = (0..inputs)
        .map(|i| b.input(i, span, Some(format!("x{i}"))))
        .collect();
    let init: Vec<ValueId> = (0..carried)
        .map(|k| b.call(Func::Tanh, vec![xs[k % xs.len()]], span))
        .collect();
    let mut tys = vec![Ty::Int];
    tys.extend(std::iter::repeat_n(Ty::F32, carried + inputs as usize));
    let mut body = Builder::with_inputs(tys);
    let i = body.input(0, span, Some("i".into()));
    let fi = body.push(Op::IntToF32(i), span, None);
    let hundredth = body.constant(0.01, span);
    let t = body.call(Func::Mul, vec![fi, hundredth], span);
    let mut vals = vec![t];
    vals.extend((0..carried + inputs as usize).map(|w| body.input(1 + w as u32, span, None)));
    push_steps(&mut body, &mut vals, steps, smooth_only);
    let half = body.constant(0.5, span);
    let outputs = (0..carried)
        .map(|k| {
            let r = vals[vals.len() - 1 - k.min(vals.len() - 1)];
            let squashed = body.call(Func::Tanh, vec![r], span);
            let new = body.call(Func::Mul, vec![squashed, half], span);
            let old = body.call(Func::Mul, vec![vals[1 + k], half], span);
            body.call(Func::Add, vec![old, new], span)
        })
        .collect();
    let node = b.push(
        Op::Loop(Box::new(Loop {
            start: 0,
            end: trips,
            init,
            captures: xs,
            body: body.finish(outputs),
            kind: LoopKind::Forward,
        })),
        span,
        None,
    );
    let mut out = b.push(Op::Result(node, 0), span, None);
    for k in 1..carried as u32 {
        let r = b.push(Op::Result(node, k), span, None);
        out = b.call(Func::Add, vec![out, r], span);
    }
    b.finish(vec![out])
}

/// How many kinds of `if`/`else` (and loop) [`branch`] builds.
const BRANCHES: usize = 4;

/// An `if`/`else` whose branch not taken is NaN (the square root or logarithm of a negative
/// number): its derivative must be that of the branch taken all the same. Both kinds are
/// smooth away from the boundary, where finite differences still apply.
fn branch(b: &mut Builder, kind: usize, x: ValueId, y: ValueId, z: ValueId, span: Span) -> ValueId {
    let zero = b.constant(0.0, span);
    let half = b.constant(0.5, span);
    if kind == 2 {
        return small_loop(b, x, y, span);
    }
    if kind == 3 {
        return array_loop(b, x, y, z, span);
    }
    if kind == 0 {
        // if x > 0 { x.sqrt() + y } else { (0.5 - x).ln() * z }: each branch is NaN on
        // part of the other's domain, and finite (with finite derivatives) on its own.
        let c = b.cmp(CmpOp::Gt, x, zero, span);
        let r = b.call(Func::Sqrt, vec![x], span);
        let t = b.call(Func::Add, vec![r, y], span);
        let nx = b.call(Func::Sub, vec![half, x], span);
        let l = b.call(Func::Ln, vec![nx], span);
        let e = b.call(Func::Mul, vec![l, z], span);
        b.select(c, t, e, span)
    } else {
        // if (x < y && !(z > 0.5)) || y.sqrt() > 0.5 { y.sqrt() * x } else { x - z }
        let c1 = b.cmp(CmpOp::Lt, x, y, span);
        let c2 = b.cmp(CmpOp::Gt, z, half, span);
        let n2 = b.not(c2, span);
        let both = b.and(c1, n2, span);
        let r = b.call(Func::Sqrt, vec![y], span);
        let c3 = b.cmp(CmpOp::Gt, r, half, span);
        let c = b.or(both, c3, span);
        let t = b.call(Func::Mul, vec![r, x], span);
        let c4 = b.cmp(CmpOp::Ge, y, zero, span);
        let t = b.select(c4, t, x, span);
        let e = b.call(Func::Sub, vec![x, z], span);
        b.select(c, t, e, span)
    }
}

/// `let mut acc = x; for i in 0..3 { acc = 0.5 * acc + (acc + y * i as f32).sin()
/// + 0.25 * [y, acc * y, 0.5][i]; } acc`: a loop with a carried value, a capture and a read
/// at a computed index, smooth in all (and small: `opt::unroll_indexed_loops` unrolls it).
fn small_loop(b: &mut Builder, x: ValueId, y: ValueId, span: Span) -> ValueId {
    let mut body = Builder::with_inputs(vec![Ty::Int, Ty::F32, Ty::F32]);
    let i = body.input(0, span, Some("i".into()));
    let acc = body.input(1, span, Some("acc".into()));
    let cy = body.input(2, span, Some("y".into()));
    let fi = body.push(Op::IntToF32(i), span, None);
    let u = body.call(Func::Mul, vec![cy, fi], span);
    let v = body.call(Func::Add, vec![acc, u], span);
    let sv = body.call(Func::Sin, vec![v], span);
    let half = body.constant(0.5, span);
    let w = body.call(Func::Mul, vec![acc, half], span);
    let next = body.call(Func::Add, vec![w, sv], span);
    let acc_y = body.call(Func::Mul, vec![acc, cy], span);
    let array = body.array(vec![cy, acc_y, half], span);
    let read = body.push(Op::ArrayGet { array, index: i }, span, None);
    let quarter = body.constant(0.25, span);
    let term = body.call(Func::Mul, vec![read, quarter], span);
    let next = body.call(Func::Add, vec![next, term], span);
    let body = body.finish(vec![next]);
    let node = b.push(
        Op::Loop(Box::new(Loop {
            start: 0,
            end: 3,
            init: vec![x],
            captures: vec![y],
            body,
            kind: LoopKind::Forward,
        })),
        span,
        None,
    );
    b.push(Op::Result(node, 0), span, None)
}

/// `let mut a = [x, y, z, x * y, 0.5]` (each word through `tanh`, and `y` too), then
/// `for i in 0..4 { a[i + 1] = 0.5 * a[i + 1] + a[i].sin() * y; } a[4] + a[2]`: an array carried through a loop, read at `i` and
/// `i + 1` and written at `i + 1` (computed indices), read at constants after it.
fn array_loop(b: &mut Builder, x: ValueId, y: ValueId, z: ValueId, span: Span) -> ValueId {
    // Bounded words, so that the sines stay well conditioned in f32 on the GPU.
    let half = b.constant(0.5, span);
    let xy = b.call(Func::Mul, vec![x, y], span);
    let words: Vec<ValueId> = [x, y, z, xy]
        .into_iter()
        .map(|v| b.call(Func::Tanh, vec![v], span))
        .chain([half])
        .collect();
    let y = words[1];
    let init = b.array(words, span);
    let mut body = Builder::with_inputs(vec![Ty::Int, Ty::Array(5), Ty::F32]);
    let i = body.input(0, span, Some("i".into()));
    let a = body.input(1, span, Some("a".into()));
    let cy = body.input(2, span, Some("y".into()));
    let one = body.int(1, span);
    let next = body.push(Op::IntBin(IntOp::Add, i, one), span, None);
    let here = body.push(Op::ArrayGet { array: a, index: i }, span, None);
    let ahead = body.push(
        Op::ArrayGet {
            array: a,
            index: next,
        },
        span,
        None,
    );
    let bhalf = body.constant(0.5, span);
    let damped = body.call(Func::Mul, vec![ahead, bhalf], span);
    let s = body.call(Func::Sin, vec![here], span);
    let t = body.call(Func::Mul, vec![s, cy], span);
    let value = body.call(Func::Add, vec![damped, t], span);
    let updated = body.set(a, next, value, span);
    let body = body.finish(vec![updated]);
    let node = b.push(
        Op::Loop(Box::new(Loop {
            start: 0,
            end: 4,
            init: vec![init],
            captures: vec![y],
            body,
            kind: LoopKind::Forward,
        })),
        span,
        None,
    );
    let out = b.push(Op::Result(node, 0), span, None);
    let last = b.get(out, 4, span);
    let mid = b.get(out, 2, span);
    b.call(Func::Add, vec![last, mid], span)
}

fn apply(b: &mut Builder, f: Func, x: ValueId, y: ValueId, z: ValueId, span: Span) -> ValueId {
    let c = |b: &mut Builder, v: f64| b.constant(v, span);
    // x² + 0.5: positive, for logarithms, roots and denominators.
    let positive = |b: &mut Builder, v: ValueId| {
        let sq = b.call(Func::Mul, vec![v, v], span);
        let half = b.constant(0.5, span);
        b.call(Func::Add, vec![sq, half], span)
    };
    // k·tanh(v): bounded.
    let bounded = |b: &mut Builder, v: ValueId, k: f64| {
        let t = b.call(Func::Tanh, vec![v], span);
        let k = b.constant(k, span);
        b.call(Func::Mul, vec![t, k], span)
    };
    match f {
        Func::Div => {
            let d = positive(b, y);
            b.call(Func::Div, vec![x, d], span)
        }
        Func::Ln | Func::Log2 | Func::Log10 | Func::Sqrt | Func::Recip => {
            let p = positive(b, x);
            b.call(f, vec![p], span)
        }
        Func::Powi(n) if n < 0 => {
            let p = positive(b, x);
            b.call(f, vec![p], span)
        }
        Func::Powf => {
            let p = positive(b, x);
            let e = bounded(b, y, 2.0);
            b.call(Func::Powf, vec![p, e], span)
        }
        Func::Asin | Func::Acos => {
            let s = bounded(b, x, 0.9);
            b.call(f, vec![s], span)
        }
        Func::Tan => {
            let s = bounded(b, x, 1.2);
            b.call(f, vec![s], span)
        }
        Func::Exp | Func::Exp2 | Func::Sinh | Func::Cosh => {
            let s = bounded(b, x, 3.0);
            b.call(f, vec![s], span)
        }
        Func::Clamp => {
            let lo = c(b, -0.5);
            let hi = c(b, 0.75);
            b.call(Func::Clamp, vec![x, lo, hi], span)
        }
        f => {
            let args = match f.arity() {
                1 => vec![x],
                2 => vec![x, y],
                _ => vec![x, y, z],
            };
            b.call(f, args, span)
        }
    }
}
