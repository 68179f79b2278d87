//! The derivative table: the partial derivatives of every function of [`crate::ops`], as
//! IR. Both the forward (tangent) and the reverse (adjoint) transform build their
//! derivatives here, so the two modes cannot disagree on a convention.

use crate::ir::{Builder, CmpOp, ValueId};
use crate::ops::Func;
use proc_macro2::Span;

/// Builds the partial derivative of `result = func(args)` in each argument, as IR.
///
/// Both the forward (tangent) and the reverse (adjoint) transform call this, so the
/// two modes cannot disagree on a convention.
pub fn partials(
    func: Func,
    b: &mut Builder,
    args: &[ValueId],
    result: ValueId,
    span: Span,
) -> Vec<ValueId> {
    use Func::*;
    let c = |b: &mut Builder, v: f64| b.constant(v, span);
    let call = |b: &mut Builder, f: Func, a: Vec<ValueId>| b.call(f, a, span);
    let x = args[0];
    match func {
        Add => vec![c(b, 1.0), c(b, 1.0)],
        Sub => vec![c(b, 1.0), c(b, -1.0)],
        Mul => vec![args[1], x],
        Div => {
            let inv = call(b, Recip, vec![args[1]]);
            let q = call(b, Mul, vec![result, inv]);
            vec![inv, call(b, Neg, vec![q])]
        }
        Neg => vec![c(b, -1.0)],
        Sin => vec![call(b, Cos, vec![x])],
        Cos => {
            let s = call(b, Sin, vec![x]);
            vec![call(b, Neg, vec![s])]
        }
        Tan => {
            let one = c(b, 1.0);
            let sq = call(b, Mul, vec![result, result]);
            vec![call(b, Add, vec![one, sq])]
        }
        Asin | Acos => {
            let one = c(b, 1.0);
            let sq = call(b, Mul, vec![x, x]);
            let d = call(b, Sub, vec![one, sq]);
            let r = call(b, Sqrt, vec![d]);
            let inv = call(b, Recip, vec![r]);
            if func == Asin {
                vec![inv]
            } else {
                vec![call(b, Neg, vec![inv])]
            }
        }
        Atan => {
            let one = c(b, 1.0);
            let sq = call(b, Mul, vec![x, x]);
            let d = call(b, Add, vec![one, sq]);
            vec![call(b, Recip, vec![d])]
        }
        Atan2 => {
            // result = atan2(y, x): d/dy = x / (x² + y²), d/dx = -y / (x² + y²).
            let (y, xx) = (args[0], args[1]);
            let y2 = call(b, Mul, vec![y, y]);
            let x2 = call(b, Mul, vec![xx, xx]);
            let r2 = call(b, Add, vec![x2, y2]);
            let inv = call(b, Recip, vec![r2]);
            let dy = call(b, Mul, vec![xx, inv]);
            let ny = call(b, Mul, vec![y, inv]);
            vec![dy, call(b, Neg, vec![ny])]
        }
        Sinh => vec![call(b, Cosh, vec![x])],
        Cosh => vec![call(b, Sinh, vec![x])],
        Tanh => {
            let one = c(b, 1.0);
            let sq = call(b, Mul, vec![result, result]);
            vec![call(b, Sub, vec![one, sq])]
        }
        Exp => vec![result],
        Exp2 => {
            let ln2 = c(b, std::f64::consts::LN_2);
            vec![call(b, Mul, vec![result, ln2])]
        }
        Ln => vec![call(b, Recip, vec![x])],
        Log2 | Log10 => {
            let k = c(
                b,
                if func == Log2 {
                    std::f64::consts::LN_2
                } else {
                    std::f64::consts::LN_10
                },
            );
            let d = call(b, Mul, vec![x, k]);
            vec![call(b, Recip, vec![d])]
        }
        Sqrt => {
            let half = c(b, 0.5);
            let inv = call(b, Recip, vec![result]);
            vec![call(b, Mul, vec![half, inv])]
        }
        Recip => {
            let sq = call(b, Mul, vec![result, result]);
            vec![call(b, Neg, vec![sq])]
        }
        Powi(n) => {
            if n == 0 {
                vec![c(b, 0.0)]
            } else {
                let k = c(b, n as f64);
                let p = call(b, Powi(n - 1), vec![x]);
                vec![call(b, Mul, vec![k, p])]
            }
        }
        Powf => {
            let y = args[1];
            let one = c(b, 1.0);
            let zero = c(b, 0.0);
            let ym1 = call(b, Sub, vec![y, one]);
            let p = call(b, Powf, vec![x, ym1]);
            let dx = call(b, Mul, vec![y, p]);
            let lnx = call(b, Ln, vec![x]);
            let dy_raw = call(b, Mul, vec![lnx, result]);
            let pos = b.cmp(CmpOp::Gt, x, zero, span);
            vec![dx, b.select(pos, dy_raw, zero, span)]
        }
        Abs => {
            let zero = c(b, 0.0);
            let one = c(b, 1.0);
            let minus = c(b, -1.0);
            let pos = b.cmp(CmpOp::Gt, x, zero, span);
            let neg = b.cmp(CmpOp::Lt, x, zero, span);
            let inner = b.select(neg, minus, zero, span);
            vec![b.select(pos, one, inner, span)]
        }
        Signum | Floor | Ceil | Round => vec![c(b, 0.0)],
        Min | Max => {
            // The gradient goes to the argument the result is: split 0.5/0.5 on a tie, and
            // none to a NaN argument (by Rust's rule never the result, unless both are).
            // Comparing which argument wins would give a NaN's partner nothing either.
            let (p, q) = (args[0], args[1]);
            let (one, half, zero) = (c(b, 1.0), c(b, 0.5), c(b, 0.0));
            let p_is = b.cmp(CmpOp::Eq, result, p, span);
            let q_is = b.cmp(CmpOp::Eq, result, q, span);
            let p_share = b.select(q_is, half, one, span);
            let q_share = b.select(p_is, half, one, span);
            vec![
                b.select(p_is, p_share, zero, span),
                b.select(q_is, q_share, zero, span),
            ]
        }
        Clamp => {
            let (lo, hi) = (args[1], args[2]);
            let (one, zero) = (c(b, 1.0), c(b, 0.0));
            let below = b.cmp(CmpOp::Lt, x, lo, span);
            let above = b.cmp(CmpOp::Gt, x, hi, span);
            let inside = b.select(above, zero, one, span);
            let dhi = b.select(above, one, zero, span);
            vec![
                b.select(below, zero, inside, span),
                b.select(below, one, zero, span),
                b.select(below, zero, dhi, span),
            ]
        }
        MulAdd => vec![args[1], x, c(b, 1.0)],
        Hypot => {
            // x / r and y / r, both scaled by 2^-64 (exactly) where r is huge: GPUs divide
            // through a reciprocal that flushes below 2^-126, which made d/dy of
            // hypot(0, 1e38) 0 instead of 1 on NVIDIA.
            let zero = c(b, 0.0);
            let huge = c(b, 18446744073709551616.0);
            let big = b.cmp(CmpOp::Gt, result, huge, span);
            let (tiny, one) = (c(b, 5.421010862427522e-20), c(b, 1.0));
            let scale = b.select(big, tiny, one, span);
            let r = call(b, Mul, vec![result, scale]);
            let inv = call(b, Recip, vec![r]);
            let pos = b.cmp(CmpOp::Gt, result, zero, span);
            let xs = call(b, Mul, vec![x, scale]);
            let ys = call(b, Mul, vec![args[1], scale]);
            let dx = call(b, Mul, vec![xs, inv]);
            let dy = call(b, Mul, vec![ys, inv]);
            vec![b.select(pos, dx, zero, span), b.select(pos, dy, zero, span)]
        }
    }
}
