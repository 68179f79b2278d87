//! Networks whose adjoint the workgroup's matrix products compute (`emit_wgsl::network`,
//! chosen by `cooperative::network_plan`): values and shared gradients on the GPU against
//! the CPU reverse mode's or the f64 interpreter's per-element results summed in f64 (no
//! code shared with the kernel), on batches cut mid-chunk, bit-identical over runs; tanh,
//! relu and sigmoid layers, two to four of them, one output or several.

mod common;

use common::networks::{
    ACTIVATIONS, check, check_against_interpreter, check_at_random, shared_words_of, uniform_array,
    with_layer_activations, words,
};
use common::{Rng, device};
use gradfuse::{KernelSpec, differentiable};

/// An 8-32-32-1 tanh network (four warps, one row a lane).
#[differentiable]
pub fn net32(
    #[constant] x: [f32; 8],
    #[constant] t: f32,
    #[shared] w1: [f32; 288],
    #[shared] w2: [f32; 1056],
    #[shared] w3: [f32; 33],
) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[32];
    for k in 0..32 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

/// A 3-64-64-1 coordinate network (eight warps, two rows a lane, the three matrices
/// filling 48 KiB), its inputs after a word the network does not read and its loss
/// reading that word too.
#[differentiable]
pub fn net64(
    #[constant] scale: f32,
    #[constant] p: [f32; 3],
    #[constant] t: f32,
    #[shared] w1: [f32; 256],
    #[shared] w2: [f32; 4160],
    #[shared] w3: [f32; 65],
) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[3 * 64 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * p[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[64 * 64 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    scale * (y - t) * (y - t)
}

/// The adjoint kernel `compile` wrote is the cooperative one, at its workgroup size.
fn assert_cooperative(name: &str, spec: &KernelSpec, threads: u32) {
    assert!(
        spec.wgsl
            .contains("register-blocked matrix products of the workgroup"),
        "{name}: one element a thread"
    );
    assert_eq!(spec.workgroup_size, threads, "{name}");
    assert!(!spec.bounds_checks, "{name}: compiled with bounds checks");
}

/// The cooperative kernels are the generator's largest and the ones issue 11's variants
/// rewrite by hand: their text is reviewed in snapshots, as every other emitter's. The
/// 8-32-32-1's rows are padded, the 3-64-64-1's swizzled: the two layouts.
#[test]
fn the_cooperative_kernels_are_valid_and_snapshotted() {
    for (name, src) in [
        ("net32_adjoint", net32::WGSL_ADJOINT),
        ("net64_adjoint", net64::WGSL_ADJOINT),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}

#[test]
fn an_8_32_32_1_network_is_the_batch_sum() {
    assert_cooperative("net32", &net32::ADJOINT_KERNEL, 128);
    // Within one chunk; past one workgroup's run, cut mid-chunk.
    check_net32_batches(&net32::kernel(device()), 71, &[37, 3001], "8-32-32-1");
}

/// The 8-32-32-1's values and shared gradients through `kernel` over a random batch of
/// each of `sizes` elements (random weights from `seed`), against the CPU's reverse mode.
fn check_net32_batches(kernel: &net32::Kernel<'_>, seed: u64, sizes: &[usize], what: &str) {
    let mut rng = Rng(seed);
    let shared = net32::Shared {
        w1: uniform_array(&mut rng, 0.4),
        w2: uniform_array(&mut rng, 0.2),
        w3: uniform_array(&mut rng, 0.3),
    };
    for &n in sizes {
        let batch: Vec<net32::Args> = (0..n)
            .map(|_| net32::Args {
                x: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let launch = || {
            let (v, _, g) = kernel.value_and_grad(&batch, &shared).expect("launch");
            (v, words(&g))
        };
        check(&format!("{what}, {n} elements"), &batch, launch, |a| {
            let (v, _, g) = net32::value_and_grad(a, &shared);
            (v, words(&g))
        });
    }
}

#[test]
fn a_3_64_64_1_network_with_a_loss_of_more_words_is_the_batch_sum() {
    assert_cooperative("net64", &net64::ADJOINT_KERNEL, 256);
    let mut rng = Rng(72);
    let shared = net64::Shared {
        w1: uniform_array(&mut rng, 0.6),
        w2: uniform_array(&mut rng, 0.15),
        w3: uniform_array(&mut rng, 0.2),
    };
    let kernel = net64::kernel(device());
    for n in [100usize, 2777] {
        let batch: Vec<net64::Args> = (0..n)
            .map(|_| net64::Args {
                scale: rng.uniform(0.5, 2.0),
                p: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let launch = || {
            let (v, _, g) = kernel.value_and_grad(&batch, &shared).expect("launch");
            (v, words(&g))
        };
        check(&format!("3-64-64-1, {n}"), &batch, launch, |a| {
            let (v, _, g) = net64::value_and_grad(a, &shared);
            (v, words(&g))
        });
    }
}

/// Input counts whose chunk loads take one, three and eight words a thread (1, 17 and 32
/// inputs), a second layer stored transposed, a loss with a branch (Huber's), and the
/// output as a loop over one row with the loss inside (`samples::network`), compiled at run
/// time, against the f64 interpreter's reverse mode of the unoptimized IR.
#[test]
fn networks_of_other_shapes_and_losses_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::{DenseNetwork, network};
    let squared = "(y - t) * (y - t)";
    let huber = "let d = (y - t).abs(); if d < 0.25 { 0.5 * d * d } else { 0.25 * (d - 0.125) }";
    let mut cases: Vec<(usize, usize, String, String)> = [
        (1usize, 32usize, 300usize, false, squared),
        (17, 64, 200, false, squared),
        (32, 32, 130, false, squared),
        (5, 64, 150, true, huber),
        (3, 32, 170, true, huber),
    ]
    .into_iter()
    .map(|(i, h, n, transposed, loss)| {
        let src = DenseNetwork {
            second_weight: transposed.then(|| format!("k * {h} + j")),
            loss: loss.into(),
            ..DenseNetwork::new(i, h)
        }
        .source();
        let name = format!("{i}-{h}-{h}-1, W2 transposed {transposed}, {loss}");
        (i, n, src, name)
    })
    .collect();
    for (i, h, n) in [(4usize, 64usize, 190usize), (6, 32, 140)] {
        let name = format!("{i}-{h}-{h}-1, samples::network's loop over one output");
        cases.push((i, n, network(i, h, 1), name));
    }
    for (i, n, src, name) in cases {
        let mut rng = Rng(90 + i as u64);
        let shared_words = shared_words_of(&src);
        let shared: Vec<f32> = (0..shared_words).map(|_| rng.uniform(-0.3, 0.3)).collect();
        let input: Vec<f32> = (0..n * (i + 1)).map(|_| rng.uniform(-1.0, 1.0)).collect();
        check_against_interpreter(&name, &src, i + 1, &shared, &input);
    }
}

/// The `#[shared]` words of network `src`.
/// `n` elements of `i` inputs and a target, uniform in [-1, 1], every seventh element's
/// inputs zero: at weights whose biases are zero those sums are exactly zero (relu's ties).
fn inputs_with_zeros(rng: &mut Rng, n: usize, i: usize) -> Vec<f32> {
    let mut input: Vec<f32> = (0..n * (i + 1)).map(|_| rng.uniform(-1.0, 1.0)).collect();
    for e in (0..n).step_by(7) {
        input[e * (i + 1)..e * (i + 1) + i].fill(0.0);
    }
    input
}

/// Relu layers (`s.max(0.0)`, or a branch), alone and beside a tanh layer, on elements and
/// weights that put sums exactly at zero: `max`'s derivative is 0.5 there (a tie), a
/// branch's 0 or 1, which the kernel reads from its mask of the sums that were zero; and
/// sigmoid layers (`1.0 / (1.0 + (-s).exp())`), on the same data.
#[test]
fn relu_and_sigmoid_layers_match_the_interpreter_at_ties_too() {
    use gradfuse_shaders_gen::samples::DenseNetwork;
    let relu = "s.max(0.0)";
    let sigmoid = "1.0 / (1.0 + (-s).exp())";
    let cases = [
        (8usize, 32usize, [relu, relu], 300usize),
        (3, 64, [relu, relu], 200),
        (5, 64, [relu, "s.tanh()"], 150),
        (4, 32, ["s.tanh()", relu], 170),
        // Relu as a branch: the derivative at zero is the branch's (0 for `>`, 1 for `>=`).
        (
            6,
            32,
            [
                "if s > 0.0 { s } else { 0.0 }",
                "if s >= 0.0 { s } else { 0.0 }",
            ],
            220,
        ),
        (2, 64, ["if 0.0 <= s { s } else { 0.0 }", relu], 140),
        (8, 32, [sigmoid, sigmoid], 200),
        (3, 64, [sigmoid, relu], 150),
        (7, 32, ["s.tanh()", sigmoid], 120),
    ];
    for (i, h, [first, second], n) in cases {
        let src = DenseNetwork {
            activation: second,
            ..DenseNetwork::new(i, h)
        }
        .source()
        .replacen(
            &format!("h1[j] = {second};"),
            &format!("h1[j] = {first};"),
            1,
        );
        let name = format!("{i}-{h}-{h}-1, {first} then {second}");
        let mut rng = Rng(110 + i as u64);
        let mut shared: Vec<f32> = (0..shared_words_of(&src))
            .map(|_| rng.uniform(-0.3, 0.3))
            .collect();
        // The first layer's biases at or below zero (every fourth exactly zero) and every
        // third of the second's zero: an element of zeros then sums to exactly zero in
        // those rows of both layers.
        let (b1, b2) = (i * h, i * h + h + h * h);
        for j in 0..h {
            shared[b1 + j] = if j % 4 == 0 {
                0.0
            } else {
                -shared[b1 + j].abs()
            };
            if j % 3 == 0 {
                shared[b2 + j] = 0.0;
            }
        }
        let input = inputs_with_zeros(&mut rng, n, i);
        check_against_interpreter(&name, &src, i + 1, &shared, &input);
    }
}

/// Networks of several outputs (`samples::network`: a loop over the output rows, the loss
/// summed inside it), at both widths up to the most each holds, two of them with relu
/// layers.
#[test]
fn networks_of_several_outputs_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::network;
    let cases = [
        (8usize, 64usize, 2usize, false, 200usize),
        (4, 32, 4, false, 170),
        (3, 32, 3, true, 150),
        (5, 64, 2, true, 130),
    ];
    for (i, h, o, relu, n) in cases {
        let mut src = network(i, h, o);
        if relu {
            src = src.replace("s.tanh()", "s.max(0.0)");
        }
        let name = format!("{i}-{h}-{h}-{o}, relu {relu}");
        // x, then t: o words.
        check_at_random(&name, &src, (i + o, n), 130 + i as u64);
    }
}

/// Layers of widths between 17 and 64 rows, computed as 32 or 64 with the rows past them
/// padding (their weights read as zero, their gradients not stored), tanh, relu and the
/// sigmoid, one output or two.
#[test]
fn networks_of_widths_between_are_padded_and_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::network;
    let sigmoid = "1.0 / (1.0 + (-s).exp())";
    let cases = [
        (8usize, 48usize, 1usize, "s.tanh()", 160usize),
        (3, 20, 2, "s.max(0.0)", 150),
        (5, 33, 1, sigmoid, 130),
        (6, 40, 2, "s.tanh()", 120),
    ];
    for (i, h, o, activation, n) in cases {
        let src = network(i, h, o).replace("s.tanh()", activation);
        let name = format!("{i}-{h}-{h}-{o}, {activation}");
        let c = gradfuse_shaders_gen::compile_str(&src).expect("compiles");
        assert!(
            c.wgsl_reverse.contains("select(0.0f, sw("),
            "{name}: not padded"
        );
        check_at_random(&name, &src, (i + o, n), 150 + i as u64);
    }
}

/// Layers of two widths (a funnel and its reverse), padded to the wider's kernel width:
/// the first layer's rows and the second's columns padded to one count, the second's rows
/// and the outputs' columns to another.
#[test]
fn networks_of_two_widths_are_padded_and_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::deep_network;
    let cases = [
        (8usize, [64usize, 32usize], 1usize, "s.tanh()", 140usize),
        (5, [32, 48], 1, "s.tanh()", 130),
        (3, [48, 24], 2, "s.max(0.0)", 150),
        (6, [20, 30], 1, "s.tanh()", 160),
    ];
    for (i, hidden, o, activation, n) in cases {
        let src = deep_network(i, &hidden, o).replace("s.tanh()", activation);
        let name = format!("{i}-{}-{}-{o}, {activation}", hidden[0], hidden[1]);
        check_at_random(&name, &src, (i + o, n), 170 + i as u64);
    }
}

/// Networks of shapes drawn at random (fixed seeds): inputs 1 to 32, each layer 16 to 64
/// rows, one width or two, 1 to the most outputs at the kernel's width, each
/// layer tanh, relu or the sigmoid, batches of 1 to 300 elements.
#[test]
fn random_network_shapes_match_the_interpreter() {
    use gradfuse_shaders_gen::emit_wgsl::{max_outputs, padded_width};
    use gradfuse_shaders_gen::samples::deep_network;
    let activations = ACTIVATIONS;
    for seed in 0..4u64 {
        let mut rng = Rng(200 + seed);
        let mut pick = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
        let i = pick(1, 32) as usize;
        let r1 = pick(16, 64) as usize;
        // One width at even seeds, two at odd.
        let r2 = if seed % 2 == 0 {
            r1
        } else {
            pick(16, 64) as usize
        };
        let width = padded_width(r1.max(r2) as u32);
        let o = pick(1, max_outputs(width) as u64) as usize;
        let (a1, a2) = (
            activations[pick(0, 2) as usize],
            activations[pick(0, 2) as usize],
        );
        let n = pick(1, 300) as usize;
        // Each layer's activation in its own row's statement (`h1[j] = ..`, `h2[j] = ..`).
        let src = deep_network(i, &[r1, r2], o)
            .replacen("s.tanh()", a1, 1)
            .replacen("h2[j] = s.tanh()", &format!("h2[j] = {a2}"), 1);
        let name = format!("seed {seed}: {i}-{r1}-{r2}-{o}, {a1} then {a2}, {n} elements");
        check_at_random(&name, &src, (i + o, n), 210 + seed);
    }
}

/// Networks of three and four hidden layers, each layer's weights after the first in
/// workgroup memory and each layer's activations but the last's: tanh, relu and the
/// sigmoid mixed, one width or several (padded to 32 rows), one output to four (four
/// outputs' parts summed a pair at a time, so that four layers and four outputs fit the
/// 48 KiB; layers of 16 rows alone stay one element a thread).
#[test]
fn networks_of_three_and_four_layers_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::deep_network;
    const TANH: &str = ACTIVATIONS[0];
    const RELU: &str = ACTIVATIONS[1];
    const SIGMOID: &str = ACTIVATIONS[2];
    // Inputs, each layer's rows, outputs, each layer's activation, batch.
    type Case = (
        usize,
        &'static [usize],
        usize,
        &'static [&'static str],
        usize,
    );
    let cases: [Case; 6] = [
        (5, &[32, 32, 32], 1, &[TANH, TANH, TANH], 150),
        (7, &[32, 32, 32, 32], 4, &[TANH, RELU, SIGMOID, TANH], 110),
        (3, &[24, 20, 30], 2, &[RELU, TANH, SIGMOID], 140),
        (6, &[32, 32, 32, 32], 1, &[TANH, SIGMOID, RELU, TANH], 130),
        (4, &[20, 20, 20, 20], 3, &[RELU, RELU, RELU, RELU], 120),
        (8, &[32, 17, 32], 1, &[SIGMOID, TANH, RELU], 100),
    ];
    for (i, hidden, o, activations, n) in cases {
        let src = with_layer_activations(deep_network(i, hidden, o), activations);
        let widths: Vec<String> = hidden.iter().map(|h| h.to_string()).collect();
        let name = format!("{i}-{}-{o}, {activations:?}", widths.join("-"));
        let c = gradfuse_shaders_gen::compile_str(&src).expect("compiles");
        let layers = ["three", "four"][hidden.len() - 3];
        assert!(
            c.wgsl_reverse.contains(&format!("its {layers} layers as")),
            "{name}: not the cooperative kernel of {layers} layers"
        );
        check_at_random(&name, &src, (i + o, n), 300 + i as u64);
    }
}

/// Three hidden layers of 64 rows (or fewer, padded), whose five matrices would not fit
/// 48 KiB: the kernel lends its weight matrices to the chunk's activations and adjoints
/// and copies the weights in again (`network/reload.rs`). One output or two, tanh, relu
/// and the sigmoid, a padded layer between full ones.
#[test]
fn three_layers_of_64_rows_reload_their_weights_and_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::deep_network;
    let [tanh, relu, sigmoid] = ACTIVATIONS;
    // Inputs, each layer's rows, outputs, each layer's activation, batch.
    type Case<'a> = (usize, &'a [usize], usize, [&'a str; 3], usize);
    let cases: [Case; 3] = [
        (5, &[64, 64, 64], 1, [tanh, tanh, tanh], 200),
        (3, &[64, 48, 64], 2, [relu, sigmoid, tanh], 150),
        (8, &[40, 64, 33], 1, [sigmoid, relu, tanh], 90),
    ];
    for (i, hidden, o, activations, n) in cases {
        let src = with_layer_activations(deep_network(i, hidden, o), &activations);
        let widths: Vec<String> = hidden.iter().map(|h| h.to_string()).collect();
        let name = format!("{i}-{}-{o}, {activations:?}", widths.join("-"));
        let c = gradfuse_shaders_gen::compile_str(&src).expect("compiles");
        assert!(
            c.wgsl_reverse.contains("its three layers as")
                && c.wgsl_reverse.contains("weights copied in again"),
            "{name}: not the cooperative kernel that reloads its weights"
        );
        check_at_random(&name, &src, (i + o, n), 500 + i as u64);
    }
}

/// Deep networks of shapes drawn at random (fixed seeds): three or four hidden layers of
/// 17 to 32 rows each, inputs 1 to 32, 1 to 4 outputs after three layers and 1 to 3 after
/// four (four after four: `networks_of_three_and_four_layers_match_the_interpreter`), each
/// layer tanh, relu or the sigmoid, batches of
/// 1 to 300 elements. The three drawn are 31-17-28-23-17-1, 17-24-27-26-2 and 6-20-29-21-1.
#[test]
fn random_deep_network_shapes_match_the_interpreter() {
    use gradfuse_shaders_gen::samples::deep_network;
    for seed in 0..3u64 {
        let mut rng = Rng(400 + seed);
        let mut pick = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
        let depth = pick(3, 4) as usize;
        let i = pick(1, 32) as usize;
        let hidden: Vec<usize> = (0..depth).map(|_| pick(17, 32) as usize).collect();
        let o = pick(1, if depth == 3 { 4 } else { 3 }) as usize;
        let n = pick(1, 300) as usize;
        let drawn: Vec<&str> = (0..depth)
            .map(|_| ACTIVATIONS[pick(0, 2) as usize])
            .collect();
        let src = with_layer_activations(deep_network(i, &hidden, o), &drawn);
        let widths: Vec<String> = hidden.iter().map(|h| h.to_string()).collect();
        let name = format!(
            "seed {seed}: {i}-{}-{o}, {drawn:?}, {n} elements",
            widths.join("-")
        );
        check_at_random(&name, &src, (i + o, n), 410 + seed);
    }
}

/// Relu in every layer of deep networks (and a branch's relu in one), on elements and
/// weights that put sums exactly at zero in each layer's tie mask: each layer's biases, of
/// every third row zero (the first's others negative), and every seventh element zeros.
#[test]
fn deep_relu_layers_match_the_interpreter_at_ties_too() {
    use gradfuse_shaders_gen::samples::deep_network;
    let branch = "if s >= 0.0 { s } else { 0.0 }";
    let cases: [(usize, &[usize], Option<&str>, usize); 3] = [
        (6, &[32, 32, 32], None, 200),
        (4, &[24, 24, 24, 24], Some(branch), 150),
        (3, &[32, 20, 32], None, 170),
    ];
    for (i, hidden, second, n) in cases {
        let mut src = deep_network(i, hidden, 1).replace("s.tanh()", "s.max(0.0)");
        if let Some(a) = second {
            src = src.replacen("h2[j] = s.max(0.0)", &format!("h2[j] = {a}"), 1);
        }
        let widths: Vec<String> = hidden.iter().map(|h| h.to_string()).collect();
        let name = format!("{i}-{}-1, relu, second {second:?}", widths.join("-"));
        let mut rng = Rng(500 + i as u64);
        let mut shared: Vec<f32> = (0..shared_words_of(&src))
            .map(|_| rng.uniform(-0.3, 0.3))
            .collect();
        // Each layer's words: its weights (rows x columns), then its biases.
        let (mut start, mut columns) = (0, i);
        for (l, &rows) in hidden.iter().enumerate() {
            let bias = start + rows * columns;
            for j in 0..rows {
                if j % 3 == 0 {
                    shared[bias + j] = 0.0;
                } else if l == 0 {
                    shared[bias + j] = -shared[bias + j].abs();
                }
            }
            (start, columns) = (bias + rows, rows);
        }
        let input = inputs_with_zeros(&mut rng, n, i);
        check_against_interpreter(&name, &src, i + 1, &shared, &input);
    }
}

/// Infinite inputs to networks whose rows are padded: a padded row's sum is `0 * inf`,
/// NaN, which the next layer's zero weights once carried into every written row (`0 *
/// NaN`), where the network as written gives a finite value (`tanh(inf) = 1`). Each
/// element's value against the interpreter's, and every word of the shared gradient that
/// the interpreter's sum finds finite.
#[test]
fn infinite_inputs_of_padded_networks_give_the_values_as_written() {
    use common::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::samples::deep_network;
    use gradfuse_shaders_gen::{ad, compile_str, interp};
    for (i, hidden) in [(8usize, vec![48usize, 48]), (5, vec![24, 20, 30])] {
        let src = deep_network(i, &hidden, 1);
        let c = compile_str(&src).expect("compiles");
        assert!(
            c.wgsl_reverse.contains("select(0.0f, sw("),
            "{hidden:?}: not padded"
        );
        let spec = compiled_spec("net", &c, KernelKind::Adjoint);
        let (words, n) = (i + 1, 100);
        let mut rng = Rng(600 + i as u64);
        let shared: Vec<f32> = (0..shared_words_of(&src))
            .map(|_| rng.uniform(-0.3, 0.3))
            .collect();
        let mut input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
        input[3 * words + 2] = f32::INFINITY;
        input[50 * words] = f32::NEG_INFINITY;
        let mut values = vec![0.0f32; n];
        let mut sg = vec![0.0f32; spec.shared_grad_words()];
        device()
            .launch_shared(spec, &input, &shared, &mut [&mut values], &mut sg)
            .expect("launch");
        let reverse = ad::reverse(&c.lowered.primal);
        let mut sums = vec![0.0f64; shared.len()];
        for e in 0..n {
            let row = input[e * words..(e + 1) * words].iter().chain(&shared);
            let all = interp::eval(&reverse, &row.map(|v| *v as f64).collect::<Vec<_>>());
            let want = all[0];
            assert!(
                want.is_finite(),
                "{hidden:?} element {e}: the interpreter's {want}"
            );
            let got = values[e] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{hidden:?} element {e}: {got} against {want}"
            );
            for (s, d) in sums.iter_mut().zip(&all[1 + words..]) {
                *s += d;
            }
        }
        let largest = (sums.iter())
            .filter(|s| s.is_finite())
            .fold(0.0f64, |m, s| m.max(s.abs()));
        for (w, (want, got)) in sums.iter().zip(&sg).enumerate() {
            if want.is_finite() {
                let got = *got as f64;
                assert!(
                    (got - want).abs() <= 1e-3 * largest.max(1.0),
                    "{hidden:?} shared word {w}: {got} against {want}"
                );
            }
        }
    }
}

