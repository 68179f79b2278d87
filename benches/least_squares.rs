//! Many small least-squares problems (`BatchedLm`): exponential fits `y = a exp(b t)` to 8
//! noisy samples each, solved to convergence on the GPU and on the CPU device, side by side.
//!
//! `cargo bench --bench least_squares` (2^14, 2^17 and 2^20 problems; the CPU device up to
//! 2^17) or `-- --quick` (2^10: CI runs it so the bench cannot rot; lavapipe's numbers only
//! show that it runs). Times are wall clock to convergence, the median of 3 runs after a
//! warm-up, status reads every 8 iterations included, as a user pays them. Set
//! GRADFUSE_BENCH_OUT=path to also write the table to a file.

use gradfuse::{BatchedLm, Buffer, Device, Error, Source, differentiable};
use std::fmt::Write as _;
use std::time::Instant;

/// Residuals of `a exp(b t_k)` against 8 samples `y_k` at `x = [a, b]`.
#[differentiable]
pub fn exp_fit(x: [f32; 2], #[constant] y: [f32; 8]) -> [f32; 8] {
    let t = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75];
    let mut r = [0.0; 8];
    for k in 0..8 {
        r[k] = x[0] * (x[1] * t[k]).exp() - y[k];
    }
    r
}

/// A reproducible value in [-1, 1) for `i`.
fn noise(i: usize) -> f32 {
    let z = (i as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// Samples of `n` curves with 1% noise.
fn samples(n: usize) -> Vec<[f32; 8]> {
    (0..n)
        .map(|e| {
            let (a, b) = (1.25 + 0.75 * noise(2 * e), noise(2 * e + 1));
            std::array::from_fn(|k| {
                let clean = a * (b * 0.25 * k as f32).exp();
                clean * (1.0 + 0.01 * noise(1000 * e + k))
            })
        })
        .collect()
}

/// The unknowns from `x`, the samples from `y`.
fn sources<'b>(x: &'b Buffer<[f32; 2]>, y: &'b Buffer<[f32; 8]>) -> exp_fit::Sources<'b> {
    exp_fit::Sources {
        x: Source::Each(x),
        y: Source::Each(y),
    }
}

/// One solve of every curve from `[1, 0]`: seconds, iterations, problems converged.
fn solve(d: &Device, y: &Buffer<[f32; 8]>, n: usize) -> Result<(f64, u32, usize), Error> {
    let x = d.buffer(&vec![[1.0f32, 0.0]; n])?;
    let k = exp_fit::kernel(d);
    let t = Instant::now();
    let summary = BatchedLm::default().solve(
        d,
        &x,
        |rec, x, v, j| k.value_and_jacobian_gathered(rec, &sources(x, y), v, &j.cast()?),
        |rec, x, v| k.value_gathered(rec, &sources(x, y), v),
    )?;
    Ok((
        t.elapsed().as_secs_f64(),
        summary.iterations,
        summary.converged(),
    ))
}

/// The median time of 3 runs after a warm-up, with the last run's iterations and count.
fn timed(d: &Device, n: usize) -> Result<(f64, u32, usize), Error> {
    let y = d.buffer(&samples(n))?;
    solve(d, &y, n)?;
    let mut runs = (0..3)
        .map(|_| solve(d, &y, n))
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(runs[1])
}

fn main() -> Result<(), Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    let gpu = Device::auto()?;
    let cpu = Device::cpu();
    let sizes: &[u32] = if quick { &[10] } else { &[14, 17, 20] };
    let mut out = String::new();
    let _ = writeln!(out, "device: {}\n", gpu.describe());
    let _ = writeln!(
        out,
        "| problems | device ms | iterations | converged | ms per iteration | CPU device ms | CPU device / device |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for &s in sizes {
        let n = 1usize << s;
        let (t, iterations, converged) = timed(&gpu, n)?;
        let cpu_time = if s <= 17 {
            Some(timed(&cpu, n)?.0)
        } else {
            None
        };
        let _ = writeln!(
            out,
            "| 2^{s} | {:.2} | {iterations} | {converged} | {:.3} | {} | {} |",
            t * 1e3,
            t * 1e3 / f64::from(iterations.max(1)),
            cpu_time.map_or("n/a".into(), |c| format!("{:.2}", c * 1e3)),
            cpu_time.map_or("n/a".into(), |c| format!("{:.1}", c / t)),
        );
    }
    print!("{out}");
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
        let _ = std::fs::write(path, &out);
    }
    Ok(())
}
