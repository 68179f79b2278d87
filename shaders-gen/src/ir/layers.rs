//! Dense layers: the top-level loops a network is made of, recognized in the IR.
//!
//! A dense layer is a loop over rows `j` of an array it writes, never reads, whose trip is
//!
//! ```text
//! let mut s = b[b0 + j];
//! for k in 0..K { s += W[w0 + rs * j + cs * k] * x[x0 + xs * k]; }
//! h[j] = act(s);            // or h[j] = s
//! ```
//!
//! with `W` and `b` arrays of `#[shared]` words and `x` any array the loop captures (the
//! element's inputs, or the array the layer before wrote). The sum may be written either
//! way round, `s = s + ..` or `s = .. + s`, and its product in either order. This is the
//! shape a matrix product of the workgroup computes for a chunk of elements at once
//! (BENCHMARKS.md, "Layers as register-blocked products of the workgroup": the 8-64-64-1
//! network's adjoint 1.9x faster than one element a thread, and than JAX), so it is what
//! an emitter of such products looks for. Anything else (a recurrence that reads what the
//! trip before wrote, a per-element weight, a sum that is not of products) is not a layer.

use super::{CmpOp, Function, IntOp, Loop, LoopInput, Op, Ty, ValueId};
use crate::ops::Func;

/// One dense layer: [`dense_layer`]'s answer, in the values of the enclosing function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenseLayer {
    /// Rows (the loop's trips): the length of the array it writes.
    pub rows: usize,
    /// Terms of each row's sum (the inner loop's trips).
    pub columns: usize,
    /// The array of weights, `W`.
    pub weights: ValueId,
    /// `W[offset + row_stride * j + column_stride * k]`: `(offset, row_stride,
    /// column_stride)`.
    pub weight_index: (i64, i64, i64),
    /// The array of the biases, `b` (may be `weights`).
    pub biases: ValueId,
    /// `b[bias_offset + j]`.
    pub bias_offset: i64,
    /// The array each row's sum reads, `x`.
    pub input: ValueId,
    /// `x[offset + stride * k]`: `(offset, stride)`.
    pub input_index: (i64, i64),
    /// The function applied to each row's sum (`None`: the sum itself).
    pub activation: Option<Activation>,
}

/// What a dense layer applies to each row's sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// A method of one argument: `s.tanh()`.
    Call(Func),
    /// A rectified linear unit: `s` above zero, 0 below and at NaN, its derivative 1 above
    /// zero and 0 below and at NaN; at a sum of exactly zero as written ([`AtZero`]).
    Relu(AtZero),
    /// The logistic sigmoid as Rust writes it, `1.0 / (1.0 + (-s).exp())` (the sum in the
    /// denominator either way round): its derivative is `h (1 - h)` of its value `h`.
    Sigmoid,
}

/// A relu's derivative at a sum of exactly zero, which depends on how it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtZero {
    /// `s.max(0.0)`, `0.0f32.max(s)`: `max`'s tie, 0.5 (`ad::partials`).
    Half,
    /// `if s > 0.0 { s } else { 0.0 }` (or `0.0 < s`): the branch not taken, 0.
    Zero,
    /// `if s >= 0.0 { s } else { 0.0 }` (or `0.0 <= s`): the branch taken, 1.
    One,
}

impl AtZero {
    /// The derivative at zero.
    pub fn derivative(self) -> f64 {
        match self {
            AtZero::Half => 0.5,
            AtZero::Zero => 0.0,
            AtZero::One => 1.0,
        }
    }
}

/// An integer of a loop body as `outer × j + inner × k + constant`, `j` the layer's row
/// and `k` the inner loop's term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Affine {
    outer: i64,
    inner: i64,
    constant: i64,
}

impl Affine {
    const fn new(outer: i64, inner: i64, constant: i64) -> Self {
        Affine {
            outer,
            inner,
            constant,
        }
    }
}

/// What a body value is, followed through the loops' captures to the enclosing function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// An array (or other value) of the enclosing function.
    Outer(ValueId),
    /// An integer known as an [`Affine`].
    Int(Affine),
    /// The layer's array of rows, as carried in.
    Rows,
    /// The row sum, as carried into the inner loop.
    Sum,
}

