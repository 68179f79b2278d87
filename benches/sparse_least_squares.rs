//! Sparse Levenberg–Marquardt on the two examples' problems at three sizes each: the mesh
//! deformation (icosphere subdivided 5, 6, 7 times: 10k to 164k vertices) and synthetic
//! bundle adjustment (16 to 64 cameras, 5k to 80k points, 6 observations a point). Per
//! problem: time to convergence, iterations, CG iterations, time per LM and per CG
//! iteration, the same solve on the CPU device (the smaller sizes), and a CG iteration's wall
//! time against the GPU time of its passes (timestamps around each).
//!
//! `cargo bench --bench sparse_least_squares`, or `-- --quick` (the smallest problems: CI runs
//! it so the bench cannot rot; lavapipe's numbers only show that it runs). Set
//! GRADFUSE_BENCH_OUT=path to also write the tables to a file.

use gradfuse::{Device, Error, LevenbergMarquardt, Loss, Problem, Summary, differentiable};
use std::fmt::Write as _;
use std::time::Duration;

#[path = "../examples/common/bal.rs"]
mod bal;
#[path = "../examples/common/mesh.rs"]
mod mesh;

use bal::{Bal, BalBuffers};
use mesh::Deformation;

/// `uᵀ r(camera, point)` for the bundle's residual `r`: its adjoint kernel computes one
/// residual's `Jᵀ·u` from the arguments, the alternative to reading a stored block.
#[differentiable]
pub fn reprojection_seeded(
    camera: [f32; 9],
    point: [f32; 3],
    #[constant] observed: [f32; 2],
    #[constant] u: [f32; 2],
) -> f32 {
    let r = bal::reprojection(camera, point, observed);
    u[0] * r[0] + u[1] * r[1]
}

