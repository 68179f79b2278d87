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

#[path = "common/cli.rs"]
mod cli;
#[path = "common/mesh.rs"]
mod mesh;
use mesh::{Deformation, norm, sub, write_obj};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = cli::options("mesh");
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
    let plot_path = cli::log_plot(
        &o.out,
        "mesh_cost.svg",
        "icosphere to target shape, Levenberg-Marquardt",
        ("iteration", "cost"),
        &cost_curve(&summary),
        true,
        None,
    )?;
    println!("largest distance from the target shape: {off:.2e}");
    println!("deformed mesh: {}", obj.display());
    println!("cost per iteration: {}", plot_path.display());
    if !(summary.final_cost <= 1e-6 * summary.initial_cost && off < 1e-2) {
        return Err("the mesh did not reach its target shape".into());
    }
    Ok(())
}

/// The cost before the first iteration and after each.
fn cost_curve(summary: &gradfuse::Summary) -> Vec<(u32, f64)> {
    std::iter::once((0, summary.initial_cost))
        .chain(summary.iterations.iter().map(|r| (r.iteration, r.new_cost)))
        .collect()
}
