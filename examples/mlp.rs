//! Trains a 2-32-32-1 tanh network with Adam, on the device, to fit
//! `sin(3 x) cos(2 y)` on the square [-1, 1]²: the batch, the weights, their gradient and
//! Adam's moments stay on the device; each step is a `value_and_grad` launch (the weights'
//! gradient summed over the batch in a fixed order) and an Adam step recorded together, and
//! the host reads only the loss, every few steps. Writes the loss curve to an SVG file.
//!
//! Run: `cargo run --release --example mlp` (add `--quick` for a short run, as CI does;
//! `--out DIR` for where the plot goes, `target/plots` by default).

#[path = "common/cli.rs"]
mod cli;
use gradfuse::{Adam, Device, differentiable};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

/// The squared error of a 2-32-32-1 tanh network at input `x` against target `t`. Each
/// weight array holds a layer's matrix (row by row), then its biases.
#[differentiable]
pub fn mlp(
    #[constant] x: [f32; 2],
    #[constant] t: f32,
    #[shared] w1: [f32; 96],
    #[shared] w2: [f32; 1056],
    #[shared] w3: [f32; 33],
) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[64 + j];
        for k in 0..2 {
            s += w1[j * 2 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[1024 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[32];
    for k in 0..32 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

/// The function the network learns.
fn target(x: f32, y: f32) -> f32 {
    (3.0 * x).sin() * (2.0 * y).cos()
}

/// A reproducible uniform generator in [-1, 1) (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Weights uniform in ±sqrt(3 / fan-in) (unit variance through each layer), biases zero.
fn initial_weights(rng: &mut Rng) -> mlp::Shared {
    let mut w = mlp::Shared {
        w1: [0.0; 96],
        w2: [0.0; 1056],
        w3: [0.0; 33],
    };
    let mut fill = |ws: &mut [f32], fan_in: f32| {
        let a = (3.0 / fan_in).sqrt();
        ws.iter_mut().for_each(|v| *v = a * rng.next());
    };
    fill(&mut w.w1[..64], 2.0);
    fill(&mut w.w2[..1024], 32.0);
    fill(&mut w.w3[..32], 32.0);
    w
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = cli::options("mlp");
    let (n, steps, goal) = if opts.quick {
        (1024, 300, 2e-2)
    } else {
        (1 << 14, 2000, 2e-3)
    };
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let mut rng = Rng(42);
    let batch: Vec<mlp::Args> = (0..n)
        .map(|_| {
            let x = [rng.next(), rng.next()];
            mlp::Args {
                x,
                t: target(x[0], x[1]),
            }
        })
        .collect();

    let kernel = mlp::kernel(&device);
    let args = device.buffer(&batch)?;
    let weights = device.buffer(&[initial_weights(&mut rng)])?;
    let values = device.zeros::<f32>(n)?;
    let grad = device.zeros::<mlp::SharedGrad>(1)?;
    // The batch sum's gradient, scaled: Adam is invariant to the scale of the gradient.
    let mut adam = Adam::new(3e-3);
    let every = 20;
    let bar = ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut curve: Vec<(u32, f32)> = Vec::new();
    let start = Instant::now();
    for chunk in 0..steps / every {
        let mut rec = device.record();
        for _ in 0..every {
            kernel.value_and_grad_to(&mut rec, &args, &weights, &values, &grad)?;
            adam.step(&mut rec, &weights, &grad)?;
        }
        rec.submit()?;
        // The only read of the loop: this chunk's last loss (before its last step).
        let loss = device.read(&values)?.iter().sum::<f32>() / n as f32;
        let step = ((chunk + 1) * every) as u32;
        curve.push((step, loss));
        bar.set_position(step as u64);
        bar.set_message(format!("mean squared error {loss:.2e}"));
    }
    bar.finish();
    let seconds = start.elapsed().as_secs_f64();
    let mut rec = device.record();
    kernel.value_to(&mut rec, &args, &weights, &values)?;
    rec.submit()?;
    let loss = device.read(&values)?.iter().sum::<f32>() / n as f32;
    println!(
        "{steps} Adam steps on {n} points in {seconds:.2} s ({:.2} ms a step): mean squared \
         error {loss:.2e} (goal {goal:.0e})",
        seconds * 1e3 / steps as f64
    );
    let curve: Vec<(u32, f64)> = curve.iter().map(|&(x, y)| (x, y as f64)).collect();
    let path = cli::log_plot(
        &opts.out,
        "mlp_loss.svg",
        "2-32-32-1 tanh network, Adam: mean squared error",
        ("step", "loss"),
        &curve,
        false,
        Some(goal as f64),
    )?;
    println!("loss curve: {}", path.display());
    if loss >= goal {
        return Err(format!("the network did not reach its goal: {loss:.2e} >= {goal:.0e}").into());
    }
    Ok(())
}
