//! Networks whose value the workgroup's matrix products compute (`emit_wgsl::network`'s
//! value kernel, chosen where one element a thread would keep a layer as a loop): values
//! on the GPU against the f64 interpreter's (no code shared with the kernel).

mod common;

use common::networks::{ACTIVATIONS, with_layer_activations};
use common::{Rng, device};

/// Network `c`'s cooperative value kernel on `input` (rows of `words`) and `shared`: its
/// values against the f64 interpreter's ([`assert_values_match_interpreter`]), and the
/// same bits launched in rows of one workgroup.
fn check_values_against_interpreter(
    name: &str,
    c: &gradfuse_shaders_gen::Compiled,
    words: usize,
    shared: &[f32],
    input: &[f32],
) {
    use common::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    assert!(
        c.wgsl_forward.contains("register-blocked"),
        "{name}: value kernel"
    );
    let spec = compiled_spec("net", c, KernelKind::Forward);
    assert!(
        !spec.bounds_checks,
        "{name}: value kernel with bounds checks"
    );
    let n = input.len() / words;
    let mut values = vec![0.0f32; n];
    device()
        .launch_shared(spec, input, shared, &mut [&mut values], &mut [])
        .expect("launch");
    // Launched in rows of one workgroup (the second dispatch dimension, which batches past
    // 2^24 elements take): each workgroup finds its elements from both ids.
    let in_rows: &'static gradfuse::KernelSpec = Box::leak(Box::new(gradfuse::KernelSpec {
        max_workgroups_per_dim: 1,
        ..*spec
    }));
    let mut by_rows = vec![0.0f32; n];
    device()
        .launch_shared(in_rows, input, shared, &mut [&mut by_rows], &mut [])
        .expect("launch in rows");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&by_rows), bits(&values), "{name}: launched in rows");
    assert_values_match_interpreter(name, c, words, shared, input, &values);
}

/// `values`, network `c`'s on `input` (rows of `words`) and `shared`, against the f64
/// interpreter's of the unoptimized IR, each to 1e-5 of its size (and `4e-6 sqrt(v)` for a
/// squared loss near zero, as `networks_cooperative.rs` holds the adjoint's values).
fn assert_values_match_interpreter(
    name: &str,
    c: &gradfuse_shaders_gen::Compiled,
    words: usize,
    shared: &[f32],
    input: &[f32],
    values: &[f32],
) {
    use gradfuse_shaders_gen::interp;
    for e in 0..values.len() {
        let row = input[e * words..(e + 1) * words].iter().chain(shared);
        let want = interp::eval(
            &c.lowered.primal,
            &row.map(|v| *v as f64).collect::<Vec<_>>(),
        )[0];
        let tol = 1e-5 * want.abs() + 4e-6 * want.abs().sqrt();
        // An infinite input may make the network as written NaN (relu(inf) - relu(inf)).
        assert!(
            (f64::from(values[e]) - want).abs() <= tol.max(1e-7)
                || (want.is_nan() && values[e].is_nan()),
            "{name}: value kernel, element {e}: {} against {want}",
            values[e]
        );
    }
}

/// Networks whose value kernel of one element a thread would keep a layer as a loop get
/// the workgroup's products for their value (`emit_wgsl::network::value`), whatever their
/// adjoint: three layers of 64 rows, of 5 and of 32 inputs, padded rows and two outputs;
/// tanh, relu and sigmoid layers; batches of one element, of part of a chunk and past a
/// workgroup's; an infinite input, which padded rows must not turn into NaN.
#[test]
fn value_kernels_of_networks_past_the_unrolling_budget_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::deep_network;
    let [tanh, relu, sigmoid] = ACTIVATIONS;
    let cases: [(usize, &[usize], usize, &[&str]); 3] = [
        (5, &[64, 64, 64], 1, &[tanh, tanh, tanh]),
        (16, &[64, 64, 33], 2, &[relu, sigmoid, tanh]),
        (32, &[64, 64, 64], 1, &[sigmoid, relu, tanh]),
    ];
    for (k, (i, hidden, o, activations)) in cases.into_iter().enumerate() {
        let src = with_layer_activations(deep_network(i, hidden, o), activations);
        let c = gradfuse_shaders_gen::compile_str(&src).expect("compiles");
        let mut rng = Rng(700 + k as u64);
        let shared: Vec<f32> = (0..c.lowered.layout.shared_words)
            .map(|_| rng.uniform(-0.3, 0.3))
            .collect();
        let words = i + o;
        for n in [1usize, 45, 300] {
            let mut input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
            if n > 1 {
                input[(n / 2) * words] = f32::INFINITY;
            }
            let name = format!("{i}-{hidden:?}-{o}, {n} elements");
            check_values_against_interpreter(&name, &c, words, &shared, &input);
        }
    }
}

/// The cooperative value kernel takes 48 KiB of workgroup memory for three layers of 64
/// rows: a GPU of 32 KiB (Apple's, many mobile ones) runs the value kernel of one element a
/// thread beside it, with the interpreter's values.
#[test]
fn a_gpu_of_less_workgroup_memory_runs_the_value_kernel_of_one_element_a_thread() {
    use common::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::samples::deep_network;
    let Some(d) = common::own_gpu() else { return };
    // As the shared test device waits: on lavapipe with 2 busy cores this launch once
    // passed the 60 s default (CI, 2026-12-02).
    d.set_timeout(std::time::Duration::from_secs(600));
    let c =
        gradfuse_shaders_gen::compile_str(&deep_network(4, &[64, 64, 64], 1)).expect("compiles");
    let spec = compiled_spec("net", &c, KernelKind::Forward);
    assert_eq!(spec.workgroup_bytes, 48 * 1024);
    d.set_workgroup_bytes(32 * 1024);
    let runs = d.kernel_for(spec).expect("a kernel");
    assert!(spec.fallback.is_some_and(|f| std::ptr::eq(f, runs)));
    assert!(runs.bounds_checks && !runs.wgsl.contains("register-blocked"));
    let mut rng = Rng(790);
    let shared: Vec<f32> = (0..c.lowered.layout.shared_words)
        .map(|_| rng.uniform(-0.3, 0.3))
        .collect();
    let (words, n) = (5, 300);
    let input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let mut values = vec![0.0f32; n];
    d.launch_shared(spec, &input, &shared, &mut [&mut values], &mut [])
        .expect("launch");
    assert_values_match_interpreter(
        "4-64-64-64-1 on 32 KiB",
        &c,
        words,
        &shared,
        &input,
        &values,
    );
}
