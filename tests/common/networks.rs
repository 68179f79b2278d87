//! Networks as users write them, for the tests of the cooperative network kernels.

/// The three activations the cooperative kernel computes, as users write them.
pub const ACTIVATIONS: [&str; 3] = ["s.tanh()", "s.max(0.0)", "1.0 / (1.0 + (-s).exp())"];

/// `samples::deep_network`'s `src` with hidden layer `l`'s activation `activations[l - 1]`,
/// each in its own row's statement (`h1[j] = ..`, `h2[j] = ..`).
pub fn with_layer_activations(mut src: String, activations: &[&str]) -> String {
    for (l, a) in (1..).zip(activations) {
        src = src.replacen(&format!("h{l}[j] = s.tanh()"), &format!("h{l}[j] = {a}"), 1);
    }
    src
}
