//! Second order, by forward-over-reverse: forward mode applied to the reverse pass. The
//! tangent of the gradient along `v` is the Hessian-vector product `H v`; along each unit
//! vector in turn, the Hessian's rows.
//!
//! Forward mode carries a tangent through every node of the adjoint, loops included (a
//! recording loop records its tangents with its values, and the reverse loop reads them
//! back: [`mod@super::forward`]). A custom derivative's second derivative is the derivative of
//! the function the user gave for its first: that function's nodes are in the adjoint.

use super::forward::forward_into;
use super::{inline, reverse};
use crate::ir::{Builder, CmpOp, Function, IntOp, Loop, LoopKind, Op, Ty, ValueId};
use proc_macro2::Span;

/// How [`hessian`] lays out its directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HessianForm {
    /// One tangent sweep of the adjoint per direction, in straight-line code: the sweeps
    /// share the primal and adjoint values (the builder merges identical nodes), and sweep
    /// `i` computes only the entries `j >= i` (the rest are its mirror). Code grows with
    /// the number of directions.
    Sweeps,
    /// One sweep in a loop over the directions, which recomputes the adjoint at each:
    /// code the size of one sweep, whatever the number of directions.
    Loop,
}

/// The Hessian-vector product of `f` (one scalar output) in the inputs `wrt`: a function
/// of `f`'s inputs, then one tangent word per `wrt` word (`v`), with the outputs `H v`
/// (one word per `wrt` word).
pub fn hvp(f: &Function, wrt: &[u32]) -> Function {
    let adjoint = reverse(f);
    let n = f.num_inputs;
    let mut b = Builder::new(n + wrt.len() as u32);
    let span = Span::call_site();
    let inputs: Vec<ValueId> = (0..n).map(|w| b.push(Op::Input(w), span, None)).collect();
    let mut tangents: Vec<Option<ValueId>> = vec![None; n as usize];
    for (k, w) in wrt.iter().enumerate() {
        tangents[*w as usize] = Some(b.push(Op::Input(n + k as u32), span, None));
    }
    let (_, tans) = forward_into(&adjoint, &mut b, &inputs, &tangents);
    let outputs = wrt
        .iter()
        .map(|w| tans[1 + *w as usize].unwrap_or_else(|| b.constant(0.0, span)))
        .collect();
    b.finish(outputs)
}

/// The Hessian of `f` (one scalar output) in the inputs `wrt`: a function of `f`'s inputs
/// with the outputs `[value, d value / d wrt_j..., H (wrt x wrt words, row-major)]`.
/// The Hessian is symmetric to the bit: each pair of mirrored entries is one value.
pub fn hessian(f: &Function, wrt: &[u32], form: HessianForm) -> Function {
    let adjoint = reverse(f);
    let n = f.num_inputs;
    let mut b = Builder::new(n);
    let span = Span::call_site();
    let inputs: Vec<ValueId> = (0..n).map(|w| b.push(Op::Input(w), span, None)).collect();
    let map = inline(&adjoint, &mut b, &inputs, false);
    let mut outputs = vec![map[adjoint.outputs[0].index()]];
    outputs.extend(
        wrt.iter()
            .map(|w| map[adjoint.outputs[1 + *w as usize].index()]),
    );
    let entries = match form {
        HessianForm::Sweeps => sweeps(&adjoint, wrt, &mut b, &inputs),
        HessianForm::Loop => looped(&adjoint, wrt, &mut b, &inputs),
    };
    let d = wrt.len();
    for i in 0..d {
        for j in 0..d {
            outputs.push(entries[i.min(j) * d + i.max(j)]);
        }
    }
    b.finish(outputs)
}

/// Row `i` of the Hessian from a tangent sweep along direction `i`: entries `j >= i`
/// (row-major over all `d x d`, the lower triangle left as zero constants).
fn sweeps(adjoint: &Function, wrt: &[u32], b: &mut Builder, inputs: &[ValueId]) -> Vec<ValueId> {
    let span = Span::call_site();
    let d = wrt.len();
    let zero = b.constant(0.0, span);
    let mut entries = vec![zero; d * d];
    for (i, wi) in wrt.iter().enumerate() {
        let one = b.constant(1.0, span);
        let tangents: Vec<Option<ValueId>> = (0..inputs.len() as u32)
            .map(|w| (w == *wi).then_some(one))
            .collect();
        let (_, tans) = forward_into(adjoint, b, inputs, &tangents);
        for (j, wj) in wrt.iter().enumerate().skip(i) {
            entries[i * d + j] = tans[1 + *wj as usize].unwrap_or(zero);
        }
    }
    entries
}

/// The Hessian's words from one loop over the directions: iteration `i` sweeps along
/// direction `i` and writes row `i` into an array of `d x d` words it carries.
fn looped(adjoint: &Function, wrt: &[u32], b: &mut Builder, inputs: &[ValueId]) -> Vec<ValueId> {
    let span = Span::call_site();
    let d = wrt.len();
    let words = Ty::Array((d * d) as u32);
    // The body's inputs: [i, the Hessian so far, f's inputs (captured)].
    let mut tys = vec![Ty::Int, words];
    tys.extend(inputs.iter().map(|v| b.ty(*v)));
    let mut nb = Builder::with_inputs(tys);
    let index = nb.push(Op::Input(0), span, Some("direction".into()));
    let mut h = nb.push(Op::Input(1), span, Some("hessian".into()));
    let caps: Vec<ValueId> = (0..inputs.len() as u32)
        .map(|w| nb.push(Op::Input(2 + w), span, None))
        .collect();
    let (one, zero) = (nb.constant(1.0, span), nb.constant(0.0, span));
    let mut tangents: Vec<Option<ValueId>> = vec![None; inputs.len()];
    for (k, w) in wrt.iter().enumerate() {
        let at = nb.int(k as i64, span);
        let here = nb.cmp(CmpOp::Eq, index, at, span);
        tangents[*w as usize] = Some(nb.select(here, one, zero, span));
    }
    let (_, tans) = forward_into(adjoint, &mut nb, &caps, &tangents);
    let width = nb.int(d as i64, span);
    let row = nb.push(Op::IntBin(IntOp::Mul, index, width), span, None);
    for (j, w) in wrt.iter().enumerate() {
        let t = tans[1 + *w as usize].unwrap_or(zero);
        let jj = nb.int(j as i64, span);
        let at = nb.push(Op::IntBin(IntOp::Add, row, jj), span, None);
        h = nb.set(h, at, t, span);
    }
    let body = nb.finish(vec![h]);
    let init = b.zero(words, span);
    let l = b.push(
        Op::Loop(Box::new(Loop {
            start: 0,
            end: d as i64,
            init: vec![init],
            captures: inputs.to_vec(),
            body,
            kind: LoopKind::Forward,
        })),
        span,
        None,
    );
    let h = b.push(Op::Result(l, 0), span, Some("hessian".into()));
    (0..d * d).map(|k| b.get(h, k, span)).collect()
}
