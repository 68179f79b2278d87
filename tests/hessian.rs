//! Hessians (issue "Second order", item 1): `f::value_grad_hessian` on the CPU and
//! `f::kernel(..).value_grad_hessian` on the device, and `f::hvp`, against two f64
//! oracles: hyper-dual evaluation of `f::eval` (every pair of words seeded) and central
//! differences of the f64 gradient. Loops kept as loops (forward-over-reverse through a
//! recorded tape), loops unrolled, branches, `#[constant]` and `#[shared]` arguments, a
//! custom derivative, and a function wide enough that its kernel sweeps in a loop.

// Hessians are indexed by row and column side by side.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, device, rel_error};
use gradfuse::{HyperDual, differentiable};

/// The extended Rosenbrock function: a loop over an array (unrolled in the kernels).
#[differentiable]
pub fn rosenbrock(x: [f32; 4]) -> f32 {
    let mut s = 0.0;
    for i in 0..3 {
        s += 100.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2);
    }
    s
}

/// Branches and a `#[constant]` word (no row or column of the Hessian).
#[differentiable]
pub fn branchy(a: f32, #[constant] c: f32, b: f32) -> f32 {
    if a > b {
        (a * b).sin() * c + a.exp()
    } else {
        (a - b).powi(3) + b.atan() * c + (a * a + 1.0).ln()
    }
}

/// `#[shared]` words: inputs of every element's Hessian, held fixed.
#[differentiable]
pub fn weighted(x: [f32; 3], #[shared] w: [f32; 3]) -> f32 {
    let mut s = (x[0] * x[2]).exp();
    for i in 0..3 {
        s += w[i] * x[i] * x[i].sin();
    }
    s
}

/// A loop with no array index: it stays a loop in every kernel, so the Hessian is the
/// tangent of a reverse loop reading a recorded tape.
#[differentiable]
pub fn iterated(x: f32, y: f32) -> f32 {
    let mut a = x;
    for _ in 0..40 {
        a = (a * y).sin() + 0.1 * x;
    }
    a * a + y
}

/// A recurrence whose carried value is a call (`tanh`): the reverse loop reads each step's
/// result as the next step's taped value rather than calling it again
/// (`ad::stored::read_next_values`), and the Hessian is the tangent of that.
#[differentiable]
pub fn scanned(x: f32, w: f32) -> f32 {
    let mut h = x;
    for i in 0..30 {
        h = (w * h + 0.1 * (i as f32) - 0.5).tanh();
    }
    h * h + w * x
}

/// A long loop: 600 steps carrying two values, a 1,200-word tape (past
/// `opt::MAX_TAPE_WORDS`), so the kernels' reverse passes run it in checkpointed segments,
/// the Hessian's tangents of them included.
#[differentiable]
pub fn integrated(k: f32, c: f32) -> f32 {
    let mut p: f32 = 1.0;
    let mut q = 0.0;
    for _ in 0..600 {
        q += 0.01 * (-k * p.sin() - c * q);
        p += 0.01 * q;
    }
    p * p + q
}

/// Softplus with a custom derivative: its second derivative is the derivative of the
/// custom one (the logistic function).
#[differentiable(grad = softplus_grad)]
pub fn softplus(x: f32) -> f32 {
    (1.0 + x.exp()).ln()
}

