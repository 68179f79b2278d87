//! Loops stay loops: the code generated for a 10,000-iteration loop is the size of the code
//! for a 10-iteration one, it compiles in well under a second, and its derivatives agree
//! with finite differences. Small loops that index arrays at computed indices are unrolled
//! instead (within a fixed budget).

use gradfuse_shaders_gen::ir::{LoopKind, Op};
use gradfuse_shaders_gen::ops::Func;
use gradfuse_shaders_gen::opt::{self, UNROLL_BUDGET};
use gradfuse_shaders_gen::random::{Step, build_long_loop};
use gradfuse_shaders_gen::{ad, compile_str, interp};
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn source(iterations: u32) -> String {
    format!(
        "fn relax(x: f32, w: [f32; 2]) -> f32 {{
            let mut s = x;
            for i in 0..{iterations} {{
                s = s * 0.999 + (w[0] * s + w[1] * (i as f32) * 0.0001).sin() * 0.001;
            }}
            s * s
        }}"
    )
}

#[test]
fn a_long_loop_compiles_fast_and_its_code_does_not_grow() {
    let started = Instant::now();
    let long = compile_str(&source(10_000)).expect("compiles");
    let elapsed = started.elapsed();
    // 2,500 = 50 x 50 and 10,000 = 100 x 100: both adjoints cut the loop into segments
    // (opt::checkpoint_long_loops) without iterations left over, so their code has one shape.
    let short = compile_str(&source(2_500)).expect("compiles");
    // The whole compiler (lowering, both AD modes, optimization, WGSL) in a debug build.
    assert!(
        elapsed < Duration::from_secs(1),
        "10,000 iterations took {elapsed:?} to compile"
    );
    for (kind, a, b) in [
        ("forward", &long.wgsl_forward, &short.wgsl_forward),
        ("adjoint", &long.wgsl_reverse, &short.wgsl_reverse),
    ] {
        // Only the numbers differ (10000 vs 2500, 100 vs 50, 99 vs 49, in bounds, the
        // tapes' sizes and the comments).
        let diff = a.len().abs_diff(b.len());
        assert!(diff <= 24, "{kind}: {} vs {} bytes", a.len(), b.len());
        assert_eq!(a.lines().count(), b.lines().count(), "{kind}");
        let module = naga::front::wgsl::parse_str(a).expect("parses");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .expect("valid");
    }
    // The adjoint records a checkpoint per segment and a segment at a time, 100 + 100
    // words, never the 10,000 iterations.
    assert_eq!(
        long.wgsl_reverse.matches("array<f32, 100>;").count(),
        2,
        "the tapes"
    );
    assert!(
        !long.wgsl_reverse.contains("array<f32, 10000>"),
        "a whole tape"
    );
}

#[test]
fn a_long_loop_differentiates_right() {
    let c = compile_str(&source(10_000)).expect("compiles");
    let x = [0.7, 1.3, -0.4];
    let adjoint = interp::eval(c.reverse.function(), &x);
    let fd = interp::finite_difference_gradient(&c.lowered.primal, &x, 1e-6);
    let scale = fd.iter().fold(1e-3, |m: f64, g| m.max(g.abs()));
    for (g, d) in adjoint[1..].iter().zip(&fd) {
        assert!((g - d).abs() < 1e-6 * scale, "{g} vs {d}");
    }
    let mut xt = x.to_vec();
    xt.extend([1.0, 1.0, 1.0]);
    let tangent = interp::eval(&c.tangent, &xt);
    let dir: f64 = fd.iter().sum();
    assert!((tangent[1] - dir).abs() < 1e-6 * scale * 3.0);
}

