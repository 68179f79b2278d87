//! Custom derivatives: `#[differentiable(grad = f_grad)]` makes every generated version of
//! `f`, and of the functions that call it, use `f_grad` for `f`'s derivative. The test
//! function's automatic derivative overflows to NaN where its custom one stays exact, which
//! shows which one is used.

mod common;

use common::device;
use gradfuse::{Device, Dual, differentiable};

/// The logistic function. Differentiated automatically, its derivative at x = -100 is
/// `e^100 / (1 + e^100)^2`, `inf / inf` in f32: NaN.
#[differentiable(grad = logistic_grad)]
pub fn logistic(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The same derivative written as `s (1 - s)`: finite everywhere.
#[differentiable]
pub fn logistic_grad(x: f32) -> f32 {
    let s = 1.0 / (1.0 + (-x).exp());
    s * (1.0 - s)
}

/// A caller: the custom derivative is used inside it too.
#[differentiable]
pub fn gate(a: f32, w: [f32; 2]) -> f32 {
    logistic(w[0] * a + w[1])
}

/// Without the custom derivative, for comparison.
#[differentiable]
pub fn logistic_plain(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// A custom derivative of a function of several words: the gradient words in order.
#[differentiable(grad = norm_grad)]
pub fn norm(p: [f32; 2], #[constant] scale: f32) -> f32 {
    scale * (p[0] * p[0] + p[1] * p[1]).sqrt()
}

#[differentiable]
pub fn norm_grad(p: [f32; 2], #[constant] scale: f32) -> [f32; 2] {
    let r = p[0].hypot(p[1]);
    [scale * p[0] / r, scale * p[1] / r]
}

fn expected(x: f32) -> f32 {
    let s = 1.0 / (1.0 + (-x).exp());
    s * (1.0 - s)
}

#[test]
fn the_custom_derivative_is_used_everywhere() {
    // The automatic derivative is NaN at -100; the custom one is exact.
    let (_, g) = logistic_plain::value_and_grad(&logistic_plain::Args { x: -100.0 });
    assert!(g.x.is_nan(), "the automatic derivative overflows: {}", g.x);
    for x in [-100.0f32, -3.0, 0.0, 0.5, 4.0] {
        let (v, g) = logistic::value_and_grad(&logistic::Args { x });
        assert_eq!(v, 1.0 / (1.0 + (-x).exp()));
        assert!((g.x - expected(x)).abs() <= 1e-7, "{x}: {}", g.x);
        let (_, d) = logistic::jvp(&logistic::Args { x }, &logistic::Grad { x: 1.0 });
        assert!((d - expected(x)).abs() <= 1e-7);
    }
    // On the GPU and the CPU fallback, and through a caller.
    let batch: Vec<logistic::Args> = [-100.0f32, -3.0, 0.0, 4.0]
        .iter()
        .map(|&x| logistic::Args { x })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (_, g) = logistic::kernel(d).value_and_grad(&batch).expect("launch");
        for (a, g) in batch.iter().zip(&g) {
            assert!((g.x - expected(a.x)).abs() <= 1e-6, "{}: {}", a.x, g.x);
        }
        let gates = [gate::Args {
            a: 50.0,
            w: [-2.0, 0.0],
        }];
        let (_, g) = gate::kernel(d).value_and_grad(&gates).expect("launch");
        // d/da = w0 * logistic'(-100) = -2 * s(1-s), finite.
        assert!(g[0].a.is_finite() && (g[0].a - -2.0 * expected(-100.0)).abs() < 1e-6);
    }
    // Duals through eval use it as well: finite at -100 where the body's is NaN.
    let d = logistic::eval(Dual::<f32, 1>::variable(-100.0, 0));
    assert!(
        (d.tangent()[0] - expected(-100.0)).abs() <= 1e-7,
        "{:?}",
        d.tangent()
    );
    let plain = logistic_plain::eval(Dual::<f32, 1>::variable(-100.0, 0));
    assert!(plain.tangent()[0].is_nan());
    let d = gate::eval(
        Dual::<f64, 1>::variable(0.5, 0),
        [Dual::constant(1.5), Dual::constant(0.0)],
    );
    assert!((d.tangent()[0] - 1.5 * expected(0.75) as f64).abs() < 1e-6);
}

#[test]
fn custom_derivatives_of_several_words_skip_constant_arguments() {
    let a = norm::Args {
        p: [3.0, 4.0],
        scale: 2.0,
    };
    let (v, g) = norm::value_and_grad(&a);
    assert_eq!(v, 10.0);
    assert!((g.p[0] - 1.2).abs() < 1e-6 && (g.p[1] - 1.6).abs() < 1e-6);
    let (_, gg) = norm::kernel(device()).value_and_grad(&[a]).expect("launch");
    assert!((gg[0].p[0] - 1.2).abs() < 1e-6 && (gg[0].p[1] - 1.6).abs() < 1e-6);
    assert!(
        norm::WGSL_ADJOINT.contains("gf_hypot"),
        "the custom formula is in the kernel"
    );
}