#[differentiable]
pub fn softplus_grad(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// A caller of the custom derivative.
#[differentiable]
pub fn softplus_pair(p: [f32; 2]) -> f32 {
    softplus(p[0] * p[1]) + softplus(p[0] - p[1])
}

/// Wide enough that its Hessian kernel sweeps in a loop over the 24 directions.
#[differentiable]
pub fn chain(x: [f32; 24]) -> f32 {
    let mut s = 0.0;
    for i in 0..23 {
        s += (x[i] * x[i + 1]).sin() * (0.5 * x[i]).exp() + (x[i] - x[i + 1]).powi(2);
    }
    s
}

/// Value, gradient and Hessian (row-major) from one batch, `f32`.
type Second = (f32, Vec<f32>, Vec<f32>);

fn flat<G: gradfuse::bytemuck::Pod, H: gradfuse::bytemuck::Pod>((v, g, h): (f32, G, H)) -> Second {
    (
        v,
        gradfuse::bytemuck::cast_slice(&[g]).to_vec(),
        gradfuse::bytemuck::cast_slice(&[h]).to_vec(),
    )
}

/// Checks one function at its points (its gradient words, in f64): the device's results
/// equal the CPU's to f32 rounding; both are symmetric to the bit; the CPU's agree with
/// the hyper-dual oracle `hyper(x, i, j)` (ε1 on word `i`, ε2 on word `j`) and with
/// central differences of its gradient.
fn check(
    name: &str,
    points: &[Vec<f64>],
    cpu: &[Second],
    gpu: &[Second],
    hyper: impl Fn(&[f64], usize, usize) -> HyperDual<f64>,
) {
    let n = points[0].len();
    for (k, x) in points.iter().enumerate() {
        let (v, g, h) = &cpu[k];
        let (gv, gg, gh) = &gpu[k];
        let to64 = |s: &[f32]| s.iter().map(|w| *w as f64).collect::<Vec<f64>>();
        let err = rel_error(&to64(gh), &to64(h), 1e-3);
        assert!(
            err < 1e-4,
            "{name} at {x:?}: device Hessian {gh:?}, CPU {h:?} ({err:e})"
        );
        // Value and gradient to f32 rounding of what the CPU computed; over a long loop
        // (600 steps of `integrated`) the device's rounding differs from the CPU's (fused
        // multiply-adds, its own `sin`) step by step: 1e-5 failed on the H100. Both are
        // held to the hyper-dual oracle below, the device's at the CPU's tolerance.
        let err = rel_error(&to64(gg), &to64(g), 1e-3);
        assert!(
            err < 1e-4 && (gv - v).abs() <= 1e-5 * v.abs().max(1.0),
            "{name} at {x:?}: device {gv}, {gg:?}, CPU {v}, {g:?} ({err:e})"
        );
        let mut want = vec![0.0; n * n];
        let mut grad = vec![0.0; n];
        for i in 0..n {
            grad[i] = hyper(x, i, i).eps1();
            for j in 0..n {
                want[i * n + j] = hyper(x, i, j).eps1eps2();
                for hess in [h, gh] {
                    assert_eq!(
                        hess[i * n + j].to_bits(),
                        hess[j * n + i].to_bits(),
                        "{name}: symmetric"
                    );
                }
            }
        }
        let value = hyper(x, 0, 0).re();
        assert!(
            (*v as f64 - value).abs() <= 1e-5 * value.abs().max(1.0),
            "{name}: value {v} vs {value}"
        );
        for (who, g) in [("CPU", g), ("device", gg)] {
            let err = rel_error(&to64(g), &grad, 1e-3);
            assert!(
                err < 1e-4,
                "{name} at {x:?}: {who} gradient {g:?} vs {grad:?}"
            );
        }
        let err = rel_error(&to64(h), &want, 1e-3);
        assert!(
            err < 2e-4,
            "{name} at {x:?}: Hessian {h:?}\nhyper-dual {want:?} ({err:e})"
        );
        // Central differences of the f64 gradient, column by column.
        let mut fd = vec![0.0; n * n];
        for j in 0..n {
            let step = 1e-5 * x[j].abs().max(1.0);
            let (mut p, mut m) = (x.clone(), x.clone());
            p[j] += step;
            m[j] -= step;
            for i in 0..n {
                fd[i * n + j] = (hyper(&p, i, i).eps1() - hyper(&m, i, i).eps1()) / (2.0 * step);
            }
        }
        let err = rel_error(&to64(h), &fd, 1e-3);
        assert!(
            err < 1e-3,
            "{name} at {x:?}: Hessian {h:?}\ndifferences {fd:?} ({err:e})"
        );
    }
}

/// Word `k` of `x` seeded for the pair `(i, j)`.
fn seeded(x: &[f64], k: usize, i: usize, j: usize) -> HyperDual<f64> {
    let one = |b: bool| if b { 1.0 } else { 0.0 };
    HyperDual::hyper(x[k], one(k == i), one(k == j), 0.0)
}

fn points(rng: &mut Rng, count: usize, n: usize, lo: f64, hi: f64) -> Vec<Vec<f64>> {
    (0..count)
        .map(|_| (0..n).map(|_| rng.uniform(lo, hi) as f64).collect())
        .collect()
}

fn words<const N: usize>(x: &[f64]) -> [f32; N] {
    std::array::from_fn(|k| x[k] as f32)
}

#[test]
fn rosenbrock_and_iterated_loops() {
    let mut rng = Rng(1);
    let xs = points(&mut rng, 64, 4, -1.5, 1.5);
    let args: Vec<rosenbrock::Args> = xs
        .iter()
        .map(|x| rosenbrock::Args { x: words(x) })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(rosenbrock::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = rosenbrock::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    check("rosenbrock", &xs, &cpu, &gpu, |x, i, j| {
        rosenbrock::eval(std::array::from_fn(|k| seeded(x, k, i, j)))
    });

    let xs = points(&mut rng, 64, 2, -1.0, 1.0);
    let args: Vec<iterated::Args> = xs
        .iter()
        .map(|x| iterated::Args {
            x: x[0] as f32,
            y: x[1] as f32,
        })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(iterated::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = iterated::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    assert!(
        iterated::WGSL_HESSIAN.contains("tape"),
        "the kernel's loop stays a loop"
    );
    check("iterated", &xs, &cpu, &gpu, |x, i, j| {
        iterated::eval(seeded(x, 0, i, j), seeded(x, 1, i, j))
    });
}

#[test]
fn a_recurrence_read_from_its_tape() {
    let mut rng = Rng(9);
    let xs = points(&mut rng, 64, 2, -1.2, 1.2);
    let args: Vec<scanned::Args> = xs
        .iter()
        .map(|x| scanned::Args {
            x: x[0] as f32,
            w: x[1] as f32,
        })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(scanned::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = scanned::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    // The adjoint's reverse loop carries the step's result; only the forward loop calls
    // tanh.
    assert!(scanned::WGSL_ADJOINT.contains("h_after"));
    assert_eq!(scanned::WGSL_ADJOINT.matches("gf_tanh(").count(), 2);
    // That adjoint kernel's values and gradients, against the CPU's (held to the
    // hyper-dual oracle by `check`).
    let (values, grads) = scanned::kernel(device())
        .value_and_grad(&args)
        .expect("launch");
    for (k, (value, grad, _)) in cpu.iter().enumerate() {
        let got = [grads[k].x as f64, grads[k].w as f64];
        let want = [grad[0] as f64, grad[1] as f64];
        assert!(
            rel_error(&got, &want, 1e-3) < 1e-4,
            "{got:?} against {want:?}"
        );
        assert!((values[k] - value).abs() <= 1e-5 * value.abs().max(1.0));
    }
    check("scanned", &xs, &cpu, &gpu, |x, i, j| {
        scanned::eval(seeded(x, 0, i, j), seeded(x, 1, i, j))
    });
}

#[test]
fn a_long_loop_in_checkpointed_segments() {
    let mut rng = Rng(7);
    let xs = points(&mut rng, 64, 2, 0.2, 1.5);
    let args: Vec<integrated::Args> = xs
        .iter()
        .map(|x| integrated::Args {
            k: x[0] as f32,
            c: x[1] as f32,
        })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(integrated::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = integrated::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    for wgsl in [integrated::WGSL_ADJOINT, integrated::WGSL_HESSIAN] {
        assert!(wgsl.contains("_segment"), "the loop is cut into segments");
        assert!(!wgsl.contains("array<f32, 1200>"), "no whole tape");
    }
    check("integrated", &xs, &cpu, &gpu, |x, i, j| {
        integrated::eval(seeded(x, 0, i, j), seeded(x, 1, i, j))
    });
}

#[test]
fn branches_constants_and_shared_words() {
    let mut rng = Rng(2);
    let c = 0.75;
    let xs = points(&mut rng, 64, 2, -1.5, 1.5);
    let args: Vec<branchy::Args> = xs
        .iter()
        .map(|x| branchy::Args {
            a: x[0] as f32,
            c,
            b: x[1] as f32,
        })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(branchy::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = branchy::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    check("branchy", &xs, &cpu, &gpu, |x, i, j| {
        branchy::eval(
            seeded(x, 0, i, j),
            HyperDual::hyper(c as f64, 0.0, 0.0, 0.0),
            seeded(x, 1, i, j),
        )
    });

    let w = [0.5f32, -1.25, 2.0];
    let shared = weighted::Shared { w };
    let xs = points(&mut rng, 64, 3, -1.0, 1.0);
    let args: Vec<weighted::Args> = xs.iter().map(|x| weighted::Args { x: words(x) }).collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(weighted::value_grad_hessian(a, &shared)))
        .collect();
    let (v, g, h) = weighted::kernel(device())
        .value_grad_hessian(&args, &shared)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    check("weighted", &xs, &cpu, &gpu, |x, i, j| {
        let w = w.map(|w| HyperDual::hyper(w as f64, 0.0, 0.0, 0.0));
        weighted::eval(std::array::from_fn(|k| seeded(x, k, i, j)), w)
    });
}

#[test]
fn custom_derivatives_give_the_derivative_of_their_gradient() {
    // softplus'' = s (1 - s), the derivative of the custom logistic.
    for x in [-30.0f32, -2.0, 0.0, 1.5, 30.0] {
        let (_, _, h) = softplus::value_grad_hessian(&softplus::Args { x });
        let s = 1.0 / (1.0 + (-x as f64).exp());
        assert!(
            (h[0][0] as f64 - s * (1.0 - s)).abs() < 1e-6,
            "at {x}: {}",
            h[0][0]
        );
    }
    let mut rng = Rng(3);
    let xs = points(&mut rng, 64, 2, -2.0, 2.0);
    let args: Vec<softplus_pair::Args> = xs
        .iter()
        .map(|x| softplus_pair::Args { p: words(x) })
        .collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(softplus_pair::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = softplus_pair::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    // The formula itself is the oracle: softplus is smooth, its automatic derivatives are
    // the custom ones here.
    check("softplus_pair", &xs, &cpu, &gpu, |x, i, j| {
        let p: [HyperDual<f64>; 2] = std::array::from_fn(|k| seeded(x, k, i, j));
        let sp = |t: HyperDual<f64>| {
            use gradfuse::Real;
            (HyperDual::hyper(1.0, 0.0, 0.0, 0.0) + t.exp()).ln()
        };
        sp(p[0] * p[1]) + sp(p[0] - p[1])
    });
}

#[test]
fn wide_functions_sweep_in_a_loop() {
    assert!(
        chain::WGSL_HESSIAN.contains("direction"),
        "24 directions: a loop"
    );
    let mut rng = Rng(4);
    let xs = points(&mut rng, 16, 24, -1.0, 1.0);
    let args: Vec<chain::Args> = xs.iter().map(|x| chain::Args { x: words(x) }).collect();
    let cpu: Vec<Second> = args
        .iter()
        .map(|a| flat(chain::value_grad_hessian(a)))
        .collect();
    let (v, g, h) = chain::kernel(device())
        .value_grad_hessian(&args)
        .expect("launch");
    let gpu: Vec<Second> = (0..args.len()).map(|k| flat((v[k], g[k], h[k]))).collect();
    check("chain", &xs, &cpu, &gpu, |x, i, j| {
        chain::eval(std::array::from_fn(|k| seeded(x, k, i, j)))
    });
}

#[test]
fn hessian_vector_products_are_the_rows_times_v() {
    let mut rng = Rng(5);
    for x in points(&mut rng, 32, 24, -1.0, 1.0) {
        let args = chain::Args { x: words(&x) };
        let v: [f32; 24] = std::array::from_fn(|_| rng.uniform(-1.0, 1.0));
        let (_, _, h) = chain::value_grad_hessian(&args);
        let hv = chain::hvp(&args, &chain::Grad { x: v });
        let want: Vec<f64> = (0..24)
            .map(|i| (0..24).map(|j| h[i][j] as f64 * v[j] as f64).sum())
            .collect();
        let got: Vec<f64> = hv.x.iter().map(|w| *w as f64).collect();
        assert!(rel_error(&got, &want, 1e-3) < 1e-4, "{got:?}\n{want:?}");
    }
}
