use gradfuse::differentiable;

// Everything a function over f64 may name: f64 arguments, arrays, locals, literals with
// and without a suffix, `as f64`, `std::f64::consts`, a vector result.
#[differentiable]
pub fn over_f64(x: f64, p: [f64; 3], #[constant] c: f64) -> f64 {
    let mut s: f64 = 0.5f64;
    for i in 0..3 {
        s += p[i] * (i as f64) + x.sin() * std::f64::consts::E;
    }
    s * c + 1.0
}

#[differentiable]
pub fn polar(r: f64, theta: f64) -> (f64, [f64; 1]) {
    (r * theta.cos(), [r * theta.sin()])
}

// `#[shared]` words over f64: `Shared` and `SharedGrad` of f64 fields.
#[differentiable]
pub fn weighted(x: f64, #[shared] w: [f64; 2]) -> f64 {
    w[0] * x + w[1]
}

fn main() {
    let (_, _, sg) = weighted::value_and_grad(&weighted::Args { x: 1.0 }, &weighted::Shared { w: [2.0, 3.0] });
    let _: [f64; 2] = sg.w;
    let (v, g) = over_f64::value_and_grad(&over_f64::Args { x: 0.3, p: [1.0, 2.0, 3.0], c: 2.0 });
    let _: (f64, f64) = (v, g.x);
    let _: over_f64::Hessian = over_f64::value_grad_hessian(&over_f64::Args { x: 0.3, p: [1.0; 3], c: 1.0 }).2;
    let _: (f64, [f64; 1]) = polar::eval(1.0f64, 0.5f64);
}
