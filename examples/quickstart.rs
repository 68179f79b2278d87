//! Annotate a function, read the WGSL gradfuse generated for it, and compute a million
//! gradients on the GPU (or on the CPU fallback), checked against the CPU reverse mode;
//! then the same launch from and into pinned memory, as a loop that launches every step
//! keeps its batch.
//!
//! Run: `cargo run --release --example quickstart`

use gradfuse::{Device, differentiable};
use std::time::{Duration, Instant};

/// The energy of a spring between mesh vertices `p` and `q` with rest length `rest`: the
/// per-edge term of a mesh-smoothing objective.
#[differentiable]
pub fn edge_energy(p: [f32; 3], q: [f32; 3], rest: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    let len = (dx * dx + dy * dy + dz * dz).sqrt();
    let stretch = len - rest;
    0.5 * stretch * stretch
}

/// A reproducible batch of edges (SplitMix64, no dependency).
fn edges(n: usize) -> Vec<edge_energy::Args> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    (0..n)
        .map(|_| edge_energy::Args {
            p: [next(), next(), next()],
            q: [next(), next(), next()],
            rest: 0.5 + 0.25 * next(),
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), gradfuse::Error> {
    println!("// The adjoint kernel gradfuse generated for `edge_energy`:\n");
    println!("{}", edge_energy::WGSL_ADJOINT);

    // One element on the CPU: the plain function and its reverse mode.
    let one = edge_energy::Args {
        p: [0.0, 0.0, 0.0],
        q: [1.0, 2.0, 2.0],
        rest: 2.0,
    };
    let (value, grad) = edge_energy::value_and_grad(&one);
    println!(
        "edge_energy{:?} = {value} (plain: {})",
        (one.p, one.q, one.rest),
        edge_energy(one.p, one.q, one.rest)
    );
    println!("gradient: {grad:?}\n");

    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let n = 1 << 20;
    let args = edges(n);
    let kernel = edge_energy::kernel(&device);

    let t = Instant::now();
    let (values, grads) = kernel.value_and_grad(&args)?;
    let first = t.elapsed();
    let t = Instant::now();
    let (values2, grads2) = kernel.value_and_grad(&args)?;
    let second = t.elapsed();
    assert!(
        values == values2 && grads == grads2,
        "two runs must give identical results"
    );

    // The same launch from and into pinned memory (page-locked host memory the GPU's copy
    // engines move with no copy by the CPU; ordinary memory where the device has none): how
    // a loop that launches every step keeps its batch.
    let mut pinned_args = device.pinned::<edge_energy::Args>(n)?;
    pinned_args.copy_from_slice(&args);
    let mut pinned_values = device.pinned::<f32>(n)?;
    let mut pinned_grads = device.pinned::<edge_energy::Grad>(n)?;
    kernel.value_and_grad_into(&pinned_args, &mut pinned_values, &mut pinned_grads)?;
    let t = Instant::now();
    kernel.value_and_grad_into(&pinned_args, &mut pinned_values, &mut pinned_grads)?;
    let pinned = t.elapsed();
    assert!(
        pinned_values[..] == values[..] && pinned_grads[..] == grads[..],
        "pinned memory must give the same results"
    );

    let cpu = Device::cpu();
    let t = Instant::now();
    let (cpu_values, cpu_grads) = edge_energy::kernel(&cpu).value_and_grad(&args)?;
    let cpu_time = t.elapsed();

    // Largest difference, relative to the larger of the value and 1 (values near zero are
    // compared absolutely).
    let rel = |a: f32, b: f32| ((a - b).abs() / a.abs().max(b.abs()).max(1.0)) as f64;
    let mut worst = 0.0f64;
    for i in 0..n {
        worst = worst.max(rel(values[i], cpu_values[i]));
        let (g, c) = (bytemuck_words(&grads[i]), bytemuck_words(&cpu_grads[i]));
        for k in 0..g.len() {
            worst = worst.max(rel(g[k], c[k]));
        }
    }
    println!("{n} edges, value and full gradient (7 partials each):");
    println!(
        "  {:<28} {:>9.2} ms (includes compiling the pipeline)",
        format!("{}, first call", short(&device)),
        ms(first)
    );
    println!(
        "  {:<28} {:>9.2} ms",
        format!("{}, second call", short(&device)),
        ms(second)
    );
    let from = if pinned_args.is_pinned() {
        "pinned memory"
    } else {
        "ordinary memory"
    };
    println!(
        "  {:<28} {:>9.2} ms",
        format!("{}, from {from}", short(&device)),
        ms(pinned)
    );
    println!("  {:<28} {:>9.2} ms", "CPU (rayon)", ms(cpu_time));
    println!("  largest difference from the CPU: {worst:.1e} (relative)");
    if !device.is_gpu() {
        println!("  (no GPU here: both runs used the CPU)");
    }
    if worst > 1e-4 {
        eprintln!("the device and the CPU disagree by {worst:e}");
        std::process::exit(1);
    }
    Ok(())
}

fn bytemuck_words(g: &edge_energy::Grad) -> &[f32] {
    gradfuse::bytemuck::cast_slice(std::slice::from_ref(g))
}

fn short(d: &Device) -> String {
    let s = d.describe();
    s.split(" (").next().unwrap_or(&s).to_string()
}
