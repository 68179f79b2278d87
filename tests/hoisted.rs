//! Values of the `#[shared]` words alone (a softmax's maximum, its ties and exponentials
//! over shared logits, a branch on a shared scale) are computed once per workgroup by the
//! value, tangent and adjoint kernels' first thread and read back by the others
//! (`shaders-gen/src/emit_wgsl/hoist.rs`); in a tangent kernel, with their tangents along
//! the shared tangent.
//! Checked against the f64 interpreter and the CPU version at batch sizes that end inside a
//! workgroup and span many, with every branch of the shared values taken and with NaN and
//! infinite logits; and that the kernel does hoist them, and does not where they cost less
//! than the barrier.

mod common;

use common::{device, words_of};
use gradfuse::differentiable;
use gradfuse_shaders_gen::{compile_str, interp};

with_source! {
    SOFT_CHOICE_SRC,
    #[differentiable]
    pub fn soft_choice(a: f32, b: f32, #[shared] logits: [f32; 6], #[shared] scale: f32) -> f32 {
        let mut m = logits[0];
        for k in 1..6 {
            m = m.max(logits[k]);
        }
        let ops = [a, b, a * b, a + b, a - b, 1.0 - a];
        let mut z = 0.0;
        let mut out = 0.0;
        for k in 0..6 {
            let e = (logits[k] - m).exp();
            z += e;
            out += e * ops[k];
        }
        let s = if scale > 1.0 { scale.ln() } else { scale * scale };
        s * out / z
    }
}

// Shared-only work of one add: less than the barrier would cost.
#[differentiable]
pub fn cheap(x: f32, #[shared] w: [f32; 2]) -> f32 {
    let c = w[0] + w[1];
    x * c
}

/// The entry point `entry` of `wgsl` (past the helper functions) before its first
/// barrier, and after it.
fn split_at_barrier<'a>(wgsl: &'a str, entry: &str) -> (&'a str, &'a str) {
    let entry = wgsl
        .split_once(&format!("fn {entry}("))
        .expect("the entry point")
        .1;
    entry
        .split_once("workgroupBarrier();")
        .expect("the kernel has a barrier")
}

/// Shared words that take the scale's branches both ways, tie for the maximum, and hold a
/// NaN and an infinite logit.
fn shared_sets() -> [soft_choice::Shared; 5] {
    [
        soft_choice::Shared {
            logits: [0.3, -1.2, 2.5, 0.0, 1.1, -0.4],
            scale: 2.0,
        },
        soft_choice::Shared {
            logits: [-3.0, 4.0, 1.5, 3.9, -0.2, 0.7],
            scale: 0.5,
        },
        // Ties for the maximum, the first and later words: Rust's `max` keeps its first
        // argument where they are equal, and so does its adjoint.
        soft_choice::Shared {
            logits: [2.5, -1.2, 2.5, 0.0, 2.5, -0.4],
            scale: 0.5,
        },
        // A NaN logit: `max` passes over it, its exponential is NaN, so is the value.
        soft_choice::Shared {
            logits: [0.1, f32::NAN, 0.2, 0.3, 0.4, 0.5],
            scale: 1.5,
        },
        // An infinite logit: the maximum is infinite, and inf - inf is NaN.
        soft_choice::Shared {
            logits: [0.1, f32::INFINITY, 0.2, 0.3, 0.4, 0.5],
            scale: 1.5,
        },
    ]
}

/// `n` elements drawn from `rng` in [-1, 1].
fn batch(rng: &mut common::Rng, n: usize) -> Vec<soft_choice::Args> {
    (0..n)
        .map(|_| soft_choice::Args {
            a: rng.uniform(-1.0, 1.0),
            b: rng.uniform(-1.0, 1.0),
        })
        .collect()
}

/// The entry point `entry` of `wgsl` split at its first barrier, once checked that the
/// first thread's prologue before it computes all six exponentials and the rest none.
fn hoisted_exponentials<'a>(wgsl: &'a str, entry: &str) -> (&'a str, &'a str) {
    let (prologue, body) = split_at_barrier(wgsl, entry);
    assert!(prologue.contains("if (lid == 0u)"));
    assert_eq!(prologue.matches("exp(").count(), 6);
    assert_eq!(body.matches("exp(").count(), 0);
    (prologue, body)
}

#[test]
fn the_value_kernel_computes_shared_values_once_per_workgroup() {
    common::validate_wgsl("soft_choice_forward", soft_choice::WGSL_FORWARD);
    // Every exponential and the scale's logarithm are in the first thread's prologue.
    let (prologue, body) = hoisted_exponentials(soft_choice::WGSL_FORWARD, "forward");
    assert!(prologue.contains("gf_ln(") && !body.contains("gf_ln("));
    insta::assert_snapshot!("soft_choice_forward", soft_choice::WGSL_FORWARD);
    // Cheap shared work is computed in every thread, with no barrier.
    assert!(!cheap::WGSL_FORWARD.contains("workgroupBarrier"));
    assert!(!cheap::WGSL_FORWARD.contains("gf_hoisted"));
}

