//! Value, tangent and Jacobian kernels write `sin` and `cos` without branches
//! (`ops::WGSL_BRANCH_FREE_HELPERS`), the cooperative network adjoint `tanh`
//! (`ops::WGSL_TANH_BRANCH_FREE`); other kernels keep the branching forms. Both must compute
//! the same bits, on either side of the points where their formulas change, and for NaN
//! and infinities.

mod common;

use common::{Rng, device};
use gradfuse::{KernelSpec, OutputSpec, Precision, differentiable};

#[differentiable]
pub fn waves(x: f32) -> f32 {
    x.sin() * 3.0 + x.cos()
}

/// A kernel computing, for each element `x`, the branching `gf_tanh(x)` into the first
/// output and the branch-free one into the second.
fn tanh_both_ways() -> &'static KernelSpec {
    use gradfuse_shaders_gen::ops::{WGSL_TANH_BRANCH_FREE, wgsl_helper};
    use gradfuse_shaders_gen::signature::Precision as P;
    let branching = wgsl_helper("gf_tanh", P::F32).expect("gf_tanh");
    let free = WGSL_TANH_BRANCH_FREE.replace("fn gf_tanh(", "fn gf_tanh_free(");
    let wgsl = format!(
        "struct Params {{\n    n: u32,\n    per_thread: u32,\n}}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read> args: array<f32>;\n\
         @group(0) @binding(2) var<storage, read_write> branching: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> free: array<f32>;\n\
         {branching}\n{free}\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n    \
         if (id.x < params.n) {{\n        \
         branching[id.x] = gf_tanh(args[id.x]);\n        \
         free[id.x] = gf_tanh_free(args[id.x]);\n    }}\n}}\n"
    );
    Box::leak(Box::new(KernelSpec {
        label: "tanh_both_ways",
        wgsl: Box::leak(wgsl.into_boxed_str()),
        entry_point: "main",
        workgroup_size: 64,
        max_workgroups_per_dim: 65535,
        params_binding: 0,
        input_binding: 1,
        input_words: 1,
        outputs: &[
            OutputSpec {
                binding: 2,
                words: 1,
            },
            OutputSpec {
                binding: 3,
                words: 1,
            },
        ],
        shared: None,
        work_per_element: 1,
        precision: Precision::F32,
        cpu: |_, _| unreachable!("GPU only"),
        bounds_checks: true,
        workgroup_bytes: 0,
        fallback: None,
    }))
}

/// The cooperative network adjoint's `tanh` (`ops::WGSL_TANH_BRANCH_FREE`) against the
/// branching one every other kernel writes, on either side of 0.625 and 9 (where its
/// formula changes), NaN and infinities.
#[test]
fn branch_free_tanh_computes_the_branching_forms_bits() {
    let mut rng = Rng(8);
    let mut xs: Vec<f32> = (0..4000).map(|_| rng.uniform(-12.0, 12.0)).collect();
    for edge in [0.625f32, 9.0] {
        for x in [edge.next_down(), edge, edge.next_up()] {
            xs.extend([x, -x]);
        }
    }
    xs.extend([0.0, -0.0, 1e-30, -1e-30, 88.0, 1e30, -1e30]);
    xs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let mut branching = vec![0.0f32; xs.len()];
    let mut free = vec![0.0f32; xs.len()];
    device()
        .launch(tanh_both_ways(), &xs, &mut [&mut branching, &mut free])
        .expect("launch");
    for ((x, a), b) in xs.iter().zip(&free).zip(&branching) {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "x = {x}: {a} without branches, {b} with"
        );
        // Both are tanh: the kernel ran.
        if !x.is_nan() {
            assert!((b - x.tanh()).abs() <= 4e-7, "x = {x}: tanh {b}");
        }
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
