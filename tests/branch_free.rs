//! Value, tangent and Jacobian kernels write `sin`, `cos` and `tanh` without branches
//! (`ops::WGSL_BRANCH_FREE_HELPERS`); adjoint kernels keep the branching forms. Both must
//! compute the same bits: for `sin` and `cos` on either side of |x| = 8192 (where the
//! driver's functions take over) and at the quadrant edges, for `tanh` either side of 0.625
//! and 9 (where its formula changes), and for NaN and infinities.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

#[differentiable]
pub fn waves(x: f32) -> f32 {
    x.sin() * 3.0 + x.cos()
}

#[differentiable]
pub fn squash(x: f32) -> f32 {
    x.tanh()
}

#[test]
fn branch_free_tanh_computes_the_branching_forms_bits() {
    let kernel = squash::kernel(device());
    assert!(squash::WGSL_FORWARD.contains("let t = select(e, 1.0, !(ax < 9.0));"));
    assert!(!squash::WGSL_ADJOINT.contains("let t = select(e, 1.0, !(ax < 9.0));"));
    let mut rng = Rng(8);
    let mut xs: Vec<f32> = (0..4000).map(|_| rng.uniform(-12.0, 12.0)).collect();
    for edge in [0.625f32, 9.0] {
        for x in [edge.next_down(), edge, edge.next_up()] {
            xs.extend([x, -x]);
        }
    }
    xs.extend([0.0, -0.0, 1e-30, -1e-30, 88.0, 1e30, -1e30]);
    xs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let args: Vec<squash::Args> = xs.iter().map(|&x| squash::Args { x }).collect();
    let free = kernel.value(&args).expect("value kernel");
    let (branching, _) = kernel.value_and_grad(&args).expect("adjoint kernel");
    for ((x, a), b) in xs.iter().zip(&free).zip(&branching) {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "x = {x}: {a} without branches, {b} with"
        );
    }
}

#[test]
fn branch_free_sin_and_cos_compute_the_branching_forms_bits() {
    let kernel = waves::kernel(device());
    assert!(waves::WGSL_FORWARD.contains("let big = !(ax <= 8192.0);"));
    assert!(!waves::WGSL_ADJOINT.contains("let big = !(ax <= 8192.0);"));
    let mut rng = Rng(7);
    let mut xs: Vec<f32> = (0..4000).map(|_| rng.uniform(-40.0, 40.0)).collect();
    // Multiples of pi/4 (the reduction's quadrant edges), either side of 8192, specials.
    xs.extend((-64..64).map(|k| k as f32 * std::f32::consts::FRAC_PI_4));
    xs.extend([8191.9, 8192.0, 8192.001, -8192.0, 1e6, -3e7, 0.0, -0.0]);
    xs.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-30,
        f32::MIN_POSITIVE,
    ]);
    let args: Vec<waves::Args> = xs.iter().map(|&x| waves::Args { x }).collect();
    let free = kernel.value(&args).expect("value kernel");
    let (branching, _) = kernel.value_and_grad(&args).expect("adjoint kernel");
    for ((x, a), b) in xs.iter().zip(&free).zip(&branching) {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "x = {x}: {a} without branches, {b} with"
        );
    }
}
