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
    let d = Derivation { args, result, span };
    match func {
        Add => vec![c(b, 1.0), c(b, 1.0)],
        Sub => vec![c(b, 1.0), c(b, -1.0)],
        Mul => vec![args[1], x],
        Div => d.div(b),
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
        Asin | Acos => d.inverse_sine(b, func == Acos),
        Atan => {
            let one = c(b, 1.0);
            let sq = call(b, Mul, vec![x, x]);
            let d = call(b, Add, vec![one, sq]);
            vec![call(b, Recip, vec![d])]
        }
        Atan2 => d.atan2(b),
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
        Log2 => d.log_base(b, std::f64::consts::LN_2),
        Log10 => d.log_base(b, std::f64::consts::LN_10),
        Sqrt => {
            let half = c(b, 0.5);
            let inv = call(b, Recip, vec![result]);
            vec![call(b, Mul, vec![half, inv])]
        }
        Recip => {
            let sq = call(b, Mul, vec![result, result]);
            vec![call(b, Neg, vec![sq])]
        }
        Powi(n) => d.powi(b, n),
        Powf => d.powf(b),
        Abs => d.abs(b),
        Signum | Floor | Ceil | Round => vec![c(b, 0.0)],
        Min | Max => d.min_max(b),
        Clamp => d.clamp(b),
        MulAdd => vec![args[1], x, c(b, 1.0)],
        Hypot => d.hypot(b),
        Fresh => vec![c(b, 1.0)],
    }
}

/// The call whose partials [`partials`] builds, for the entries of more than a line.
struct Derivation<'a> {
    args: &'a [ValueId],
    result: ValueId,
    span: Span,
}

