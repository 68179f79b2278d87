//! What the examples share besides their problems: the command line (`--quick`, `--out DIR`,
//! positional arguments) and a curve plotted on a log scale to an SVG file.
#![allow(dead_code)]

use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// An example's command line.
pub struct Options {
    /// `--quick`: the short run CI makes.
    pub quick: bool,
    /// `--out DIR`: where plots and other files go (`target/plots` by default).
    pub out: PathBuf,
    /// Arguments that are no flag, in order.
    pub positional: Vec<String>,
}

/// The command line of the example `name` (unknown flags are reported and ignored).
pub fn options(name: &str) -> Options {
    let mut o = Options {
        quick: false,
        out: PathBuf::from("target/plots"),
        positional: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--out" => o.out = args.next().map_or(o.out, PathBuf::from),
            other if !other.starts_with("--") => o.positional.push(other.to_string()),
            other => eprintln!("{name}: ignoring unknown argument {other}"),
        }
    }
    o
}

/// Writes `curve` (x, y > 0) on a log scale to `dir/file`, a dot at every point if `dots`,
/// and with a `goal` the line it must reach, labelled.
pub fn log_plot(
    dir: &Path,
    file: &str,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    curve: &[(u32, f64)],
    dots: bool,
    goal: Option<f64>,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(file);
    let curve: Vec<(u32, f64)> = curve.iter().map(|&(x, y)| (x, y.max(1e-30))).collect();
    {
        let root = SVGBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let last = curve.last().map_or(1, |c| c.0.max(1));
        let ys = || curve.iter().map(|c| c.1).chain(goal);
        let lo = ys().fold(f64::MAX, f64::min) * 0.5;
        let hi = ys().fold(0.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0u32..last, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()?;
        chart
            .draw_series(LineSeries::new(curve.iter().copied(), &BLUE))?
            .label(y_desc)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        if dots {
            chart.draw_series(curve.iter().map(|&p| Circle::new(p, 3, BLUE.filled())))?;
        }
        if let Some(goal) = goal {
            chart
                .draw_series(LineSeries::new([(0, goal), (last, goal)], &RED))?
                .label("goal")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            chart
                .configure_series_labels()
                .background_style(WHITE)
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
    }
    Ok(path)
}