#[test]
fn hoisted_values_match_the_interpreter_and_the_cpu() {
    let c = compile_str(SOFT_CHOICE_SRC).expect("the source compiles");
    let kernel = soft_choice::kernel(device());
    let mut rng = common::Rng(11);
    for shared in &shared_sets() {
        // One element, a workgroup's last thread missing, one past it, many workgroups.
        for n in [1usize, 255, 257, 70_001] {
            let batch = batch(&mut rng, n);
            let values = kernel.value(&batch, shared).expect("launch");
            assert_eq!(values.len(), n);
            // Every element checked against the CPU version, a sample of them against the
            // f64 interpreter (it runs the unoptimized IR, one element at a time).
            for (i, (a, v)) in batch.iter().zip(&values).enumerate() {
                let cpu = soft_choice(a.a, a.b, shared.logits, shared.scale);
                if cpu.is_nan() {
                    assert!(v.is_nan(), "n = {n}, element {i}: {v}, the CPU's NaN");
                    continue;
                }
                assert!(
                    (v - cpu).abs() <= 1e-5 * cpu.abs().max(1.0),
                    "n = {n}, element {i}: {v} against the CPU's {cpu}"
                );
                if i % 997 == 0 || i + 1 == n {
                    let want = interp::eval(&c.lowered.primal, &words_of(a, shared))[0];
                    assert!(
                        (*v as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "n = {n}, element {i}: {v} against the interpreter's {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_tangent_kernel_hoists_shared_values_and_their_tangents() {
    common::validate_wgsl("soft_choice_tangent", soft_choice::WGSL_TANGENT);
    hoisted_exponentials(soft_choice::WGSL_TANGENT, "tangent");
    let shared = soft_choice::Shared {
        logits: [0.3, -1.2, 2.5, 0.0, 1.1, -0.4],
        scale: 2.0,
    };
    let shared_tangent = soft_choice::SharedGrad {
        logits: [0.5, -0.25, 1.0, 0.125, -1.5, 0.75],
        scale: -0.5,
    };
    let c = compile_str(SOFT_CHOICE_SRC).expect("the source compiles");
    let mut rng = common::Rng(12);
    for n in [1usize, 257, 70_001] {
        let batch = batch(&mut rng, n);
        let tangents: Vec<soft_choice::Grad> = (0..n)
            .map(|_| soft_choice::Grad {
                a: rng.uniform(-1.0, 1.0),
                b: rng.uniform(-1.0, 1.0),
            })
            .collect();
        let (values, derivatives) = soft_choice::kernel(device())
            .jvp(&batch, &shared, &tangents, &shared_tangent)
            .expect("launch");
        for i in [0, n - 1] {
            // Central differences of the f64 interpreter along the element's and the
            // shared tangent.
            let words = words_of(&batch[i], &shared);
            let dir = words_of(&tangents[i], &shared_tangent);
            let at = |h: f64| {
                let w: Vec<f64> = words.iter().zip(&dir).map(|(w, t)| w + h * t).collect();
                interp::eval(&c.lowered.primal, &w)[0]
            };
            let fd = (at(1e-6) - at(-1e-6)) / 2e-6;
            assert!(
                (derivatives[i] as f64 - fd).abs() <= 1e-4 * fd.abs().max(1.0),
                "n = {n}, element {i}: derivative {} against central differences {fd}",
                derivatives[i]
            );
        }
        for i in 0..n {
            let (v, d) = soft_choice::jvp(&batch[i], &shared, &tangents[i], &shared_tangent);
            assert!(
                (values[i] - v).abs() <= 1e-5 * v.abs().max(1.0),
                "n = {n}, element {i}: value {} against the CPU's {v}",
                values[i]
            );
            assert!(
                (derivatives[i] - d).abs() <= 1e-5 * d.abs().max(1.0),
                "n = {n}, element {i}: derivative {} against the CPU's {d}",
                derivatives[i]
            );
        }
    }
}

#[test]
fn the_adjoint_hoists_shared_values_and_the_ties_of_their_maximum() {
    common::validate_wgsl("soft_choice_adjoint", soft_choice::WGSL_ADJOINT);
    let (prologue, body) = hoisted_exponentials(soft_choice::WGSL_ADJOINT, "adjoint");
    // The running maximum's ties, which route its adjoint, are compared once per
    // workgroup, NaN tests and all, and read back as words.
    assert!(prologue.contains("gf_is_nan(") && !body.contains("gf_is_nan("));
    assert!(body.contains("gf_hoisted["));
    let kernel = soft_choice::kernel(device());
    let mut rng = common::Rng(13);
    for shared in &shared_sets() {
        for n in [1usize, 255, 257, 70_001] {
            let batch = batch(&mut rng, n);
            let (values, grads, sg) = kernel.value_and_grad(&batch, shared).expect("launch");
            // The shared gradient against the f64 sum of the CPU's, word by word, to the
            // rounding of a sum in another order.
            let (mut want, mut magnitude) = ([0.0f64; 7], [0.0f64; 7]);
            for (i, a) in batch.iter().enumerate() {
                let (v, g, s) = soft_choice::value_and_grad(a, shared);
                let close = |got: f32, cpu: f32| {
                    (got.is_nan() && cpu.is_nan()) || (got - cpu).abs() <= 1e-5 * cpu.abs().max(1.0)
                };
                assert!(
                    close(values[i], v),
                    "n = {n}, element {i}: {} against {v}",
                    values[i]
                );
                assert!(
                    close(grads[i].a, g.a) && close(grads[i].b, g.b),
                    "n = {n}, element {i}: gradient {:?} against the CPU's {g:?}",
                    grads[i]
                );
                let words = s.logits.iter().chain([&s.scale]);
                for (k, w) in words.enumerate() {
                    want[k] += *w as f64;
                    magnitude[k] += w.abs() as f64;
                }
            }
            let got = sg.logits.iter().chain([&sg.scale]);
            for (k, g) in got.enumerate() {
                if want[k].is_nan() {
                    assert!(g.is_nan(), "n = {n}, shared word {k}: {g}, the CPU's NaN");
                    continue;
                }
                assert!(
                    (*g as f64 - want[k]).abs() <= 1e-5 * magnitude[k].max(1e-30),
                    "n = {n}, shared word {k}: {g} against the CPU's sum {}",
                    want[k]
                );
            }
        }
    }
}
