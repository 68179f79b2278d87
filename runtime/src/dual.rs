//! Dual numbers: a value and `N` tangents, for forward-mode derivatives of `f::eval`.

use crate::real::Real;
use std::cmp::Ordering;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A value and `N` directional derivatives (tangents).
///
/// `f::eval` called with `Dual<f64, N>` arguments, argument word `i` seeded with
/// [`Dual::variable`]`(v, i)`, returns the value and the full gradient in one pass.
/// `T` is `f32`, `f64`, or itself a `Dual` (nested duals give higher derivatives).
#[derive(Clone, Copy, Debug)]
pub struct Dual<T, const N: usize> {
    re: T,
    eps: [T; N],
}

impl<T: Real, const N: usize> Dual<T, N> {
    /// A number from its value and tangents.
    pub fn new(value: T, tangent: [T; N]) -> Self {
        Dual {
            re: value,
            eps: tangent,
        }
    }

    /// A constant: every tangent zero.
    pub fn constant(value: T) -> Self {
        Dual::new(value, [T::from_f64(0.0); N])
    }

    /// The variable with index `i`: tangent `i` is one, the others zero.
    ///
    /// # Panics
    /// If `i >= N`.
    pub fn variable(value: T, i: usize) -> Self {
        assert!(
            i < N,
            "Dual::variable: index {i} out of range for {N} tangents"
        );
        let mut d = Dual::constant(value);
        d.eps[i] = T::from_f64(1.0);
        d
    }

    /// The value.
    pub fn value(&self) -> T {
        self.re
    }

    /// The tangents.
    pub fn tangent(&self) -> [T; N] {
        self.eps
    }

    /// `f(self)` given `f`'s value and derivative at `self.value()`.
    #[inline]
    fn chain(self, value: T, derivative: T) -> Self {
        Dual::new(value, self.eps.map(|e| e * derivative))
    }

    /// The linear combination `da * a' + db * b'` of two tangents.
    #[inline]
    fn combine(value: T, a: &Self, da: T, b: &Self, db: T) -> Self {
        let mut eps = a.eps;
        for (e, be) in eps.iter_mut().zip(b.eps) {
            *e = *e * da + be * db;
        }
        Dual::new(value, eps)
    }

    fn zero_tangent(value: T) -> Self {
        Dual::constant(value)
    }
}

/// Compares values only: tangents do not take part in comparisons.
impl<T: Real, const N: usize> PartialEq for Dual<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.re == other.re
    }
}

/// Compares values only.
impl<T: Real, const N: usize> PartialOrd for Dual<T, N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.re.partial_cmp(&other.re)
    }
}

impl<T: Real, const N: usize> Add for Dual<T, N> {
    type Output = Self;
    #[inline]
    fn add(self, o: Self) -> Self {
        let mut eps = self.eps;
        for (e, oe) in eps.iter_mut().zip(o.eps) {
            *e = *e + oe;
        }
        Dual::new(self.re + o.re, eps)
    }
}

impl<T: Real, const N: usize> Sub for Dual<T, N> {
    type Output = Self;
    #[inline]
    fn sub(self, o: Self) -> Self {
        let mut eps = self.eps;
        for (e, oe) in eps.iter_mut().zip(o.eps) {
            *e = *e - oe;
        }
        Dual::new(self.re - o.re, eps)
    }
}

impl<T: Real, const N: usize> Mul for Dual<T, N> {
    type Output = Self;
    #[inline]
    fn mul(self, o: Self) -> Self {
        Dual::combine(self.re * o.re, &self, o.re, &o, self.re)
    }
}

impl<T: Real, const N: usize> Div for Dual<T, N> {
    type Output = Self;
    #[inline]
    fn div(self, o: Self) -> Self {
        let inv = o.re.recip();
        let q = self.re * inv;
        Dual::combine(q, &self, inv, &o, -(q * inv))
    }
}