/// A network's gathered kernels compute one element a thread, and bind its shared words as
/// such kernels do, whatever its plain kernels are: the 8-32-32-1's gathered adjoint,
/// bound to storage as its cooperative adjoint is, failed to launch ("Storage class
/// Storage doesn't match the shader Uniform"). Values and shared gradients against the CPU
/// reverse mode summed in f64.
#[test]
fn a_networks_gathered_kernels_launch_and_match_the_cpu() {
    use gradfuse::Source;
    let d = device();
    let mut rng = Rng(81);
    let shared = net32::Shared {
        w1: uniform_array(&mut rng, 0.4),
        w2: uniform_array(&mut rng, 0.2),
        w3: uniform_array(&mut rng, 0.3),
    };
    let (rows, n) = (20usize, 300usize);
    let xs: Vec<[f32; 8]> = (0..rows).map(|_| uniform_array(&mut rng, 1.0)).collect();
    let index: Vec<u32> = (0..n)
        .map(|_| (rng.next_u64() % rows as u64) as u32)
        .collect();
    let t: Vec<f32> = (0..n).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let (xb, xi) = (
        d.buffer(&xs).expect("rows"),
        d.index(&index, rows).expect("index"),
    );
    let (tb, sb) = (
        d.buffer(&t).expect("t"),
        d.buffer(&[shared]).expect("shared"),
    );
    let values = d.zeros::<f32>(n).expect("values");
    let sg = d.zeros::<net32::SharedGrad>(1).expect("shared gradient");
    let sources = net32::Sources {
        x: Source::Gather(&xb, &xi),
        t: Source::Each(&tb),
    };
    let kernel = net32::kernel(d);
    let batch: Vec<net32::Args> = (0..n)
        .map(|e| net32::Args {
            x: xs[index[e] as usize],
            t: t[e],
        })
        .collect();
    let oracle = |a: &net32::Args| {
        let (v, _, g) = net32::value_and_grad(a, &shared);
        (v, words(&g))
    };
    // Each call launches again: `check` asks two launches for the same bits.
    let adjoint = || {
        let mut rec = d.record();
        kernel
            .value_and_grad_gathered(&mut rec, &sources, &sb, &values, &sg)
            .expect("gathered adjoint");
        rec.submit().expect("submit");
        let sums = d.read(&sg).expect("read");
        (d.read(&values).expect("read"), words(&sums[0]))
    };
    check("gathered 8-32-32-1", &batch, adjoint, oracle);
    let gathered_values = d.zeros::<f32>(n).expect("values");
    let value = || {
        let mut rec = d.record();
        kernel
            .value_gathered(&mut rec, &sources, &sb, &gathered_values)
            .expect("gathered value");
        rec.submit().expect("submit");
        let sums = d.read(&sg).expect("read");
        (d.read(&gathered_values).expect("read"), words(&sums[0]))
    };
    check("gathered 8-32-32-1's values", &batch, value, oracle);
}

