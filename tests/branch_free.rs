//! Value, tangent and Jacobian kernels write `sin` and `cos` without branches
//! (`ops::WGSL_BRANCH_FREE_HELPERS`), the cooperative network adjoint `tanh`
//! (`ops::WGSL_TANH_BRANCH_FREE`); other kernels keep the branching forms. Both must compute
//! the same bits, on either side of the points where their formulas change, and for NaN
//! and infinities. So must `gf_sincos`, which kernels that need both a `sin` and a `cos`
//! of one argument call instead of the two.

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
    gpu_only("tanh_both_ways", wgsl, 2)
}

/// A GPU-only kernel `main` of workgroups of 64 over one input word an element (binding
/// 1), with `outputs` outputs of one word an element (bindings 2, 3, ..).
fn gpu_only(label: &'static str, wgsl: String, outputs: u32) -> &'static KernelSpec {
    let outputs: Vec<OutputSpec> = (2..2 + outputs)
        .map(|binding| OutputSpec { binding, words: 1 })
        .collect();
    Box::leak(Box::new(KernelSpec {
        label,
        wgsl: Box::leak(wgsl.into_boxed_str()),
        entry_point: "main",
        workgroup_size: 64,
        max_workgroups_per_dim: 65535,
        params_binding: 0,
        input_binding: 1,
        input_words: 1,
        outputs: Box::leak(outputs.into_boxed_slice()),
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
/// branching one every other kernel writes, on either side of 0.625 (where its formula
/// changes) and of 9.011 (where it reaches 1), NaN and infinities.
#[test]
fn branch_free_tanh_computes_the_branching_forms_bits() {
    let mut rng = Rng(8);
    let mut xs: Vec<f32> = (0..4000).map(|_| rng.uniform(-12.0, 12.0)).collect();
    for edge in [0.625f32, 9.0, 9.011] {
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

/// Past 9 neither form selects 1: `1 - 2 / (exp(2|x|) + 1)` rounds to the f64 tanh's nearest
/// float (0.99999994 up to 9.011, 13 ln 2, where the select at 9 they had gave 1, an ulp
/// off), and to 1 from there to infinity, never over it.
#[test]
fn tanh_past_9_is_the_nearest_float_and_reaches_1() {
    let mut xs: Vec<f32> = (0..=400).map(|k| 8.9 + k as f32 * 0.0005).collect();
    xs.extend([12.0, 20.0, 44.0, 45.0, 88.0, 1e30, f32::MAX, f32::INFINITY]);
    let negated: Vec<f32> = xs.iter().map(|x| -x).collect();
    xs.extend(negated);
    let mut branching = vec![0.0f32; xs.len()];
    let mut free = vec![0.0f32; xs.len()];
    device()
        .launch(tanh_both_ways(), &xs, &mut [&mut branching, &mut free])
        .expect("launch");
    for ((&x, &a), &b) in xs.iter().zip(&free).zip(&branching) {
        let nearest = (x as f64).tanh() as f32;
        for (form, t) in [("without branches", a), ("with branches", b)] {
            // Up to 9.008, 2 / (exp(2|x|) + 1) is half a percent or more over half an ulp of 1,
            // where Vulkan's `exp` and division are off by some 1e-6 of it at most; nearer
            // 9.011 it may round either way.
            let ulps = if x.abs() <= 9.008 { 0.0 } else { 1.0 };
            assert!(
                t.abs() <= 1.0 && (t - nearest).abs() <= ulps * f32::EPSILON / 2.0,
                "x = {x}: {t} {form}, the nearest float to tanh {nearest}"
            );
        }
        if x.abs() >= 9.02 {
            assert_eq!(a, x.signum(), "x = {x}");
        }
    }
    // The select at 9 gave 1 here: the nearest float is an ulp under.
    assert_eq!((9.005f64).tanh() as f32, 1.0 - f32::EPSILON / 2.0);
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

/// A kernel computing, for each element `x`, `gf_sin(x)`, `gf_cos(x)` and both lanes of
/// `gf_sincos(x)` in their branching forms, and both lanes of the branch-free
/// `gf_sincos(x)`: six outputs.
fn sincos_all_ways() -> &'static KernelSpec {
    use gradfuse_shaders_gen::ops::{WGSL_BRANCH_FREE_HELPERS, wgsl_helper};
    use gradfuse_shaders_gen::signature::Precision as P;
    let helper = |name: &str| wgsl_helper(name, P::F32).expect("helper");
    let free = (WGSL_BRANCH_FREE_HELPERS.iter())
        .find(|(name, _)| *name == "gf_sincos")
        .expect("a branch-free gf_sincos")
        .1
        .replace("fn gf_sincos(", "fn gf_sincos_free(");
    let wgsl = format!(
        "struct Params {{\n    n: u32,\n    per_thread: u32,\n}}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read> args: array<f32>;\n\
         @group(0) @binding(2) var<storage, read_write> sin_alone: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> cos_alone: array<f32>;\n\
         @group(0) @binding(4) var<storage, read_write> sin_both: array<f32>;\n\
         @group(0) @binding(5) var<storage, read_write> cos_both: array<f32>;\n\
         @group(0) @binding(6) var<storage, read_write> sin_free: array<f32>;\n\
         @group(0) @binding(7) var<storage, read_write> cos_free: array<f32>;\n\
         {}\n{}\n{}\n{free}\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n    \
         if (id.x < params.n) {{\n        \
         let x = args[id.x];\n        \
         sin_alone[id.x] = gf_sin(x);\n        \
         cos_alone[id.x] = gf_cos(x);\n        \
         let both = gf_sincos(x);\n        \
         sin_both[id.x] = both.x;\n        \
         cos_both[id.x] = both.y;\n        \
         let free = gf_sincos_free(x);\n        \
         sin_free[id.x] = free.x;\n        \
         cos_free[id.x] = free.y;\n    }}\n}}\n",
        helper("gf_sin"),
        helper("gf_cos"),
        helper("gf_sincos"),
    );
    gpu_only("sincos_all_ways", wgsl, 6)
}

/// `gf_sincos` (both forms) against `gf_sin` and `gf_cos` called apart, bit for bit, at the
/// reduction's quadrant edges, either side of 8192, and specials; and a kernel that needs
/// both of one argument calls it once.
#[test]
fn sincos_computes_the_bits_of_sin_and_cos() {
    assert!(waves::WGSL_ADJOINT.contains("= gf_sincos(x);"));
    assert!(!waves::WGSL_ADJOINT.contains("gf_sin(x)"));
    let mut rng = Rng(9);
    let mut xs: Vec<f32> = (0..4000).map(|_| rng.uniform(-40.0, 40.0)).collect();
    for k in -64..64 {
        let edge = k as f32 * std::f32::consts::FRAC_PI_4;
        xs.extend([edge.next_down(), edge, edge.next_up()]);
    }
    xs.extend([8191.9, 8192.0, 8192.001, -8192.0, 1e6, -3e7, 0.0, -0.0]);
    xs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, -1e-30]);
    let mut outs = vec![vec![0.0f32; xs.len()]; 6];
    let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
    device()
        .launch(sincos_all_ways(), &xs, &mut slices)
        .expect("launch");
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for (k, x) in xs.iter().enumerate() {
        let [s, c, s2, c2, s3, c3] = std::array::from_fn(|j| outs[j][k]);
        assert!(
            same(s, s2) && same(c, c2),
            "x = {x}: sincos ({s2}, {c2}), apart ({s}, {c})"
        );
        assert!(
            same(s, s3) && same(c, c3),
            "x = {x}: without branches ({s3}, {c3}), apart ({s}, {c})"
        );
        // They are sin and cos: the kernel ran.
        if x.abs() <= 8192.0 {
            assert!(
                (s - x.sin()).abs() <= 2e-7 && (c - x.cos()).abs() <= 2e-7,
                "x = {x}"
            );
        }
    }
}
