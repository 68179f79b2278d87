//! A million independent minimizations of the 4-variable Rosenbrock function from
//! scattered starts, by batched damped Newton steps: each step one launch of the Hessian
//! kernel (value, gradient and 4 x 4 Hessian of every problem, forward-over-reverse) and
//! one of the value kernel at four points along every Newton direction (a backtracking line
//! search in one launch); the 4 x 4 solves run on the host.
//! Prints, and plots, the fraction of problems not yet converged after each step.
//!
//! Run: `cargo run --release --example newton` (add `--quick` for a short run, as CI does;
//! `--out DIR` for where the plot goes, `target/plots` by default; a number for the
//! problem count).

// The Cholesky factorization indexes rows and columns side by side.
#![allow(clippy::needless_range_loop)]

#[path = "common/cli.rs"]
mod cli;
use gradfuse::{Device, differentiable};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use std::time::Instant;

/// The extended Rosenbrock function in 4 variables: its global minimum is 0 at (1, 1, 1,
/// 1), and it has one local minimum (about 3.70, near x = (-0.78, 0.61, 0.38, 0.15)).
#[differentiable]
pub fn rosenbrock(x: [f32; 4]) -> f32 {
    let mut s = 0.0;
    for i in 0..3 {
        s += 100.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2);
    }
    s
}

/// A problem is solved when its gradient is this small (in the largest word), relative to
/// its value where that is above 1: at the local minimum (3.70) f32 cannot resolve a
/// gradient much smaller (a step it would take changes the value by less than an ulp).
const GRADIENT_TOLERANCE: f32 = 1e-3;

/// The step lengths tried along each Newton direction, longest first.
const STEPS: [f32; 4] = [1.0, 0.5, 0.25, 0.0625];

/// One problem's damped Newton state: the point, its value, and the damping `lambda` of
/// `(H + lambda I) d = -g`, lowered after a step that decreases the value and raised after
/// one that does not (Levenberg's rule, here for a Hessian).
#[derive(Clone, Copy)]
struct Problem {
    x: [f32; 4],
    value: f32,
    lambda: f32,
    converged: bool,
}

/// Solves `(h + lambda I) d = -g` by Cholesky, raising `lambda` until the matrix is
/// positive definite. Returns the step and the damping used.
fn damped_newton_step(h: &[[f32; 4]; 4], g: &[f32; 4], mut lambda: f32) -> ([f32; 4], f32) {
    loop {
        let mut l = [[0.0f64; 4]; 4];
        let mut ok = true;
        'rows: for i in 0..4 {
            for j in 0..=i {
                let mut s = h[i][j] as f64 + if i == j { lambda as f64 } else { 0.0 };
                for k in 0..j {
                    s -= l[i][k] * l[j][k];
                }
                if i == j {
                    if s <= 0.0 || !s.is_finite() {
                        ok = false;
                        break 'rows;
                    }
                    l[i][i] = s.sqrt();
                } else {
                    l[i][j] = s / l[j][j];
                }
            }
        }
        if ok {
            let mut y = [0.0f64; 4];
            for i in 0..4 {
                let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
                y[i] = (-g[i] as f64 - s) / l[i][i];
            }
            let mut d = [0.0f64; 4];
            for i in (0..4).rev() {
                let s: f64 = (i + 1..4).map(|k| l[k][i] * d[k]).sum();
                d[i] = (y[i] - s) / l[i][i];
            }
            return (d.map(|v| v as f32), lambda);
        }
        lambda = (lambda * 4.0).max(1e-3);
    }
}

