//! Signs and values at arguments the kernel computes or stages rather than loads: `sin`,
//! `signum` and `atan2` of products and differences, and `abs`, `<`, `signum` and `sin` of
//! products of words of a wide row, which the kernels load through workgroup memory in
//! rounds. A grammar function (seed 4294968237, `sin(p1[27] * p0)`) was wrong on the H100
//! while `tests/gpu_functions.rs` passed: `p0` and `p1[27]` were read from one stage
//! address in two rounds, and NVIDIA's compiler took the two reads for one value when it
//! judged signs (`p1[27] * p0` "a square"). The row stage now masks each round's words
//! (`emit_wgsl/loads.rs`); these tests fail on the H100 without it.

mod common;

use common::{assert_none, device};
use gradfuse::differentiable;

#[differentiable]
pub fn sin_of_product(a: f32, b: f32) -> f32 {
    (a * b).sin()
}

#[differentiable]
pub fn sin_of_difference(a: f32, b: f32) -> f32 {
    (a - b).sin()
}

#[differentiable]
pub fn signum_of_product(a: f32, b: f32) -> f32 {
    (a * b).signum() * a
}

#[differentiable]
pub fn atan2_of_products(a: f32, b: f32) -> f32 {
    (a * b).atan2(b * 0.75 - a)
}

#[differentiable]
pub fn sin_of_row_word(p0: f32, #[constant] p1: [f32; 33]) -> f32 {
    let v = (2.8359375 - p0) - (p1[27] * p0).sin();
    -(p0 / v) - v
}

/// The sign of a product of two words of one staged row, four ways.
#[differentiable]
pub fn row_product_signs(p0: f32, #[constant] p1: [f32; 33]) -> [f32; 4] {
    let x = p1[27] * p0;
    let below = if x < 0.0 { 1.0 } else { 0.0 };
    [x.abs(), below, x.signum(), x.sin()]
}

/// Products of words that share a place in the stage in different rounds (rows of 34
/// words go in rounds of 14: `p0`, `p1[13]` and `p1[27]` at each slot's first word in
/// rounds 0, 1 and 2; `p1[0]` and `p1[14]` at its second in rounds 0 and 1).
#[differentiable]
pub fn row_pairs(p0: f32, #[constant] p1: [f32; 33]) -> [f32; 5] {
    let below = if p1[13] * p1[27] < 0.0 { 1.0 } else { 0.0 };
    [
        (p0 * p1[13]).abs(),
        (p0 * p1[27]).abs(),
        (p1[13] * p1[27]).abs(),
        (p1[0] * p1[14]).abs(),
        below,
    ]
}

/// [`row_pairs`] in f64, whose rows go in rounds of 6 words: `p0`, `p1[11]` and `p1[23]`
/// at each slot's first word in rounds 0, 2 and 4, `p1[0]` and `p1[12]` at its second in
/// rounds 0 and 2.
#[differentiable]
pub fn row_pairs_f64(p0: f64, #[constant] p1: [f64; 33]) -> [f64; 5] {
    let below = if p1[11] * p1[23] < 0.0 { 1.0 } else { 0.0 };
    [
        (p0 * p1[11]).abs(),
        (p0 * p1[23]).abs(),
        (p1[11] * p1[23]).abs(),
        (p1[0] * p1[12]).abs(),
        below,
    ]
}

/// Words of a row's second and third rounds, returned as they are: the stage's mask must
/// give back every bit pattern.
#[differentiable]
pub fn row_words(p0: f32, #[constant] p1: [f32; 33]) -> [f32; 3] {
    [p1[13] + p0 * 0.0, p1[20], p1[27]]
}

