//! Kernels whose outputs are wider than a vector store go through the workgroup's stage
//! and are stored in runs (`out_stage`): adjoints of more than 16 gradient words and
//! Jacobians of up to two chunks, each chunk of a power-of-two width permuted per element
//! in the stage (`stores.rs`, `chunk_swizzle`). On the GPU, at a batch that ends inside a
//! workgroup, they give the CPU versions' values and derivatives.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

#[differentiable]
fn wide(a: [f32; 20], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..19 {
        acc += (a[i] * s).tanh() * a[i + 1];
    }
    acc * s
}

#[differentiable]
fn wide_jacobian(x: [f32; 8]) -> [f32; 3] {
    let mut r = [0.0; 3];
    for j in 0..3 {
        let mut t = 0.0;
        for k in 0..8 {
            t += (x[k] * (j as f32 + 1.0)).sin() * x[7 - k];
        }
        r[j] = t;
    }
    r
}

fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 1e-4 * (1.0 + want.abs())
}

#[test]
fn wide_gradients_are_staged_and_match_the_cpu() {
    assert!(
        wide::WGSL_ADJOINT.contains("out_stage"),
        "21 gradient words: staged"
    );
    // Its first chunk, 16 words, permuted in the stage so that stores miss no bank.
    assert!(wide::WGSL_ADJOINT.contains("grads_swizzle_0"));
    let mut rng = Rng(17);
    let args: Vec<wide::Args> = (0..700)
        .map(|_| wide::Args {
            a: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            s: rng.uniform(0.5, 1.5),
        })
        .collect();
    let (values, grads) = wide::kernel(device())
        .value_and_grad(&args)
        .expect("launch");
    for (k, a) in args.iter().enumerate() {
        let (v, g) = wide::value_and_grad(a);
        assert_eq!(v, wide(a.a, a.s));
        assert!(close(values[k], v), "{k}: {} vs {v}", values[k]);
        for w in 0..20 {
            assert!(close(grads[k].a[w], g.a[w]), "{k}, a[{w}]");
        }
        assert!(close(grads[k].s, g.s), "{k}, s");
    }
}

#[test]
fn wide_jacobians_are_staged_and_match_the_cpu() {
    assert!(
        wide_jacobian::WGSL_JACOBIAN.contains("out_stage"),
        "24 Jacobian words: staged"
    );
    // Chunks of 16 and 8 words, both permuted.
    assert!(wide_jacobian::WGSL_JACOBIAN.contains("jacobians_swizzle_1"));
    let mut rng = Rng(18);
    let args: Vec<wide_jacobian::Args> = (0..700)
        .map(|_| wide_jacobian::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
        })
        .collect();
    let (values, jacobians) = wide_jacobian::kernel(device())
        .value_and_jacobian(&args)
        .expect("launch");
    for (k, a) in args.iter().enumerate() {
        let (v, j) = wide_jacobian::value_and_jacobian(a);
        assert_eq!(v, wide_jacobian(a.x));
        for m in 0..3 {
            assert!(close(values[k][m], v[m]), "{k}: result[{m}]");
            for w in 0..8 {
                assert!(close(jacobians[k][m].x[w], j[m].x[w]), "{k}: d{m}/dx[{w}]");
            }
        }
    }
}