/// The layer loop `at` of `f` (a node of `f`, a top-level function) as a [`DenseLayer`],
/// if it is one. `shared` says which of `f`'s values are arrays of `#[shared]` words.
pub fn dense_layer(
    f: &Function,
    at: ValueId,
    shared: &dyn Fn(ValueId) -> bool,
) -> Option<DenseLayer> {
    let Op::Loop(l) = &f.node(at).op else {
        return None;
    };
    let rows = u32::try_from(l.end).ok()?;
    if l.start != 0 || l.init.len() != 1 || l.carried_ty(0) != Ty::Array(rows) {
        return None;
    }
    let body = &l.body;
    // The body's inputs: the row, the rows array, and the captures as outer values.
    let outer_input = |w: u32| match l.input(w as usize) {
        LoopInput::Index => Some(Origin::Int(Affine::new(1, 0, 0))),
        LoopInput::Carried(_) => Some(Origin::Rows),
        LoopInput::Capture(c) => Some(origin_in_outer(f, l.captures[c])),
        LoopInput::Taped(_) => None,
    };
    let origins = origins(body, &outer_input);
    // h[j] = act(s) (or s): the only output.
    let Op::ArraySet {
        array,
        index,
        value,
    } = &body.node(body.outputs[0]).op
    else {
        return None;
    };
    if origins[array.index()] != Some(Origin::Rows)
        || origins[index.index()] != Some(Origin::Int(Affine::new(1, 0, 0)))
    {
        return None;
    }
    let (activation, sum, between) = activation_of(body, *value);
    let Op::Result(inner_at, 0) = body.node(sum).op else {
        return None;
    };
    let Op::Loop(inner) = &body.node(inner_at).op else {
        return None;
    };
    // s = b[b0 + j], carried into the sum.
    let (biases, bias_index) = read(body, &origins, inner.init.first().copied()?)?;
    if inner.init.len() != 1 || bias_index.outer != 1 || bias_index.inner != 0 {
        return None;
    }
    let terms = sum_of_products(&origins, inner)?;
    let (weights, w, input, mut x) = terms;
    let columns = (inner.end - inner.start).max(0) as usize;
    // A row of one column reads index 0 of an array of one word, which the builder folds
    // to a constant: any stride reads the same word.
    if columns == 1 && x.inner == 0 {
        x.inner = 1;
    }
    let is_layer = shared(weights)
        && shared(biases)
        && w.outer != 0
        && (w.inner != 0 || columns == 1)
        && x.outer == 0
        && x.inner != 0
        && !used_elsewhere(body, [inner_at, *value, sum], &between);
    is_layer.then_some(DenseLayer {
        rows: rows as usize,
        columns,
        weights,
        weight_index: (w.constant, w.outer, w.inner),
        biases,
        bias_offset: bias_index.constant,
        input,
        input_index: (x.constant, x.inner),
        activation,
    })
}

/// The top-level loops of `f` that are dense layers, in order, each with its loop node.
pub fn dense_layers(f: &Function, shared: &dyn Fn(ValueId) -> bool) -> Vec<(ValueId, DenseLayer)> {
    (0..f.nodes.len() as u32)
        .map(ValueId)
        .filter_map(|at| Some((at, dense_layer(f, at, shared)?)))
        .collect()
}

/// A top-level loop that sums one row of shared weights times an array into a scalar:
/// `let mut y = init; for k in 0..K { y += w[offset + stride * k] * x[x0 + xs * k]; }`
/// (a network's output row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotRow {
    /// Terms (the loop's trips).
    pub length: usize,
    /// The shared array of the row's weights.
    pub weights: ValueId,
    /// `w[offset + stride * k]`: `(offset, stride)`.
    pub weight_index: (i64, i64),
    /// The array the row reads.
    pub input: ValueId,
    /// `x[offset + stride * k]`: `(offset, stride)`.
    pub input_index: (i64, i64),
    /// The sum's first value (a value of the enclosing function).
    pub init: ValueId,
}

/// The loop `at` of `f` as a [`DotRow`], if it is one.
pub fn dot_row(f: &Function, at: ValueId, shared: &dyn Fn(ValueId) -> bool) -> Option<DotRow> {
    let Op::Loop(l) = &f.node(at).op else {
        return None;
    };
    if l.init.len() != 1 || l.carried_ty(0) != Ty::F32 {
        return None;
    }
    // The loop as the inner loop of a layer whose row index is always 0: its captures are
    // values of `f` itself.
    let outer: Vec<Option<Origin>> = (0..f.nodes.len() as u32)
        .map(|v| Some(origin_in_outer(f, ValueId(v))))
        .collect();
    let (mut weights, mut w, mut input, mut x) = sum_of_products(&outer, l)?;
    // Neither factor moves with a row here: the weights are the shared one.
    if !shared(weights) {
        (weights, w, input, x) = (input, x, weights, w);
    }
    let is_row = shared(weights) && w.outer == 0 && w.inner != 0 && x.outer == 0 && x.inner != 0;
    is_row.then(|| DotRow {
        length: (l.end - l.start).max(0) as usize,
        weights,
        weight_index: (w.constant, w.inner),
        input,
        input_index: (x.constant, x.inner),
        init: l.init[0],
    })
}

