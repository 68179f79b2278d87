//! Sparse Levenberg–Marquardt (`Problem`, `LevenbergMarquardt`): known minima, one step
//! against a dense f64 solve of the damped normal equations, robust losses against an f64
//! gradient, held rows, every termination reason, bit-identical reruns, the GPU against the
//! CPU device, and the errors of a badly bound problem.

mod common;

use common::{Rng, device, solve_dense};
use gradfuse::{
    BlockId, Buffer, Device, Error, Index, LevenbergMarquardt, Loss, Problem, Source, Termination,
    differentiable,
};

/// One sample `(t, y)` of the curve `a exp(b t)`: a scalar residual.
#[differentiable]
pub fn sample(ab: [f32; 2], #[constant] ty: [f32; 2]) -> f32 {
    ab[0] * (ab[1] * ty[0]).exp() - ty[1]
}

/// Neighbouring curves' parameters differ by `d`: two rows of one block.
#[differentiable]
pub fn smooth(p: [f32; 2], q: [f32; 2], #[constant] d: [f32; 2]) -> [f32; 2] {
    [q[0] - p[0] - d[0], q[1] - p[1] - d[1]]
}

/// A step down from `x = 1` lands past a cliff in the residual: no step lowers the cost.
#[differentiable]
pub fn ledge(x: f32) -> f32 {
    if x < 1.0 { x - 10.0 } else { x }
}

/// `ln x - 1`: not finite where `x <= 0`.
#[differentiable]
pub fn log_residual(x: f32) -> f32 {
    x.ln() - 1.0
}

/// A line `y = a t + b` through samples: a scalar residual of one parameter row.
#[differentiable]
pub fn line(ab: [f32; 2], #[constant] ty: [f32; 2]) -> f32 {
    ab[0] * ty[0] + ab[1] - ty[1]
}

const SAMPLES: usize = 8;

/// `curves` exponential curves with known parameters, `SAMPLES` noise-free samples each,
/// neighbours' differences known: the minimum is the truth, at cost 0.
struct Curves {
    truth: Vec<[f32; 2]>,
    samples: Vec<[f32; 2]>,
    curve_of: Vec<u32>,
    diffs: Vec<[f32; 2]>,
    left: Vec<u32>,
    right: Vec<u32>,
}

impl Curves {
    fn new(curves: usize, seed: u64) -> Curves {
        let mut rng = Rng(seed);
        let truth: Vec<[f32; 2]> = (0..curves)
            .map(|_| [rng.uniform(0.5, 2.0), rng.uniform(-1.0, 1.0)])
            .collect();
        let mut samples = Vec::new();
        let mut curve_of = Vec::new();
        for (c, &[a, b]) in truth.iter().enumerate() {
            for k in 0..SAMPLES {
                let t = 0.25 * k as f32;
                let y = (f64::from(a) * (f64::from(b) * f64::from(t)).exp()) as f32;
                samples.push([t, y]);
                curve_of.push(c as u32);
            }
        }
        let (left, right): (Vec<u32>, Vec<u32>) =
            (0..curves as u32 - 1).map(|c| (c, c + 1)).unzip();
        let diffs = (0..curves - 1)
            .map(|c| [truth[c + 1][0] - truth[c][0], truth[c + 1][1] - truth[c][1]])
            .collect();
        Curves {
            truth,
            samples,
            curve_of,
            diffs,
            left,
            right,
        }
    }

    /// A start near the truth.
    fn start(&self, seed: u64) -> Vec<[f32; 2]> {
        let mut rng = Rng(seed);
        self.truth
            .iter()
            .map(|&[a, b]| [a + rng.uniform(-0.3, 0.3), b + rng.uniform(-0.3, 0.3)])
            .collect()
    }

