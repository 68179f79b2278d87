//! Mesh deformation by nonlinear least squares on the device: an icosphere (163,842
//! vertices at full size) deformed into a bumpy target shape by Levenberg–Marquardt over
//! every vertex at once. Two residual terms read the vertices by index: each edge's length
//! against the target's, and each edge's bending (the midpoint of the edge against the
//! midpoint of the two vertices across it, a second difference) against the target's. One
//! vertex is held fixed (the gauge). Writes the result as an OBJ file and the cost per
//! iteration as an SVG plot, and checks that the result is the target.
//!
//! Run: `cargo run --release --example mesh` (`--quick` for a small sphere, as CI does;
//! `--out DIR` for where the files go, `target/plots` by default).

use gradfuse::{Device, LevenbergMarquardt, Loss, Problem, Source, differentiable};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

#[path = "common/mesh.rs"]
mod mesh;
use mesh::{edges_with_wings, icosphere, write_obj};

/// The length of the edge from `p` to `q` against the target's.
#[differentiable]
pub fn edge_length(p: [f32; 3], q: [f32; 3], #[constant] target: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    (dx * dx + dy * dy + dz * dz).sqrt() - target
}

/// The bending across the edge `p q` whose faces' other vertices are `a` and `b`: the
/// edge's midpoint against theirs, against the target's, weighted.
#[differentiable]
pub fn bending(
    p: [f32; 3],
    q: [f32; 3],
    a: [f32; 3],
    b: [f32; 3],
    #[constant] target: [f32; 3],
) -> [f32; 3] {
    let mut r = [0.0; 3];
    for i in 0..3 {
        r[i] = 0.5 * (0.5 * (p[i] + q[i]) - 0.5 * (a[i] + b[i]) - target[i]);
    }
    r
}

/// The target: the sphere pushed out and in by smooth bumps.
fn target_of(s: [f32; 3]) -> [f32; 3] {
    let bump = (3.0 * s[0]).sin() * (3.0 * s[1]).sin() * (3.0 * s[2]).sin();
    let radius = 1.0 + 0.25 * bump + 0.15 * s[2] * s[2];
    s.map(|x| x * radius)
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn norm(a: [f32; 3]) -> f32 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

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
    let (sphere, faces) = icosphere(levels);
    let wings = edges_with_wings(&faces);
    let target: Vec<[f32; 3]> = sphere.iter().map(|&s| target_of(s)).collect();
    let corner = |w: &[u32; 4], k: usize| target[w[k] as usize];
    let lengths: Vec<f32> = wings
        .iter()
        .map(|w| norm(sub(corner(w, 1), corner(w, 0))))
        .collect();
    let bends: Vec<[f32; 3]> = wings
        .iter()
        .map(|w| {
            let mid =
                |i: usize, j: usize| [0, 1, 2].map(|c| 0.5 * (corner(w, i)[c] + corner(w, j)[c]));
            sub(mid(0, 1), mid(2, 3))
        })
        .collect();
    println!(
        "icosphere: {} vertices, {} edges; {} unknowns",
        sphere.len(),
        wings.len(),
        3 * (sphere.len() - 1)
    );

    let n = sphere.len();
    let column = |k: usize| wings.iter().map(|w| w[k]).collect::<Vec<u32>>();
    let vertices = device.buffer(&sphere)?;
    let index: Vec<gradfuse::Index> = (0..4)
        .map(|k| device.index(&column(k), n))
        .collect::<Result<_, _>>()?;
    let (lengths, bends) = (device.buffer(&lengths)?, device.buffer(&bends)?);
    let mut problem = Problem::new(&device);
    let block = problem.add_block(&vertices)?;
    // Vertex 0 is where the target is (a pole of the sphere, on the z axis): held there.
    problem.hold_rows(block, &[0])?;
    let gather = |k: usize| Source::Gather(&vertices, &index[k]);
    let lengths_term = edge_length::Sources {
        p: gather(0),
        q: gather(1),
        target: Source::Each(&lengths),
    };
    problem.add_term(edge_length::kernel(&device), lengths_term, Loss::Squared)?;
    let bending_term = bending::Sources {
        p: gather(0),
        q: gather(1),
        a: gather(2),
        b: gather(3),
        target: Source::Each(&bends),
    };
    problem.add_term(bending::kernel(&device), bending_term, Loss::Squared)?;
    // The sphere's vertex 0 is not on the z axis: move the target so they coincide there.
    let shift = sub(sphere[0], target[0]);
    let target: Vec<[f32; 3]> = target
        .iter()
        .map(|t| [t[0] + shift[0], t[1] + shift[1], t[2] + shift[2]])
        .collect();

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

    let result = device.read(&vertices)?;
    let off = result
        .iter()
        .zip(&target)
        .map(|(r, t)| norm(sub(*r, *t)))
        .fold(0.0f32, f32::max);
    std::fs::create_dir_all(&o.out)?;
    let obj = o.out.join("mesh.obj");
    write_obj(&obj, &result, &faces)?;
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