/// Where `v`, a value of the top-level function `f`, comes from: itself, or an integer
/// constant.
fn origin_in_outer(f: &Function, v: ValueId) -> Origin {
    match f.node(v).op {
        Op::Int(k) => Origin::Int(Affine::new(0, 0, k)),
        _ => Origin::Outer(v),
    }
}

/// The [`Origin`] of each node of `body` that has one, its inputs' given by `input`.
fn origins(body: &Function, input: &dyn Fn(u32) -> Option<Origin>) -> Vec<Option<Origin>> {
    let mut out: Vec<Option<Origin>> = Vec::with_capacity(body.nodes.len());
    for node in &body.nodes {
        let origin = match &node.op {
            Op::Input(w) => input(*w),
            Op::Int(k) => Some(Origin::Int(Affine::new(0, 0, *k))),
            Op::IntBin(op, a, b) => match (out[a.index()], out[b.index()]) {
                (Some(Origin::Int(a)), Some(Origin::Int(b))) => int_bin(*op, a, b).map(Origin::Int),
                _ => None,
            },
            _ => None,
        };
        out.push(origin);
    }
    out
}

/// `a op b` as an [`Affine`], where it is one (a product needs a constant factor).
fn int_bin(op: IntOp, a: Affine, b: Affine) -> Option<Affine> {
    let constant = |x: Affine| x.outer == 0 && x.inner == 0;
    let scale = |x: Affine, k: i64| {
        Some(Affine::new(
            x.outer.checked_mul(k)?,
            x.inner.checked_mul(k)?,
            x.constant.checked_mul(k)?,
        ))
    };
    match op {
        IntOp::Add => Some(Affine::new(
            a.outer.checked_add(b.outer)?,
            a.inner.checked_add(b.inner)?,
            a.constant.checked_add(b.constant)?,
        )),
        IntOp::Sub => Some(Affine::new(
            a.outer.checked_sub(b.outer)?,
            a.inner.checked_sub(b.inner)?,
            a.constant.checked_sub(b.constant)?,
        )),
        IntOp::Mul if constant(a) => scale(b, a.constant),
        IntOp::Mul if constant(b) => scale(a, b.constant),
        IntOp::Mul => None,
    }
}

/// `v` as a read of an outer array at an [`Affine`] index.
fn read(f: &Function, origins: &[Option<Origin>], v: ValueId) -> Option<(ValueId, Affine)> {
    let Op::ArrayGet { array, index } = f.node(v).op else {
        return None;
    };
    match (origins[array.index()], origins[index.index()]) {
        (Some(Origin::Outer(a)), Some(Origin::Int(i))) => Some((a, i)),
        _ => None,
    }
}

/// The inner loop of a layer's row as `s += W[..] * x[..]`: the weights' array and index,
/// the input's array and index.
fn sum_of_products(
    outer_origins: &[Option<Origin>],
    inner: &Loop,
) -> Option<(ValueId, Affine, ValueId, Affine)> {
    if inner.start != 0 {
        return None;
    }
    // The inner body's inputs: k, the sum, and the captures as the outer body's values
    // (the row index among them, as its affine in j).
    let input = |w: u32| match inner.input(w as usize) {
        LoopInput::Index => Some(Origin::Int(Affine::new(0, 1, 0))),
        LoopInput::Carried(_) => Some(Origin::Sum),
        LoopInput::Capture(c) => outer_origins[inner.captures[c].index()],
        LoopInput::Taped(_) => None,
    };
    let body = &inner.body;
    let origins = origins(body, &input);
    let [out] = body.outputs[..] else {
        return None;
    };
    let Op::Call(Func::Add, args) = &body.node(out).op else {
        return None;
    };
    let is_sum = |v: &ValueId| origins[v.index()] == Some(Origin::Sum);
    let product = match args[..] {
        [a, b] if is_sum(&a) && !is_sum(&b) => b,
        [a, b] if is_sum(&b) && !is_sum(&a) => a,
        _ => return None,
    };
    let Op::Call(Func::Mul, factors) = &body.node(product).op else {
        return None;
    };
    let [p, q] = factors[..] else {
        return None;
    };
    let (p, q) = (read(body, &origins, p)?, read(body, &origins, q)?);
    // The weight is the factor that moves with the row.
    let (w, x) = if p.1.outer != 0 { (p, q) } else { (q, p) };
    // Nothing else in the body may read the sum (it would not be a sum of products).
    let sum_reads = (body.nodes.iter())
        .filter(|n| n.op.operands().iter().any(is_sum))
        .count();
    (sum_reads == 1).then_some((w.0, w.1, x.0, x.1))
}

