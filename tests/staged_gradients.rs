//! Gradients beside a shared-gradient reduction: of an odd number of words, staged through
//! workgroup memory where the kernel computes 2 elements per thread or more and the gradient
//! has 7 words or more (`abi::stage_gradients`), stored directly otherwise; past 8 words
//! (odd, or past 16), in rounds through the reduction's own stage while the sums are in
//! registers (`abi::reduce_stage_rounds`). Both stores are
//! checked against the f64 interpreter's reverse mode over batches of one run per
//! workgroup and of several (whose last run ends part way and whose next is wholly past
//! the end), with the shared gradient summed over the batch.

mod common;

use common::{Rng, device, rel_error, words_of};
use gradfuse::differentiable;
use gradfuse_shaders_gen::{ad, compile_str, interp};

with_source! {
    SEVEN_SRC,
    // Seven gradient words (staged), a shared value read in a branch, a constant between.
    #[differentiable]
    pub fn seven(p: [f32; 7], #[shared] s: f32, #[constant] c: f32) -> f32 {
        let scale = if s > 0.0 { s.sqrt() } else { -s };
        let mut acc = 0.0;
        for k in 0..7 {
            acc += (p[k] * (k as f32 + c)).sin();
        }
        scale * acc + p[0] * p[6]
    }
}

with_source! {
    THREE_SRC,
    // Three gradient words (stored directly).
    #[differentiable]
    pub fn three(p: [f32; 3], #[shared] s: f32) -> f32 {
        s * (p[0] * p[1]).tanh() + p[2] * p[2] * s
    }
}

with_source! {
    THIRTEEN_SRC,
    // Thirteen gradient words: too many to stage beside the reduction, stored in rounds of
    // 128 elements through the reduction's stage (`abi::reduce_stage_rounds`).
    #[differentiable]
    pub fn thirteen(p: [f32; 13], #[shared] s: f32) -> f32 {
        let mut acc = 0.0;
        for k in 0..13 {
            acc += (p[k] * s + k as f32).sin() * p[12 - k];
        }
        acc * s
    }
}

with_source! {
    TWENTY_SRC,
    // Twenty gradient words (a vector view): in rounds of 64 elements through the
    // reduction's stage, each element's words rotated there.
    #[differentiable]
    pub fn twenty(p: [f32; 20], #[shared] s: f32) -> f32 {
        let mut acc = 0.0;
        for k in 0..20 {
            acc += (p[k] - s).tanh() * (k as f32 + 1.0);
        }
        acc * s + p[0] * p[19]
    }
}

/// Checks a batch's values, gradients (`grads` words each) and shared-gradient sum against
/// the f64 interpreter's reverse mode of `src` (its one shared word the last input, its
/// gradient the last output).
fn check(src: &str, batch: &[Vec<f64>], got: (&[f32], &[f32], f32), grads: usize) {
    let c = compile_str(src).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    let (values, gradients, shared) = got;
    let (mut want, mut magnitude) = (0.0f64, 0.0f64);
    for (i, words) in batch.iter().enumerate() {
        let all = interp::eval(&reverse, words);
        let value = all[0];
        assert!(
            (values[i] as f64 - value).abs() <= 2e-5 * value.abs().max(1.0),
            "{i}"
        );
        let got: Vec<f64> = gradients[i * grads..(i + 1) * grads]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let g = &all[1..1 + grads];
        assert!(rel_error(&got, g, 1.0) < 2e-5, "{i}: {got:?} against {g:?}");
        let s = all[all.len() - 1];
        want += s;
        magnitude += s.abs();
    }
    assert!(
        (shared as f64 - want).abs() <= 1e-5 * magnitude,
        "shared gradient {shared} against {want}"
    );
}

/// Elements of a batch of `n`: one run per workgroup (3,000), or past 512 workgroups'
/// worth several, the last ending part way.
const SIZES: [usize; 2] = [3000, 2 * 512 * 256 + 1001];

