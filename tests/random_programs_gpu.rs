//! Random straight-line programs (proptest over the IR) compiled to WGSL and run on the
//! GPU: values and gradients against the f64 interpreter. Catches emitter mistakes (operand
//! order, helper semantics, layout) that naga validation cannot see. The same programs as
//! f64 kernels hold the f64 emitter and its math library (`ops_f64.rs`) to 1e-11.

mod common;

use common::device;
use gradfuse::{KernelSpec, OutputSpec, Precision};
use gradfuse_shaders_gen::abi::{self, KernelKind};
use gradfuse_shaders_gen::random::{Step, build, build_long_loop, scalar_layout};
use gradfuse_shaders_gen::{ad, emit_wgsl, interp, opt, signature};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn gpu_only(_: &[f32], _: &mut [f32]) {
    unreachable!("random programs run on the GPU only")
}

/// A kernel spec for the adjoint of a random program, leaked: specs are `'static`.
fn adjoint_spec(
    inputs: u32,
    src: String,
    work_per_element: u64,
    precision: Precision,
) -> &'static KernelSpec {
    // 4-byte words: two per f64.
    let wps = if precision == Precision::F64 { 2 } else { 1 };
    let outputs: &'static [OutputSpec] = Box::leak(
        KernelKind::Adjoint
            .outputs(&scalar_layout(inputs))
            .iter()
            .map(|(binding, words, _)| OutputSpec {
                binding: *binding,
                words: *words * wps,
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    Box::leak(Box::new(KernelSpec {
        label: "random::adjoint",
        wgsl: Box::leak(src.into_boxed_str()),
        entry_point: KernelKind::Adjoint.entry_point(),
        workgroup_size: abi::WORKGROUP_SIZE,
        max_workgroups_per_dim: abi::MAX_WORKGROUPS_PER_DIM,
        params_binding: abi::PARAMS_BINDING,
        input_binding: abi::ARGS_BINDING,
        input_words: inputs * wps,
        outputs,
        shared: None,
        work_per_element,
        precision,
        cpu: gpu_only,
        bounds_checks: true,
        workgroup_bytes: 0,
        fallback: None,
    }))
}

proptest! {
    #![proptest_config(Config {
        cases: 48,
        rng_seed: RngSeed::Fixed(0x6770_755f_7261_6e64),
        ..Config::default()
    })]

    #[test]
    fn gpu_adjoint_matches_the_oracle(
        inputs in 1u32..5,
        program in prop::collection::vec(
            (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>())
                .prop_map(|(op, a, b, c)| Step { op, a, b, c }),
            1..24,
        ),
        points in prop::collection::vec(-2.0f32..2.0, 4 * 64),
    ) {
        let d = device();
        prop_assume!(d.is_gpu());
        let f = build(inputs, &program, false);
        let adjoint = opt::optimize(&ad::reverse(&opt::optimize(&f)));
        let src = emit_wgsl::emit_kernel("fn random(..) -> f32", &scalar_layout(inputs), KernelKind::Adjoint, &adjoint);
        let spec = adjoint_spec(inputs, src, adjoint.work(), Precision::F32);
        let n = inputs as usize;
        let input: Vec<f32> = points[..64 * n].to_vec();
        let mut values = vec![0.0f32; 64];
        let mut grads = vec![0.0f32; 64 * n];
        d.launch(spec, &input, &mut [&mut values, &mut grads]).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut worst = 0.0f64;
        for i in 0..64 {
            let x: Vec<f64> = input[i * n..(i + 1) * n].iter().map(|v| *v as f64).collect();
            let want = interp::eval(&ad::reverse(&f), &x);
            // Skip points where f32 overflows. (A jump of floor/round/signum between the f32
            // and the f64 evaluation would also show as a large error; the fixed seed has none.)
            if want.iter().any(|v| !v.is_finite() || v.abs() > 1e4) {
                continue;
            }
            let got: Vec<f64> = std::iter::once(values[i]).chain(grads[i * n..(i + 1) * n].iter().copied()).map(|v| v as f64).collect();
            let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max((g - w).abs() / scale);
            }
        }
        // f32 against f64 over up to 24 chained operations: a wrong operand order or
        // helper gives errors of order one; rounding stays orders of magnitude below this.
        prop_assert!(worst < 1e-3, "worst error {worst:e} relative to the largest output");
    }
}