/// Pairs of both signs over several magnitudes, so that every quadrant of `sin`'s
/// reduction meets both signs of the product.
fn pairs() -> Vec<(f32, f32)> {
    let mut rng = common::Rng(7);
    (0..1500)
        .map(|_| {
            let mag = |r: &mut common::Rng| {
                // Products stay under 8192, where `sin` is gradfuse's own helper.
                let e = r.next_u64() % 4;
                (r.next_u64() % 10_000) as f32 / 10_000.0 * 10f32.powi(e as i32 - 2)
            };
            let sign = |r: &mut common::Rng| {
                if r.next_u64().is_multiple_of(2) {
                    1.0
                } else {
                    -1.0
                }
            };
            (
                sign(&mut rng) * mag(&mut rng),
                sign(&mut rng) * mag(&mut rng),
            )
        })
        .collect()
}

/// Whether `gpu` is `cpu` to a relative `1e-5` (the helpers are within a few ulp of the
/// correctly rounded result, the CPU within one; a wrong sign is off by twice the value).
fn close(gpu: f32, cpu: f32) -> bool {
    (gpu.is_nan() && cpu.is_nan()) || (gpu - cpu).abs() <= 1e-5 * cpu.abs().max(1e-3)
}

/// Runs `$f` of two arguments on the GPU in every kernel and compares value, gradient and
/// directional derivative with its CPU versions at every pair; pushes what differs.
macro_rules! check_pairs {
    ($f:ident, $failures:expr) => {{
        let xs = pairs();
        let args: Vec<$f::Args> = xs.iter().map(|&(a, b)| $f::Args { a, b }).collect();
        let dirs: Vec<$f::Grad> = xs.iter().map(|&(a, b)| $f::Grad { a: b, b: a }).collect();
        let k = $f::kernel(device());
        let values = k.value(&args).unwrap();
        let (gv, gg) = k.value_and_grad(&args).unwrap();
        let (tv, td) = k.jvp(&args, &dirs).unwrap();
        for (i, x) in args.iter().enumerate() {
            let (v, g) = $f::value_and_grad(x);
            let (_, d) = $f::jvp(x, &dirs[i]);
            let wrong = [
                ("value", values[i], $f(x.a, x.b)),
                ("adjoint's value", gv[i], v),
                ("gradient a", gg[i].a, g.a),
                ("gradient b", gg[i].b, g.b),
                ("tangent's value", tv[i], v),
                ("tangent", td[i], d),
            ]
            .into_iter()
            .filter(|&(_, gpu, cpu)| !close(gpu, cpu))
            .map(|(what, gpu, cpu)| {
                format!(
                    "{}({}, {}): {what} {gpu:e} on the GPU, {cpu:e} on the CPU",
                    stringify!($f),
                    x.a,
                    x.b
                )
            });
            $failures.extend(wrong);
        }
    }};
}

#[test]
fn sign_taking_helpers_of_computed_arguments_match_the_cpu() {
    let mut failures: Vec<String> = Vec::new();
    check_pairs!(sin_of_product, failures);
    check_pairs!(sin_of_difference, failures);
    check_pairs!(signum_of_product, failures);
    check_pairs!(atan2_of_products, failures);
    assert_none(&failures);
}

/// Rows of `p0 = a` and `p1[27] = b`, the other words of `p1` fixed and of both signs.
fn rows(xs: &[(f32, f32)]) -> Vec<(f32, [f32; 33])> {
    xs.iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            let mut p1 = [0.0f32; 33];
            for (j, w) in p1.iter_mut().enumerate() {
                *w = ((i * 33 + j) % 17) as f32 * 0.125 - 1.0;
            }
            p1[27] = b;
            (a, p1)
        })
        .collect()
}

/// Each kernel's words against the CPU's (`want`), element `i` named by `at(i)`.
fn disagreements<const M: usize>(
    kernels: &[(&str, &[[f32; M]])],
    want: &[[f32; M]],
    at: impl Fn(usize) -> String,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (kernel, got) in kernels {
        for (i, (got, want)) in got.iter().zip(want).enumerate() {
            for w in 0..M {
                if !close(got[w], want[w]) {
                    failures.push(format!(
                        "{}: word {w} of the {kernel} kernel {:e} on the GPU, {:e} on the CPU",
                        at(i),
                        got[w],
                        want[w]
                    ));
                }
            }
        }
    }
    failures
}

