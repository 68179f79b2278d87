//! The cooperative network adjoint's WGSL, validated by naga for each width it supports;
//! its numbers are checked on the GPU against the CPU reverse mode (`tests/networks_cooperative.rs`).

use super::*;
use crate::ir::AtZero;
use crate::{Reverse, compile_str};

/// `(y - t)^2` and its derivative in `y`, for elements of `inputs` words of `x` then `t`.
fn squared_error(inputs: u32) -> Function {
    let src = format!(
        "fn loss(y: f32, #[constant] x: [f32; {inputs}], #[constant] t: f32) -> f32 {{ (y - t) * (y - t) }}"
    );
    match compile_str(&src).expect("compiles").reverse {
        Reverse::Gradient(f) => f,
        Reverse::Jacobian(..) => unreachable!("a scalar result"),
    }
}

/// The plan of an `inputs`-`hidden`-`hidden`-1 network laid out as `samples::network`
/// writes it (`w1`, `w2`, `w3` consecutive, each layer's biases after its weights).
fn plan(inputs: u32, hidden: u32, loss: &Function) -> NetworkPlan {
    plan_with(inputs, hidden, [TANH, TANH], loss)
}

const TANH: Activation = Activation::Call(Func::Tanh);
const RELU: Activation = Activation::Relu(AtZero::Half);

/// [`plan`] with the layers' `activations`.
fn plan_with(
    inputs: u32,
    hidden: u32,
    activations: [Activation; 2],
    loss: &Function,
) -> NetworkPlan {
    let w2 = inputs * hidden + hidden;
    let w3 = w2 + hidden * hidden + hidden;
    let layer = |offset: u32, columns: u32, activation: Activation| HiddenLayer {
        weights: WordIndex {
            offset,
            row_stride: columns,
            column_stride: 1,
        },
        bias: offset + hidden * columns,
        rows: hidden,
        activation,
    };
    NetworkPlan {
        element_words: inputs + 1,
        first_input: 0,
        inputs,
        hidden,
        layers: vec![
            layer(0, inputs, activations[0]),
            layer(w2, hidden, activations[1]),
        ],
        outputs: vec![OutputRow {
            weights: WordIndex {
                offset: w3,
                row_stride: 1,
                column_stride: 0,
            },
            bias: w3 + hidden,
        }],
        loss: loss.clone(),
        shared_words: w3 + hidden + 1,
    }
}

