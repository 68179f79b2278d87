//! The activations the cooperative network kernels compute (`tanh`, relu, the sigmoid)
//! over a thread's `vec4`s of sums, and their derivatives read off the stored outputs.

use crate::ir::{Activation, AtZero};

/// The WGSL of activation `a` over `sums`, a `vec4` (one of [`super::NetworkPlan::supported`]'s).
pub(super) fn activate(a: Activation, sums: &str) -> String {
    match a {
        Activation::Relu(_) => format!("relu4({sums})"),
        Activation::Sigmoid => format!("sigmoid4({sums})"),
        _ => format!("tanh4({sums})"),
    }
}

/// Whether a layer of activation `a` keeps a tie mask of the sums that were exactly zero:
/// a relu whose derivative at zero is not 0 ([`WGSL_RELU`]).
pub(super) fn keeps_ties(a: Activation) -> bool {
    matches!(a, Activation::Relu(at_zero) if at_zero != AtZero::Zero)
}

/// The statement that records which lanes of `sums` are exactly zero into layer `layer`'s
/// tie mask at bit `bit`, where `a` [`keeps_ties`].
pub(super) fn record_ties(a: Activation, layer: u32, sums: &str, bit: u32) -> Option<String> {
    keeps_ties(a).then(|| format!("ties{layer} |= zero_bits({sums}, {bit}u);"))
}

/// The WGSL of activation `a`'s derivative from `out`, a `vec4` of what [`activate`]
/// wrote, and (relu) layer `layer`'s tie mask at bit `bit`.
pub(super) fn derivative(a: Activation, out: &str, layer: u32, bit: u32) -> String {
    match a {
        Activation::Relu(AtZero::Zero) => format!("drelu4({out}, 0u, 0u, 0.0)"),
        Activation::Relu(at_zero) => {
            let d = at_zero.derivative();
            format!("drelu4({out}, ties{layer}, {bit}u, {d:?})")
        }
        Activation::Sigmoid => format!("({out} * (vec4<f32>(1.0) - {out}))"),
        _ => format!("(vec4<f32>(1.0) - {out} * {out})"),
    }
}

/// Relu's helpers. `max(s, 0)`'s derivative is 1 above zero, 0.5 at zero (`ad::partials`:
/// a tie; 0 or 1 for a relu written as a branch, [`AtZero`]) and 0 below and at NaN, which
/// the output `0` alone cannot tell apart; so each
/// thread keeps a bit for each of its sums that was exactly zero (a tie mask a layer,
/// `ties1`, `ties2`: 16 sums a thread at either width), set where the layer is computed
/// and read where its derivative is. NaN gives `0`, as Rust's `f32::max` (and `gf_max`)
/// does. Storing ties as `-0.0` instead, for the derivative to read the sign back, passed
/// on lavapipe and failed on the H200, its gradients off far from any tie (as if every
/// zero output read as one): Vulkan promises signed zeros only to a shader that asks.
pub(super) const WGSL_RELU: &str = "\
// max(v, 0), and 0 where v is NaN.
fn relu4(v: vec4<f32>) -> vec4<f32> {
    return select(vec4<f32>(0.0), v, v > vec4<f32>(0.0));
}

// Bits bit .. bit + 3 set where v's lanes are exactly zero.
fn zero_bits(v: vec4<f32>, bit: u32) -> u32 {
    let b = select(vec4<u32>(0u), vec4<u32>(1u, 2u, 4u, 8u), v == vec4<f32>(0.0));
    return (b.x | b.y | b.z | b.w) << bit;
}

// A relu's derivative from relu4's output h and zero_bits's mask: 1 above zero, at_zero
// where the sum was exactly zero, else 0.
fn drelu4(h: vec4<f32>, ties: u32, bit: u32, at_zero: f32) -> vec4<f32> {
    let tie = (vec4<u32>(ties >> bit) & vec4<u32>(1u, 2u, 4u, 8u)) != vec4<u32>(0u);
    return select(select(vec4<f32>(0.0), vec4<f32>(at_zero), tie), vec4<f32>(1.0), h > vec4<f32>(0.0));
}
";