impl<T: Real, const N: usize> Neg for Dual<T, N> {
    type Output = Self;
    #[inline]
    fn neg(self) -> Self {
        Dual::new(-self.re, self.eps.map(|e| -e))
    }
}

impl<T: Real, const N: usize> Real for Dual<T, N> {
    fn from_f64(v: f64) -> Self {
        Dual::constant(T::from_f64(v))
    }
    fn custom_grad(value: Self, args: &[Self], partials: &[Self]) -> Self {
        let mut eps = [T::from_f64(0.0); N];
        for (a, p) in args.iter().zip(partials) {
            for (e, t) in eps.iter_mut().zip(&a.eps) {
                *e = *e + p.re * *t;
            }
        }
        Dual { re: value.re, eps }
    }
    fn to_f64(self) -> f64 {
        self.re.to_f64()
    }
    fn sin(self) -> Self {
        self.chain(self.re.sin(), self.re.cos())
    }
    fn cos(self) -> Self {
        self.chain(self.re.cos(), -self.re.sin())
    }
    fn tan(self) -> Self {
        let t = self.re.tan();
        self.chain(t, T::from_f64(1.0) + t * t)
    }
    fn asin(self) -> Self {
        let d = (T::from_f64(1.0) - self.re * self.re).sqrt().recip();
        self.chain(self.re.asin(), d)
    }
    fn acos(self) -> Self {
        let d = (T::from_f64(1.0) - self.re * self.re).sqrt().recip();
        self.chain(self.re.acos(), -d)
    }
    fn atan(self) -> Self {
        let d = (T::from_f64(1.0) + self.re * self.re).recip();
        self.chain(self.re.atan(), d)
    }
    fn atan2(self, x: Self) -> Self {
        let inv = (x.re * x.re + self.re * self.re).recip();
        Dual::combine(self.re.atan2(x.re), &self, x.re * inv, &x, -(self.re * inv))
    }
    fn sinh(self) -> Self {
        self.chain(self.re.sinh(), self.re.cosh())
    }
    fn cosh(self) -> Self {
        self.chain(self.re.cosh(), self.re.sinh())
    }
    fn tanh(self) -> Self {
        let t = self.re.tanh();
        self.chain(t, T::from_f64(1.0) - t * t)
    }
    fn exp(self) -> Self {
        let e = self.re.exp();
        self.chain(e, e)
    }
    fn exp2(self) -> Self {
        let e = self.re.exp2();
        self.chain(e, e * T::from_f64(std::f64::consts::LN_2))
    }
    fn ln(self) -> Self {
        self.chain(self.re.ln(), self.re.recip())
    }
    fn log2(self) -> Self {
        let d = (self.re * T::from_f64(std::f64::consts::LN_2)).recip();
        self.chain(self.re.log2(), d)
    }
    fn log10(self) -> Self {
        let d = (self.re * T::from_f64(std::f64::consts::LN_10)).recip();
        self.chain(self.re.log10(), d)
    }
    fn sqrt(self) -> Self {
        let r = self.re.sqrt();
        self.chain(r, T::from_f64(0.5) * r.recip())
    }
    fn recip(self) -> Self {
        let r = self.re.recip();
        self.chain(r, -(r * r))
    }
    fn powi(self, n: i32) -> Self {
        if n == 0 {
            return Dual::zero_tangent(T::from_f64(1.0));
        }
        let d = T::from_f64(n as f64) * self.re.powi(n - 1);
        self.chain(self.re.powi(n), d)
    }
    fn powf(self, y: Self) -> Self {
        let r = self.re.powf(y.re);
        let dx = y.re * self.re.powf(y.re - T::from_f64(1.0));
        let dy = if self.re > T::from_f64(0.0) {
            self.re.ln() * r
        } else {
            T::from_f64(0.0)
        };
        Dual::combine(r, &self, dx, &y, dy)
    }
    fn abs(self) -> Self {
        let zero = T::from_f64(0.0);
        let d = if self.re > zero {
            T::from_f64(1.0)
        } else if self.re < zero {
            T::from_f64(-1.0)
        } else {
            zero
        };
        self.chain(self.re.abs(), d)
    }
    fn signum(self) -> Self {
        Dual::zero_tangent(self.re.signum())
    }
    fn min(self, o: Self) -> Self {
        let (da, db) = split(self.re < o.re, o.re < self.re, self.re == o.re);
        Dual::combine(self.re.min(o.re), &self, da, &o, db)
    }
    fn max(self, o: Self) -> Self {
        let (da, db) = split(self.re > o.re, o.re > self.re, self.re == o.re);
        Dual::combine(self.re.max(o.re), &self, da, &o, db)
    }
    fn clamp(self, lo: Self, hi: Self) -> Self {
        if self.re < lo.re {
            lo
        } else if self.re > hi.re {
            hi
        } else {
            self
        }
    }
    fn floor(self) -> Self {
        Dual::zero_tangent(self.re.floor())
    }
    fn ceil(self) -> Self {
        Dual::zero_tangent(self.re.ceil())
    }
    fn round(self) -> Self {
        Dual::zero_tangent(self.re.round())
    }
    fn mul_add(self, a: Self, b: Self) -> Self {
        let mut eps = [T::from_f64(0.0); N];
        for (i, e) in eps.iter_mut().enumerate() {
            *e = self.eps[i] * a.re + a.eps[i] * self.re + b.eps[i];
        }
        Dual::new(self.re.mul_add(a.re, b.re), eps)
    }
    fn hypot(self, o: Self) -> Self {
        let r = self.re.hypot(o.re);
        let zero = T::from_f64(0.0);
        if r > zero {
            let inv = r.recip();
            Dual::combine(r, &self, self.re * inv, &o, o.re * inv)
        } else {
            Dual::zero_tangent(r)
        }
    }
}

