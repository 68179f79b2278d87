//! Launches at every workgroup size the runtime may choose for a kernel
//! (`tests/workgroup_sizes.rs`, `tests/wide_outputs.rs`).

use super::{Rng, device};
use gradfuse::{Device, KernelSpec};

/// The sizes the runtime times, its default first.
pub const SIZES: [u32; 4] = [256, 128, 64, 32];

/// Every output of `spec` over `input`, launched at `size`.
pub fn launch_at(d: &Device, spec: &'static KernelSpec, size: u32, input: &[f32]) -> Vec<Vec<f32>> {
    let sized = d
        .at_workgroup_size(spec, size)
        .expect("a size the kernel takes");
    assert_eq!(sized.workgroup_size, if d.is_gpu() { size } else { 256 });
    let n = input.len() / spec.input_words as usize;
    let mut outs: Vec<Vec<f32>> = (spec.outputs.iter())
        .map(|o| vec![f32::NAN; n * o.words as usize])
        .collect();
    let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
    d.launch(sized, input, &mut views).expect("launch");
    outs
}

/// Launches `spec` at every size: the outputs, the same bits at each.
pub fn same_bits_at_every_size(spec: &'static KernelSpec, input: &[f32]) -> Vec<Vec<f32>> {
    assert!(spec.wgsl.contains("override gf_workgroup_size: u32 = 256;"));
    let first = launch_at(device(), spec, 256, input);
    for size in &SIZES[1..] {
        let outs = launch_at(device(), spec, *size, input);
        for (k, (a, b)) in first.iter().zip(&outs).enumerate() {
            let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{}: output {k} differs at size {size}", spec.label);
        }
    }
    first
}

/// `spec` over 1,000 random elements: the same bits at every size, and the CPU device's
/// launch (the CPU versions, not the WGSL) within `tol` of them. An f64 kernel's words are
/// pairs: its arguments and outputs are read as f64s.
pub fn stores_at_every_size(spec: &'static KernelSpec, tol: f64) {
    let f64 = spec.precision == gradfuse::Precision::F64;
    let mut rng = Rng(spec.input_words as u64);
    let input: Vec<f32> = if f64 {
        let values: Vec<f64> = (0..1000 * spec.input_words / 2)
            .map(|_| rng.uniform(-1.0, 1.0) as f64)
            .collect();
        bytemuck::cast_slice(&values).to_vec()
    } else {
        (0..1000 * spec.input_words)
            .map(|_| rng.uniform(-1.0, 1.0))
            .collect()
    };
    let as_values = |words: &[f32]| -> Vec<f64> {
        if f64 {
            bytemuck::cast_slice::<f32, f64>(words).to_vec()
        } else {
            words.iter().map(|&w| w as f64).collect()
        }
    };
    let gpu = same_bits_at_every_size(spec, &input);
    let cpu = launch_at(&Device::cpu(), spec, 256, &input);
    for (k, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
        for (w, (a, b)) in as_values(g).into_iter().zip(as_values(c)).enumerate() {
            let ok = (a - b).abs() <= tol * (1.0 + b.abs());
            assert!(
                ok,
                "{}: output {k}, value {w}: {a} vs the CPU's {b}",
                spec.label
            );
        }
    }
}