/// The value and tangent kernels' values of `$f(p0, p1)` at `$args` against the CPU's
/// (the values are what is at stake; `p0` is the only argument differentiated).
macro_rules! row_disagreements {
    ($f:ident, $args:expr) => {{
        let k = $f::kernel(device());
        let values = k.value(&$args).unwrap();
        let dirs = vec![$f::Grad { p0: 1.0 }; $args.len()];
        let (tangents_values, _) = k.jvp(&$args, &dirs).unwrap();
        let want: Vec<_> = $args.iter().map(|x| $f(x.p0, x.p1)).collect();
        disagreements(
            &[("value", &values), ("tangent", &tangents_values)],
            &want,
            |i| format!("p0 = {}, p1[27] = {}", $args[i].p0, $args[i].p1[27]),
        )
    }};
}

/// `abs`, `<`, `signum` and `sin` of a product of two words of a row, in the value and
/// tangent kernels.
#[test]
fn signs_of_a_product_of_staged_row_words_match_the_cpu() {
    let args: Vec<row_product_signs::Args> = rows(&pairs())
        .into_iter()
        .map(|(p0, p1)| row_product_signs::Args { p0, p1 })
        .collect();
    let failures = row_disagreements!(row_product_signs, args);
    assert_none(&failures);
}

/// Every pair of rounds (0 and 1, 0 and 2, 1 and 2) at one place in the stage.
#[test]
fn products_of_words_of_different_rounds_match_the_cpu() {
    let args: Vec<row_pairs::Args> = rows(&pairs())
        .into_iter()
        .map(|(p0, mut p1)| {
            // Both signs at p1[13], p1[14] and p1[0] too.
            p1[13] = -p1[27] * 0.75 + p0;
            p1[14] = p1[27] - 0.5;
            p1[0] = -p0;
            row_pairs::Args { p0, p1 }
        })
        .collect();
    let failures = row_disagreements!(row_pairs, args);
    assert_none(&failures);
}

/// Hostile words (infinities, NaN, signed zeros, subnormals, the extremes) through the
/// masked rounds of the stage come back bit for bit (NaN as NaN).
#[test]
fn hostile_words_pass_through_the_masked_stage() {
    let hostile = [
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -0.0,
        0.0,
        f32::from_bits(1),
        -f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        1.0,
        -1.0,
    ];
    let args: Vec<row_words::Args> = (0..hostile.len() * hostile.len())
        .map(|i| {
            let mut p1 = [0.5f32; 33];
            p1[20] = hostile[i % hostile.len()];
            p1[27] = hostile[i / hostile.len()];
            row_words::Args { p0: 1.0, p1 }
        })
        .collect();
    let values = row_words::kernel(device()).value(&args).unwrap();
    let mut failures = Vec::new();
    for (x, got) in args.iter().zip(&values) {
        for (w, want) in [(1, x.p1[20]), (2, x.p1[27])] {
            let same = got[w].to_bits() == want.to_bits() || (got[w].is_nan() && want.is_nan());
            if !same {
                failures.push(format!("word {w}: {:e} on the GPU, {want:e} given", got[w]));
            }
        }
    }
    assert_none(&failures);
}

/// The f64 stage (not masked: naga has no bitcast of f64), where the device has f64.
#[test]
fn f64_products_of_words_of_different_rounds_match_the_cpu() {
    if !device().has_f64() {
        eprintln!("{}: no 64-bit floats in shaders", device().describe());
        return;
    }
    let args: Vec<row_pairs_f64::Args> = rows(&pairs())
        .into_iter()
        .map(|(p0, p1)| {
            let mut p1 = p1.map(f64::from);
            p1[11] = -p1[27] * 0.75 + f64::from(p0);
            p1[23] = p1[27];
            p1[12] = p1[27] - 0.5;
            p1[0] = -f64::from(p0);
            row_pairs_f64::Args { p0: p0.into(), p1 }
        })
        .collect();
    let values = row_pairs_f64::kernel(device()).value(&args).unwrap();
    let mut failures = Vec::new();
    for (i, x) in args.iter().enumerate() {
        let want = row_pairs_f64(x.p0, x.p1);
        for w in 0..5 {
            let got = values[i][w];
            if (got - want[w]).abs() > 1e-12 * want[w].abs().max(1.0) {
                failures.push(format!(
                    "p0 = {}, p1[23] = {}: word {w} {got:e} on the GPU, {:e} on the CPU",
                    x.p0, x.p1[23], want[w]
                ));
            }
        }
    }
    assert_none(&failures);
}

