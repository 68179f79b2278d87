//! Sensitivities of many points: the Jacobians of a 3-link planar arm's hand position and
//! the Hessians of its distance to a target, over grids of joint angles, each grid one
//! launch. Draws two maps: the arm's manipulability `sqrt(det(J Jᵀ))` over the elbow and
//! wrist angles (where it vanishes, the arm is singular: it cannot move its hand in some
//! direction), and the smallest eigenvalue of the reach cost's Hessian over the shoulder
//! and elbow angles (where it is negative, Newton's method on the cost needs damping).
//! Checks the device's results against the CPU versions and central differences.
//!
//! Run: `cargo run --release --example jacobian` (add `--quick` for a short run, as CI
//! does; `--out DIR` for where the plot goes, `target/plots` by default).

#[path = "common/cli.rs"]
mod cli;
use gradfuse::{Device, differentiable};
use plotters::prelude::*;
use std::f32::consts::PI;
use std::time::Instant;

/// The hand of a planar arm with links of 1.0, 0.8 and 0.6 at joint angles `theta`
/// (each relative to the previous link).
#[differentiable]
pub fn hand(theta: [f32; 3]) -> [f32; 2] {
    let a1 = theta[0];
    let a2 = a1 + theta[1];
    let a3 = a2 + theta[2];
    [
        a1.cos() + 0.8 * a2.cos() + 0.6 * a3.cos(),
        a1.sin() + 0.8 * a2.sin() + 0.6 * a3.sin(),
    ]
}

/// Half the squared distance from the hand to `target`.
#[differentiable]
pub fn reach(theta: [f32; 3], #[constant] target: [f32; 2]) -> f32 {
    let a1 = theta[0];
    let a2 = a1 + theta[1];
    let a3 = a2 + theta[2];
    let x = a1.cos() + 0.8 * a2.cos() + 0.6 * a3.cos() - target[0];
    let y = a1.sin() + 0.8 * a2.sin() + 0.6 * a3.sin() - target[1];
    0.5 * (x * x + y * y)
}

/// The smallest eigenvalue of a symmetric 3 x 3 matrix (the trigonometric solution of its
/// characteristic cubic).
fn smallest_eigenvalue(h: &[[f32; 3]; 3]) -> f64 {
    let a = |i: usize, j: usize| h[i][j] as f64;
    let off = a(0, 1).powi(2) + a(0, 2).powi(2) + a(1, 2).powi(2);
    let q = (a(0, 0) + a(1, 1) + a(2, 2)) / 3.0;
    let p2 = (a(0, 0) - q).powi(2) + (a(1, 1) - q).powi(2) + (a(2, 2) - q).powi(2) + 2.0 * off;
    let p = (p2 / 6.0).sqrt();
    if p == 0.0 {
        return q;
    }
    let b = |i: usize, j: usize| (a(i, j) - if i == j { q } else { 0.0 }) / p;
    let det = b(0, 0) * (b(1, 1) * b(2, 2) - b(1, 2) * b(2, 1))
        - b(0, 1) * (b(1, 0) * b(2, 2) - b(1, 2) * b(2, 0))
        + b(0, 2) * (b(1, 0) * b(2, 1) - b(1, 1) * b(2, 0));
    let phi = (det / 2.0).clamp(-1.0, 1.0).acos() / 3.0;
    q + 2.0 * p * (phi + 2.0 * std::f64::consts::PI / 3.0).cos()
}

/// The angle of cell `k` of `n` over [-pi, pi).
fn angle(k: usize, n: usize) -> f32 {
    -PI + 2.0 * PI * (k as f32 + 0.5) / n as f32
}

/// Colour of `t` in [0, 1] (dark blue to yellow).
fn colour(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t) as u8;
    RGBColor(lerp(30.0, 250.0), lerp(20.0, 230.0), lerp(110.0, 40.0))
}

