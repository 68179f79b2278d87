//! Kernel reverse passes that recompute their forward values a segment at a time
//! (`opt::recompute`): a loop short enough to unroll but with a long tape keeps far fewer
//! values alive, computes the same numbers as the reverse pass of the whole loop, and the
//! kernel reads each checkpoint through `gf_fresh`.

use gradfuse_shaders_gen::ir::{Function, Op};
use gradfuse_shaders_gen::ops::Func;
use gradfuse_shaders_gen::opt::{self, recompute};
use gradfuse_shaders_gen::samples::table_loop as table_source;
use gradfuse_shaders_gen::{ad, compile_str, interp};

fn calls(f: &Function, func: Func) -> usize {
    f.nodes
        .iter()
        .filter(|n| matches!(&n.op, Op::Call(g, _) if *g == func))
        .count()
}

#[test]
fn a_long_tape_is_recomputed_in_segments_with_the_same_values() {
    let c = compile_str(&table_source(256)).expect("compiles");
    let lowered = &c.lowered.primal;
    let kept = recompute::keeping_long_tapes(lowered).expect("the loop is kept to be cut");
    let recomputed = opt::optimize(&recompute::unroll_loops(&ad::reverse(
        &opt::checkpoint_long_loops(&kept),
    )));
    assert!(
        !recomputed.nodes.iter().any(|n| matches!(n.op, Op::Loop(_))),
        "every loop unrolled"
    );
    // Segments of 16 trips: one checkpoint of p read fresh in each.
    assert_eq!(calls(&recomputed, Func::Fresh), 16);
    // What it is for: far fewer values alive than the reverse pass of the unrolled loop,
    // which keeps every p (both count the 256 table words).
    let unrolled = opt::optimize(&ad::reverse(&c.primal));
    let (alive, alive_unrolled) = (opt::max_live(&recomputed), opt::max_live(&unrolled));
    assert!(
        alive + 200 < alive_unrolled,
        "{alive} values alive against {alive_unrolled} unrolled"
    );
    // The numbers of the reverse pass of the whole loop, in the f64 interpreter: the same
    // operations, but for the order in which a segment's adds into `d_y` (a capture's
    // adjoint) join the total, so within rounding.
    let whole = ad::reverse(lowered);
    for seed in 0..4u32 {
        let words: Vec<f64> = (0..258)
            .map(|k| {
                let h = (k as u32)
                    .wrapping_mul(2_654_435_761)
                    .wrapping_add(seed * 97);
                match k {
                    0 => 0.7 - 0.3 * seed as f64,
                    1 => 0.95 - 0.1 * seed as f64,
                    _ => ((h % 1000) as f64 / 1000.0 - 0.5) * 0.1,
                }
            })
            .collect();
        let want = interp::eval(&whole, &words);
        let got = interp::eval(&recomputed, &words);
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "output {k}: {g} against {w}"
            );
        }
    }
    // The kernel reads its checkpoints through gf_fresh (both elements of a thread).
    assert_eq!(c.wgsl_reverse.matches("gf_fresh(").count(), 1 + 2 * 16);
}

#[test]
fn short_tapes_and_long_loops_are_left_as_they_were() {
    // 64 trips of two words: a tape of 128 words, within opt::MAX_TAPE_WORDS.
    let short = compile_str(&table_source(64)).expect("compiles");
    assert!(recompute::keeping_long_tapes(&short.lowered.primal).is_none());
    assert!(!short.wgsl_reverse.contains("gf_fresh"));
    // 1,024 trips: past the unrolling budget, a loop cut into segments as a loop.
    let long = compile_str(&table_source(1024)).expect("compiles");
    assert!(recompute::keeping_long_tapes(&long.lowered.primal).is_none());
    assert!(!long.wgsl_reverse.contains("gf_fresh"));
    assert!(long.wgsl_reverse.contains("_segment"));
}