fn validate(wgsl: &str) {
    let module =
        naga::front::wgsl::parse_str(wgsl).unwrap_or_else(|e| panic!("{}", e.emit_to_string(wgsl)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{e:?}\n{wgsl}"));
}

#[test]
fn the_kernel_validates_at_both_widths_and_any_inputs() {
    for (inputs, hidden) in [(8, 64), (2, 64), (3, 32), (8, 32), (16, 64), (32, 32)] {
        let loss = squared_error(inputs);
        let p = plan(inputs, hidden, &loss);
        assert!(p.supported(), "{inputs}-{hidden}");
        let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
        validate(&wgsl);
        let size = network_workgroup_size(&p);
        assert!(wgsl.contains(&format!("@workgroup_size({size})")));
        // The three matrices fit the device's 48 KiB at the wider width.
        if hidden == 64 {
            assert!(wgsl.contains("var<workgroup> w2s: array<f32, 4096>;"));
            assert!(wgsl.contains("var<workgroup> h1s: array<vec4<f32>, 1024>;"));
            assert!(wgsl.contains("var<workgroup> ds2s: array<vec4<f32>, 1024>;"));
        }
    }
}

/// Two layers of 128 rows stream `W2` in blocks through 48 KiB, in chunks of 32 elements;
/// past [`FIRST_LAYER_ROW_INPUTS`] inputs `d_W1` is a tile of the workgroup's product, past
/// [`FIRST_LAYER_REGISTER_INPUTS`] `W1` is streamed in blocks too (its last block padded
/// with zero inputs), and more than 128 inputs do not fit.
#[test]
fn layers_of_128_rows_validate_with_w2_in_blocks() {
    for (inputs, activations) in [
        (8, [TANH, TANH]),
        (1, [RELU, TANH]),
        (15, [Activation::Sigmoid, RELU]),
        (16, [TANH, RELU]),
        (17, [TANH, RELU]),
        (32, [TANH, TANH]),
        (33, [TANH, TANH]),
        (64, [RELU, TANH]),
        (100, [TANH, Activation::Sigmoid]),
        (128, [TANH, TANH]),
    ] {
        let loss = squared_error(inputs);
        let p = plan_with(inputs, 128, activations, &loss);
        assert!(p.supported() && p.blocks_weights(), "{inputs}");
        assert_eq!(p.workgroup_bytes(), WORKGROUP_BYTES);
        let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
        validate(&wgsl);
        assert!(wgsl.contains("var<workgroup> wblk: array<vec4<f32>, 1024>;"));
        assert!(wgsl.contains("var<workgroup> h1s: array<vec4<f32>, 1024>;"));
        assert!(wgsl.contains("var<workgroup> ds2s: array<vec4<f32>, 1024>;"));
        assert!(!wgsl.contains("w2s"));
        assert!(wgsl.contains("let first = idx * 32u;"));
        assert!(wgsl.contains("@workgroup_size(256)"));
        let tiled = inputs > FIRST_LAYER_ROW_INPUTS;
        assert_eq!(p.tiles_first_layer(), tiled);
        assert_eq!(wgsl.contains("gw1_0[k] = "), !tiled, "{inputs}");
        assert_eq!(wgsl.contains("let k1 = lid % 8u;"), tiled, "{inputs}");
        let streamed = inputs > FIRST_LAYER_REGISTER_INPUTS;
        assert_eq!(p.streams_first_layer(), streamed);
        assert_eq!(wgsl.contains("var w1_0: array<f32"), !streamed, "{inputs}");
        let blocks = format!("for (var wb = 0u; wb < {}u; wb++)", inputs.div_ceil(32));
        assert_eq!(wgsl.contains(&blocks), streamed, "{inputs}");
        // Rows of zero inputs pad the last block where the inputs do not fill it.
        let zeros = wgsl.contains("] = vec4<f32>();");
        assert_eq!(zeros, streamed && !inputs.is_multiple_of(32), "{inputs}");
    }
    let loss = squared_error(129);
    assert!(!plan(129, 128, &loss).supported());
    let loss = squared_error(33);
    assert!(!plan(33, 64, &loss).supported());
    assert!(!plan(33, 32, &loss).supported());
}

#[test]
fn relu_layers_read_their_derivative_off_the_stored_outputs() {
    let loss = squared_error(8);
    for (activations, tanh) in [
        ([RELU, RELU], false),
        ([TANH, RELU], true),
        ([RELU, TANH], true),
        (
            [
                Activation::Relu(AtZero::Zero),
                Activation::Relu(AtZero::One),
            ],
            false,
        ),
    ] {
        for hidden in [32, 64] {
            let p = plan_with(8, hidden, activations, &loss);
            assert!(p.supported(), "{activations:?} {hidden}");
            let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
            validate(&wgsl);
            assert!(wgsl.contains("h1s[") && wgsl.contains("drelu4("));
            assert_eq!(wgsl.contains("fn tanh4"), tanh, "{activations:?}");
            assert_eq!(wgsl.contains("gf_tanh("), tanh, "{activations:?}");
        }
    }
    // A relu whose derivative at zero is 0 keeps no tie mask; one whose is 1 reads it.
    let p = plan_with(
        8,
        32,
        [
            Activation::Relu(AtZero::Zero),
            Activation::Relu(AtZero::One),
        ],
        &loss,
    );
    let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
    assert!(!wgsl.contains("ties1") && wgsl.contains("drelu4(hh0_0, 0u, 0u, 0.0)"));
    assert!(wgsl.contains("ties2 |= zero_bits(f0_0, 0u);"));
    assert!(wgsl.contains("drelu4(t0_0, ties2, 0u, 1.0)"));
    // The sigmoid, beside either.
    for activations in [[Activation::Sigmoid, RELU], [TANH, Activation::Sigmoid]] {
        let p = plan_with(8, 64, activations, &loss);
        assert!(p.supported(), "{activations:?}");
        let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
        validate(&wgsl);
        assert!(wgsl.contains("fn sigmoid4") && wgsl.contains(" * (vec4<f32>(1.0) - "));
    }
    // Layers of other activations are not the kernel's.
    let sin = Activation::Call(Func::Sin);
    assert!(!plan_with(8, 32, [sin, TANH], &loss).supported());
    assert!(!plan_with(8, 64, [TANH, sin], &loss).supported());
}

#[test]
fn more_outputs_validate_up_to_what_the_matrix_holds() {
    let cases = [
        (8, 64, 2, true),
        (8, 32, 4, true),
        (3, 32, 2, true),
        (32, 32, 3, true),
        (8, 64, 3, false),
        (8, 32, 5, false),
        // At 128 rows the third and fourth outputs' parts go into `wblk`.
        (8, 128, 4, true),
        (16, 128, 3, true),
        (8, 128, 5, false),
    ];
    for (inputs, hidden, outputs, supported) in cases {
        let src = format!(
            "fn loss(y: [f32; {outputs}], #[constant] x: [f32; {inputs}], #[constant] t: f32) -> f32 {{
                let mut l = 0.0;
                for o in 0..{outputs} {{ l += (y[o] - t) * (y[o] - t); }}
                l
            }}"
        );
        let loss = match compile_str(&src).expect("compiles").reverse {
            Reverse::Gradient(f) => f,
            Reverse::Jacobian(..) => unreachable!("a scalar result"),
        };
        let mut p = plan(inputs, hidden, &loss);
        let row = p.outputs[0];
        p.outputs = (0..outputs)
            .map(|o| OutputRow {
                weights: WordIndex {
                    offset: row.weights.offset + o * hidden,
                    ..row.weights
                },
                bias: row.bias + o * hidden + o,
            })
            .collect();
        // The loss takes y as its first words: the element's words follow.
        p.element_words = inputs + 1;
        let loss_inputs = p.loss.num_inputs;
        assert_eq!(loss_inputs, outputs + inputs + 1);
        assert_eq!(p.supported(), supported, "{inputs}-{hidden}-{outputs}");
        if supported {
            let wgsl = emit_network_adjoint("fn net(..) -> f32", &p);
            validate(&wgsl);
            assert!(wgsl.contains(&format!("fn gf_loss(gf_y: array<f32, {outputs}>")));
        }
    }
}

