//! Adjoints that record a tape and sum shared gradients compute 2 elements per thread
//! where their tapes hold at most `opt::MAX_TAPE_WORDS` words per element, one past it
//! (`shared_sums::elements_per_thread`): the two elements' tapes side by side must not
//! mix. Each shape is checked against the f64 interpreter's reverse mode over a batch of
//! one run per workgroup and one of several runs (the last part way).

mod common;

use common::shared_adjoint::check_shared_adjoint;
use gradfuse_shaders_gen::compile_str;

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

/// A mass-spring chain with a shared stiffness, 24 steps carrying two 6-word arrays: a
/// 288-word tape, cut into checkpointed segments (`opt::checkpoint_long_loops`, 120 words)
/// and so two elements per thread.
const CHAIN: &str = "fn chain(p0: [f32; 6], #[shared] k: f32) -> f32 {
    let mut p = p0;
    let mut q = [0.0; 6];
    for _t in 0..24 {
        let mut f = [0.0; 6];
        for i in 1..5 {
            f[i] = (0.5 + k) * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - 0.1 * q[i];
        }
        for i in 0..6 {
            q[i] += 0.1 * f[i];
            p[i] += 0.1 * q[i];
        }
    }
    let mut e = 0.0;
    for i in 0..6 {
        e += p[i] * p[i];
    }
    e
}";

/// A chain of 24 masses stepped 30 times: 48 words carried, whose segments of 6 steps
/// still record 528 words, past the bound: one element per thread.
const LONG_CHAIN: &str = "fn long_chain(p0: [f32; 24], #[shared] k: f32) -> f32 {
    let mut p = p0;
    let mut q = [0.0; 24];
    for _t in 0..30 {
        let mut f = [0.0; 24];
        for i in 1..23 {
            f[i] = (0.5 + k) * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - 0.1 * q[i];
        }
        for i in 0..24 {
            q[i] += 0.1 * f[i];
            p[i] += 0.1 * q[i];
        }
    }
    let mut e = 0.0;
    for i in 0..24 {
        e += p[i] * p[i];
    }
    e
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
    let wgsl = compile_str(CHAIN).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("_segment") && wgsl.contains("nth += 2u"));
    check_both_sizes("chain", CHAIN, (6, 1), 5);
}

#[test]
fn a_tape_past_the_bound_keeps_one_element() {
    let wgsl = compile_str(LONG_CHAIN).expect("compiles").wgsl_reverse;
    assert!(wgsl.contains("_segment") && wgsl.contains("nth++"));
    check_both_sizes("long chain", LONG_CHAIN, (24, 1), 7);
}
