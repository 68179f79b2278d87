//! Value, tangent and Jacobian kernels write `sin` and `cos` without branches
//! (`ops::WGSL_BRANCH_FREE_HELPERS`); adjoint kernels keep the branching forms. Both must
//! compute the same bits, on either side of |x| = 8192 (where the driver's functions take
//! over), at the quadrant edges, and for NaN and infinities.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

#[differentiable]
pub fn waves(x: f32) -> f32 {
    x.sin() * 3.0 + x.cos()
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
