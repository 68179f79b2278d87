//! Networks of two hidden layers of 65 to 128 rows, whose cooperative adjoint streams `W2`
//! through workgroup memory in blocks (`emit_wgsl/network/blocked.rs`): values and shared
//! gradients on the GPU against the CPU reverse mode's or the f64 interpreter's
//! per-element results summed in f64, bit-identical over runs; batches cut mid-chunk,
//! padded rows, two outputs, each activation.

mod common;

use common::networks::{
    ACTIVATIONS, check, check_at_random, uniform_array, with_layer_activations, words,
};
use common::{Rng, device};
use gradfuse::differentiable;

/// An 8-128-128-1 tanh network as a user writes it.
#[differentiable]
pub fn net128(
    #[constant] x: [f32; 8],
    #[constant] t: f32,
    #[shared] w1: [f32; 1152],
    #[shared] w2: [f32; 16512],
    #[shared] w3: [f32; 129],
) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[8 * 128 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

#[test]
fn an_8_128_128_1_network_is_the_batch_sum() {
    let spec = &net128::ADJOINT_KERNEL;
    assert!(
        spec.wgsl.contains("register-blocked") && spec.wgsl.contains("var<workgroup> wblk"),
        "net128: not the blocked cooperative kernel"
    );
    assert!(spec.fallback.is_some() && !spec.bounds_checks);
    let mut rng = Rng(1281);
    let shared = net128::Shared {
        w1: uniform_array(&mut rng, 0.4),
        w2: uniform_array(&mut rng, 0.1),
        w3: uniform_array(&mut rng, 0.2),
    };
    let kernel = net128::kernel(device());
    // Within one chunk; past one workgroup's run (256 elements), cut mid-chunk.
    for n in [19usize, 300] {
        let batch: Vec<net128::Args> = (0..n)
            .map(|_| net128::Args {
                x: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let launch = || {
            let (v, _, g) = kernel.value_and_grad(&batch, &shared).expect("launch");
            (v, words(&g))
        };
        check(&format!("8-128-128-1, {n}"), &batch, launch, |a| {
            let (v, _, g) = net128::value_and_grad(a, &shared);
            (v, words(&g))
        });
    }
}

/// A network of two hidden layers: inputs, each layer's rows, outputs, each layer's
/// activation, batch.
type Case<'a> = (usize, [usize; 2], usize, [&'a str; 2], usize);

/// Each case's network compiled, its adjoint checked to be the kernel `is_kernel` tells
/// (`what`), and run on a random batch (inputs from `seed` on) against the interpreter.
fn check_cases(cases: &[Case], seed: u64, (is_kernel, what): (fn(&str) -> bool, &str)) {
    use gradfuse_shaders_gen::samples::deep_network;
    for &(i, hidden, o, activations, n) in cases {
        let src = with_layer_activations(deep_network(i, &hidden, o), &activations);
        let name = format!("{i}-{}-{}-{o}, {activations:?}", hidden[0], hidden[1]);
        let c = gradfuse_shaders_gen::compile_str(&src).expect("compiles");
        assert!(
            c.wgsl_reverse.contains("var<workgroup> wblk") && is_kernel(&c.wgsl_reverse),
            "{name}: not the blocked cooperative kernel {what}"
        );
        check_at_random(&name, &src, (i + o, n), seed + i as u64);
    }
}

/// Padded rows (65 to 127 of them written), two to four outputs (the third and fourth
/// outputs' parts in `wblk`), inputs up to the most whose `d_W1` each thread sums in
/// registers (`FIRST_LAYER_ROW_INPUTS`) and one past them, where `d_W1` is a tile beside
/// four outputs, batches cut mid-chunk.
#[test]
fn wide_networks_of_other_shapes_match_the_interpreter() {
    let [tanh, relu, sigmoid] = ACTIVATIONS;
    let cases = [
        (3, [100, 128], 2, [relu, sigmoid], 70),
        (15, [96, 96], 1, [sigmoid, tanh], 33),
        (1, [128, 65], 1, [relu, tanh], 9),
        (5, [127, 120], 2, [tanh, relu], 45),
        (16, [128, 128], 4, [tanh, tanh], 40),
        (2, [70, 128], 3, [relu, sigmoid], 35),
    ];
    check_cases(&cases, 1280, (|_| true, ""));
}

/// Past `FIRST_LAYER_ROW_INPUTS` inputs `d_W1` is a tile of the workgroup's product, `d_s1`
/// and the inputs stored into the chunk's matrices: 32 inputs (four rows of inputs a tile),
/// 20 (three, the last reaching past the inputs), padded rows, two outputs.
#[test]
fn networks_of_many_inputs_tile_the_first_layers_gradient() {
    let [tanh, relu, sigmoid] = ACTIVATIONS;
    let cases = [
        (32, [128, 128], 1, [tanh, relu], 37),
        (20, [100, 117], 2, [sigmoid, tanh], 45),
    ];
    let tiled = |wgsl: &str| wgsl.contains("let k1 = lid % 8u;");
    check_cases(&cases, 1320, (tiled, "with d_W1 a tile"));
}

/// Past 32 inputs `W1` is streamed through workgroup memory in blocks of 32 of its columns
/// as `W2` is, and `d_W1` is a tile: 64 inputs (two whole blocks), 100 (four, the last
/// padded with 28 rows of zero inputs) beside padded rows and two outputs.
#[test]
fn networks_past_32_inputs_stream_the_first_layers_weights() {
    let [tanh, relu, sigmoid] = ACTIVATIONS;
    let cases = [
        (64, [128, 128], 1, [tanh, relu], 37),
        (100, [128, 117], 2, [sigmoid, tanh], 45),
    ];
    let streamed = |wgsl: &str| !wgsl.contains("var w1_0: array<f32");
    check_cases(&cases, 1360, (streamed, "with W1 streamed"));
}

/// An element whose target is infinite has NaN adjoints, which the chunk's matrices hold
/// when the next chunk starts: the rows past the inputs that `W1`'s last, padded block
/// multiplies by its zero weights are zeroed first, so the elements of later chunks keep
/// the values the interpreter gives them (`0 * NaN` would have made them NaN).
#[test]
fn an_infinite_target_reaches_no_other_element_through_the_padded_inputs() {
    use common::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::samples::deep_network;
    use gradfuse_shaders_gen::{compile_str, interp};
    let (i, n) = (40usize, 70usize);
    let src = deep_network(i, &[128, 128], 1);
    let c = compile_str(&src).expect("compiles");
    assert!(
        c.wgsl_reverse.contains("] = vec4<f32>();"),
        "no zeroed rows"
    );
    let spec = compiled_spec("net", &c, KernelKind::Adjoint);
    let words = i + 1;
    let mut rng = Rng(1401);
    let shared: Vec<f32> = (0..common::networks::shared_words_of(&src))
        .map(|_| rng.uniform(-0.3, 0.3))
        .collect();
    let mut input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
    // Element 3's target, in the first chunk of 32: elements 35 and 67 take its columns of
    // the chunk's matrices in the next two.
    input[3 * words + i] = f32::INFINITY;
    let mut values = vec![0.0f32; n];
    let mut sg = vec![0.0f32; spec.shared_grad_words()];
    device()
        .launch_shared(spec, &input, &shared, &mut [&mut values], &mut sg)
        .expect("launch");
    assert!(
        sg.iter().any(|g| !g.is_finite()),
        "element 3's adjoints are summed"
    );
    for (e, got) in values.iter().enumerate().filter(|(e, _)| *e != 3) {
        let row = input[e * words..(e + 1) * words].iter().chain(&shared);
        let want = interp::eval(
            &c.lowered.primal,
            &row.map(|v| *v as f64).collect::<Vec<_>>(),
        )[0];
        let got = *got as f64;
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
            "element {e}: {got} against {want}"
        );
    }
}