impl Derivation<'_> {
    fn c(&self, b: &mut Builder, v: f64) -> ValueId {
        b.constant(v, self.span)
    }

    fn call(&self, b: &mut Builder, f: Func, a: Vec<ValueId>) -> ValueId {
        b.call(f, a, self.span)
    }

    /// `x / y`: `1 / y` and `-(x / y) / y`.
    fn div(&self, b: &mut Builder) -> Vec<ValueId> {
        let inv = self.call(b, Func::Recip, vec![self.args[1]]);
        let q = self.call(b, Func::Mul, vec![self.result, inv]);
        vec![inv, self.call(b, Func::Neg, vec![q])]
    }

    /// `asin x` (`acos x`, `negated`): `±1 / sqrt(1 - x²)`.
    fn inverse_sine(&self, b: &mut Builder, negated: bool) -> Vec<ValueId> {
        let x = self.args[0];
        let one = self.c(b, 1.0);
        let sq = self.call(b, Func::Mul, vec![x, x]);
        let d = self.call(b, Func::Sub, vec![one, sq]);
        let r = self.call(b, Func::Sqrt, vec![d]);
        let inv = self.call(b, Func::Recip, vec![r]);
        if negated {
            vec![self.call(b, Func::Neg, vec![inv])]
        } else {
            vec![inv]
        }
    }

    /// `atan2(y, x)`: d/dy = x / (x² + y²), d/dx = -y / (x² + y²).
    fn atan2(&self, b: &mut Builder) -> Vec<ValueId> {
        let (y, xx) = (self.args[0], self.args[1]);
        let y2 = self.call(b, Func::Mul, vec![y, y]);
        let x2 = self.call(b, Func::Mul, vec![xx, xx]);
        let r2 = self.call(b, Func::Add, vec![x2, y2]);
        let inv = self.call(b, Func::Recip, vec![r2]);
        let dy = self.call(b, Func::Mul, vec![xx, inv]);
        let ny = self.call(b, Func::Mul, vec![y, inv]);
        vec![dy, self.call(b, Func::Neg, vec![ny])]
    }

    /// A logarithm of base `e^ln_base`: `1 / (x ln_base)`.
    fn log_base(&self, b: &mut Builder, ln_base: f64) -> Vec<ValueId> {
        let k = self.c(b, ln_base);
        let d = self.call(b, Func::Mul, vec![self.args[0], k]);
        vec![self.call(b, Func::Recip, vec![d])]
    }

    /// `x^n`: `n x^(n-1)` (0 for `n = 0`).
    fn powi(&self, b: &mut Builder, n: i32) -> Vec<ValueId> {
        if n == 0 {
            vec![self.c(b, 0.0)]
        } else {
            let k = self.c(b, n as f64);
            let p = self.call(b, Func::Powi(n - 1), vec![self.args[0]]);
            vec![self.call(b, Func::Mul, vec![k, p])]
        }
    }

    /// `x^y`: `y x^(y-1)`, and `ln(x) x^y` where `x > 0` (else 0).
    fn powf(&self, b: &mut Builder) -> Vec<ValueId> {
        let (x, y, span) = (self.args[0], self.args[1], self.span);
        let one = self.c(b, 1.0);
        let zero = self.c(b, 0.0);
        let ym1 = self.call(b, Func::Sub, vec![y, one]);
        let p = self.call(b, Func::Powf, vec![x, ym1]);
        let dx = self.call(b, Func::Mul, vec![y, p]);
        let lnx = self.call(b, Func::Ln, vec![x]);
        let dy_raw = self.call(b, Func::Mul, vec![lnx, self.result]);
        let pos = b.cmp(CmpOp::Gt, x, zero, span);
        vec![dx, b.select(pos, dy_raw, zero, span)]
    }

    /// `|x|`: the sign of `x` (0 at 0).
    fn abs(&self, b: &mut Builder) -> Vec<ValueId> {
        let (x, span) = (self.args[0], self.span);
        let zero = self.c(b, 0.0);
        let one = self.c(b, 1.0);
        let minus = self.c(b, -1.0);
        let pos = b.cmp(CmpOp::Gt, x, zero, span);
        let neg = b.cmp(CmpOp::Lt, x, zero, span);
        let inner = b.select(neg, minus, zero, span);
        vec![b.select(pos, one, inner, span)]
    }

    /// `min` and `max`: the gradient goes to the argument the result is: split 0.5/0.5 on
    /// a tie, and none to a NaN argument (by Rust's rule never the result, unless both
    /// are). Comparing which argument wins would give a NaN's partner nothing either.
    fn min_max(&self, b: &mut Builder) -> Vec<ValueId> {
        let (p, q, span) = (self.args[0], self.args[1], self.span);
        let (one, half, zero) = (self.c(b, 1.0), self.c(b, 0.5), self.c(b, 0.0));
        let p_is = b.cmp(CmpOp::Eq, self.result, p, span);
        let q_is = b.cmp(CmpOp::Eq, self.result, q, span);
        let p_share = b.select(q_is, half, one, span);
        let q_share = b.select(p_is, half, one, span);
        vec![
            b.select(p_is, p_share, zero, span),
            b.select(q_is, q_share, zero, span),
        ]
    }

    /// `x.clamp(lo, hi)`: 1 to whichever of the three the result is.
    fn clamp(&self, b: &mut Builder) -> Vec<ValueId> {
        let (x, lo, hi, span) = (self.args[0], self.args[1], self.args[2], self.span);
        let (one, zero) = (self.c(b, 1.0), self.c(b, 0.0));
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

    /// `hypot(x, y)`: x / r and y / r, both scaled by 2^-64 (exactly) where r is huge:
    /// GPUs divide through a reciprocal that flushes below 2^-126, which made d/dy of
    /// hypot(0, 1e38) 0 instead of 1 on NVIDIA.
    fn hypot(&self, b: &mut Builder) -> Vec<ValueId> {
        let (x, y, r, span) = (self.args[0], self.args[1], self.result, self.span);
        let zero = self.c(b, 0.0);
        let huge = self.c(b, 18446744073709551616.0);
        let big = b.cmp(CmpOp::Gt, r, huge, span);
        let (tiny, one) = (self.c(b, 5.421010862427522e-20), self.c(b, 1.0));
        let scale = b.select(big, tiny, one, span);
        let r = self.call(b, Func::Mul, vec![r, scale]);
        let inv = self.call(b, Func::Recip, vec![r]);
        let pos = b.cmp(CmpOp::Gt, self.result, zero, span);
        let xs = self.call(b, Func::Mul, vec![x, scale]);
        let ys = self.call(b, Func::Mul, vec![y, scale]);
        let dx = self.call(b, Func::Mul, vec![xs, inv]);
        let dy = self.call(b, Func::Mul, vec![ys, inv]);
        vec![b.select(pos, dx, zero, span), b.select(pos, dy, zero, span)]
    }
}
