//! Layers recognized in functions written as users write them, and near misses that are
//! not layers.

use super::*;
use crate::lower::lower_fn_with;

/// The layers of `src`'s primal (as lowered), `#[shared]` arrays being those built of the
/// layout's shared words.
fn layers_of(src: &str) -> (Function, Vec<DenseLayer>) {
    let item: syn::ItemFn = syn::parse_str(src).expect("parses");
    let lowered = lower_fn_with(&item, &[]).expect("lowers");
    let f = lowered.primal;
    let (words, shared) = (lowered.layout.words, lowered.layout.shared_words);
    let is_shared = |v: ValueId| match &f.node(v).op {
        Op::ArrayNew(ws) => ws
            .iter()
            .any(|w| matches!(f.node(*w).op, Op::Input(i) if (words..words + shared).contains(&i))),
        _ => false,
    };
    let layers = dense_layers(&f, &is_shared)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    (f, layers)
}

/// The source name of value `v` of `f`.
fn name(f: &Function, v: ValueId) -> &str {
    f.node(v).name.as_deref().unwrap_or("")
}

/// One layer over `x` (`[f32; 4]`) into `h` (`[f32; 3]`), its row's statements `row` (`s`,
/// `j` and `k` as in a layer), `b` and `w` shared, `p` a per-element array.
fn one_layer(row: &str) -> String {
    format!(
        "fn f(x: [f32; 4], p: [f32; 12], #[shared] w: [f32; 12], #[shared] b: [f32; 3]) -> f32 {{
            let mut h = [0.0; 3];
            for j in 0..3 {{
                {row}
            }}
            h[0] + h[1] * h[2]
        }}"
    )
}

#[test]
fn the_readme_network_is_two_layers_and_an_output_that_is_not_one() {
    let (f, layers) = layers_of(&crate::samples::network(8, 32, 1));
    assert_eq!(layers.len(), 2, "{layers:?}");
    let (first, second) = (&layers[0], &layers[1]);
    assert_eq!((first.rows, first.columns), (32, 8));
    assert_eq!(first.weight_index, (0, 8, 1));
    assert_eq!((first.bias_offset, first.input_index), (256, (0, 1)));
    assert_eq!(
        (name(&f, first.weights), name(&f, first.biases)),
        ("w1", "w1")
    );
    assert_eq!(name(&f, first.input), "x");
    assert_eq!(first.activation, Some(Activation::Call(Func::Tanh)));
    assert_eq!((second.rows, second.columns), (32, 32));
    assert_eq!(second.weight_index, (0, 32, 1));
    assert_eq!(second.bias_offset, 1024);
    assert_eq!(name(&f, second.weights), "w2");
    // The second layer reads what the first wrote.
    assert!(matches!(f.node(second.input).op, Op::Result(..)));
    assert_eq!(name(&f, second.input), "h1");
}

#[test]
fn sums_and_products_either_way_round_and_other_activations() {
    for row in [
        "let mut s = b[j]; for k in 0..4 { s = x[k] * w[4 * j + k] + s; } h[j] = s.sin();",
        "let mut s = b[j]; for k in 0..4 { s += w[j * 4 + k] * x[k]; } h[j] = s.sin();",
    ] {
        let (_, layers) = layers_of(&one_layer(row));
        assert_eq!(layers.len(), 1, "{row}");
        assert_eq!(layers[0].weight_index, (0, 4, 1), "{row}");
        assert_eq!(
            layers[0].activation,
            Some(Activation::Call(Func::Sin)),
            "{row}"
        );
    }
}

/// The activation of [`one_layer`] with `h[j] = {act}` for its row's last statement, if
/// that is a layer.
fn activation_in_layer(act: &str) -> Option<Option<Activation>> {
    let row =
        format!("let mut s = b[j]; for k in 0..4 {{ s += w[j * 4 + k] * x[k]; }} h[j] = {act};");
    let (_, layers) = layers_of(&one_layer(&row));
    assert!(layers.len() <= 1, "{act}: {layers:?}");
    layers.first().map(|l| l.activation)
}