    /// Residuals and the dense Jacobian in f64 at `x` (samples, then differences).
    fn dense(&self, x: &[[f32; 2]]) -> (Vec<f64>, Vec<Vec<f64>>) {
        let cols = 2 * x.len();
        let (mut r, mut j) = (Vec::new(), Vec::new());
        for (s, &c) in self.samples.iter().zip(&self.curve_of) {
            let [a, b] = x[c as usize].map(f64::from);
            let t = f64::from(s[0]);
            let e = (b * t).exp();
            r.push(a * e - f64::from(s[1]));
            let mut row = vec![0.0; cols];
            row[2 * c as usize] = e;
            row[2 * c as usize + 1] = a * t * e;
            j.push(row);
        }
        for (k, d) in self.diffs.iter().enumerate() {
            for w in 0..2 {
                r.push(f64::from(x[k + 1][w]) - f64::from(x[k][w]) - f64::from(d[w]));
                let mut row = vec![0.0; cols];
                row[2 * (k + 1) + w] = 1.0;
                row[2 * k + w] = -1.0;
                j.push(row);
            }
        }
        (r, j)
    }
}

/// The device buffers of [`Curves`].
struct CurveBuffers {
    x: Buffer<[f32; 2]>,
    samples: Buffer<[f32; 2]>,
    diffs: Buffer<[f32; 2]>,
    curve_of: Index,
    left: Index,
    right: Index,
}

impl CurveBuffers {
    fn new(d: &Device, c: &Curves, start: &[[f32; 2]]) -> CurveBuffers {
        let rows = c.truth.len();
        CurveBuffers {
            x: d.buffer(start).unwrap(),
            samples: d.buffer(&c.samples).unwrap(),
            diffs: d.buffer(&c.diffs).unwrap(),
            curve_of: d.index(&c.curve_of, rows).unwrap(),
            left: d.index(&c.left, rows).unwrap(),
            right: d.index(&c.right, rows).unwrap(),
        }
    }

    fn problem<'b>(&'b self, d: &'b Device, smoothness: bool) -> Problem<'b> {
        self.problem_and_block(d, smoothness).0
    }

    fn problem_and_block<'b>(&'b self, d: &'b Device, smoothness: bool) -> (Problem<'b>, BlockId) {
        let mut p = Problem::new(d);
        let block = p.add_block(&self.x).unwrap();
        let sources = sample::Sources {
            ab: Source::Gather(&self.x, &self.curve_of),
            ty: Source::Each(&self.samples),
        };
        p.add_term(sample::kernel(d), sources, Loss::Squared)
            .unwrap();
        if smoothness {
            let sources = smooth::Sources {
                p: Source::Gather(&self.x, &self.left),
                q: Source::Gather(&self.x, &self.right),
                d: Source::Each(&self.diffs),
            };
            p.add_term(smooth::kernel(d), sources, Loss::Squared)
                .unwrap();
        }
        (p, block)
    }
}

#[test]
fn curves_converge_to_their_known_minimum() {
    let c = Curves::new(40, 1);
    let start = c.start(2);
    for d in [device(), &Device::cpu()] {
        let b = CurveBuffers::new(d, &c, &start);
        let problem = b.problem(d, true);
        let summary = LevenbergMarquardt::default().solve(&problem).unwrap();
        assert!(
            summary.termination.converged(),
            "{}: {summary}",
            d.describe()
        );
        assert!(summary.final_cost < 1e-9, "{}: {summary}", d.describe());
        assert!(summary.final_cost < summary.initial_cost * 1e-6);
        for (got, want) in d.read(&b.x).unwrap().iter().zip(&c.truth) {
            for w in 0..2 {
                assert!((got[w] - want[w]).abs() < 1e-3, "{got:?} vs {want:?}");
            }
        }
    }
}