/// GPU ms per launch of `spec` over `n` elements (the median of 20 timed launches) on
/// plausible words: every argument, tangent and seed near 0.5, so every element takes the
/// same (rotating) branch.
fn kernel_ms(device: &Device, spec: &'static gradfuse::KernelSpec, n: usize) -> Result<f64, Error> {
    let words = n * spec.input_words as usize;
    let input: Vec<f32> = (0..words)
        .map(|i| 0.4 + 0.2 * ((i * 7919) % 101) as f32 / 101.0)
        .collect();
    let mut t: Vec<f64> = device
        .time_kernel(spec, &input, 20)?
        .iter()
        .map(|k| ms(k.main + k.reduce))
        .collect();
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// The row comparing a bundle's `J·v` and `Jᵀ·u` from stored blocks (GPU ms per CG
/// iteration) with the tangent and adjoint kernels that would compute them from the
/// arguments, on arguments already gathered (a lower bound for those kernels).
fn products_row(
    device: &Device,
    case: Case,
    passes: &[(&'static str, Duration)],
) -> Result<String, Error> {
    let Case::Bundle {
        points,
        schur: false,
        ..
    } = case
    else {
        return Ok(String::new());
    };
    let residuals = points * 6;
    let pass = |label: &str| {
        passes
            .iter()
            .find(|p| p.0 == label)
            .map_or(f64::NAN, |p| ms(p.1))
    };
    let (jv, jtu) = (pass("J·v"), pass("Jᵀ·u"));
    let tangent = kernel_ms(device, &bal::reprojection::TANGENT_KERNEL, residuals)?;
    let adjoint = kernel_ms(device, &reprojection_seeded::ADJOINT_KERNEL, residuals)?;
    Ok(format!(
        "| {} | {residuals} | {jv:.4} | {tangent:.4} | {:.2} | {jtu:.4} | {adjoint:.4} | {:.2} |\n",
        case.name(),
        tangent / jv,
        adjoint / jtu
    ))
}

/// A problem of the bench, made anew for every solve (a solve moves its blocks).
#[derive(Clone, Copy)]
enum Case {
    Mesh {
        levels: u32,
    },
    /// `schur`: CG on the cameras' Schur complement, the points eliminated.
    Bundle {
        cameras: usize,
        points: usize,
        schur: bool,
    },
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::Mesh { levels } => {
                let v = 10 * 4usize.pow(levels) + 2;
                format!("mesh, {v} vertices")
            }
            Case::Bundle {
                cameras,
                points,
                schur,
            } => {
                let how = if schur { ", Schur" } else { "" };
                format!("bundle, {cameras} cameras, {points} points{how}")
            }
        }
    }

    /// Runs `f` on the case's problem on `device`, with `options` for it (the block to
    /// eliminate set).
    fn with_problem<R>(
        self,
        device: &Device,
        options: &LevenbergMarquardt,
        f: impl FnOnce(&Problem<'_>, &LevenbergMarquardt) -> Result<R, Error>,
    ) -> Result<R, Error> {
        match self {
            Case::Mesh { levels } => {
                let m = Deformation::new(device, levels)?;
                f(&m.problem(device)?, options)
            }
            Case::Bundle {
                cameras,
                points,
                schur,
            } => {
                let (start, _) = Bal::synthetic(cameras, points, 6, 0.5, 7);
                let b = BalBuffers::new(device, &start)?;
                let (problem, points) = b.problem(device, Loss::Squared, true)?;
                let options = LevenbergMarquardt {
                    eliminate: schur.then_some(points),
                    ..*options
                };
                f(&problem, &options)
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One solve's row: size, time, iterations, CG iterations, per LM and per CG iteration.
fn solve_row(
    device: &Device,
    case: Case,
    options: &LevenbergMarquardt,
) -> Result<(Summary, String), Error> {
    let s = case.with_problem(device, options, |p, o| o.solve(p))?;
    // On a GPU the first solve of a problem also compiles its pipelines: the row is the
    // second, as a user solving again (a frame, a new scene) pays it; the first is noted.
    let (s, first) = if device.is_gpu() {
        let again = case.with_problem(device, options, |p, o| o.solve(p))?;
        (again, format!(" (first {:.0})", ms(s.time)))
    } else {
        (s, String::new())
    };
    let lm = s.iterations.len().max(1) as f64;
    let row = format!(
        "| {} | {} | {} | {:.1}{first} | {} ({} accepted) | {} | {:.2} | {:.3} | {:.3e} -> {:.3e} | {:?} |",
        case.name(),
        s.unknowns,
        s.residuals,
        ms(s.time),
        s.iterations.len(),
        s.successful_steps(),
        s.cg_iterations(),
        ms(s.time) / lm,
        ms(s.time) / s.cg_iterations().max(1) as f64,
        s.initial_cost,
        s.final_cost,
        s.termination
    );
    Ok((s, row))
}

fn main() -> Result<(), Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    let device = Device::auto()?;
    let cases: Vec<Case> = if quick {
        vec![
            Case::Mesh { levels: 3 },
            Case::Bundle {
                cameras: 8,
                points: 300,
                schur: false,
            },
            Case::Bundle {
                cameras: 8,
                points: 300,
                schur: true,
            },
        ]
    } else {
        vec![
            Case::Mesh { levels: 5 },
            Case::Mesh { levels: 6 },
            Case::Mesh { levels: 7 },
            Case::Bundle {
                cameras: 16,
                points: 5_000,
                schur: false,
            },
            Case::Bundle {
                cameras: 16,
                points: 5_000,
                schur: true,
            },
            Case::Bundle {
                cameras: 32,
                points: 20_000,
                schur: false,
            },
            Case::Bundle {
                cameras: 32,
                points: 20_000,
                schur: true,
            },
            Case::Bundle {
                cameras: 64,
                points: 80_000,
                schur: false,
            },
            Case::Bundle {
                cameras: 64,
                points: 80_000,
                schur: true,
            },
        ]
    };
    // The CPU device solves the problems up to this many unknowns.
    let cpu_limit = if quick { usize::MAX } else { 130_000 };
    let options = LevenbergMarquardt {
        max_iterations: 100,
        ..LevenbergMarquardt::default()
    };
    let cpu = Device::cpu();
    let mut out = String::new();
    let _ = writeln!(out, "device: {}\n", device.describe());
    let _ = writeln!(
        out,
        "One CG iteration: wall time (20 iterations, a submission each as a solve runs them, then a read; and all 20 in one submission) against the GPU time of its passes\n\n| problem | wall ms | passes' GPU ms | wall / GPU | wall ms, one submission | its / GPU | kinds of pass | the three longest (GPU ms) |\n|---|---|---|---|---|---|---|---|"
    );
    let mut products = String::from(
        "\nJ·v and Jᵀ·u from the stored Jacobian blocks (GPU ms per CG iteration) against the tangent kernel (J·v) and the adjoint kernel of uᵀr (Jᵀ·u) computing them from the arguments, on arguments already gathered\n\n| problem | residuals | J·v, blocks | tangent kernel | kernel / blocks | Jᵀ·u, blocks | adjoint kernel | kernel / blocks |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut evaluations = String::from(
        "\nAn outer iteration's evaluation (residuals, Jacobian blocks, Jᵀr, block diagonal of JᵀJ, cost) and CG's start (preconditioner), with a read\n\n| problem | wall ms | passes' GPU ms | wall / GPU | the three longest (GPU ms) |\n|---|---|---|---|---|\n",
    );
    for &case in &cases {
        let t = case.with_problem(&device, &options, |p, o| o.time_cg(p, 20))?;
        let gpu: Duration = t.evaluation_passes.iter().map(|p| p.1).sum();
        let _ = writeln!(
            evaluations,
            "| {} | {:.3} | {:.3} | {:.2} | {} |",
            case.name(),
            ms(t.evaluation),
            ms(gpu),
            ms(t.evaluation) / ms(gpu).max(1e-9),
            longest(&t.evaluation_passes)
        );
        products.push_str(&products_row(&device, case, &t.passes)?);
        let gpu: Duration = t.passes.iter().map(|p| p.1).sum();
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} | {:.2} | {:.3} | {:.2} | {} | {} |",
            case.name(),
            ms(t.wall),
            ms(gpu),
            ms(t.wall) / ms(gpu).max(1e-9),
            ms(t.wall_one_submission),
            ms(t.wall_one_submission) / ms(gpu).max(1e-9),
            t.passes.len(),
            longest(&t.passes)
        );
    }
    out.push_str(&evaluations);
    out.push_str(&products);
    eprint!("{out}");
    let header = "| problem | unknowns | residual words | ms to stop | iterations | CG iterations | ms per iteration | ms per CG iteration | cost | stop |\n|---|---|---|---|---|---|---|---|---|---|";
    let _ = writeln!(
        out,
        "\nSolves on the device (wall clock, reads included)\n\n{header}"
    );
    let mut cpu_rows = Vec::new();
    for &case in &cases {
        let (s, row) = solve_row(&device, case, &options)?;
        let _ = writeln!(out, "{row}");
        eprintln!("{row}");
        if s.unknowns <= cpu_limit {
            let (c, row) = solve_row(&cpu, case, &options)?;
            cpu_rows.push(format!("{row} {:.1}× |", ms(c.time) / ms(s.time)));
        }
    }
    let _ = writeln!(
        out,
        "\nThe same solves on the CPU device ({} rayon threads); last column: CPU device time / device time\n\n{} CPU / device |\n{}---|",
        rayon_threads(),
        header.lines().next().unwrap_or_default(),
        header.lines().nth(1).unwrap_or_default()
    );
    for r in &cpu_rows {
        let _ = writeln!(out, "{r}");
    }
    print!("{out}");
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT")
        && let Err(e) = std::fs::write(&path, &out)
    {
        eprintln!("could not write {path}: {e}");
    }
    Ok(())
}

/// The three longest passes, with their GPU ms.
fn longest(passes: &[(&'static str, Duration)]) -> String {
    let mut sorted = passes.to_vec();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.1));
    let top: Vec<String> = sorted
        .iter()
        .take(3)
        .map(|(l, d)| format!("{l} {:.3}", ms(*d)))
        .collect();
    top.join(", ")
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
