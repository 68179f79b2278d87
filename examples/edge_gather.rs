//! The edge energy of an icosphere with its vertices gathered by index: each edge's residual
//! reads its two vertices from one vertex block, and the gradient is scattered back per
//! vertex (summed in a fixed order: the same bits on every run). The gradient is checked
//! against the CPU device, then the sphere, squashed flat, relaxes back to its rest lengths
//! by gradient descent with momentum, resident on the device. Writes the energy curve to an
//! SVG file.
//!
//! Run: `cargo run --release --example edge_gather` (`--quick` for a small sphere, as CI
//! does; `--out DIR` for where the plot goes, `target/plots` by default).

use gradfuse::{Device, Momentum, Source, differentiable};
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/cli.rs"]
mod cli;
#[path = "common/mesh.rs"]
mod mesh;
use mesh::{edges, icosphere};

/// Half the squared stretch of the edge from `p` to `q` against its rest length.
#[differentiable]
pub fn edge_energy(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    let stretch = (dx * dx + dy * dy + dz * dz).sqrt() - rest;
    0.5 * stretch * stretch
}

fn length(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = cli::options("edge_gather");
    let (levels, steps) = if o.quick { (4, 300) } else { (6, 3000) };
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let (sphere, faces) = icosphere(levels);
    let (p_idx, q_idx) = edges(&faces);
    let rest: Vec<f32> = p_idx
        .iter()
        .zip(&q_idx)
        .map(|(&a, &b)| length(sphere[a as usize], sphere[b as usize]))
        .collect();
    // Squashed to half its height: the edges' rest lengths pull it back into a sphere.
    let squashed: Vec<[f32; 3]> = sphere.iter().map(|p| [p[0], p[1], 0.5 * p[2]]).collect();
    println!("icosphere: {} vertices, {} edges", sphere.len(), rest.len());

    // The gradient per vertex on this device and on the CPU device: the same sums.
    let mut energies = Vec::new();
    let mut grads = Vec::new();
    for d in [&device, &Device::cpu()] {
        let (e, g) = energy_and_grad(d, &squashed, &p_idx, &q_idx, &rest)?;
        energies.push(e);
        grads.push(g);
    }
    let scale = grads[1]
        .iter()
        .flatten()
        .fold(0.0f32, |m, g| m.max(g.abs()));
    let worst = grads[0]
        .iter()
        .flatten()
        .zip(grads[1].iter().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "energy {:.6} ({:.6} on the CPU device); per-vertex gradient: largest difference \
         {worst:.2e} of {scale:.2e}",
        energies[0], energies[1]
    );
    if worst > 1e-4 * scale {
        return Err("the device's per-vertex gradient disagrees with the CPU's".into());
    }

    // Relaxation: launch and step recorded together, the energy read every few steps.
    let vertices = device.buffer(&squashed)?;
    let (pi, qi) = (
        device.index(&p_idx, sphere.len())?,
        device.index(&q_idx, sphere.len())?,
    );
    let rest_buf = device.buffer(&rest)?;
    let values = device.zeros::<f32>(rest.len())?;
    let grad = device.zeros::<[f32; 3]>(sphere.len())?;
    let kernel = edge_energy::kernel(&device);
    let mut sgd = Momentum::new(0.2);
    let every = 10;
    let bar = ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut curve = Vec::new();
    for chunk in 0..steps / every {
        let mut rec = device.record();
        for _ in 0..every {
            let sources = edge_energy::Sources {
                p: Source::Gather(&vertices, &pi),
                q: Source::Gather(&vertices, &qi),
                rest: Source::Each(&rest_buf),
            };
            let sinks = edge_energy::Sinks { p: &grad, q: &grad };
            kernel.value_and_grad_gathered(&mut rec, &sources, &values, &sinks)?;
            sgd.step(&mut rec, &vertices, &grad)?;
        }
        rec.submit()?;
        let energy: f32 = device.read(&values)?.iter().sum();
        let step = (chunk + 1) * every;
        curve.push((step as u32, energy.max(1e-12)));
        bar.set_position(step as u64);
        bar.set_message(format!("energy {energy:.3e}"));
    }
    bar.finish();
    let (first, last) = (energies[0], curve.last().map_or(energies[0], |c| c.1));
    println!("energy {first:.4e} -> {last:.4e} after {steps} steps");
    let curve: Vec<(u32, f64)> = curve.iter().map(|&(x, y)| (x, f64::from(y))).collect();
    let path = cli::log_plot(
        &o.out,
        "edge_gather_energy.svg",
        "icosphere edge energy, momentum descent",
        ("step", "energy"),
        &curve,
        false,
        None,
    )?;
    println!("energy curve: {}", path.display());
    if last >= 1e-2 * first {
        return Err("the relaxation did not reduce the energy a hundredfold".into());
    }
    Ok(())
}

/// The total energy and the per-vertex gradient from one gathered launch on `d`.
fn energy_and_grad(
    d: &Device,
    vertices: &[[f32; 3]],
    p: &[u32],
    q: &[u32],
    rest: &[f32],
) -> Result<(f32, Vec<[f32; 3]>), gradfuse::Error> {
    let v = d.buffer(vertices)?;
    let (pi, qi) = (d.index(p, vertices.len())?, d.index(q, vertices.len())?);
    let rest = d.buffer(rest)?;
    let values = d.zeros::<f32>(p.len())?;
    let grad = d.zeros::<[f32; 3]>(vertices.len())?;
    let mut rec = d.record();
    edge_energy::kernel(d).value_and_grad_gathered(
        &mut rec,
        &edge_energy::Sources {
            p: Source::Gather(&v, &pi),
            q: Source::Gather(&v, &qi),
            rest: Source::Each(&rest),
        },
        &values,
        &edge_energy::Sinks { p: &grad, q: &grad },
    )?;
    rec.submit()?;
    Ok((d.read(&values)?.iter().sum(), d.read(&grad)?))
}