#[test]
fn a_loop_carrying_arrays_is_cut_into_segments_and_differentiates_right() {
    // Six masses stepped 40 times, two 6-word arrays rewritten at every step: a 480-word
    // tape, past `opt::MAX_TAPE_WORDS`, so its adjoint cuts the loop into checkpointed
    // segments as it cuts loops of scalars.
    let c =
        compile_str(&gradfuse_shaders_gen::samples::spring_chain(6, 40, false)).expect("compiles");
    // Segments of 7 steps (5 of them, then 5 steps left over): checkpoints of 5 x 12
    // words, a segment's tape of 7 x 12, never the whole 40 x 12.
    assert!(c.wgsl_reverse.contains("_segment"), "cut");
    assert!(!c.wgsl_reverse.contains("array<f32, 480>"), "a whole tape");
    let x = [0.3, -0.2, 0.5, 0.1, -0.4, 0.25, 0.8];
    let adjoint = interp::eval(c.reverse.function(), &x);
    let fd = interp::finite_difference_gradient(&c.lowered.primal, &x, 1e-6);
    let scale = fd.iter().fold(1e-3, |m: f64, g| m.max(g.abs()));
    for (g, d) in adjoint[1..].iter().zip(&fd) {
        assert!((g - d).abs() < 1e-6 * scale, "{g} vs {d}");
    }
}

#[test]
fn a_layer_loop_is_not_cut() {
    // Its reverse pass reads each activation from the array after the loop (ad/stored.rs),
    // which a cut loop would lose.
    // `t` differentiable: an adjoint of one element a thread, not the cooperative one.
    let src = gradfuse_shaders_gen::samples::network(8, 64, 1).replace("#[constant] t:", "t:");
    let c = compile_str(&src).expect("compiles");
    assert!(c.wgsl_reverse.contains("for (var j"), "kept layers");
    assert!(!c.wgsl_reverse.contains("_segment"), "cut");
}

/// Recurrences whose carried value is a call reading only its result for its derivative
/// (`tanh`, `exp`, `sqrt`), kept as loops: short ones recording a whole tape, long ones cut
/// into checkpointed segments. Their reverse loops read each step's call from the next
/// step's taped value (`ad::stored::read_next_values`) and call it only forward.
#[test]
fn recurrences_read_their_calls_from_the_tape_and_differentiate_right() {
    for (call, x) in [
        ("(w * h + 0.3 * x).tanh()", [0.4, 0.9]),
        ("(0.98 * h.ln() + 0.01 * w * x).exp()", [1.3, 0.5]),
        ("(0.5 * h * h + 0.2 * w + 0.1 * x).sqrt()", [0.7, 0.6]),
    ] {
        for steps in [30, 700] {
            let src = format!(
                "fn f(x: f32, w: f32) -> f32 {{
                    let mut h = x;
                    let mut acc = 0.0;
                    for _t in 0..{steps} {{
                        h = {call};
                        acc += h;
                    }}
                    acc * h
                }}"
            );
            let c = compile_str(&src).expect("compiles");
            let reverse = c.reverse.function();
            assert!(
                !a_reverse_step_calls(reverse),
                "{call}, {steps} steps: a reverse step calls it"
            );
            let adjoint = interp::eval(reverse, &x);
            let fd = interp::finite_difference_gradient(&c.lowered.primal, &x, 1e-6);
            let scale = fd.iter().fold(1e-3, |m: f64, g| m.max(g.abs()));
            for (g, d) in adjoint[1..].iter().zip(&fd) {
                assert!(
                    (g - d).abs() < 1e-5 * scale,
                    "{call}, {steps} steps: {g} vs {d}"
                );
            }
        }
    }
}

/// Whether the body of a reverse loop of `f`, at any depth, calls `tanh`, `exp` or `sqrt`
/// itself (not in a loop nested in it: a segment's recording pass).
fn a_reverse_step_calls(f: &gradfuse_shaders_gen::ir::Function) -> bool {
    f.nodes.iter().any(|n| match &n.op {
        Op::Loop(l) => {
            let calls = matches!(l.kind, LoopKind::Reverse { .. })
                && (l.body.nodes.iter())
                    .any(|m| matches!(m.op, Op::Call(Func::Tanh | Func::Exp | Func::Sqrt, _)));
            calls || a_reverse_step_calls(&l.body)
        }
        _ => false,
    })
}

