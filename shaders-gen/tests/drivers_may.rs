//! The interpreter's model of what WGSL lets a driver do (`interp::eval_as_drivers_may`):
//! ignore the sign of a computed zero, and cancel `x - x` or `0 * x` whatever `x` holds.
//! `tests/grammar_gpu.rs` sets aside the points where a result hangs on either; these
//! check that the model moves exactly those results.

use gradfuse_shaders_gen::{compile_str, interp};

/// The function's value at `x` exactly, and under each liberty.
fn values(src: &str, x: &[f64]) -> (f64, Vec<f64>) {
    let c = compile_str(src).unwrap_or_else(|e| panic!("{src}: {}", e[0]));
    let f = &c.lowered.primal;
    let liberal = interp::eval_as_drivers_may(f, x)
        .iter()
        .map(|r| r[0])
        .collect();
    (interp::eval(f, x)[0], liberal)
}

#[test]
fn a_result_that_hangs_on_a_computed_zeros_sign_moves() {
    // Rust: (1.3 - 1.3) is +0, its signum 1; a driver may make it -0.
    let (exact, liberal) = values("fn f(x: f32) -> f32 { (x - x).signum() }", &[1.3]);
    assert_eq!(exact, 1.0);
    assert!(liberal.contains(&-1.0), "{liberal:?}");
    // -(x - y) at x == y is -0 in Rust, +0 where a driver writes it y - x.
    let (exact, liberal) = values(
        "fn f(x: f32, y: f32) -> f32 { (-(x - y)).signum() }",
        &[0.5, 0.5],
    );
    assert_eq!(exact, -1.0);
    assert!(liberal.contains(&1.0), "{liberal:?}");
}

#[test]
fn a_cancelled_nan_moves() {
    // ln(-1) is NaN and 0 * NaN is NaN; a driver may assume no NaN and fold 0 * x to 0.
    let src = "fn f(v: f32, w: f32) -> f32 { if (v - v) * v.ln() < 1.0 { w } else { -w } }";
    let (exact, liberal) = values(src, &[-1.0, 2.0]);
    assert_eq!(exact, -2.0);
    assert!(liberal.contains(&2.0), "{liberal:?}");
    let src = "fn f(v: f32, w: f32) -> f32 { (v - v).mul_add(v.asin(), w) }";
    let (exact, liberal) = values(src, &[3.0, 2.0]);
    assert!(exact.is_nan());
    assert!(liberal.contains(&2.0), "{liberal:?}");
}

#[test]
fn results_that_hang_on_neither_stay() {
    let src = "fn f(x: f32, y: f32) -> f32 {
        let mut s = 0.0;
        for i in 0..4 { s += (x * y + (i as f32)).sin() * 0.0 + x.max(0.0) - y.signum(); }
        if s > 0.0 { s.sqrt() } else { (-s).ln() }
    }";
    for x in [[0.7, -1.2], [-0.3, 0.4], [2.0, 3.0]] {
        let (exact, liberal) = values(src, &x);
        assert!(exact.is_finite());
        assert!(
            liberal.iter().all(|v| *v == exact),
            "{x:?}: {exact} {liberal:?}"
        );
    }
}