/// `value`, a layer's row, as an activation of a sum: `(activation, sum, the nodes
/// between the two)`, or `(None, value, [])`.
fn activation_of(body: &Function, value: ValueId) -> (Option<Activation>, ValueId, Vec<ValueId>) {
    let zero = |v: ValueId| matches!(body.node(v).op, Op::Const(c) if c == 0.0);
    let relu = |at_zero| Some(Activation::Relu(at_zero));
    if let Some((sum, between)) = sigmoid_of(body, value) {
        return (Some(Activation::Sigmoid), sum, between);
    }
    match &body.node(value).op {
        Op::Call(func, args) if args.len() == 1 => {
            (Some(Activation::Call(*func)), args[0], Vec::new())
        }
        Op::Call(Func::Max, args) if args.len() == 2 && zero(args[1]) => {
            (relu(AtZero::Half), args[0], Vec::new())
        }
        Op::Call(Func::Max, args) if args.len() == 2 && zero(args[0]) => {
            (relu(AtZero::Half), args[1], Vec::new())
        }
        // `if s > 0.0 { s } else { 0.0 }`: 0 at NaN, as the kernels' relu. The branches the
        // other way round (`if s <= 0.0 { 0.0 } else { s }`) give NaN there: not a relu.
        Op::Select {
            cond,
            then,
            otherwise,
        } if zero(*otherwise) => {
            let at_zero = match body.node(*cond).op {
                Op::Cmp(CmpOp::Gt, a, b) | Op::Cmp(CmpOp::Lt, b, a) if a == *then && zero(b) => {
                    Some(AtZero::Zero)
                }
                Op::Cmp(CmpOp::Ge, a, b) | Op::Cmp(CmpOp::Le, b, a) if a == *then && zero(b) => {
                    Some(AtZero::One)
                }
                _ => None,
            };
            match at_zero {
                Some(at_zero) => (relu(at_zero), *then, vec![*cond]),
                None => (None, value, Vec::new()),
            }
        }
        _ => (None, value, Vec::new()),
    }
}

/// `value` as `1.0 / (1.0 + (-s).exp())` (the sum either way round): `(s, the nodes
/// between)`.
fn sigmoid_of(body: &Function, value: ValueId) -> Option<(ValueId, Vec<ValueId>)> {
    let one = |v: ValueId| matches!(body.node(v).op, Op::Const(c) if c == 1.0);
    let call = |v: ValueId, f: Func| match &body.node(v).op {
        Op::Call(g, args) if *g == f => Some(args.clone()),
        _ => None,
    };
    let quotient = call(value, Func::Div)?;
    let [numerator, denominator] = quotient[..] else {
        return None;
    };
    let terms = call(denominator, Func::Add)?;
    let exp = match terms[..] {
        [a, b] if one(a) => b,
        [a, b] if one(b) => a,
        _ => return None,
    };
    let [negated] = call(exp, Func::Exp)?[..] else {
        return None;
    };
    let [sum] = call(negated, Func::Neg)?[..] else {
        return None;
    };
    one(numerator).then(|| (sum, vec![denominator, exp, negated]))
}

/// Whether any node of the layer's `body` other than the ones that make its row (the inner
/// loop, its result `sum`, the activation `value`, and the nodes `between` the sum and the
/// activation: a relu's comparison, a sigmoid's exponential) reads those.
fn used_elsewhere(body: &Function, [inner, value, sum]: [ValueId; 3], between: &[ValueId]) -> bool {
    let out = body.outputs[0];
    body.nodes.iter().enumerate().any(|(at, n)| {
        let at = ValueId(at as u32);
        at != out
            && at != value
            && at != sum
            && !between.contains(&at)
            && n.op
                .operands()
                .iter()
                .any(|v| *v == inner || *v == sum || (*v == value && value != sum))
    })
}

#[cfg(test)]
mod tests;
