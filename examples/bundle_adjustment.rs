//! Bundle adjustment by sparse Levenberg–Marquardt on the device, in the BAL format (Bundle
//! Adjustment in the Large: Snavely cameras of 9 parameters, angle-axis rotation,
//! translation, focal length and two radial distortion terms; 3-D points; observations in
//! pixels). Each residual reads one camera and one point by index.
//!
//! Without arguments it makes a synthetic problem (cameras around a cloud of points, each
//! point seen by several cameras, observations with 0.5 px of noise, the cameras and points
//! then perturbed), holds camera 0 and point 0 (the gauge) and solves it back: the final
//! reprojection error must reach the one of the true scene. Given the path of a BAL text file
//! (for example `problem-49-7776-pre.txt` from grail.cs.washington.edu/projects/bal), it
//! solves that instead, with a Huber loss of 1 px. Writes the cost per iteration as an SVG plot.
//!
//! Run: `cargo run --release --example bundle_adjustment [-- FILE]` (`--quick` for a small
//! synthetic problem, as CI does; `--out DIR` for the plot, `target/plots` by default).

use gradfuse::{Device, LevenbergMarquardt, Loss, Summary};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[path = "common/bal.rs"]
mod bal;
#[path = "common/cli.rs"]
mod cli;
use bal::{Bal, BalBuffers};

/// A solve's summary, or the cost where the unknowns are.
enum Outcome {
    Solved(Summary),
    Cost(f64),
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = cli::options("bundle_adjustment");
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let (start, truth, loss) = match o.positional.first().map(PathBuf::from) {
        Some(path) => (Bal::read(&path)?, None, Loss::Huber(1.0)),
        None => {
            let (cameras, points, per_point) = if o.quick {
                (8, 500, 4)
            } else {
                (64, 20_000, 6)
            };
            let (start, truth) = Bal::synthetic(cameras, points, per_point, 0.5, 7);
            (start, Some(truth), Loss::Squared)
        }
    };
    println!(
        "{} cameras, {} points, {} observations",
        start.cameras.len(),
        start.points.len(),
        start.observed.len()
    );
    let truth_cost = match &truth {
        Some(t) => match solve(&device, t, loss, true, 0)? {
            Outcome::Cost(c) => Some(c),
            Outcome::Solved(s) => Some(s.initial_cost),
        },
        None => None,
    };
    let Outcome::Solved(summary) = solve(&device, &start, loss, truth.is_some(), 100)? else {
        return Err("a solve of 100 iterations returned no summary".into());
    };
    for r in &summary.iterations {
        println!("{r}");
    }
    println!("{summary}");
    let rms = |cost: f64| (2.0 * cost / start.observed.len() as f64).sqrt();
    println!(
        "RMS reprojection error: {:.4} px -> {:.4} px",
        rms(summary.initial_cost),
        rms(summary.final_cost)
    );
    let curve: Vec<(u32, f64)> = std::iter::once((0, summary.initial_cost))
        .chain(summary.iterations.iter().map(|r| (r.iteration, r.new_cost)))
        .collect();
    let path = cli::log_plot(
        &o.out,
        "bundle_adjustment_cost.svg",
        "bundle adjustment, Levenberg-Marquardt",
        ("iteration", "cost"),
        &curve,
        true,
        None,
    )?;
    println!("cost per iteration: {}", path.display());
    if let Some(truth_cost) = truth_cost {
        println!(
            "the true scene's RMS reprojection error: {:.4} px",
            rms(truth_cost)
        );
        // The least-squares fit is at least as good as the truth that made the noise.
        if summary.final_cost > truth_cost * 1.001 {
            return Err("the solve did not reach the true scene's reprojection error".into());
        }
    }
    Ok(())
}

/// Solves `bal` from its cameras and points (`gauge`: camera 0 and point 0 held) with at
/// most `iterations` iterations; with none, only its cost where it is.
fn solve(
    device: &Device,
    bal: &Bal,
    loss: Loss,
    gauge: bool,
    iterations: u32,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let buffers = BalBuffers::new(device, bal)?;
    let (problem, points) = buffers.problem(device, loss, gauge)?;
    if iterations == 0 {
        return Ok(Outcome::Cost(problem.cost()?));
    }
    // CG on the cameras' Schur complement, the points eliminated (Ceres' ITERATIVE_SCHUR;
    // BENCHMARKS.md measures it against CG on every unknown).
    let options = LevenbergMarquardt {
        max_iterations: iterations,
        eliminate: Some(points),
        ..LevenbergMarquardt::default()
    };
    let bar = ProgressBar::new(u64::from(iterations)).with_style(
        ProgressStyle::with_template("{bar:40} iteration {pos}, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let summary = options.solve_with(&problem, |r| {
        bar.set_position(u64::from(r.iteration));
        bar.set_message(format!(
            "cost {:.4e}, {} CG iterations",
            r.new_cost, r.cg_iterations
        ));
    })?;
    bar.finish_and_clear();
    Ok(Outcome::Solved(summary))
}
