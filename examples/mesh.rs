//! Mesh deformation by nonlinear least squares on the device: an icosphere (163,842
//! vertices at full size) deformed into a bumpy target shape by Levenberg–Marquardt over
//! every vertex at once. Three residual terms read the vertices by index: each edge's length
//! against the target's; each edge's bending (the midpoint of the edge against the midpoint
//! of the two vertices across it, a second difference) against the target's; and markers,
//! one vertex in 16 against where the target has it (the shape's smooth modes are otherwise
//! too ill-conditioned for CG in f32 on a large mesh). One vertex is held fixed. Writes the result as an OBJ file and the cost per
//! iteration as an SVG plot, and checks that the result is the target.
//!
//! Run: `cargo run --release --example mesh` (`--quick` for a small sphere, as CI does;
//! `--out DIR` for where the files go, `target/plots` by default).

use gradfuse::{Device, LevenbergMarquardt};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

#[path = "common/mesh.rs"]
mod mesh;
use mesh::{Deformation, norm, sub, write_obj};

struct Options {
    quick: bool,
    out: PathBuf,
}

fn options() -> Options {
    let mut o = Options {
        quick: false,
        out: PathBuf::from("target/plots"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--out" => o.out = args.next().map_or(o.out, PathBuf::from),
            other => eprintln!("mesh: ignoring unknown argument {other}"),
        }
    }
    o
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = options();
    let levels = if o.quick { 4 } else { 7 };
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let mesh = Deformation::new(&device, levels)?;
    println!(
        "icosphere: {} vertices, {} edges; {} unknowns",
        mesh.sphere.len(),
        mesh.edges,
        3 * (mesh.sphere.len() - 1)
    );
    let problem = mesh.problem(&device)?;
    let options = LevenbergMarquardt {
        max_iterations: 100,
        ..LevenbergMarquardt::default()
    };
    let bar = ProgressBar::new(u64::from(options.max_iterations)).with_style(
        ProgressStyle::with_template("{bar:40} iteration {pos}, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let summary = options.solve_with(&problem, |r| {
        bar.set_position(u64::from(r.iteration));
        bar.set_message(format!(
            "cost {:.3e}, {} CG iterations, {:.0} ms",
            r.new_cost,
            r.cg_iterations,
            r.time.as_secs_f64() * 1e3
        ));
    })?;
    bar.finish_and_clear();
    for r in &summary.iterations {
        println!("{r}");
    }
    println!("{summary}");

    let result = device.read(&mesh.vertices)?;
    let off = result
        .iter()
        .zip(&mesh.target)
        .map(|(r, t)| norm(sub(*r, *t)))
        .fold(0.0f32, f32::max);
    std::fs::create_dir_all(&o.out)?;
    let obj = o.out.join("mesh.obj");
    write_obj(&obj, &result, &mesh.faces)?;
    let plot_path = plot(&o.out, &summary)?;
    println!("largest distance from the target shape: {off:.2e}");
    println!("deformed mesh: {}", obj.display());
    println!("cost per iteration: {}", plot_path.display());
    if !(summary.final_cost <= 1e-6 * summary.initial_cost && off < 1e-2) {
        return Err("the mesh did not reach its target shape".into());
    }
    Ok(())
}

/// Writes the cost per iteration (log scale) to `dir/mesh_cost.svg`.
fn plot(dir: &Path, summary: &gradfuse::Summary) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let path = dir.join("mesh_cost.svg");
    let curve: Vec<(u32, f64)> = std::iter::once((0, summary.initial_cost))
        .chain(summary.iterations.iter().map(|r| (r.iteration, r.new_cost)))
        .map(|(i, c)| (i, c.max(1e-30)))
        .collect();
    {
        let root = SVGBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let last = curve.last().map_or(1, |c| c.0.max(1));
        let lo = curve.iter().map(|c| c.1).fold(f64::MAX, f64::min) * 0.5;
        let hi = curve.iter().map(|c| c.1).fold(0.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "icosphere to target shape, Levenberg-Marquardt",
                ("sans-serif", 20),
            )
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
