//! Structured random functions from a grammar of the supported language
//! (`gradfuse_shaders_gen::grammar`, which `tests/grammar_gpu.rs` runs on the GPU; arguments of
//! every kind, `let`/`let mut`, assignments and compound assignments to variables and array
//! elements, `for` loops with their index in arithmetic and indices, `if`/`else` as
//! statements and values, every method of the function table, vector results), and the
//! same functions with one nearby unsupported construct put in (`while`, `return`, an
//! integer variable, a closure, a macro, a cast to another type, an index past the end...).
//!
//! Properties: a function of the language compiles, every kernel it generates (value,
//! tangent, adjoint or Jacobian) is valid WGSL to naga, and its reverse and forward modes
//! agree with central differences where it is smooth; a function with an unsupported
//! construct is a list of errors whose spans lie inside its source; neither panics. A fixed
//! seed and case count (`GRADFUSE_FUZZ_CASES=N` runs more); a failure prints the source.

use gradfuse_shaders_gen::grammar::{self, Sizes};
use gradfuse_shaders_gen::{Compiled, abi, ad, compile_str, emit_wgsl, interp};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// A random point's words, drawn from the case's seed.
struct Draws(proptest::test_runner::TestRng);

impl Draws {
    fn new(seed: u64) -> Self {
        Draws(proptest::test_runner::TestRng::from_seed(
            proptest::test_runner::RngAlgorithm::ChaCha,
            &[seed.to_le_bytes(), (!seed).to_le_bytes(), [7; 8], [11; 8]].concat(),
        ))
    }

    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }
}

/// Constructs next to the language that it does not support, each put in as a statement.
const UNSUPPORTED: &[&str] = &[
    "while p0 == p0 { }",
    "loop { break; }",
    "return 1.0;",
    "let mut k = 3; k += 1;",
    "let k: i32 = 3;",
    "let b = true;",
    "let q = 2.0f64;",
    "let c = |v: f32| v * 2.0;",
    "println!(\"{}\", 1.0);",
    "let r = &p0;",
    "unsafe { }",
    "let m = match 1 { _ => 1.0 };",
    "let u = undefined_function(1.0);",
    "let e = (1.0f32).exp_m1();",
    "let z = [1.0; 4]; let w = z[4];",
    "for i in 0..1 { let y = [0.0; 2]; let t = y[i + 2]; }",
    "let s = String::new();",
    "let t = (1.0, 2.0);",
    "let g = 1.0 as u8;",
    "let mut h = 1.0; h %= 2.0;",
    "struct S;",
    "let o = Some(1.0)?;",
    "let mut a = [0.0; 2]; for i in 0..3 { a[i] = 1.0; }",
];

