//! Many small least-squares problems at once (`BatchedLm`): each element's unknowns driven
//! to its known minimum, every termination reason reached, the GPU against the CPU device,
//! bit-identical reruns.

mod common;

use common::{Rng, device};
use gradfuse::{BatchedLm, Buffer, Device, Error, Recording, Source, Termination, differentiable};

/// `y_k = a exp(b t_k)` at 8 times: residuals of the model at `x = [a, b]`.
#[differentiable]
pub fn exp_fit(x: [f32; 2], #[constant] y: [f32; 8]) -> [f32; 8] {
    let t = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75];
    let mut r = [0.0; 8];
    for k in 0..8 {
        r[k] = x[0] * (x[1] * t[k]).exp() - y[k];
    }
    r
}

/// Rosenbrock's function as two residuals: minimum 0 at (1, 1).
#[differentiable]
pub fn rosenbrock(x: [f32; 2]) -> [f32; 2] {
    [10.0 * (x[1] - x[0] * x[0]), 1.0 - x[0]]
}

/// Finite only at `x = 0.5`: every step away from it is rejected.
#[differentiable]
pub fn cliff(x: [f32; 1]) -> [f32; 1] {
    let r = if x[0] == 0.5 {
        x[0]
    } else {
        x[0] * 1e30 * 1e30
    };
    [r]
}

fn exp_data(n: usize, seed: u64) -> (Vec<[f32; 2]>, Vec<[f32; 8]>) {
    let mut rng = Rng(seed);
    let truth: Vec<[f32; 2]> = (0..n)
        .map(|_| [rng.uniform(0.5, 2.0), rng.uniform(-1.0, 1.0)])
        .collect();
    let y = truth
        .iter()
        .map(|&[a, b]| {
            std::array::from_fn(|k| (f64::from(a) * (f64::from(b) * 0.25 * k as f64).exp()) as f32)
        })
        .collect();
    (truth, y)
}

/// The unknowns from `x`, the observations from `y`, one row each per element.
fn sources<'b>(x: &'b Buffer<[f32; 2]>, y: &'b Buffer<[f32; 8]>) -> exp_fit::Sources<'b> {
    exp_fit::Sources {
        x: Source::Each(x),
        y: Source::Each(y),
    }
}

/// Solves the exponential fits of `y` from `start`; the final unknowns and the summary.
fn solve_exp(
    d: &Device,
    lm: &BatchedLm,
    start: &[[f32; 2]],
    y: &[[f32; 8]],
) -> Result<(Vec<[f32; 2]>, gradfuse::BatchedSummary), Error> {
    let (x, y) = (d.buffer(start)?, d.buffer(y)?);
    let k = exp_fit::kernel(d);
    let summary = lm.solve(
        d,
        &x,
        |rec, x, v, j| k.value_and_jacobian_gathered(rec, &sources(x, &y), v, &j.cast()?),
        |rec, x, v| k.value_gathered(rec, &sources(x, &y), v),
    )?;
    Ok((d.read(&x)?, summary))
}

#[test]
fn exponential_fits_reach_their_known_parameters() {
    let n = 3000;
    let (truth, y) = exp_data(n, 7);
    let start = vec![[1.0f32, 0.0]; n];
    let mut finals = Vec::new();
    for d in [device(), &Device::cpu()] {
        let (x, summary) = solve_exp(d, &BatchedLm::default(), &start, &y).unwrap();
        assert_eq!(
            summary.converged(),
            n,
            "{}: {:?}",
            d.describe(),
            summary.iterations
        );
        for (e, (got, want)) in x.iter().zip(&truth).enumerate() {
            for c in 0..2 {
                let err = (got[c] - want[c]).abs();
                assert!(
                    err <= 1e-3 * want[c].abs().max(1.0),
                    "{e}: {got:?} vs {want:?}"
                );
            }
            assert!(summary.costs[e] <= 1e-8, "{e}: cost {}", summary.costs[e]);
        }
        finals.push(x);
    }
    // The two devices round differently (FMA), not by much.
    for (a, b) in finals[0].iter().zip(&finals[1]) {
        assert!((a[0] - b[0]).abs() <= 1e-4 && (a[1] - b[1]).abs() <= 1e-4);
    }
}

#[test]
fn rosenbrock_from_anywhere_and_reruns_are_bit_identical() {
    let n = 500;
    let mut rng = Rng(11);
    let start: Vec<[f32; 2]> = (0..n)
        .map(|_| [rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)])
        .collect();
    let lm = BatchedLm {
        max_iterations: 200,
        ..BatchedLm::default()
    };
    for d in [device(), &Device::cpu()] {
        let run = || {
            let x = d.buffer(&start).unwrap();
            let k = rosenbrock::kernel(d);
            let summary = lm
                .solve(
                    d,
                    &x,
                    |rec: &mut Recording<'_>,
                     x: &Buffer<[f32; 2]>,
                     v: &Buffer<[f32; 2]>,
                     j: &Buffer<[[f32; 2]; 2]>| {
                        k.value_and_jacobian_to(rec, &x.cast()?, v, &j.cast()?)
                    },
                    |rec: &mut Recording<'_>, x: &Buffer<[f32; 2]>, v: &Buffer<[f32; 2]>| {
                        k.value_to(rec, &x.cast()?, v)
                    },
                )
                .unwrap();
            (d.read(&x).unwrap(), summary)
        };
        let (x, summary) = run();
        assert_eq!(summary.converged(), n, "{}", d.describe());
        for (e, p) in x.iter().enumerate() {
            assert!(
                (p[0] - 1.0).abs() < 1e-3 && (p[1] - 1.0).abs() < 2e-3,
                "{e}: {p:?}"
            );
        }
        let (again, summary2) = run();
        let bits = |v: &[[f32; 2]]| v.iter().flatten().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&x), bits(&again), "{}", d.describe());
        assert_eq!(summary.terminations, summary2.terminations);
    }
}