/// Derivative weights of `min`/`max` in their two arguments: the winner gets 1, a tie
/// splits 0.5 / 0.5, a NaN comparison (neither wins, no tie) gives 0 / 0.
fn split<T: Real>(a_wins: bool, b_wins: bool, tie: bool) -> (T, T) {
    let w = |win: bool| {
        if win {
            T::from_f64(1.0)
        } else if tie {
            T::from_f64(0.5)
        } else {
            T::from_f64(0.0)
        }
    };
    (w(a_wins), w(b_wins))
}

/// A hyper-dual number `re + eps1 ε1 + eps2 ε2 + eps1eps2 ε1ε2` (ε1² = ε2² = 0), for
/// second derivatives through `f::eval`: argument word `i` seeded with `eps1 = 1` and word
/// `j` with `eps2 = 1` (the same word for a diagonal entry), the result's
/// [`eps1eps2`](Dual::eps1eps2) is ∂²f/∂x_i∂x_j, its `eps1` and `eps2` the first
/// derivatives. It is a dual number over dual numbers (ε2's coefficient is itself a dual
/// in ε1), so every function of [`Real`] and every convention of `Dual` carries over.
pub type HyperDual<T> = Dual<Dual<T, 1>, 1>;

impl<T: Real> Dual<Dual<T, 1>, 1> {
    /// The hyper-dual number with these four parts.
    pub fn hyper(re: T, eps1: T, eps2: T, eps1eps2: T) -> Self {
        Dual::new(Dual::new(re, [eps1]), [Dual::new(eps2, [eps1eps2])])
    }

    /// The real part.
    pub fn re(&self) -> T {
        self.re.re
    }

    /// The coefficient of ε1: the derivative along the first seeding.
    pub fn eps1(&self) -> T {
        self.re.eps[0]
    }

    /// The coefficient of ε2: the derivative along the second seeding.
    pub fn eps2(&self) -> T {
        self.eps[0].re
    }

    /// The coefficient of ε1ε2: the second derivative along both seedings.
    pub fn eps1eps2(&self) -> T {
        self.eps[0].eps[0]
    }
}