#[test]
fn one_step_matches_a_dense_solve_of_the_damped_normal_equations() {
    let c = Curves::new(10, 3);
    let start = c.start(4);
    let lambda = 0.05f32;
    let (r, j) = c.dense(&start);
    let n = 2 * start.len();
    let mut a = vec![vec![0.0f64; n]; n];
    let mut g = vec![0.0f64; n];
    for (row, ri) in j.iter().zip(&r) {
        for p in 0..n {
            g[p] += row[p] * ri;
            for q in 0..n {
                a[p][q] += row[p] * row[q];
            }
        }
    }
    for (p, row) in a.iter_mut().enumerate() {
        row[p] += f64::from(lambda) * row[p].clamp(1e-6, 1e32);
    }
    let delta = solve_dense(a, g.iter().map(|x| -x).collect());
    let options = LevenbergMarquardt {
        max_iterations: 1,
        initial_lambda: lambda,
        cg_tolerance: 1e-4,
        max_cg_iterations: 100,
        ..LevenbergMarquardt::default()
    };
    for d in [device(), &Device::cpu()] {
        let b = CurveBuffers::new(d, &c, &start);
        let summary = options.solve(&b.problem(d, true)).unwrap();
        let report = summary.iterations[0];
        assert!(report.accepted, "{}: {report}", d.describe());
        assert_eq!(summary.termination, Termination::MaxIterations);
        let scale = delta.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (k, (got, s)) in d.read(&b.x).unwrap().iter().zip(&start).enumerate() {
            for w in 0..2 {
                let step = f64::from(got[w]) - f64::from(s[w]);
                let want = delta[2 * k + w];
                assert!(
                    (step - want).abs() <= 2e-3 * scale,
                    "{}: unknown {}: step {step} vs dense {want}",
                    d.describe(),
                    2 * k + w
                );
            }
        }
        // The gradient it reports is |Jᵀr| in f64.
        let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((report.gradient_norm - norm).abs() <= 1e-4 * norm);
    }
}

#[test]
fn held_rows_stay_and_the_rest_converge() {
    let c = Curves::new(12, 5);
    let mut start = c.start(6);
    // Row 0 held at the truth, row 5 held off it: the rest fit the samples and neighbours.
    start[0] = c.truth[0];
    for d in [device(), &Device::cpu()] {
        let b = CurveBuffers::new(d, &c, &start);
        let (mut problem, block) = b.problem_and_block(d, true);
        problem.hold_rows(block, &[0, 5]).unwrap();
        let summary = LevenbergMarquardt::default().solve(&problem).unwrap();
        let x = d.read(&b.x).unwrap();
        assert_eq!(x[0], start[0], "{}", d.describe());
        assert_eq!(x[5], start[5], "{}", d.describe());
        assert!(summary.final_cost < summary.initial_cost);
        assert!(summary.termination.converged(), "{summary}");
        assert_eq!(problem.unknowns(), 2 * (12 - 2));
    }
}

/// A problem of one term whose elements each read their own row of the block `x`.
fn scalar_problem<
    'b,
    K: gradfuse::Residuals<Sources<'b> = S> + 'b,
    S,
    T: gradfuse::bytemuck::Pod,
>(
    d: &'b Device,
    x: &'b Buffer<T>,
    kernel: K,
    sources: S,
) -> Problem<'b> {
    let mut p = Problem::new(d);
    p.add_block(x).unwrap();
    p.add_term(kernel, sources, Loss::Squared).unwrap();
    p
}