/// Scattered starts in [-2, 2]^4 (SplitMix64, reproducible).
fn starts(n: usize) -> Vec<Problem> {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
    };
    (0..n)
        .map(|_| Problem {
            x: std::array::from_fn(|_| next()),
            value: f32::INFINITY,
            lambda: 1e-3,
            converged: false,
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = cli::options("newton");
    let n: usize = match opts.positional.first() {
        Some(a) => a.parse()?,
        None if opts.quick => 1 << 14,
        None => 1 << 20,
    };
    let max_steps = if opts.quick { 40 } else { 60 };
    let device = Device::auto()?;
    println!("{n} Rosenbrock minimizations on {}", device.describe());
    let kernel = rosenbrock::kernel(&device);
    let mut problems = starts(n);
    let bar = ProgressBar::new(max_steps as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} steps {msg}",
    )?);
    let mut curve = Vec::new();
    let (mut gpu_time, t0) = (0.0f64, Instant::now());
    for step in 0..max_steps {
        let args: Vec<rosenbrock::Args> = problems
            .iter()
            .map(|p| rosenbrock::Args { x: p.x })
            .collect();
        let t = Instant::now();
        let (values, grads, hessians) = kernel.value_grad_hessian(&args)?;
        gpu_time += t.elapsed().as_secs_f64();
        // Newton directions of the problems not yet solved, on the host; four candidate
        // points along each.
        let directions: Vec<([f32; 4], f32)> = problems
            .par_iter_mut()
            .enumerate()
            .map(|(k, p)| {
                p.value = values[k];
                let g = grads[k].x;
                let tolerance = GRADIENT_TOLERANCE * p.value.abs().max(1.0);
                p.converged = g.iter().all(|w| w.abs() < tolerance);
                if p.converged {
                    return ([0.0; 4], 0.0);
                }
                let (d, lambda) = damped_newton_step(&hessians[k], &g, p.lambda);
                p.lambda = lambda;
                (d, (0..4).map(|i| g[i] * d[i]).sum())
            })
            .collect();
        let unconverged = problems.iter().filter(|p| !p.converged).count();
        curve.push((step, unconverged as f64 / n as f64));
        bar.set_message(format!(
            "{:.4}% not converged",
            100.0 * unconverged as f64 / n as f64
        ));
        bar.inc(1);
        if unconverged == 0 {
            break;
        }
        let candidates: Vec<rosenbrock::Args> = problems
            .par_iter()
            .zip(&directions)
            .flat_map_iter(|(p, (d, _))| {
                STEPS.map(|a| rosenbrock::Args {
                    x: std::array::from_fn(|i| p.x[i] + a * d[i]),
                })
            })
            .collect();
        let t = Instant::now();
        let trial = kernel.value(&candidates)?;
        gpu_time += t.elapsed().as_secs_f64();
        // The longest step with a sufficient decrease (Armijo's rule); none: damp more.
        problems.par_iter_mut().enumerate().for_each(|(k, p)| {
            if p.converged {
                return;
            }
            let slope = directions[k].1;
            let accepted = (0..STEPS.len())
                .find(|&s| trial[4 * k + s] <= p.value + 1e-4 * STEPS[s] * slope.min(0.0));
            match accepted {
                Some(s) => {
                    p.x = candidates[4 * k + s].x;
                    if s == 0 {
                        p.lambda *= 0.25;
                    }
                }
                None => p.lambda = (p.lambda * 4.0).max(1e-3),
            }
        });
    }
    bar.finish();
    let at_global = problems.iter().filter(|p| p.value < 1e-6).count();
    let at_local = problems
        .iter()
        .filter(|p| (p.value - 3.70).abs() < 0.01)
        .count();
    let converged = problems.iter().filter(|p| p.converged).count();
    println!(
        "after {} steps: {:.3}% converged ({:.3}% at the global minimum 0, {:.3}% at the local \
         minimum 3.70); {:.2} s in all, {:.2} s in launches",
        curve.len(),
        100.0 * converged as f64 / n as f64,
        100.0 * at_global as f64 / n as f64,
        100.0 * at_local as f64 / n as f64,
        t0.elapsed().as_secs_f64(),
        gpu_time
    );
    for (step, frac) in curve.iter().step_by(5) {
        println!("  step {step:>3}: {:.4}% not converged", 100.0 * frac);
    }
    let plot = cli::log_plot(
        &opts.out,
        "newton.svg",
        &format!("Damped Newton on {n} Rosenbrock problems"),
        ("Newton step", "fraction not converged"),
        &curve,
        true,
        None,
    )?;
    println!("plot: {}", plot.display());
    if converged * 100 < n * 99 {
        return Err(format!("only {converged} of {n} problems converged").into());
    }
    Ok(())
}