/// The grammar function that found it: the product's first factor is a word of a
/// 34-word row, which the kernels load through workgroup memory.
#[test]
fn sin_of_a_staged_row_word_matches_the_cpu() {
    let args: Vec<sin_of_row_word::Args> = rows(&pairs())
        .into_iter()
        .map(|(p0, p1)| sin_of_row_word::Args { p0, p1 })
        .collect();
    let dirs = vec![sin_of_row_word::Grad { p0: 1.0 }; args.len()];
    let k = sin_of_row_word::kernel(device());
    let values = k.value(&args).unwrap();
    let (gv, gg) = k.value_and_grad(&args).unwrap();
    let (_, td) = k.jvp(&args, &dirs).unwrap();
    let mut failures = Vec::new();
    for (i, x) in args.iter().enumerate() {
        let (v, g) = sin_of_row_word::value_and_grad(x);
        // Near a pole of -(p0 / v) the function is too steep for a relative comparison.
        let v_inner = (2.8359375 - x.p0) - (x.p1[27] * x.p0).sin();
        if v_inner.abs() < 1e-2 {
            continue;
        }
        for (what, gpu, cpu) in [
            ("value", values[i], sin_of_row_word(x.p0, x.p1)),
            ("adjoint's value", gv[i], v),
            ("gradient", gg[i].p0, g.p0),
            ("tangent", td[i], g.p0),
        ] {
            // NaN differences fail too.
            if (gpu - cpu).abs().is_nan() || (gpu - cpu).abs() > 1e-4 * cpu.abs().max(1.0) {
                failures.push(format!(
                    "p0 = {}, p1[27] = {}: {what} {gpu:e} on the GPU, {cpu:e} on the CPU",
                    x.p0, x.p1[27]
                ));
            }
        }
    }
    assert_none(&failures);
}

/// The row tests above hold only while the kernels stage these rows in rounds through one
/// stage, so that words of different rounds share an address: every kernel kind of every
/// row function in two rounds or more, and one of each function's in three (the tangent's
/// 68-word rows), where every pair of rounds meets.
#[test]
fn the_row_functions_share_stage_addresses_across_rounds() {
    let staged = "the group loads them through";
    for (function, kernels) in [
        (
            "sin_of_row_word",
            [
                sin_of_row_word::WGSL_FORWARD,
                sin_of_row_word::WGSL_TANGENT,
                sin_of_row_word::WGSL_ADJOINT,
            ],
        ),
        (
            "row_product_signs",
            [
                row_product_signs::WGSL_FORWARD,
                row_product_signs::WGSL_TANGENT,
                row_product_signs::WGSL_JACOBIAN,
            ],
        ),
        (
            "row_pairs",
            [
                row_pairs::WGSL_FORWARD,
                row_pairs::WGSL_TANGENT,
                row_pairs::WGSL_JACOBIAN,
            ],
        ),
        (
            "row_words",
            [
                row_words::WGSL_FORWARD,
                row_words::WGSL_TANGENT,
                row_words::WGSL_JACOBIAN,
            ],
        ),
    ] {
        for wgsl in kernels {
            assert!(wgsl.contains(staged), "{function}: rows staged");
            // Round 1's words masked: two rounds or more through one stage.
            assert!(wgsl.contains(") ^ 1u)"), "{function}: two rounds or more");
        }
        assert!(
            kernels.iter().any(|wgsl| wgsl.contains(") ^ 2u)")),
            "{function}: three rounds in one kernel"
        );
    }
    assert!(
        row_pairs_f64::WGSL_FORWARD.contains(staged),
        "row_pairs_f64: rows staged"
    );
}
