//! The launch descriptions that every `KernelSpec` is quoted from: words counted by hand
//! for one function of every argument kind, in f32 and f64 (two 4-byte words a scalar).

use gradfuse_shaders_gen::abi::{GRAD_BINDING, KernelKind, VALUE_BINDING};
use gradfuse_shaders_gen::compile_str;
use gradfuse_shaders_gen::launch::{SharedLaunch, kernel_launch, reverse_kind};

/// `x` and `p` differentiable (4 gradient words), `c` constant, 16 shared words.
fn source(float: &str) -> String {
    format!(
        "fn f(x: {float}, p: [{float}; 3], #[constant] c: {float}, #[shared] w: [{float}; 16]) -> {float} {{
            let mut s = x * c;
            for i in 0..16 {{
                s += w[i] * p[0] - p[1] * p[2];
            }}
            s
        }}"
    )
}

#[test]
fn launches_count_every_buffer_in_four_byte_words() {
    for (float, wps) in [("f32", 1), ("f64", 2)] {
        let c = compile_str(&source(float)).expect("compiles");
        assert_eq!(reverse_kind(&c), KernelKind::Adjoint);
        let forward = kernel_launch(&c, KernelKind::Forward);
        assert_eq!(forward.input_words, 5 * wps);
        assert_eq!(forward.outputs, vec![(VALUE_BINDING, wps)]);
        // The f32 adjoint computes 2 elements per thread (its 16 words summed in
        // registers), the f64 one 1.
        let elements = if wps == 1 { 2 } else { 1 };
        assert_eq!(c.adjoint_elements, elements);
        let shared = |reduced| {
            Some(SharedLaunch {
                words: 16 * wps,
                uniform: true,
                reduced,
                elements_per_thread: if reduced { elements } else { 1 },
                divides_chunks: false,
            })
        };
        assert_eq!(forward.shared, shared(false));
        let adjoint = kernel_launch(&c, KernelKind::Adjoint);
        assert_eq!(adjoint.input_words, 5 * wps);
        assert_eq!(
            adjoint.outputs,
            vec![(VALUE_BINDING, wps), (GRAD_BINDING, 4 * wps)]
        );
        assert_eq!(adjoint.shared, shared(true));
        // The tangent kernel reads a tangent per gradient word after the arguments, and the
        // shared words' tangents after the shared words.
        let tangent = kernel_launch(&c, KernelKind::Tangent);
        assert_eq!(tangent.input_words, 9 * wps);
        assert_eq!(
            tangent.outputs,
            vec![(VALUE_BINDING, wps), (GRAD_BINDING, wps)]
        );
        assert_eq!(
            tangent.shared.map(|s| (s.words, s.reduced)),
            Some((32 * wps, false))
        );
        // The loop of 16 trips is counted by its trips.
        assert!(forward.work_per_element > 16 * 3, "{forward:?}");
    }
}

#[test]
fn a_vector_result_launches_the_jacobian_kernel() {
    let c = compile_str("fn g(x: [f32; 4]) -> [f32; 2] { [x[0] * x[1], x[2] + x[3]] }")
        .expect("compiles");
    assert_eq!(reverse_kind(&c), KernelKind::Jacobian);
    let jacobian = kernel_launch(&c, KernelKind::Jacobian);
    assert_eq!(jacobian.input_words, 4);
    assert_eq!(
        jacobian.outputs,
        vec![(VALUE_BINDING, 2), (GRAD_BINDING, 8)]
    );
    assert_eq!(jacobian.shared, None);
}

/// The work a benchmark's roofline weighs: with every operation at one it is the work the
/// runtime cuts submissions by; a call weighted `w` adds `w - 1` for every time it runs,
/// loops counted per trip.
#[test]
fn weighted_work_counts_each_call_at_its_weight_per_trip() {
    use gradfuse_shaders_gen::ir::Op;
    use gradfuse_shaders_gen::launch::kernel_ir;
    use gradfuse_shaders_gen::ops::Func;
    let c = compile_str(
        "fn g(x: f32) -> f32 { let mut y = x; for i in 0..5 { y = y.sin() * 0.5 + 1.0; } y.sin() }",
    )
    .unwrap();
    let ir = kernel_ir(&c, KernelKind::Forward).unwrap();
    assert_eq!(ir.weighted_work(&|_| 1.0), ir.work() as f64);
    let sin_at_ten = |op: &Op| match op {
        Op::Call(Func::Sin, _) => 10.0,
        _ => 1.0,
    };
    // Six sines run: five in the loop, one after it.
    assert_eq!(ir.weighted_work(&sin_at_ten), ir.work() as f64 + 6.0 * 9.0);
}