/// The cooperative adjoint's matrices take 48 KiB of workgroup memory at 64 rows, which
/// Apple's and many mobile GPUs lack (32 KiB), and wgpu does not check: on a GPU of less,
/// launches run the adjoint of one element a thread the macro writes beside it, with the
/// same values and gradients as the CPU's reverse mode; a spec without such a fallback is
/// an error there, not a launch.
#[test]
fn a_gpu_of_less_workgroup_memory_runs_the_adjoint_of_one_element_a_thread() {
    let Some(d) = common::own_gpu() else { return };
    // As the shared test device waits: on lavapipe with 2 busy cores this launch once
    // passed the 60 s default (CI, 2026-12-02).
    d.set_timeout(std::time::Duration::from_secs(600));
    let (coop, fallback) = (&net64::ADJOINT_KERNEL, &net64::ADJOINT_FALLBACK_KERNEL);
    assert_eq!(coop.workgroup_bytes, 48 * 1024);
    assert!(coop.fallback.is_some_and(|f| std::ptr::eq(f, fallback)));
    assert!(fallback.workgroup_bytes == 0 && fallback.fallback.is_none());
    assert!(fallback.bounds_checks && !fallback.wgsl.contains("register-blocked"));
    d.set_workgroup_bytes(32 * 1024);
    let runs = |spec: &'static KernelSpec| d.kernel_for(spec).expect("a kernel");
    assert!(std::ptr::eq(runs(coop), fallback));
    // The 8-32-32-1's three matrices take 20.25 KiB.
    assert!(std::ptr::eq(
        runs(&net32::ADJOINT_KERNEL),
        &net32::ADJOINT_KERNEL
    ));
    let mut rng = Rng(91);
    let shared = net64::Shared {
        w1: uniform_array(&mut rng, 0.6),
        w2: uniform_array(&mut rng, 0.15),
        w3: uniform_array(&mut rng, 0.2),
    };
    let batch: Vec<net64::Args> = (0..700)
        .map(|_| net64::Args {
            scale: rng.uniform(0.5, 2.0),
            p: uniform_array(&mut rng, 1.0),
            t: rng.uniform(-0.5, 0.5),
        })
        .collect();
    let kernel = net64::kernel(&d);
    let launch = || {
        let (v, _, g) = kernel.value_and_grad(&batch, &shared).expect("launch");
        (v, words(&g))
    };
    check("3-64-64-1 on 32 KiB", &batch, launch, |a| {
        let (v, _, g) = net64::value_and_grad(a, &shared);
        (v, words(&g))
    });
    let alone: &'static KernelSpec = Box::leak(Box::new(KernelSpec {
        fallback: None,
        ..*coop
    }));
    let words_in = bytemuck::cast_slice::<net64::Args, f32>(&batch);
    let mut outputs: Vec<Vec<f32>> = (alone.outputs.iter())
        .map(|o| vec![0.0; batch.len() * o.words as usize])
        .collect();
    let mut outputs: Vec<&mut [f32]> = outputs.iter_mut().map(|o| &mut o[..]).collect();
    let mut shared_grad = vec![0.0f32; alone.shared_grad_words()];
    let err = d
        .launch_shared(
            alone,
            words_in,
            bytemuck::cast_slice(std::slice::from_ref(&shared)),
            &mut outputs,
            &mut shared_grad,
        )
        .expect_err("48 KiB on a GPU of 32");
    assert!(
        matches!(&err, gradfuse::Error::Unsupported(m) if m.contains("workgroup memory")),
        "{err}"
    );
}

