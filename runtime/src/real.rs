//! The scalar trait generic CPU code (`f::eval`) is written against.

use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A real scalar: `f32`, `f64`, or a [`Dual`](crate::Dual) number over one of them.
///
/// The methods mirror the f32 methods of the same name. Where a derivative does not exist
/// the number types follow the conventions of the compiler's function table
/// (`gradfuse-shaders-gen`'s `ops` module): ties of `min`/`max` split the derivative
/// `0.5 / 0.5`, `abs` has derivative 0 at 0, `clamp` takes the derivative of the branch
/// taken, `floor`/`ceil`/`round`/`signum` have derivative 0.
///
/// Comparisons (`PartialOrd`) compare values only.
#[allow(missing_docs)] // each method is the f32 method of the same name
pub trait Real:
    Copy
    + Debug
    + PartialOrd
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// The constant `v` (rounded to the type's precision).
    fn from_f64(v: f64) -> Self;
    /// The value as an f64 (for duals, the value part).
    fn to_f64(self) -> f64;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    /// `self.atan2(x)`: the angle of the point `(x, self)`.
    fn atan2(self, x: Self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn exp(self) -> Self;
    fn exp2(self) -> Self;
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn sqrt(self) -> Self;
    fn recip(self) -> Self;
    fn powi(self, n: i32) -> Self;
    fn powf(self, y: Self) -> Self;
    fn abs(self) -> Self;
    fn signum(self) -> Self;
    fn min(self, other: Self) -> Self;
    fn max(self, other: Self) -> Self;
    /// `if self < lo { lo } else if self > hi { hi } else { self }`: unlike `f32::clamp`,
    /// never panics (NaN stays NaN, `lo > hi` gives `lo` below `lo`).
    fn clamp(self, lo: Self, hi: Self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn hypot(self, other: Self) -> Self;
    /// `value`, whose derivative in `args[w]` is `partials[w]`: how a function with a
    /// custom derivative (`#[differentiable(grad = ...)]`) is evaluated generically. Plain
    /// numbers return `value`; duals take their tangents from the partials.
    #[inline]
    fn custom_grad(value: Self, args: &[Self], partials: &[Self]) -> Self {
        let _ = (args, partials);
        value
    }
}

macro_rules! impl_real_float {
    ($t:ty) => {
        impl Real for $t {
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            impl_real_float!(@unary $t: sin cos tan asin acos atan sinh cosh tanh exp exp2 ln
                log2 log10 sqrt recip abs signum floor ceil round);
            impl_real_float!(@binary $t: atan2 powf min max hypot);
            #[inline]
            fn powi(self, n: i32) -> Self {
                <$t>::powi(self, n)
            }
            #[inline]
            fn clamp(self, lo: Self, hi: Self) -> Self {
                if self < lo {
                    lo
                } else if self > hi {
                    hi
                } else {
                    self
                }
            }
            #[inline]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
        }
    };
    (@unary $t:ty: $($m:ident)*) => {
        $(#[inline] fn $m(self) -> Self { <$t>::$m(self) })*
    };
    (@binary $t:ty: $($m:ident)*) => {
        $(#[inline] fn $m(self, other: Self) -> Self { <$t>::$m(self, other) })*
    };
}

impl_real_float!(f32);
impl_real_float!(f64);