#[test]
fn every_termination_reason() {
    let (truth, mut y) = exp_data(4, 3);
    // A NaN observation makes that element's residuals NaN.
    y[2][5] = f32::NAN;
    for d in [device(), &Device::cpu()] {
        // One iteration is not enough for the others.
        let once = BatchedLm {
            max_iterations: 1,
            ..BatchedLm::default()
        };
        let (_, s) = solve_exp(d, &once, &[[1.0, 0.0]; 4], &y).unwrap();
        assert_eq!(
            s.terminations[2],
            Termination::NotFinite,
            "{}",
            d.describe()
        );
        assert_eq!(s.terminations[0], Termination::MaxIterations);
        // Started at the answer, the gradient is zero but for the rounding of the data.
        let at_rest = BatchedLm {
            gradient_tolerance: 1e-4,
            ..BatchedLm::default()
        };
        let (_, s) = solve_exp(d, &at_rest, &truth, &y).unwrap();
        assert_eq!(s.terminations[0], Termination::Gradient, "{}", d.describe());
        // A loose step tolerance stops on the step.
        let step = BatchedLm {
            step_tolerance: 1e-2,
            gradient_tolerance: 0.0,
            ..BatchedLm::default()
        };
        let (_, s) = solve_exp(d, &step, &[[1.0, 0.0]; 4], &y).unwrap();
        assert_eq!(s.terminations[0], Termination::Step, "{}", d.describe());
        // Heavily damped, the first step lowers the cost by a small fraction.
        let cost = BatchedLm {
            initial_lambda: 1e4,
            cost_tolerance: 1e-2,
            gradient_tolerance: 0.0,
            step_tolerance: 0.0,
            ..BatchedLm::default()
        };
        let (_, s) = solve_exp(d, &cost, &[[1.0, 0.0]; 4], &y).unwrap();
        assert_eq!(s.terminations[0], Termination::Cost, "{}", d.describe());
        // Every step from x = 0.5 is rejected until the damping gives up.
        let stuck = BatchedLm {
            step_tolerance: 0.0,
            cost_tolerance: 0.0,
            gradient_tolerance: 0.0,
            ..BatchedLm::default()
        };
        let x = d.buffer(&[[0.5f32]]).unwrap();
        let k = cliff::kernel(d);
        let s = stuck
            .solve(
                d,
                &x,
                |rec: &mut Recording<'_>,
                 x: &Buffer<[f32; 1]>,
                 v: &Buffer<[f32; 1]>,
                 j: &Buffer<[[f32; 1]; 1]>| {
                    k.value_and_jacobian_to(rec, &x.cast()?, v, &j.cast()?)
                },
                |rec: &mut Recording<'_>, x: &Buffer<[f32; 1]>, v: &Buffer<[f32; 1]>| {
                    k.value_to(rec, &x.cast()?, v)
                },
            )
            .unwrap();
        assert_eq!(
            s.terminations,
            [Termination::NoProgress],
            "{}",
            d.describe()
        );
        assert_eq!(d.read(&x).unwrap(), [[0.5]]);
    }
    // Sizes past the limits, unknowns of another device, and bad options, are errors.
    let d = device();
    let elsewhere = Device::cpu().buffer(&[[1.0f32, 0.0]]).unwrap();
    let e = BatchedLm::default()
        .solve(
            d,
            &elsewhere,
            |_, _, _: &Buffer<[f32; 1]>, _: &Buffer<[[f32; 2]; 1]>| Ok(()),
            |_, _, _: &Buffer<[f32; 1]>| Ok(()),
        )
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    let x = d.buffer(&[[0.0f32; 17]]).unwrap();
    let e = BatchedLm::default()
        .solve(
            d,
            &x,
            |_: &mut Recording<'_>,
             _: &Buffer<[f32; 17]>,
             _: &Buffer<[f32; 1]>,
             _: &Buffer<[[f32; 17]; 1]>| Ok(()),
            |_: &mut Recording<'_>, _: &Buffer<[f32; 17]>, _: &Buffer<[f32; 1]>| Ok(()),
        )
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    let bad = BatchedLm {
        initial_lambda: -1.0,
        ..BatchedLm::default()
    };
    let (_, y) = exp_data(1, 1);
    assert!(matches!(
        solve_exp(d, &bad, &[[1.0, 0.0]], &y),
        Err(Error::Unsupported(_))
    ));
}