/// Where the driver reports its multiprocessors (NVIDIA's), a launch that reduces shared
/// gradients of a kernel that declares its workgroup memory is cut into one wave of
/// workgroups: the multiprocessors times the workgroups their 48 KiB hold (`gpu/waves.rs`),
/// among which the kernel divides the batch's chunks itself. Lavapipe reports none; here
/// the count is set, and the launch's fewer, longer workgroups still give the batch sum,
/// where the chunks divide evenly and where some workgroups take one more.
#[test]
fn a_known_count_of_multiprocessors_cuts_the_adjoint_into_one_wave() {
    let Some(d) = common::own_gpu() else { return };
    d.set_timeout(std::time::Duration::from_secs(600));
    d.set_workgroup_bytes(48 * 1024);
    let spec = &net32::ADJOINT_KERNEL;
    // 24 runs of 128 elements: a workgroup each, as many as the default allows.
    assert_eq!(d.launch_workgroups(spec, 3001), 24);
    // Three multiprocessors, two workgroups of 22,288 bytes each: six workgroups, which
    // divide 3,001 elements' 47 chunks of 64 as 8, 8, 8, 8, 8 and 7, and 837's 14 as 3, 3,
    // 2, 2, 2 and 2 (in runs of two chunks, four workgroups would have taken them).
    d.set_multiprocessors(3);
    assert_eq!(d.launch_workgroups(spec, 3001), 6);
    assert_eq!(d.launch_workgroups(spec, 837), 6);
    assert_eq!(d.launch_workgroups(spec, 300), 3);
    let kernel = net32::kernel(&d);
    check_net32_batches(
        &kernel,
        93,
        &[3001, 837],
        "8-32-32-1 in one wave of six workgroups",
    );
}