#[test]
fn widths_it_cannot_tile_are_not_supported() {
    let loss = squared_error(8);
    for hidden in [16, 48, 96, 256] {
        assert!(!plan(8, hidden, &loss).supported(), "{hidden}");
    }
    let wide = squared_error(40);
    assert!(!plan(40, 64, &wide).supported());
}

#[test]
fn the_losss_names_avoid_wgsl_keywords() {
    // The loss's locals keep the user's names: `target` and `select` are WGSL's.
    let src = crate::samples::DenseNetwork {
        loss: "let select = y - target; select * select".into(),
        ..crate::samples::DenseNetwork::new(4, 24)
    }
    .source()
    .replace("t: f32", "target: f32");
    let c = crate::compile_str(&src).unwrap_or_else(|e| panic!("{src}: {}", e[0]));
    assert!(c.wgsl_reverse.contains("register-blocked"), "{src}");
    assert!(c.wgsl_reverse.contains("let target_1 = args[gf_row"));
    validate(&c.wgsl_reverse);
}

#[test]
fn rows_are_padded_at_32_rows_where_the_padded_matrices_fit() {
    let loss = squared_error(8);
    let p32 = plan(8, 32, &loss);
    assert!(p32.pads_rows());
    // W2 rows of 36 words, h1 rows of 17 vec4s, d_s2's 33 rows too.
    assert_eq!(p32.workgroup_bytes(), 4 * (32 * 36 + (32 + 33) * 68));
    let wgsl = emit_network_adjoint("fn net", &p32);
    validate(&wgsl);
    assert!(wgsl.contains("var<workgroup> w2s: array<f32, 1152>;"));
    assert!(wgsl.contains("var<workgroup> h1s: array<vec4<f32>, 544>;"));
    // Every address a lane computes is a base and a constant: no XOR swizzle is left.
    assert!(!wgsl.contains(" ^ "), "{wgsl}");
    // d_W2's loop over the chunk's columns is written out.
    assert!(!wgsl.contains("for (var i4"));
    let p64 = plan(8, 64, &loss);
    assert!(!p64.pads_rows());
    let wgsl = emit_network_adjoint("fn net", &p64);
    validate(&wgsl);
    assert!(wgsl.contains(" ^ ") && !wgsl.contains("for (var e4"));
}

/// A multiprocessor holds 48 KiB of workgroup memory in all: two workgroups of 24,064
/// bytes and one of 25,088, as the H100 ran them. The layout keeps the most workgroups,
/// then pads, then sums the outputs at once: each case's bytes padded or swizzled, outputs
/// in pairs or at once, as the H100 measured the choices (BENCHMARKS.md, "Workgroups a
/// multiprocessor").
#[test]
fn the_layout_keeps_the_most_workgroups_then_pads_then_sums_outputs_at_once() {
    assert_eq!(workgroups_sharing(24_064), 2);
    assert_eq!(workgroups_sharing(25_088), 1);
    let loss = squared_error(8);
    let mut p = plan(8, 32, &loss);
    let (row, layer) = (p.outputs[0], p.layers[1]);
    // Hidden layers, outputs, (padded, paired), bytes.
    let cases = [
        (2, 1, (true, false), 22_288),
        (2, 2, (true, false), 22_560),
        // Padded at once 26,368 bytes (one workgroup), swizzled at once 24,576 (two, and
        // 0.354 ms at 2^20 against the padded pairs' 0.346).
        (2, 3, (true, true), 22_832),
        // At once 28,672 swizzled: one workgroup (0.619 ms against 0.355).
        (2, 4, (true, true), 23_104),
        // One workgroup whatever the layout: padded, at once (the pairs' barriers cost 1%).
        (3, 4, (true, false), 44_032),
        // Padded past 48 KiB.
        (4, 3, (false, false), 49_152),
        // Only in pairs within 48 KiB.
        (4, 4, (false, true), 46_080),
    ];
    for (depth, outputs, layout, bytes) in cases {
        p.layers.truncate(1);
        p.layers.resize(depth, layer);
        p.outputs = vec![row; outputs];
        let name = format!("{depth} layers, {outputs} outputs");
        assert_eq!((p.pads_rows(), p.pairs_outputs()), layout, "{name}");
        assert_eq!(p.workgroup_bytes(), bytes, "{name}");
    }
}