/// Cases of a test whose default is `default`: `GRADFUSE_FUZZ_CASES` where set.
fn cases_or(default: u32) -> u32 {
    std::env::var("GRADFUSE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cases() -> u32 {
    cases_or(1000)
}

fn runner() -> TestRunner {
    runner_of(cases())
}

fn runner_of(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(0x6772_616d_6d61_7273),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Every kernel of a compiled function, valid to naga.
fn validate(name: &str, wgsl: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(wgsl)
        .map_err(|e| format!("{name}: naga cannot parse it: {}", e.emit_to_string(wgsl)))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("{name}: invalid: {e:?}"))?;
    Ok(())
}

/// For a function with an `f32` result: its reverse and forward mode (the optimized IR the
/// kernels are written from, run by the f64 interpreter) against central differences of
/// the lowered function, at a random point, word by word. A difference that changes when
/// its step is halved, or whose one-sided halves disagree, is at a kink (a branch, `floor`,
/// `abs`, a tie) and is not checked.
fn derivatives_agree(c: &Compiled, seed: u64) -> Result<bool, String> {
    if c.reverse.jacobian_mode().is_some() {
        return Ok(false);
    }
    let layout = &c.lowered.layout;
    let n = (layout.words + layout.shared_words) as usize;
    let mut rng = Draws::new(seed ^ 0x5eed);
    let x: Vec<f64> = (0..n)
        .map(|_| (rng.below(2000) as f64 - 1000.0) / 700.0)
        .collect();
    let value = interp::eval(&c.lowered.primal, &x)[0];
    if !value.is_finite() || value.abs() > 1e6 {
        return Ok(false);
    }
    let reverse = interp::eval(c.reverse.function(), &x);
    let kept: Vec<u32> = layout
        .grad_words()
        .into_iter()
        .chain(layout.words..layout.words + layout.shared_words)
        .collect();
    let fd = interp::finite_difference_gradient(&c.lowered.primal, &x, 1e-6);
    let fd_half = interp::finite_difference_gradient(&c.lowered.primal, &x, 5e-7);
    // Forward mode along the tangent 1 in every word with a derivative.
    let mut with_tangent = x.clone();
    with_tangent.extend(kept.iter().map(|_| 1.0));
    let tangent = interp::eval(&c.tangent, &with_tangent)[1];
    let mut sum = 0.0;
    for (k, w) in kept.iter().enumerate() {
        let (d, want) = (reverse[1 + k], fd[*w as usize]);
        sum += d;
        if (want - fd_half[*w as usize]).abs() > 1e-5 * (1.0 + want.abs()) {
            return Ok(false);
        }
        // A kink exactly at the point (two inputs drawn equal, a `clamp` tie) has equal
        // central differences at every step, but one-sided ones that differ: there the
        // documented convention, not the average slope, is the derivative.
        let one_sided = |h: f64| {
            let mut y = x.clone();
            y[*w as usize] += h;
            (interp::eval(&c.lowered.primal, &y)[0] - value) / h
        };
        if (one_sided(1e-6) - one_sided(-1e-6)).abs() > 1e-3 * (1.0 + want.abs()) {
            return Ok(false);
        }
        if (d - want).abs() > 1e-4 * (1.0 + want.abs()) {
            return Err(format!(
                "d/d word {w}: reverse {d}, central difference {want}"
            ));
        }
    }
    if (tangent - sum).abs() > 1e-8 * (1.0 + sum.abs()) && !(tangent.is_nan() && sum.is_nan()) {
        return Err(format!(
            "forward {tangent} against the reverse gradient's sum {sum}"
        ));
    }
    hessian_agrees(c, &x)?;
    Ok(true)
}

/// Hessian entries held against central differences, over the run.
static HESSIAN_ENTRIES_CHECKED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The Hessian (forward-over-reverse, both forms; and the Hessian-vector product) against
/// central differences of the reverse gradient, where those are smooth at `x` (they agree
/// at two steps); its kernels valid to naga.
fn hessian_agrees(c: &Compiled, x: &[f64]) -> Result<(), String> {
    let Some(second) = &c.second else {
        return Ok(());
    };
    let Some(h) = &second.hessian else {
        return Ok(());
    };
    let layout = &c.lowered.layout;
    let wrt = layout.grad_words();
    let d = wrt.len();
    let looped = ad::hessian(&c.primal, &wrt, ad::HessianForm::Loop);
    let other = match h.form {
        ad::HessianForm::Sweeps => ad::HessianForm::Loop,
        ad::HessianForm::Loop => ad::HessianForm::Sweeps,
    };
    let wgsl = emit_wgsl::emit_kernel("fn f()", layout, abi::KernelKind::Hessian, &looped);
    validate("hessian (loop)", &h.wgsl)?;
    validate("hessian (other form)", &wgsl)?;
    let got = interp::eval(&h.function, x);
    let twin = interp::eval(&ad::hessian(&c.primal, &wrt, other), x);
    let gradient_at = |y: &[f64]| interp::eval(c.reverse.function(), y);
    let g0 = gradient_at(x);
    // An infinite intermediate of the value or its adjoint (`p / 0.0` divided into
    // something; `powf`'s partials at a zero base) gives second derivatives of `0 * inf`:
    // NaN, where the differences of a finite gradient say 0.
    let mut probe = c.reverse.function().clone();
    probe.outputs = (0..probe.nodes.len() as u32)
        .map(gradfuse_shaders_gen::ir::ValueId)
        .filter(|v| probe.node(*v).ty == gradfuse_shaders_gen::ir::Ty::F32)
        .collect();
    if interp::eval(&probe, x).iter().any(|v| v.is_infinite()) {
        return Ok(());
    }
    let v: Vec<f64> = (0..d).map(|k| 1.0 + k as f64 / 3.0).collect();
    let mut with_v = x.to_vec();
    with_v.extend(&v);
    let hv = interp::eval(&second.cpu_hvp, &with_v);
    for i in 0..d {
        // The primal's own NaNs (a `ln` of a negative that a `min` discards) reach the
        // derivatives of every order alike.
        let close = |a: f64, b: f64, tol: f64| {
            (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan())
        };
        if !close(got[1 + i], g0[1 + i], 1e-9) {
            return Err(format!(
                "the Hessian kernel's gradient word {i}: {} against {}",
                got[1 + i],
                g0[1 + i]
            ));
        }
        let central = |step: f64| {
            let s = step * x[wrt[i] as usize].abs().max(1.0);
            let (mut p, mut m) = (x.to_vec(), x.to_vec());
            p[wrt[i] as usize] += s;
            m[wrt[i] as usize] -= s;
            let (gp, gm) = (gradient_at(&p), gradient_at(&m));
            (0..d)
                .map(|j| (gp[1 + j] - gm[1 + j]) / (2.0 * s))
                .collect::<Vec<f64>>()
        };
        let (fd, fd_half) = (central(1e-5), central(5e-6));
        let mut row_v = 0.0;
        for j in 0..d {
            let entry = got[1 + d + i * d + j];
            row_v += entry * v[j];
            if entry.to_bits() != got[1 + d + j * d + i].to_bits() && !entry.is_nan() {
                return Err(format!(
                    "H[{i}][{j}] = {entry} but H[{j}][{i}] = {}",
                    got[1 + d + j * d + i]
                ));
            }
            // Where the primal has a NaN that does not reach the value, a sweep that knows an
            // entry's tangent is zero skips it, one that multiplies by a zero direction
            // word gets NaN: both forms are right about the finite entries.
            let nan_in_one = entry.is_nan() != twin[1 + d + i * d + j].is_nan();
            if !close(twin[1 + d + i * d + j], entry, 1e-9) && !nan_in_one {
                return Err(format!(
                    "H[{i}][{j}]: {entry}, the other form {}",
                    twin[1 + d + i * d + j]
                ));
            }
            let want = fd[j];
            // A NaN gradient (a NaN partial times a zero adjoint, as in JAX) has NaN
            // second derivatives: the first-order check does not hold it against the
            // differences either.
            let smooth = close(want, fd_half[j], 1e-6) && want.is_finite();
            let nan_gradient = g0[1 + i].is_nan() || g0[1 + j].is_nan();
            if smooth && !nan_gradient {
                HESSIAN_ENTRIES_CHECKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if smooth && !nan_gradient && !close(entry, want, 1e-4) {
                return Err(format!(
                    "H[{i}][{j}]: {entry}, central difference of the gradient {want}"
                ));
            }
        }
        if row_v.is_finite() && !close(hv[i], row_v, 1e-9) {
            return Err(format!(
                "(H v)[{i}]: hvp {}, the Hessian's row times v {row_v}",
                hv[i]
            ));
        }
    }
    Ok(())
}

/// Functions of `sizes` from `cases` seeds: each compiles, its kernels are valid, and its
/// derivatives agree with differences; returns how many were smooth enough to check.
fn functions_compile_and_differentiate(sizes: Sizes, cases: u32) -> u32 {
    std::panic::set_hook(Box::new(|_| {}));
    let checked = std::cell::Cell::new(0u32);
    let result = runner_of(cases).run(&any::<u64>(), |seed| {
        let src = grammar::function(seed, sizes);
        let compiled = std::panic::catch_unwind(|| compile_str(&src));
        prop_assert!(compiled.is_ok(), "the compiler panicked on:\n{src}");
        let c = match compiled.expect("checked") {
            Ok(c) => c,
            Err(errors) => {
                let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                return Err(TestCaseError::fail(format!(
                    "a function of the language was refused: {messages:?}\n{src}"
                )));
            }
        };
        for (name, wgsl) in [
            ("forward", &c.wgsl_forward),
            ("tangent", &c.wgsl_tangent),
            ("reverse", &c.wgsl_reverse),
        ] {
            validate(name, wgsl).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        }
        let agreed =
            derivatives_agree(&c, seed).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        checked.set(checked.get() + agreed as u32);
        Ok(())
    });
    let _ = std::panic::take_hook();
    if let Err(e) = result {
        panic!("{e}");
    }
    // Most functions are smooth and finite at their random point: their derivatives were
    // checked, not skipped.
    eprintln!(
        "derivatives checked on {} of {cases} functions",
        checked.get()
    );
    assert!(checked.get() * 3 >= cases, "only {} checked", checked.get());
    checked.get()
}

#[test]
fn functions_of_the_language_compile_to_valid_kernels() {
    functions_compile_and_differentiate(Sizes::Small, cases());
    let entries = HESSIAN_ENTRIES_CHECKED.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("Hessian entries checked against differences of the gradient: {entries}");
    assert!(
        entries as u32 >= cases(),
        "only {entries} Hessian entries checked"
    );
}

#[test]
fn wide_functions_of_the_language_compile_to_valid_kernels() {
    // Arrays and loops of up to 64 words and trips, tables of up to 320: kernels that keep
    // loops, tapes and streamed sums, each compiled in full, so fewer of them.
    functions_compile_and_differentiate(Sizes::Wide, cases_or(1000) / 5);
}

#[test]
fn unsupported_constructs_are_spanned_errors() {
    std::panic::set_hook(Box::new(|_| {}));
    let result = runner().run(&(any::<u64>(), 0..UNSUPPORTED.len()), |(seed, k)| {
        let good = grammar::function(seed, Sizes::Small);
        // The construct goes first in the body: every later statement still parses.
        let at = good.find("{\n").expect("a body") + 2;
        let src = format!("{}{}\n{}", &good[..at], UNSUPPORTED[k], &good[at..]);
        let lines = src.lines().count();
        let compiled = std::panic::catch_unwind(|| compile_str(&src));
        prop_assert!(compiled.is_ok(), "the compiler panicked on:\n{src}");
        let Err(errors) = compiled.expect("checked") else {
            return Err(TestCaseError::fail(format!("accepted:\n{src}")));
        };
        prop_assert!(!errors.is_empty());
        for e in &errors {
            let (start, end) = (e.span().start(), e.span().end());
            prop_assert!(
                start.line >= 1
                    && end.line <= lines
                    && (start.line, start.column) <= (end.line, end.column),
                "error `{e}` at {start:?}..{end:?} outside the source:\n{src}"
            );
        }
        Ok(())
    });
    let _ = std::panic::take_hook();
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Compiles `src` on a thread of its own (a compilation is not `Send`: it holds spans),
/// then here: `Err` if the first takes longer than `limit`, which no function of this size
/// needs (they compile in milliseconds).
fn compile_within(src: &str, limit: std::time::Duration) -> Result<Compiled, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = src.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(compile_str(&owned).is_ok());
    });
    match rx.recv_timeout(limit) {
        Ok(_) => compile_str(src).map_err(|errors| {
            let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            format!("refused: {messages:?}\n{src}")
        }),
        Err(_) => Err(format!("still compiling after {limit:?}:\n{src}")),
    }
}

