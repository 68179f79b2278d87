//! Hessian kernels (forward-over-reverse: value, gradient and Hessian of every element)
//! against the device's copy ceiling for the same bytes and against the same function's
//! adjoint (value and gradient) kernel, in one process on one device. JAX's
//! `jit(vmap(hessian(f)))` on the same functions is `benches/hessian/jax_hessian.py`: run
//! both in one device call (BENCHMARKS.md has the command).
//!
//! The f64 table measures functions written over f64 against their f32 twins.
//!
//! `cargo bench --bench hessian` (n = 2^20 and 2^24) or `-- --quick` (n = 2^12: that it runs).

use gradfuse::{Device, Error, KernelSpec};
use gradfuse_shaders_gen::compile_str;

mod ceilings;
mod common;
use ceilings::{copy_spec, inputs, kernel_time};
use common::{
    CHAIN24, EDGE_RESIDUAL, REPROJECTION, ROSENBROCK4, TRANSCENDENTAL4, chain24, edge_residual,
    edge_residual_f64, reprojection, rosenbrock4, rosenbrock4_f64, transcendental4,
    transcendental4_f64,
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

/// One function in f64 and its f32 twin.
struct F64Case {
    name: &'static str,
    hessian: &'static KernelSpec,
    adjoint: &'static KernelSpec,
    hessian_f32: &'static KernelSpec,
    adjoint_f32: &'static KernelSpec,
    /// Value, gradient and Hessian of one element on the CPU, in f64.
    cpu: fn(&[f64]) -> Vec<f64>,
}

macro_rules! f64_case {
    ($name:ident, $twin:ident) => {
        F64Case {
            name: stringify!($name),
            hessian: &$name::HESSIAN_KERNEL,
            adjoint: &$name::ADJOINT_KERNEL,
            hessian_f32: &$twin::HESSIAN_KERNEL,
            adjoint_f32: &$twin::ADJOINT_KERNEL,
            cpu: |w| {
                let a: $name::Args = bytemuck::pod_read_unaligned(bytemuck::cast_slice(w));
                let (v, g, h) = $name::value_grad_hessian(&a);
                let mut out = vec![v];
                out.extend_from_slice(bytemuck::cast_slice(&[g]));
                out.extend_from_slice(bytemuck::cast_slice(&[h]));
                out
            },
        }
    };
}

/// f64 Hessian and adjoint kernels against their f32 twins and the copy of the same bytes,
/// and the device's f64 Hessians against the CPU's.
fn f64_table(d: &Device, sizes: &[u32]) -> Result<(), Box<dyn std::error::Error>> {
    if !d.has_f64() {
        println!(
            "\n{}: no 64-bit floats in shaders; no f64 table",
            d.describe()
        );
        return Ok(());
    }
    println!("\nf64 kernels against their f32 twins");
    println!(
        "| function | n | f64 Hessian ms | f32 Hessian ms | f64 / f32 | f64 adjoint ms | f32 adjoint ms | f64 Hessian of copy bandwidth | device vs CPU (f64) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let cases = [
        f64_case!(transcendental4_f64, transcendental4),
        f64_case!(rosenbrock4_f64, rosenbrock4),
        f64_case!(edge_residual_f64, edge_residual),
    ];
    for c in cases {
        let words = c.hessian.input_words;
        let out_words: u32 = c.hessian.outputs.iter().map(|o| o.words).sum();
        let widest = c.hessian.outputs.iter().map(|o| o.words).max().unwrap_or(1);
        let fits = 31 - (widest * 4).next_power_of_two().trailing_zeros();
        let mut logs: Vec<u32> = sizes.iter().map(|l| (*l).min(fits)).collect();
        logs.dedup();
        for log_n in logs {
            let n = 1usize << log_n;
            // f64 inputs in (0.5, 2), as the f32 words the runtime moves; the twin's f32.
            let input32 = inputs(n, words / 2);
            let input64: Vec<f64> = input32.iter().map(|&x| x as f64).collect();
            let words64: &[f32] = bytemuck::cast_slice(&input64);
            let check = f64_spot_check(d, &c, &input64)?;
            let hessian = kernel_time(d, c.hessian, words64, 3, 10)?;
            let adjoint = kernel_time(d, c.adjoint, words64, 3, 10)?;
            let hessian32 = kernel_time(d, c.hessian_f32, &input32, 3, 10)?;
            let adjoint32 = kernel_time(d, c.adjoint_f32, &input32, 3, 10)?;
            let copy = kernel_time(d, copy_spec(words, out_words), words64, 3, 10)?;
            println!(
                "| {} | 2^{log_n} | {:.3} | {:.3} | {:.2} | {:.3} | {:.3} | {:.0}% | {check:.1e} |",
                c.name,
                hessian * 1e3,
                hessian32 * 1e3,
                hessian / hessian32,
                adjoint * 1e3,
                adjoint32 * 1e3,
                100.0 * copy / hessian,
            );
        }
    }
    Ok(())
}

/// The largest difference of the device's f64 outputs from the CPU's over the first
/// elements, relative to each element's largest word.
fn f64_spot_check(d: &Device, c: &F64Case, input: &[f64]) -> Result<f64, Error> {
    let words = (c.hessian.input_words / 2) as usize;
    let elements = 64;
    let mut outs: Vec<Vec<f64>> = c
        .hessian
        .outputs
        .iter()
        .map(|o| vec![0.0; elements * (o.words / 2) as usize])
        .collect();
    let mut views: Vec<&mut [f32]> = outs
        .iter_mut()
        .map(|v| bytemuck::cast_slice_mut(&mut v[..]))
        .collect();
    d.launch(
        c.hessian,
        bytemuck::cast_slice(&input[..elements * words]),
        &mut views,
    )?;
    let mut worst = 0.0f64;
    for k in 0..elements {
        let want = (c.cpu)(&input[k * words..(k + 1) * words]);
        let mut got = Vec::new();
        for (o, out) in c.hessian.outputs.iter().zip(&outs) {
            let w = (o.words / 2) as usize;
            got.extend_from_slice(&out[k * w..(k + 1) * w]);
        }
        let scale = want.iter().fold(1e-300f64, |m, w| m.max(w.abs()));
        for (g, w) in got.iter().zip(&want) {
            worst = worst.max((g - w).abs() / scale);
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
    let f64_sizes: &[u32] = if quick { &[12] } else { &[20, 23] };
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
    f64_table(&d, f64_sizes)?;
    Ok(())
}
