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
use plotters::prelude::*;
use std::path::{Path, PathBuf};

#[path = "common/bal.rs"]
mod bal;
use bal::{Bal, BalBuffers};

/// A solve's summary, or the cost where the unknowns are.
enum Outcome {
    Solved(Summary),
    Cost(f64),
}

struct Options {
    quick: bool,
    file: Option<PathBuf>,
    out: PathBuf,
}

fn options() -> Options {
    let mut o = Options {
        quick: false,
        file: None,
        out: PathBuf::from("target/plots"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--out" => o.out = args.next().map_or(o.out, PathBuf::from),
            other if !other.starts_with("--") => o.file = Some(PathBuf::from(other)),
            other => eprintln!("bundle_adjustment: ignoring unknown argument {other}"),
        }
    }
    o
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = options();
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let (start, truth, loss) = match &o.file {
        Some(path) => (Bal::read(path)?, None, Loss::Huber(1.0)),
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
    let path = plot(&o.out, &summary)?;
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
    let problem = buffers.problem(device, loss, gauge)?;
    if iterations == 0 {
        return Ok(Outcome::Cost(problem.cost()?));
    }
    let options = LevenbergMarquardt {
        max_iterations: iterations,
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

/// Writes the cost per iteration (log scale) to `dir/bundle_adjustment_cost.svg`.
fn plot(dir: &Path, summary: &Summary) -> Result<PathBuf, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("bundle_adjustment_cost.svg");
    let curve: Vec<(u32, f64)> = std::iter::once((0, summary.initial_cost))
        .chain(summary.iterations.iter().map(|r| (r.iteration, r.new_cost)))
        .collect();
    {
        let root = SVGBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let last = curve.last().map_or(1, |c| c.0.max(1));
        let lo = curve.iter().map(|c| c.1).fold(f64::MAX, f64::min) * 0.5;
        let hi = curve.iter().map(|c| c.1).fold(0.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(&root)
            .caption("bundle adjustment, Levenberg-Marquardt", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0u32..last, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("iteration")
            .y_desc("cost")
            .draw()?;
        chart.draw_series(LineSeries::new(curve.iter().copied(), &BLUE))?;
        chart.draw_series(curve.iter().map(|&p| Circle::new(p, 3, BLUE.filled())))?;
        root.present()?;
    }
    Ok(path)
}