#[test]
fn elements_per_thread_follow_the_sums_and_the_tapes() {
    let adjoint_elements = |src: &str| compile_str(src).expect("compiles").adjoint_elements;
    // Words summed in registers: 2 elements per thread.
    assert_eq!(
        adjoint_elements("fn f(x: f32, #[shared] w: [f32; 2]) -> f32 { w[0] * x.sin() + w[1] }"),
        2
    );
    // No shared gradient to sum: one.
    assert_eq!(adjoint_elements("fn f(x: f32, y: f32) -> f32 { x * y }"), 1);
    // A gradient too long for registers, streamed into the workgroup's sums: 2.
    let streamed = "fn f(x: [f32; 8], #[shared] w: [f32; 512]) -> f32 {
        let mut s = 0.0;
        for j in 0..64 {
            let mut a = 0.0;
            for k in 0..8 { a += w[j * 8 + k] * (x[k] + j as f32); }
            s += a.tanh();
        }
        s
    }";
    assert_eq!(adjoint_elements(streamed), 2);
    // The same rows with columns the same in every trip: summed as outer products, one.
    let dense = streamed.replace("(x[k] + j as f32)", "x[k]");
    assert_eq!(adjoint_elements(&dense), 1);
    // A table read in a loop of `trips` iterations whose carried `p` the reverse pass needs.
    let table_loop = gradfuse_shaders_gen::samples::table_loop;
    // 256 trips: unrolled, long straight-line code whose 256 words and the values its
    // reverse pass reads (recomputed a segment at a time, `opt::recompute`) do not fit the
    // registers together: streamed, 2 elements per thread
    // (`abi::MAX_REGISTER_SUMS_WITH_VALUES`).
    let unrolled = compile_str(&table_loop(256)).expect("compiles");
    assert!(!unrolled.wgsl_reverse.contains("var tape"));
    assert!(!unrolled.wgsl_reverse.contains("var sum_"));
    assert_eq!(unrolled.adjoint_elements, 2);
    // 64 trips: the same straight-line code, whose 64 words fit beside its values: in
    // registers, 2 elements per thread (under `MAX_OPS_FOR_TWO_ELEMENTS`).
    let short = compile_str(&table_loop(64)).expect("compiles");
    assert!(short.wgsl_reverse.contains("var sum_"));
    assert_eq!(short.adjoint_elements, 2);
    // 1,024 trips: a loop recording its carried values, cut into checkpointed segments
    // (two tapes of 32 x 2 words): 2 elements per thread, within `opt::MAX_TAPE_WORDS`.
    let taped = compile_str(&table_loop(1024)).expect("compiles");
    assert!(taped.wgsl_reverse.contains("var tape"));
    assert_eq!(taped.adjoint_elements, 2);
    // 40 words carried over 30 trips: segments of 6 still record 440 words, past the
    // bound: one element per thread.
    let wide_tape = "fn f(p0: [f32; 20], #[shared] k: f32) -> f32 {
        let mut p = p0;
        let mut q = [0.0; 20];
        for _t in 0..30 {
            for i in 1..19 {
                q[i] += 0.1 * (k * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - 0.1 * q[i]);
            }
            for i in 0..20 {
                p[i] += 0.1 * q[i];
            }
        }
        p[3] * p[7]
    }";
    let wide_tape = compile_str(wide_tape).expect("compiles");
    assert!(wide_tape.wgsl_reverse.contains("var tape"));
    assert_eq!(wide_tape.adjoint_elements, 1);
}

#[test]
fn gradients_through_the_reduction_stage_in_whole_rounds() {
    use gradfuse_shaders_gen::abi::reduce_stage_rounds;
    use gradfuse_shaders_gen::signature::Precision;
    // A heavy kernel (100 weighted operations a gradient word): up to 8 f32 words a lane
    // stage beside the reduction; 9 and 13 odd words go in 2 rounds of 128, 32 in 4 of 64,
    // 48 would take 8 (past the cap of 4).
    let heavy = |words: u32| 100.0 * f64::from(words);
    assert_eq!(reduce_stage_rounds(7, heavy(7), Precision::F32), None);
    assert_eq!(reduce_stage_rounds(9, heavy(9), Precision::F32), Some(128));
    assert_eq!(
        reduce_stage_rounds(13, heavy(13), Precision::F32),
        Some(128)
    );
    assert_eq!(reduce_stage_rounds(32, heavy(32), Precision::F32), Some(64));
    assert_eq!(reduce_stage_rounds(48, heavy(48), Precision::F32), None);
    // A light one (2 a word) up to 16 rounds: 48 and 64 words in 8 of 32, 128 in 16 of 16,
    // 256 would take 32.
    let light = |words: u32| 2.0 * f64::from(words);
    assert_eq!(reduce_stage_rounds(48, light(48), Precision::F32), Some(32));
    assert_eq!(reduce_stage_rounds(64, light(64), Precision::F32), Some(32));
    assert_eq!(
        reduce_stage_rounds(128, light(128), Precision::F32),
        Some(16)
    );
    assert_eq!(reduce_stage_rounds(256, light(256), Precision::F32), None);
    // Past the stage's 2,048 words not one element fits: no rounds, and no panic.
    assert_eq!(reduce_stage_rounds(2049, light(2049), Precision::F32), None);
    assert_eq!(reduce_stage_rounds(7, heavy(7), Precision::F64), Some(128));
}
