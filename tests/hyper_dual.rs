//! Hyper-dual numbers through `f::eval` (issue "Second order", item 2): every part of
//! `eval::<HyperDual<f64>>` against num-dual's `HyperDual64` evaluating the same formula, for
//! every pair of seeded variables, and the Hessians they give symmetric.

// Hessians are indexed by row and column side by side.
#![allow(clippy::needless_range_loop)]

use gradfuse::{HyperDual, differentiable};
use num_dual::{DualNum, HyperDual64};

/// Most methods of the table in one function of three variables.
#[differentiable]
pub fn mix(x: f32, y: f32, z: f32) -> f32 {
    x.sin() * y.exp()
        + (x + 3.0).ln() * (y + 2.0).sqrt()
        + y.atan2(x + 2.0)
        + (x * y).tanh()
        + (x + 2.0).powf(y)
        + x.hypot(z)
        + z.cosh() * x.cos()
        + (z * 0.5).atan()
        + x.powi(3) * z
        + (y + 1.5).log2()
        + z.exp2() / (x * x + 1.0)
        + (0.3 * x).asin() * (0.2 * z).acos()
        + (y * 0.7).tan()
        + (x - z).sinh()
        + (y + 4.0).log10() * x.recip()
}

/// The same formula in num-dual's numbers.
fn mix_num_dual(x: HyperDual64, y: HyperDual64, z: HyperDual64) -> HyperDual64 {
    x.sin() * y.exp()
        + (x + 3.0).ln() * (y + 2.0).sqrt()
        + y.atan2(x + 2.0)
        + (x * y).tanh()
        + (x + 2.0).powd(y)
        + (x * x + z * z).sqrt()
        + z.cosh() * x.cos()
        + (z * 0.5).atan()
        + x.powi(3) * z
        + (y + 1.5).log2()
        + z.exp2() / (x * x + 1.0)
        + (x * 0.3).asin() * (z * 0.2).acos()
        + (y * 0.7).tan()
        + (x - z).sinh()
        + (y + 4.0).log10() * x.recip()
}

/// A loop over an array argument: the extended Rosenbrock function.
#[differentiable]
pub fn rosenbrock(x: [f32; 4]) -> f32 {
    let mut s = 0.0;
    for i in 0..3 {
        s += 100.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2);
    }
    s
}

fn rosenbrock_num_dual(x: [HyperDual64; 4]) -> HyperDual64 {
    let mut s = HyperDual64::from_re(0.0);
    for i in 0..3 {
        s += (x[i + 1] - x[i] * x[i]).powi(2) * 100.0 + (-x[i] + 1.0).powi(2);
    }
    s
}

/// Word `k` seeded for the pair `(i, j)`: ε1 on word `i`, ε2 on word `j`.
fn seeded(v: f64, k: usize, (i, j): (usize, usize)) -> HyperDual<f64> {
    let one = |b: bool| if b { 1.0 } else { 0.0 };
    HyperDual::hyper(v, one(k == i), one(k == j), 0.0)
}

fn seeded_num_dual(v: f64, k: usize, (i, j): (usize, usize)) -> HyperDual64 {
    let one = |b: bool| if b { 1.0 } else { 0.0 };
    HyperDual64::new(v, one(k == i), one(k == j), 0.0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + b.abs())
}

#[test]
fn every_part_agrees_with_num_dual() {
    let points = [[0.3, -0.4, 0.9], [-0.7, 0.2, -1.1], [1.2, 0.8, 0.05]];
    for p in points {
        let mut hessian = [[0.0f64; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                let g = mix::eval(
                    seeded(p[0], 0, (i, j)),
                    seeded(p[1], 1, (i, j)),
                    seeded(p[2], 2, (i, j)),
                );
                let n = mix_num_dual(
                    seeded_num_dual(p[0], 0, (i, j)),
                    seeded_num_dual(p[1], 1, (i, j)),
                    seeded_num_dual(p[2], 2, (i, j)),
                );
                let parts = [
                    (g.re(), n.re),
                    (g.eps1(), n.eps1),
                    (g.eps2(), n.eps2),
                    (g.eps1eps2(), n.eps1eps2),
                ];
                for (k, (a, b)) in parts.into_iter().enumerate() {
                    assert!(
                        close(a, b),
                        "at {p:?}, pair ({i}, {j}), part {k}: {a} vs num-dual {b}"
                    );
                }
                hessian[i][j] = g.eps1eps2();
            }
        }
        for i in 0..3 {
            for j in 0..3 {
                assert!(close(hessian[i][j], hessian[j][i]), "{hessian:?}");
            }
        }
    }
}

#[test]
fn loops_and_arrays_agree_with_num_dual() {
    let x = [0.5, -1.2, 0.8, 1.5];
    for i in 0..4 {
        for j in 0..4 {
            let g = rosenbrock::eval(std::array::from_fn(|k| seeded(x[k], k, (i, j))));
            let n = rosenbrock_num_dual(std::array::from_fn(|k| seeded_num_dual(x[k], k, (i, j))));
            assert!(close(g.re(), n.re));
            assert!(close(g.eps1(), n.eps1) && close(g.eps2(), n.eps2));
            assert!(
                close(g.eps1eps2(), n.eps1eps2),
                "({i}, {j}): {} vs {}",
                g.eps1eps2(),
                n.eps1eps2
            );
        }
    }
    // The analytic diagonal of the first word: 1200 x0^2 - 400 x1 + 2.
    let g = rosenbrock::eval(std::array::from_fn(|k| seeded(x[k], k, (0, 0))));
    assert!(close(g.eps1eps2(), 1200.0 * 0.25 - 400.0 * -1.2 + 2.0));
}