#[test]
fn every_termination_reason_is_reached() {
    for d in [device(), &Device::cpu()] {
        let what = d.describe();
        let c = Curves::new(6, 7);
        // At the minimum already: the gradient is zero, but for f32 rounding.
        let b = CurveBuffers::new(d, &c, &c.truth);
        let at_minimum = LevenbergMarquardt {
            gradient_tolerance: 1e-4,
            ..LevenbergMarquardt::default()
        };
        let s = at_minimum.solve(&b.problem(d, true)).unwrap();
        assert_eq!(s.termination, Termination::Gradient, "{what}: {s}");
        assert!(s.iterations.is_empty());
        // Neighbours' differences that contradict the samples: a minimum above zero, where
        // the cost stops falling before the step shrinks.
        let start = c.start(8);
        let mut contradicting = Curves::new(6, 7);
        contradicting.diffs[2] = [0.5, -0.5];
        let b = CurveBuffers::new(d, &contradicting, &start);
        let s = LevenbergMarquardt {
            cost_tolerance: 1e-3,
            ..LevenbergMarquardt::default()
        }
        .solve(&b.problem(d, true))
        .unwrap();
        assert_eq!(s.termination, Termination::Cost, "{what}: {s}");
        assert!(s.final_cost > 1e-3, "{what}: {s}");
        // A loose step tolerance, then no iterations left.
        let loose_step = LevenbergMarquardt {
            step_tolerance: 10.0,
            ..LevenbergMarquardt::default()
        };
        let b = CurveBuffers::new(d, &c, &start);
        let s = loose_step.solve(&b.problem(d, true)).unwrap();
        assert_eq!(s.termination, Termination::Step, "{what}: {s}");
        assert_eq!(s.iterations.len(), 1);
        let two = LevenbergMarquardt {
            max_iterations: 2,
            cost_tolerance: 0.0,
            step_tolerance: 0.0,
            ..LevenbergMarquardt::default()
        };
        let b = CurveBuffers::new(d, &c, &start);
        let s = two.solve(&b.problem(d, true)).unwrap();
        assert_eq!(s.termination, Termination::MaxIterations, "{what}: {s}");
        assert_eq!(s.iterations.len(), 2);
        // Not finite at the start.
        let x = d.buffer(&[-1.0f32, 2.0]).unwrap();
        let sources = log_residual::Sources {
            x: Source::Each(&x),
        };
        let s = LevenbergMarquardt::default()
            .solve(&scalar_problem(d, &x, log_residual::kernel(d), sources))
            .unwrap();
        assert_eq!(s.termination, Termination::NotFinite, "{what}: {s}");
        // Every step rejected, λ past its ceiling; the unknowns are left as they were.
        let x = d.buffer(&[1.0f32]).unwrap();
        let sources = ledge::Sources {
            x: Source::Each(&x),
        };
        let no_step_test = LevenbergMarquardt {
            step_tolerance: 0.0,
            max_iterations: 100,
            ..LevenbergMarquardt::default()
        };
        let s = no_step_test
            .solve(&scalar_problem(d, &x, ledge::kernel(d), sources))
            .unwrap();
        assert_eq!(s.termination, Termination::NoProgress, "{what}: {s}");
        assert!(s.iterations.iter().all(|r| !r.accepted));
        assert_eq!(d.read(&x).unwrap(), vec![1.0]);
        assert_eq!(s.final_cost, 0.5);
    }
}