#[test]
fn seven_gradient_words_are_staged_beside_the_reduction() {
    assert!(seven::WGSL_ADJOINT.contains("grad_stage"));
    assert!(seven::WGSL_ADJOINT.contains("nth += 2u"));
    let mut rng = Rng(11);
    for n in SIZES {
        let batch: Vec<seven::Args> = (0..n)
            .map(|_| seven::Args {
                p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
                c: rng.uniform(-1.0, 1.0),
            })
            .collect();
        let shared = seven::Shared { s: 0.8 };
        let (values, grads, sg) = seven::kernel(device())
            .value_and_grad(&batch, &shared)
            .expect("launch");
        let words: Vec<Vec<f64>> = batch.iter().map(|a| words_of(a, &shared)).collect();
        check(
            SEVEN_SRC,
            &words,
            (&values, bytemuck::cast_slice(&grads), sg.s),
            7,
        );
    }
}

/// Runs `$module`'s `value_and_grad` over batches of [`SIZES`] random elements (its one
/// argument `p`, one shared word `s`) and checks `$w` gradient words and the shared sum
/// against `$src` ([`check`]).
macro_rules! check_batches {
    ($module:ident, $src:expr, $w:expr, $seed:expr, $s:expr) => {{
        let mut rng = Rng($seed);
        for n in SIZES {
            let batch: Vec<$module::Args> = (0..n)
                .map(|_| $module::Args {
                    p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
                })
                .collect();
            let shared = $module::Shared { s: $s };
            let (values, grads, sg) = $module::kernel(device())
                .value_and_grad(&batch, &shared)
                .expect("launch");
            let words: Vec<Vec<f64>> = batch.iter().map(|a| words_of(a, &shared)).collect();
            check(
                $src,
                &words,
                (&values, bytemuck::cast_slice(&grads), sg.s),
                $w,
            );
        }
    }};
}

#[test]
fn three_gradient_words_are_stored_directly_beside_the_reduction() {
    assert!(!three::WGSL_ADJOINT.contains("grad_stage"));
    check_batches!(three, THREE_SRC, 3, 12, -0.6);
}

#[test]
fn thirteen_gradient_words_go_through_the_reduction_stage_in_rounds() {
    let wgsl = thirteen::WGSL_ADJOINT;
    assert!(wgsl.contains("nth += 2u") && !wgsl.contains("grad_stage"));
    assert!(wgsl.contains("2 rounds of 128 elements"));
    assert!(wgsl.contains("grads[grads_group + first * 13u + word] = reduce_stage[word];"));
    check_batches!(thirteen, THIRTEEN_SRC, 13, 13, 0.7);
}

#[test]
fn twenty_gradient_words_go_through_the_reduction_stage_rotated() {
    let wgsl = twenty::WGSL_ADJOINT;
    assert!(wgsl.contains("4 rounds of 64 elements"));
    assert!(wgsl.contains("var<storage, read_write> grads: array<f32>;"));
    assert!(wgsl.contains("(word % 20u + word / 20u) % 20u"));
    check_batches!(twenty, TWENTY_SRC, 20, 20, -0.3);
}

with_source! {
    THIRTY_THREE_SRC,
    // Thirty-three gradient words and little work per word: past the 4 rounds a heavier
    // kernel takes, in 8 rounds of 32 elements through the reduction's stage
    // (`abi::reduce_stage_rounds`), not in 33 strided stores a thread.
    #[differentiable]
    pub fn thirty_three(p: [f32; 33], #[shared] s: f32) -> f32 {
        let mut acc = 0.0;
        for k in 0..33 {
            acc += p[k] * p[k] * (k as f32 + s);
        }
        acc
    }
}

with_source! {
    SIXTY_FOUR_SRC,
    // Sixty-four gradient words (a vector view), little work per word: 8 rounds of 32.
    #[differentiable]
    pub fn sixty_four(p: [f32; 64], #[shared] s: f32) -> f32 {
        let mut acc = 0.0;
        for k in 0..64 {
            acc += p[k] * s - p[63 - k] * p[k];
        }
        acc
    }
}

#[test]
fn light_kernels_store_wide_gradients_through_the_reduction_stage_in_more_rounds() {
    let wgsl = thirty_three::WGSL_ADJOINT;
    assert!(wgsl.contains("8 rounds of 32 elements"), "{wgsl}");
    check_batches!(thirty_three, THIRTY_THREE_SRC, 33, 33, 0.4);
    let wgsl = sixty_four::WGSL_ADJOINT;
    assert!(wgsl.contains("8 rounds of 32 elements"), "{wgsl}");
    check_batches!(sixty_four, SIXTY_FOUR_SRC, 64, 64, -0.5);
}