/// Draws `values` (an `n x n` grid, row-major by the first angle) as a heat map on `area`,
/// scaled from `lo` to `hi`: at most 128 x 128 cells (every `n / 128`-th point), which is
/// what a screen shows, not a million rectangles.
fn heat_map(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    values: &[f64],
    n: usize,
    (lo, hi): (f64, f64),
) -> Result<(), Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(-PI..PI, -PI..PI)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    let m = n.min(128);
    let stride = n / m;
    let cell = 2.0 * PI / m as f32;
    chart.draw_series((0..m * m).map(|k| {
        let (row, col) = ((k / m) * stride, (k % m) * stride);
        let (x, y) = (angle(row, n), angle(col, n));
        let c = colour((values[row * n + col] - lo) / (hi - lo));
        Rectangle::new(
            [
                (x - cell / 2.0, y - cell / 2.0),
                (x + cell / 2.0, y + cell / 2.0),
            ],
            c.filled(),
        )
    }))?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = cli::options("jacobian");
    let n = if opts.quick { 96 } else { 1024 };
    let device = Device::auto()?;
    println!("{} points per map on {}", n * n, device.describe());

    // Jacobians over (elbow, wrist); the shoulder angle does not change the manipulability.
    let arms: Vec<hand::Args> = (0..n * n)
        .map(|k| hand::Args {
            theta: [0.3, angle(k / n, n), angle(k % n, n)],
        })
        .collect();
    let t = Instant::now();
    let (_, jacobians) = hand::kernel(&device).value_and_jacobian(&arms)?;
    let jacobian_time = t.elapsed();
    let manipulability: Vec<f64> = jacobians
        .iter()
        .map(|j| {
            let (r0, r1) = (j[0].theta.map(f64::from), j[1].theta.map(f64::from));
            let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
            (dot(r0, r0) * dot(r1, r1) - dot(r0, r1).powi(2))
                .max(0.0)
                .sqrt()
        })
        .collect();

    // Hessians of the reach cost over (shoulder, elbow).
    let target = [1.2, 0.9];
    let poses: Vec<reach::Args> = (0..n * n)
        .map(|k| reach::Args {
            theta: [angle(k / n, n), angle(k % n, n), 0.5],
            target,
        })
        .collect();
    let t = Instant::now();
    let (_, _, hessians) = reach::kernel(&device).value_grad_hessian(&poses)?;
    let hessian_time = t.elapsed();
    let smallest: Vec<f64> = hessians.iter().map(smallest_eigenvalue).collect();
    let indefinite = smallest.iter().filter(|e| **e < 0.0).count();
    println!(
        "{} Jacobians in {:.1} ms, {} Hessians in {:.1} ms (launch, transfers included)",
        n * n,
        jacobian_time.as_secs_f64() * 1e3,
        n * n,
        hessian_time.as_secs_f64() * 1e3
    );
    println!(
        "manipulability from {:.3} to {:.3}; the reach cost's Hessian is indefinite at {:.1}% \
         of the poses",
        manipulability.iter().copied().fold(f64::MAX, f64::min),
        manipulability.iter().copied().fold(0.0, f64::max),
        100.0 * indefinite as f64 / (n * n) as f64
    );

    // The device against the CPU versions, and the Hessian against central differences of
    // the CPU gradient, at a sample of points.
    let (mut worst_j, mut worst_h, mut worst_fd) = (0.0f64, 0.0f64, 0.0f64);
    for k in (0..n * n).step_by((n * n / 200).max(1)) {
        let (_, j) = hand::value_and_jacobian(&arms[k]);
        for r in 0..2 {
            for i in 0..3 {
                worst_j = worst_j.max((j[r].theta[i] - jacobians[k][r].theta[i]).abs() as f64);
            }
        }
        let (_, _, h) = reach::value_grad_hessian(&poses[k]);
        for i in 0..3 {
            let step = 1e-2f32;
            let shifted = |s: f32| {
                let mut p = poses[k];
                p.theta[i] += s;
                reach::value_and_grad(&p).1.theta
            };
            let (gp, gm) = (shifted(step), shifted(-step));
            for c in 0..3 {
                worst_h = worst_h.max((h[i][c] - hessians[k][i][c]).abs() as f64);
                let fd = (gp[c] - gm[c]) as f64 / (2.0 * step as f64);
                worst_fd = worst_fd.max((fd - h[i][c] as f64).abs());
            }
        }
    }
    println!(
        "device vs CPU: Jacobians within {worst_j:.1e}, Hessians within {worst_h:.1e}; Hessians \
         vs central differences of the gradient (step 1e-2): within {worst_fd:.1e}"
    );

    std::fs::create_dir_all(&opts.out)?;
    let path = opts.out.join("jacobian.svg");
    {
        let root = SVGBackend::new(&path, (1100, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((1, 2));
        let hi = manipulability.iter().copied().fold(0.0, f64::max);
        heat_map(
            &panels[0],
            "manipulability sqrt(det(J J^T)) (dark: singular)",
            ("elbow angle", "wrist angle"),
            &manipulability,
            n,
            (0.0, hi),
        )?;
        let lo = smallest.iter().copied().fold(f64::MAX, f64::min);
        let top = smallest.iter().copied().fold(f64::MIN, f64::max);
        heat_map(
            &panels[1],
            &format!("smallest Hessian eigenvalue of the reach cost ({lo:.2} to {top:.2})"),
            ("shoulder angle", "elbow angle"),
            &smallest,
            n,
            (lo, top),
        )?;
        root.present()?;
    }
    println!("plot: {}", path.display());
    if worst_j > 1e-4 || worst_h > 1e-3 || worst_fd > 1e-2 {
        return Err("the device's derivatives disagree with the CPU's".into());
    }
    Ok(())
}
