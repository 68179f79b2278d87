//! Hessian kernels (forward-over-reverse: value, gradient and Hessian of every element)
//! against the device's copy ceiling for the same bytes and against the same function's
//! adjoint (value and gradient) kernel, in one process on one device. JAX's
//! `jit(vmap(hessian(f)))` on the same functions is `benches/hessian/jax_hessian.py`: run
//! both in one device call (BENCHMARKS.md has the command).
//!
//! `cargo bench --bench hessian` (n = 2^20 and 2^24) or `-- --quick` (n = 2^12: that it runs).

use gradfuse::{Device, Error, KernelSpec};
use gradfuse_shaders_gen::compile_str;

mod ceilings;
mod common;
use ceilings::{copy_spec, inputs, kernel_time};
use common::{
    CHAIN24, EDGE_RESIDUAL, REPROJECTION, ROSENBROCK4, TRANSCENDENTAL4, chain24, edge_residual,
    reprojection, rosenbrock4, transcendental4,
};

/// One function of the table: its source, kernels and CPU Hessian (for a spot check).
struct Case {
    name: &'static str,
    src: &'static str,
    hessian: &'static KernelSpec,
    adjoint: &'static KernelSpec,
    /// Value, gradient and Hessian words of one element on the CPU, from its words.
    cpu: fn(&[f32]) -> Vec<f32>,
    /// Largest batch measured (JAX's Hessians of 2^24 elements of 24 words do not fit).
    max_log_n: u32,
}

macro_rules! case {
    ($name:ident, $src:ident, $max:expr) => {
        Case {
            name: stringify!($name),
            src: $src,
            hessian: &$name::HESSIAN_KERNEL,
            adjoint: &$name::ADJOINT_KERNEL,
            cpu: |w| {
                let a = &bytemuck::cast_slice::<f32, $name::Args>(w)[0];
                let (v, g, h) = $name::value_grad_hessian(a);
                let mut out = vec![v];
                out.extend_from_slice(bytemuck::cast_slice(&[g]));
                out.extend_from_slice(bytemuck::cast_slice(&[h]));
                out
            },
            max_log_n: $max,
        }
    };
}

fn cases() -> Vec<Case> {
    vec![
        case!(transcendental4, TRANSCENDENTAL4, 24),
        case!(rosenbrock4, ROSENBROCK4, 24),
        case!(edge_residual, EDGE_RESIDUAL, 24),
        case!(reprojection, REPROJECTION, 24),
        case!(chain24, CHAIN24, 20),
    ]
}

/// The device's Hessians of the first elements against the CPU's, largest difference
/// relative to the largest word.
fn spot_check(d: &Device, c: &Case, input: &[f32]) -> Result<f64, Error> {
    let words = c.hessian.input_words as usize;
    let elements = 64;
    let mut outs: Vec<Vec<f32>> = c
        .hessian
        .outputs
        .iter()
        .map(|o| vec![0.0; elements * o.words as usize])
        .collect();
    let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
    d.launch(c.hessian, &input[..elements * words], &mut views)?;
    let mut worst = 0.0f64;
    for k in 0..elements {
        let want = (c.cpu)(&input[k * words..(k + 1) * words]);
        let mut got = Vec::new();
        for (o, out) in c.hessian.outputs.iter().zip(&outs) {
            let w = o.words as usize;
            got.extend_from_slice(&out[k * w..(k + 1) * w]);
        }
        let scale = want.iter().fold(1e-30f64, |m, w| m.max(w.abs() as f64));
        for (g, w) in got.iter().zip(&want) {
            worst = worst.max((*g as f64 - *w as f64).abs() / scale);
        }
    }
    Ok(worst)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let d = Device::gpu()?;
    println!("Hessian kernels on {}", d.describe());
    println!(
        "| function | N | form | n | Hessian ms | value_and_grad ms | ratio | copy of the same bytes ms | of copy bandwidth | Hessians/s | device vs CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let sizes: &[u32] = if quick { &[12] } else { &[20, 24] };
    for c in cases() {
        let compiled = compile_str(c.src).map_err(|e| format!("{}: {e:?}", c.name))?;
        let form = compiled
            .second
            .as_ref()
            .and_then(|s| s.hessian.as_ref())
            .map_or("none".to_string(), |h| format!("{:?}", h.form));
        let words = c.hessian.input_words;
        let out_words: u32 = c.hessian.outputs.iter().map(|o| o.words).sum();
        let n_grad = c.hessian.outputs[1].words;
        // Timed launches are one binding each: at most 2^31 bytes of the largest output.
        let widest = c.hessian.outputs.iter().map(|o| o.words).max().unwrap_or(1);
        let fits = 31 - (widest * 4).next_power_of_two().trailing_zeros();
        let mut logs: Vec<u32> = sizes
            .iter()
            .map(|l| (*l).min(c.max_log_n).min(fits))
            .collect();
        logs.dedup();
        for log_n in logs {
            let n = 1usize << log_n;
            let input = inputs(n, words);
            let check = spot_check(&d, &c, &input)?;
            let hessian = kernel_time(&d, c.hessian, &input, 3, 10)?;
            let adjoint = kernel_time(&d, c.adjoint, &input, 3, 10)?;
            let copy = kernel_time(&d, copy_spec(words, out_words), &input, 3, 10)?;
            println!(
                "| {} | {n_grad} | {form} | 2^{log_n} | {:.3} | {:.3} | {:.1} | {:.3} | {:.0}% | {:.2e} | {check:.1e} |",
                c.name,
                hessian * 1e3,
                adjoint * 1e3,
                hessian / adjoint,
                copy * 1e3,
                100.0 * copy / hessian,
                n as f64 / hessian,
            );
        }
    }
    Ok(())
}