#[test]
fn max_with_zero_either_way_round_is_a_relu() {
    for act in ["s.max(0.0)", "0.0f32.max(s)", "f32::max(s, 0.0)"] {
        let relu = Some(Activation::Relu(AtZero::Half));
        assert_eq!(activation_in_layer(act), Some(relu), "{act}");
    }
    // As a branch: the derivative at zero is the branch's.
    for (act, at_zero) in [
        ("if s > 0.0 { s } else { 0.0 }", AtZero::Zero),
        ("if 0.0 < s { s } else { 0.0 }", AtZero::Zero),
        ("if s >= 0.0 { s } else { 0.0 }", AtZero::One),
        ("if 0.0 <= s { s } else { 0.0 }", AtZero::One),
    ] {
        let relu = Some(Activation::Relu(at_zero));
        assert_eq!(activation_in_layer(act), Some(relu), "{act}");
    }
    // The maximum with another value, or of the sum and a weight, is no activation; nor a
    // branch that gives NaN at NaN, or compares with something else.
    for act in [
        "s.max(0.5)",
        "s.max(w[j])",
        "s.min(0.0)",
        "if s <= 0.0 { 0.0 } else { s }",
        "if s > 0.5 { s } else { 0.0 }",
        "if s > 0.0 { s } else { 0.5 }",
        "if s < 0.0 { s } else { 0.0 }",
    ] {
        assert_eq!(activation_in_layer(act), None, "{act}");
    }
}

#[test]
fn the_logistic_sigmoid_as_rust_writes_it() {
    for act in [
        "1.0 / (1.0 + (-s).exp())",
        "1.0 / ((-s).exp() + 1.0)",
        "1.0 / (1.0 + f32::exp(-s))",
    ] {
        let sigmoid = Some(Activation::Sigmoid);
        assert_eq!(activation_in_layer(act), Some(sigmoid), "{act}");
    }
    for act in [
        "2.0 / (1.0 + (-s).exp())",
        "1.0 / (2.0 + (-s).exp())",
        "1.0 / (1.0 + s.exp())",
        "1.0 / (1.0 + (-s).exp()) + s",
    ] {
        assert_eq!(activation_in_layer(act), None, "{act}");
    }
}

#[test]
fn transposed_weights_and_no_activation() {
    let row = "let mut s = b[j]; for k in 0..4 { s += w[3 * k + j] * x[k]; } h[j] = s;";
    let (_, layers) = layers_of(&one_layer(row));
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0].weight_index, (0, 1, 3));
    assert_eq!(layers[0].activation, None);
}

#[test]
fn near_misses_are_not_layers() {
    for row in [
        // Per-element weights.
        "let mut s = b[j]; for k in 0..4 { s += p[4 * j + k] * x[k]; } h[j] = s.tanh();",
        // The same weight for every row.
        "let mut s = b[j]; for k in 0..4 { s += w[k] * x[k]; } h[j] = s.tanh();",
        // Not a sum of products.
        "let mut s = b[j]; for k in 0..4 { s *= w[4 * j + k] * x[k]; } h[j] = s.tanh();",
        "let mut s = b[j]; for k in 0..4 { s += (w[4 * j + k] * x[k]).sin(); } h[j] = s;",
        // The sum read inside the loop as more than its own term.
        "let mut s = b[j]; for k in 0..4 { s += w[4 * j + k] * x[k] * s; } h[j] = s;",
        // An activation of two arguments, other than the maximum with zero.
        "let mut s = b[j]; for k in 0..4 { s += w[4 * j + k] * x[k]; } h[j] = s.hypot(1.0);",
        // The row written somewhere else.
        "let mut s = b[j]; for k in 0..4 { s += w[4 * j + k] * x[k]; } h[2 - j] = s;",
    ] {
        let (_, layers) = layers_of(&one_layer(row));
        assert!(layers.is_empty(), "{row}: {layers:?}");
    }
}

#[test]
fn a_recurrence_is_not_a_layer() {
    let src = "fn f(x: [f32; 4], #[shared] w: [f32; 12], #[shared] b: [f32; 3]) -> f32 {
        let mut h = [0.0; 3];
        for j in 0..3 {
            let mut s = b[j];
            for k in 0..3 {
                s += w[4 * j + k] * h[k];
            }
            h[j] = s.tanh();
        }
        h[0] + x[1]
    }";
    let (_, layers) = layers_of(src);
    assert!(layers.is_empty(), "{layers:?}");
}

#[test]
fn a_coordinate_network_of_two_inputs_has_two_columns_in_its_first_layer() {
    let (_, layers) = layers_of(&crate::samples::network(2, 64, 1));
    assert_eq!(layers.len(), 2, "{layers:?}");
    assert_eq!((layers[0].rows, layers[0].columns), (64, 2));
    assert_eq!(
        (layers[0].weight_index, layers[0].bias_offset),
        ((0, 2, 1), 128)
    );
    assert_eq!((layers[1].rows, layers[1].columns), (64, 64));
}

#[test]
fn a_layer_of_one_input_reads_its_one_word() {
    // `x[k]` of an array of one word is folded to `x[0]`: still the layer's one column.
    let (_, layers) = layers_of(&crate::samples::network(1, 32, 1));
    assert_eq!(layers.len(), 2, "{layers:?}");
    assert_eq!((layers[0].rows, layers[0].columns), (32, 1));
    assert_eq!(layers[0].input_index, (0, 1));
}