fn has_op(f: &gradfuse_shaders_gen::ir::Function, pred: fn(&Op) -> bool) -> bool {
    f.nodes.iter().any(|n| {
        pred(&n.op)
            || match &n.op {
                Op::Loop(l) => has_op(&l.body, pred),
                _ => false,
            }
    })
}

/// Agreement of the compiled value and adjoint with the interpreted lowering (loops as
/// loops) and its central differences.
fn check_against_lowering(c: &gradfuse_shaders_gen::Compiled, x: &[f64]) {
    let oracle = interp::eval(&c.lowered.primal, x)[0];
    let value = interp::eval(&c.primal, x)[0];
    assert!(
        (value - oracle).abs() <= 1e-12 * oracle.abs().max(1.0),
        "{value} vs {oracle}"
    );
    let adjoint = interp::eval(c.reverse.function(), x);
    let fd = interp::finite_difference_gradient(&c.lowered.primal, x, 1e-6);
    let scale = fd.iter().fold(1e-3, |m: f64, g| m.max(g.abs()));
    for (g, d) in adjoint[1..].iter().zip(&fd) {
        assert!((g - d).abs() < 1e-6 * scale, "{g} vs {d}");
    }
}

#[test]
fn small_loops_with_computed_indices_are_unrolled() {
    // A two-layer nest like a small network's: unrolled, every index is a constant, so the
    // adjoint adds into each weight's word directly instead of scattering through selects.
    let c = compile_str(
        "fn layer(x: [f32; 4], w: [f32; 12]) -> f32 {
            let mut y = 0.0;
            for j in 0..3 {
                let mut s = 0.0;
                for i in 0..4 {
                    s += w[j * 4 + i] * x[i];
                }
                y += s.tanh();
            }
            y
        }",
    )
    .expect("compiles");
    for f in [&c.primal, c.reverse.function()] {
        assert!(!has_op(f, |op| matches!(
            op,
            Op::Loop(_)
                | Op::ArrayNew(_)
                | Op::ArrayGet { .. }
                | Op::ArraySet { .. }
                | Op::Select { .. }
        )));
    }
    // Forward: 12 products, 12 sums, 3 tanh. Reverse: about three times that, where the
    // scatter made it 12 selects per read.
    assert!(c.reverse.function().dynamic_op_count() <= 4 * c.primal.dynamic_op_count());
    let x: Vec<f64> = (0..16).map(|k| 0.1 * k as f64 - 0.7).collect();
    check_against_lowering(&c, &x);
}

#[test]
fn loops_over_the_unroll_budget_stay_loops() {
    let words = 2 * UNROLL_BUDGET;
    let c = compile_str(&format!(
        "fn long_dot(w: [f32; {words}]) -> f32 {{
            let mut s = 0.0;
            for i in 0..{words} {{
                s += w[i] * w[i];
            }}
            s
        }}"
    ))
    .expect("compiles");
    assert!(has_op(&c.primal, |op| matches!(op, Op::Loop(_))));
    assert!(has_op(c.reverse.function(), |op| matches!(op, Op::Loop(_))));
    let x: Vec<f64> = (0..words).map(|k| ((k % 7) as f64 - 3.0) * 0.1).collect();
    let adjoint = interp::eval(c.reverse.function(), &x);
    for (k, g) in adjoint[1..].iter().enumerate() {
        assert!((g - 2.0 * x[k]).abs() < 1e-12, "word {k}: {g}");
    }
}