#[test]
fn reruns_are_bit_identical_and_the_devices_agree() {
    let c = Curves::new(64, 9);
    let start = c.start(10);
    let options = LevenbergMarquardt {
        max_iterations: 6,
        cost_tolerance: 0.0,
        ..LevenbergMarquardt::default()
    };
    let run = |d: &Device| {
        let b = CurveBuffers::new(d, &c, &start);
        let s = options.solve(&b.problem(d, true)).unwrap();
        let costs: Vec<u64> = s.iterations.iter().map(|r| r.new_cost.to_bits()).collect();
        (d.read(&b.x).unwrap(), costs)
    };
    let (x1, c1) = run(device());
    let (x2, c2) = run(device());
    assert_eq!(c1, c2);
    assert_eq!(
        x1.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>(),
        x2.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let (x3, _) = run(&Device::cpu());
    for (a, b) in x1.iter().zip(&x3) {
        for w in 0..2 {
            assert!((a[w] - b[w]).abs() < 1e-4, "{a:?} vs {b:?}");
        }
    }
}

/// The gradient of `½ Σ ρ(r_k²)` for the line fit, in f64.
fn robust_gradient(loss: Loss, ab: [f32; 2], samples: &[[f32; 2]]) -> [f64; 2] {
    let (a, b) = (f64::from(ab[0]), f64::from(ab[1]));
    let mut g = [0.0; 2];
    for s in samples {
        let (t, y) = (f64::from(s[0]), f64::from(s[1]));
        let r = a * t + b - y;
        let d = match loss {
            Loss::Huber(c) if r.abs() > f64::from(c) => f64::from(c) / r.abs(),
            Loss::Cauchy(c) => 1.0 / (1.0 + r * r / f64::from(c * c)),
            _ => 1.0,
        };
        g[0] += d * r * t;
        g[1] += d * r;
    }
    g
}

#[test]
fn robust_losses_reach_a_stationary_point_and_resist_outliers() {
    // y = 2 t + 1 with noise, and every tenth sample far off.
    let mut rng = Rng(11);
    let samples: Vec<[f32; 2]> = (0..200)
        .map(|k| {
            let t = k as f32 / 20.0;
            let outlier = if k % 10 == 3 { 30.0 } else { 0.0 };
            [t, 2.0 * t + 1.0 + rng.uniform(-0.05, 0.05) + outlier]
        })
        .collect();
    let at_zero = vec![0u32; samples.len()];
    for d in [device(), &Device::cpu()] {
        let mut fits = Vec::new();
        for loss in [Loss::Squared, Loss::Huber(0.5), Loss::Cauchy(0.5)] {
            let ab = d.buffer(&[[0.0f32, 0.0]]).unwrap();
            let s_buf = d.buffer(&samples).unwrap();
            let index = d.index(&at_zero, 1).unwrap();
            let mut p = Problem::new(d);
            p.add_block(&ab).unwrap();
            let sources = line::Sources {
                ab: Source::Gather(&ab, &index),
                ty: Source::Each(&s_buf),
            };
            p.add_term(line::kernel(d), sources, loss).unwrap();
            // The cost at the start, against ½ Σ ρ(r²) in f64.
            let want: f64 = samples
                .iter()
                .map(|s| {
                    let r2 = f64::from(s[1]).powi(2);
                    0.5 * match loss {
                        Loss::Huber(c) if r2 > f64::from(c * c) => {
                            2.0 * f64::from(c) * r2.sqrt() - f64::from(c * c)
                        }
                        Loss::Cauchy(c) => f64::from(c * c) * (1.0 + r2 / f64::from(c * c)).ln(),
                        _ => r2,
                    }
                })
                .sum();
            let got = p.cost().unwrap();
            assert!(
                (got - want).abs() <= 1e-5 * want,
                "{loss:?}: cost {got} vs {want}"
            );
            let options = LevenbergMarquardt {
                max_iterations: 200,
                cost_tolerance: 1e-9,
                ..LevenbergMarquardt::default()
            };
            let summary = options.solve(&p).unwrap();
            let fit = d.read(&ab).unwrap()[0];
            let g = robust_gradient(loss, fit, &samples);
            let g0 = robust_gradient(loss, [0.0, 0.0], &samples);
            let (gn, g0n) = (g[0].hypot(g[1]), g0[0].hypot(g0[1]));
            assert!(gn <= 1e-3 * g0n, "{loss:?}: |g| {gn} of {g0n}; {summary}");
            fits.push(fit);
        }
        // The squared loss is pulled up by the outliers; the robust ones stay near b = 1.
        assert!(fits[0][1] > 2.5, "{:?}", fits[0]);
        for f in &fits[1..] {
            assert!(
                (f[0] - 2.0).abs() < 0.05 && (f[1] - 1.0).abs() < 0.3,
                "{f:?}"
            );
        }
    }
}

#[test]
fn badly_bound_problems_are_errors() {
    let d = device();
    let cpu = Device::cpu();
    // Declared before the problems that borrow them.
    let other = d.buffer(&[[0.0f32; 2]; 3]).unwrap();
    let wide = d.buffer(&[[0.0f32; 17]]).unwrap();
    let foreign = cpu.buffer(&[[0.0f32; 2]; 4]).unwrap();
    let c = Curves::new(4, 12);
    let b = CurveBuffers::new(d, &c, &c.truth);
    // An argument with a derivative reading a buffer that is no block.
    let mut p = Problem::new(d);
    let sources = sample::Sources {
        ab: Source::Gather(&b.x, &b.curve_of),
        ty: Source::Each(&b.samples),
    };
    let e = p
        .add_term(sample::kernel(d), sources, Loss::Squared)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("`ab`")),
        "{e}"
    );
    // A block read by no term.
    let (mut p, _) = b.problem_and_block(d, false);
    p.add_block(&other).unwrap();
    let e = LevenbergMarquardt::default().solve(&p).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("block 1")),
        "{e}"
    );
    // The same buffer twice, a held row out of range, a bad loss scale, a wide row.
    let (mut p, block) = b.problem_and_block(d, false);
    assert!(matches!(p.add_block(&b.x), Err(Error::Aliased(_))));
    assert!(matches!(
        p.hold_rows(block, &[4]),
        Err(Error::IndexOutOfRange {
            row: 4,
            rows: 4,
            ..
        })
    ));
    let sources = sample::Sources {
        ab: Source::Gather(&b.x, &b.curve_of),
        ty: Source::Each(&b.samples),
    };
    let e = p
        .add_term(sample::kernel(d), sources, Loss::Huber(-1.0))
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)));
    assert!(matches!(p.add_block(&wide), Err(Error::Unsupported(_))));
    // A block of another device.
    if d.is_gpu() {
        assert!(matches!(p.add_block(&foreign), Err(Error::WrongDevice(_))));
    }
}