proptest! {
    #![proptest_config(Config {
        cases: 48,
        rng_seed: RngSeed::Fixed(0x6770_755f_6636_3421),
        ..Config::default()
    })]

    #[test]
    fn f64_gpu_adjoint_matches_the_oracle(
        inputs in 1u32..5,
        program in prop::collection::vec(
            (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>())
                .prop_map(|(op, a, b, c)| Step { op, a, b, c }),
            1..24,
        ),
        points in prop::collection::vec(-2.0f64..2.0, 4 * 64),
    ) {
        let d = device();
        prop_assume!(d.is_gpu() && d.has_f64());
        let f = build(inputs, &program, false);
        let adjoint = opt::optimize(&ad::reverse(&opt::optimize(&f)));
        let mut layout = scalar_layout(inputs);
        layout.precision = signature::Precision::F64;
        let src = emit_wgsl::emit_kernel("fn random(..) -> f64", &layout, KernelKind::Adjoint, &adjoint);
        let spec = adjoint_spec(inputs, src, adjoint.work(), Precision::F64);
        let n = inputs as usize;
        let input: Vec<f64> = points[..64 * n].to_vec();
        let mut values = vec![0.0f64; 64];
        let mut grads = vec![0.0f64; 64 * n];
        d.launch(
            spec,
            gradfuse::bytemuck::cast_slice(&input),
            &mut [gradfuse::bytemuck::cast_slice_mut(&mut values[..]), gradfuse::bytemuck::cast_slice_mut(&mut grads[..])],
        )
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut worst = 0.0f64;
        for i in 0..64 {
            let x = &input[i * n..(i + 1) * n];
            let want = interp::eval(&ad::reverse(&f), x);
            if want.iter().any(|v| !v.is_finite() || v.abs() > 1e4) {
                continue;
            }
            let got: Vec<f64> = std::iter::once(values[i]).chain(grads[i * n..(i + 1) * n].iter().copied()).collect();
            let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max((g - w).abs() / scale);
            }
        }
        // Both in f64: a few ulp per operation, amplified by at most the 1e4 the outputs
        // are held below.
        prop_assert!(worst < 1e-11, "worst error {worst:e} relative to the largest output");
    }
}

proptest! {
    #![proptest_config(Config {
        // Few cases: lavapipe takes seconds to compile each pair of kernels.
        cases: 6,
        rng_seed: RngSeed::Fixed(0x6770_755f_6c6f_6e67),
        ..Config::default()
    })]

    /// Long loops around random bodies, whose adjoint kernels cut them into segments run
    /// again from checkpoints (`opt::checkpoint_long_loops`): values and gradients against
    /// the kernel that records every iteration, on the same device. The two run the same
    /// operations in the same order, so they agree to rounding, where f32 against the f64
    /// interpreter would not: hundreds of iterations of a random body amplify f32's rounding
    /// past any fixed tolerance (the interpreter checks the cut IR against the whole one in
    /// f64, `shaders-gen/tests/loops.rs`; the whole kernel meets the interpreter in
    /// `gpu_adjoint_matches_the_oracle`).
    #[test]
    fn gpu_adjoint_of_a_long_loop_matches_the_whole_tape(
        inputs in 1u32..4,
        carried in 1usize..4,
        trips in 300i64..700,
        program in prop::collection::vec(
            (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>())
                .prop_map(|(op, a, b, c)| Step { op, a, b, c }),
            1..10,
        ),
        points in prop::collection::vec(-1.5f32..1.5, 3 * 64),
    ) {
        let d = device();
        prop_assume!(d.is_gpu());
        let f = opt::optimize(&build_long_loop(inputs, carried, trips, &program, true));
        let n = inputs as usize;
        let input: Vec<f32> = points[..64 * n].to_vec();
        let mut outputs = Vec::new();
        for primal in [opt::checkpoint_long_loops(&f), f.clone()] {
            let adjoint = opt::optimize(&ad::reverse(&primal));
            let src = emit_wgsl::emit_kernel("fn random(..) -> f32", &scalar_layout(inputs), KernelKind::Adjoint, &adjoint);
            let spec = adjoint_spec(inputs, src, adjoint.work(), Precision::F32);
            let mut values = vec![0.0f32; 64];
            let mut grads = vec![0.0f32; 64 * n];
            d.launch(spec, &input, &mut [&mut values, &mut grads]).map_err(|e| TestCaseError::fail(e.to_string()))?;
            outputs.push((values, grads));
        }
        let ((cut_values, cut_grads), (values, grads)) = (&outputs[0], &outputs[1]);
        let got = cut_values.iter().chain(cut_grads);
        let want: Vec<f32> = values.iter().chain(grads).copied().collect();
        let scale = want.iter().fold(1.0f32, |m, w| if w.is_finite() { m.max(w.abs()) } else { m });
        for (g, w) in got.zip(&want) {
            prop_assert!(
                (g - w).abs() <= 1e-5 * scale || (g.is_nan() && w.is_nan()),
                "{g} against {w} (largest output {scale})"
            );
        }
    }
}