/// Found by `fuzz_grammar.rs`: a loop in a branch whose body reads an array only in dead
/// code. The body then has no node for that capture, its type was taken for `f32`, and the
/// reverse pass selected between the array's adjoints as if they were words (invalid WGSL,
/// and every word of the gradient read from word 0). The gradient against finite
/// differences, and the kernels valid to naga.
#[test]
fn an_array_read_only_in_dead_code_of_a_loop_in_a_branch() {
    let src = "fn f(p0: [f32; 4], p1: f32) -> f32 {
        let mut v = p1;
        if p1 > 0.0 {
            for i in 0..2 {
                v = (i as f32).sqrt() * v;
                let u = p0[1] / p1.atan2(2.0);
            }
        }
        v + p0[0] * p0[3]
    }";
    let c = compile_str(src).expect("compiles");
    for wgsl in [&c.wgsl_forward, &c.wgsl_tangent, &c.wgsl_reverse] {
        naga::front::wgsl::parse_str(wgsl).expect("valid WGSL");
    }
    for x in [[0.3, -0.7, 1.1, 0.4, 0.8], [0.3, -0.7, 1.1, 0.4, -0.8]] {
        let adj = interp::eval(c.reverse.function(), &x);
        let fd = interp::finite_difference_gradient(&c.lowered.primal, &x, 1e-6);
        for w in 0..5 {
            assert!(
                (adj[1 + w] - fd[w]).abs() < 1e-6,
                "{w}: {} vs {}",
                adj[1 + w],
                fd[w]
            );
        }
    }
}

#[test]
fn an_index_may_multiply_two_loop_indices() {
    // `j * j` has no literal in it: the names decide that it is integer arithmetic (it
    // was lowered as f32 and reported as "expected an `f32`, found an integer").
    let src = "fn f(x: f32, #[shared] w: [f32; 60]) -> f32 {
        let mut y = 0.0;
        for j in 0..7 {
            y += w[j * j + 1] * x;
        }
        y
    }";
    let c = compile_str(src).expect("compiles");
    let mut words = vec![2.0];
    words.extend((0..60).map(|k| k as f64));
    let value = interp::eval(&c.primal, &words)[0];
    let want: f64 = (0..7).map(|j| 2.0 * (j * j + 1) as f64).sum();
    assert_eq!(value, want);
}

/// The calls of `func` in the bodies of reverse loops.
fn calls_in_reverse_loops(f: &gradfuse_shaders_gen::ir::Function, func: Func) -> usize {
    f.nodes
        .iter()
        .map(|n| match &n.op {
            Op::Loop(l) => {
                let own = match l.kind {
                    LoopKind::Reverse { .. } => l
                        .body
                        .nodes
                        .iter()
                        .filter(|m| matches!(&m.op, Op::Call(g, _) if *g == func))
                        .count(),
                    _ => 0,
                };
                own + calls_in_reverse_loops(&l.body, func)
            }
            _ => 0,
        })
        .sum()
}

