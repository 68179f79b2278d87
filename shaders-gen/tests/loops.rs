//! Loops stay loops: the code generated for a 10,000-iteration loop is the size of the code
//! for a 10-iteration one, it compiles in well under a second, and its derivatives agree
//! with finite differences.

use gradfuse_shaders_gen::{compile_str, interp};
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
    let short = compile_str(&source(10)).expect("compiles");
    // The whole compiler (lowering, both AD modes, optimization, WGSL) in a debug build.
    assert!(
        elapsed < Duration::from_secs(1),
        "10,000 iterations took {elapsed:?} to compile"
    );
    for (kind, a, b) in [
        ("forward", &long.wgsl_forward, &short.wgsl_forward),
        ("adjoint", &long.wgsl_adjoint, &short.wgsl_adjoint),
    ] {
        // Only the numbers differ (10000 vs 10, 9999 vs 9, in bounds, the tape's size and
        // the comments).
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
    assert!(long.wgsl_adjoint.contains("array<f32, 10000>"), "the tape");
}

#[test]
fn a_long_loop_differentiates_right() {
    let c = compile_str(&source(10_000)).expect("compiles");
    let x = [0.7, 1.3, -0.4];
    let adjoint = interp::eval(&c.adjoint, &x);
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
