//! Adjoints that record a tape and sum shared gradients compute 2 elements per thread
//! where their tapes hold at most `opt::MAX_TAPE_WORDS` words per element, one past it
//! (`shared_sums::elements_per_thread`): the two elements' tapes side by side must not
//! mix. Each shape is checked against the f64 interpreter's reverse mode over a batch of
//! one run per workgroup and one of several runs (the last part way).

mod common;

use common::shared_adjoint::check_shared_adjoint;
use gradfuse_shaders_gen::compile_str;
use gradfuse_shaders_gen::samples::spring_chain;

/// A pendulum per element, stiffness and damping shared: a kept loop (no array index)
/// recording 40 x 3 words, its two shared words summed in registers.
const PENDULUM: &str = "fn pendulum(x: f32, v: f32, #[shared] kc: [f32; 2]) -> f32 {
    let mut a = x;
    let mut w = v;
    let mut e = 0.0;
    for _t in 0..40 {
        w = w - 0.05 * (kc[0] * a.sin() + (kc[1] + 0.7) * w);
        a = a + 0.05 * w;
        e += a * a;
    }
    e
}";

/// A leaky integrator over a shared 400-word signal: past the unroll budget, so a loop
/// cut into checkpointed segments (two tapes of 20 x 2 words), its gradient streamed.
const DECAY: &str = "fn decay(u: f32, c: f32, #[shared] table: [f32; 400]) -> f32 {
    let mut h = 0.0;
    let mut s = 0.0;
    for i in 0..400 {
        h = h * 0.9 + table[i] * u;
        s += c * h * h;
    }
    s
}";

/// Elements of the two batches: one run per workgroup, and past 512 workgroups' worth.
const SIZES: [(usize, usize); 2] = [(3000, 3000), (2 * 512 * 256 + 1001, 997)];

fn check_both_sizes(label: &str, src: &str, shape: (usize, usize), seed: u64) {
    for (k, sizes) in SIZES.into_iter().enumerate() {
        check_shared_adjoint(label, src, shape, sizes, seed + k as u64).expect("launch");
    }
}

#[test]
fn a_kept_loop_with_sums_in_registers_takes_two_elements() {
    let wgsl = compile_str(PENDULUM).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("var tape") && wgsl.contains("nth += 2u"));
    check_both_sizes("pendulum", PENDULUM, (2, 2), 1);
}

#[test]
fn a_checkpointed_loop_with_a_streamed_gradient_takes_two_elements() {
    let wgsl = compile_str(DECAY).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("_segment") && wgsl.contains("stage_count"));
    assert!(wgsl.contains("nth += 2u") && wgsl.contains("tape_b"));
    check_both_sizes("decay", DECAY, (2, 400), 3);
}

#[test]
fn a_loop_carrying_arrays_is_cut_and_takes_two_elements() {
    // Six masses with a shared stiffness, 24 steps carrying two 6-word arrays: a 288-word
    // tape, cut into checkpointed segments (`opt::checkpoint_long_loops`, 120 words).
    let chain = spring_chain(6, 24, true);
    let wgsl = compile_str(&chain).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("_segment") && wgsl.contains("nth += 2u"));
    check_both_sizes("chain", &chain, (6, 1), 5);
}

#[test]
fn a_tape_past_the_bound_keeps_one_element() {
    // 24 masses stepped 30 times, 48 words carried: segments of 6 steps still record 528
    // words, past the bound.
    let chain = spring_chain(24, 30, true);
    let wgsl = compile_str(&chain).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("_segment") && wgsl.contains("nth++"));
    check_both_sizes("long chain", &chain, (24, 1), 7);
}