#[test]
fn a_reverse_loop_reads_the_values_its_forward_loop_stored() {
    // A layer's activations, stored at `j` and at `j + 1`: the reverse loop reads them back
    // instead of computing each tanh and exp again. A store at an index that a later
    // iteration writes again (here `last[0]` each time) is not read back: the array after
    // the loop no longer holds it. Nor is a product (`exp(..) * 0.5`), whose partials need
    // its factors anyway.
    let c = compile_str(
        "fn layers(x: [f32; 4], w: [f32; 24], v: [f32; 6]) -> f32 {
            let mut h = [0.0; 6];
            for j in 0..6 {
                let mut s = v[j];
                for i in 0..4 {
                    s += w[j * 4 + i] * x[i];
                }
                h[j] = s.tanh();
            }
            let mut g = [0.0; 7];
            let mut half = [0.0; 6];
            for j in 0..6 {
                g[j + 1] = (h[j] * v[j] + x[1]).exp();
                half[j] = g[j + 1].sin() * 0.5;
            }
            let mut last = [0.0; 2];
            for j in 0..6 {
                last[0] = (g[j] + h[j]).sin() * (g[j + 1] * 0.3).cos();
            }
            let mut y = last[0];
            for j in 0..6 {
                y += g[j] * g[j] + half[j];
            }
            y
        }",
    )
    .expect("compiles");
    let reverse = c.cpu.reverse.function();
    assert_eq!(calls_in_reverse_loops(reverse, Func::Tanh), 0, "{reverse}");
    assert_eq!(calls_in_reverse_loops(reverse, Func::Exp), 0, "{reverse}");
    // The overwritten store's value is computed again, and so is the product's factor.
    assert!(calls_in_reverse_loops(reverse, Func::Cos) > 0, "{reverse}");
    assert!(calls_in_reverse_loops(reverse, Func::Sin) > 0, "{reverse}");
    let x: Vec<f64> = (0..34)
        .map(|k| 0.37 * ((k * 7 % 11) as f64) / 11.0 - 0.2)
        .collect();
    let cpu = gradfuse_shaders_gen::Compiled {
        primal: c.cpu.primal.clone(),
        reverse: c.cpu.reverse.clone(),
        ..c.clone()
    };
    check_against_lowering(&cpu, &x);
    check_against_lowering(&c, &x);
}

/// How many loops `f` has, nested ones included.
fn loop_count(f: &gradfuse_shaders_gen::ir::Function) -> usize {
    f.nodes
        .iter()
        .map(|n| match &n.op {
            Op::Loop(l) => 1 + loop_count(&l.body),
            _ => 0,
        })
        .sum()
}

/// The words of the largest tape any recording loop of `f` (nested ones included) keeps.
fn largest_tape(f: &gradfuse_shaders_gen::ir::Function) -> usize {
    let mut largest = 0;
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Loop(l) = &node.op {
            if l.kind == LoopKind::Recording {
                let (_, words) = f.tape_layout(gradfuse_shaders_gen::ir::ValueId(i as u32));
                largest = largest.max(l.trip_count() as usize * words);
            }
            largest = largest.max(largest_tape(&l.body));
        }
    }
    largest
}

proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x636b_7074_6c6f_6f70),
        ..Default::default()
    })]

    /// Long loops around random bodies (branches and small nested loops included): the
    /// reverse pass of the loop cut into segments computes what the whole tape's does, in
    /// f64 to rounding, and its tapes stay near `2 sqrt(T)` iterations.
    #[test]
    fn checkpointed_reverse_passes_agree_with_whole_tapes(
        inputs in 1u32..4,
        carried in 1usize..4,
        trips in 5i64..700,
        program in proptest::collection::vec(
            (0u8..255, 0u16..999, 0u16..999, 0u16..999)
                .prop_map(|(op, a, b, c)| Step { op, a, b, c }),
            1..10,
        ),
        x in proptest::collection::vec(-1.5f64..1.5, 3),
    ) {
        let f = opt::optimize(&build_long_loop(inputs, carried, trips, &program, true));
        let whole = opt::optimize(&ad::reverse(&f));
        let cut = opt::optimize(&ad::reverse(&opt::checkpoint_long_loops(&f)));
        let x = &x[..inputs as usize];
        let (want, got) = (interp::eval(&whole, x), interp::eval(&cut, x));
        let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 1e-12 * scale, "{got:?} vs {want:?}");
        }
        // The loop is cut (into more loops) exactly when its whole tape would pass the
        // bound.
        let cut_into_more = loop_count(&cut) > loop_count(&whole);
        prop_assert_eq!(cut_into_more, trips as usize * carried > opt::MAX_TAPE_WORDS);
        let segment = (trips as f64).sqrt().ceil() as usize;
        let bound = opt::MAX_TAPE_WORDS.max((segment + 1) * carried);
        prop_assert!(largest_tape(&cut) <= bound, "a tape of {} words", largest_tape(&cut));
    }
}