#[test]
fn a_value_updated_under_a_condition_every_trip_then_compared_compiles() {
    // In reverse mode, `v` of each trip is used in both branches of the next trip's select,
    // reached under the final comparison's guard: its guard was `(g && c) || (g && !c)`
    // over the next trip's `g`, and every walk over the guards took 2^trips steps (20 trips
    // 0.2 s, 24 trips 2.7 s, 64 never). Found by the wide grammar's seed 2^32 + 3560.
    let src = "fn f(p0: f32, p1: f32, #[shared] t: [f32; 64]) -> f32 {
        let mut v = p1;
        for i in 0..64 {
            if t[i] <= 0.0 {
                v *= 1.5;
            }
        }
        if v == p0 { p1 } else { v }
    }";
    let limit = std::time::Duration::from_secs(120);
    let c = compile_within(src, limit).unwrap_or_else(|e| panic!("{e}"));
    for name in ["forward", "tangent", "reverse"] {
        let wgsl = match name {
            "forward" => &c.wgsl_forward,
            "tangent" => &c.wgsl_tangent,
            _ => &c.wgsl_reverse,
        };
        validate(name, wgsl).unwrap_or_else(|e| panic!("{e}"));
    }
    // Derivatives at points where some of the table is below zero and the comparison
    // fails: `v` is `p1 * 1.5^k`.
    let checked = (0..16u64)
        .filter(|&seed| derivatives_agree(&c, seed).unwrap_or_else(|e| panic!("{e}")))
        .count();
    assert!(checked >= 8, "only {checked} points checked");
    let found = grammar::function((1 << 32) + 3560, Sizes::Wide);
    compile_within(&found, limit).unwrap_or_else(|e| panic!("{e}"));
}