/// `a + b − 1`: only the sum of the two unknowns is determined.
#[differentiable]
pub fn sum_of_two(ab: [f32; 2]) -> f32 {
    ab[0] + ab[1] - 1.0
}

/// An unknown no residual depends on, beside one that is fitted.
#[differentiable]
pub fn first_only(ab: [f32; 2], #[constant] y: f32) -> f32 {
    ab[0] * ab[0] - y
}

#[test]
fn singular_systems_are_damped_not_fatal() {
    for d in [device(), &Device::cpu()] {
        // JᵀJ of rank 1 in 2 unknowns, and a column of zeros: the damping keeps each step
        // finite and the solve reaches a minimum.
        let ab = d.buffer(&[[3.0f32, 2.0]]).unwrap();
        let sources = sum_of_two::Sources {
            ab: Source::Each(&ab),
        };
        let s = LevenbergMarquardt::default()
            .solve(&scalar_problem(d, &ab, sum_of_two::kernel(d), sources))
            .unwrap();
        assert!(s.termination.converged(), "{}: {s}", d.describe());
        let [a, b] = d.read(&ab).unwrap()[0];
        assert!((a + b - 1.0).abs() < 1e-5, "{a} + {b}");
        // The two unknowns move alike (the minimum-norm step from (3, 2)).
        assert!(((a - 3.0) - (b - 2.0)).abs() < 1e-4, "{a}, {b}");
        let ab = d.buffer(&[[3.0f32, 7.0]]).unwrap();
        let y = d.buffer(&[4.0f32]).unwrap();
        let sources = first_only::Sources {
            ab: Source::Each(&ab),
            y: Source::Each(&y),
        };
        let s = LevenbergMarquardt::default()
            .solve(&scalar_problem(d, &ab, first_only::kernel(d), sources))
            .unwrap();
        assert!(s.termination.converged(), "{}: {s}", d.describe());
        let [a, b] = d.read(&ab).unwrap()[0];
        assert!((a - 2.0).abs() < 1e-4 && b == 7.0, "{a}, {b}");
    }
}
