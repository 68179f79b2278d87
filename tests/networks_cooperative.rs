//! The cooperative network adjoint (`emit_wgsl::network`: two dense tanh layers as
//! register-blocked products of the workgroup) on the GPU, launched with the generated
//! adjoint's buffers: values and shared gradients against the CPU reverse mode's
//! per-element results summed in f64 (no code shared with the kernel), on batches cut
//! mid-chunk, bit-identical over runs.

mod common;

use common::{Rng, device};
use gradfuse::{KernelSpec, differentiable};
use gradfuse_shaders_gen::emit_wgsl::{
    LayerWords, NetworkPlan, WordIndex, emit_network_adjoint, network_workgroup_size,
};
use gradfuse_shaders_gen::ir::Function;
use gradfuse_shaders_gen::{Reverse, compile_str};

/// An 8-32-32-1 tanh network (four warps, one row a lane).
#[differentiable]
pub fn net32(
    #[constant] x: [f32; 8],
    #[constant] t: f32,
    #[shared] w1: [f32; 288],
    #[shared] w2: [f32; 1056],
    #[shared] w3: [f32; 33],
) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
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

/// A 3-64-64-1 coordinate network (eight warps, two rows a lane, the three matrices
/// filling 48 KiB), its inputs after a word the network does not read and its loss
/// reading that word too.
#[differentiable]
pub fn net64(
    #[constant] scale: f32,
    #[constant] p: [f32; 3],
    #[constant] t: f32,
    #[shared] w1: [f32; 256],
    #[shared] w2: [f32; 4160],
    #[shared] w3: [f32; 65],
) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[3 * 64 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * p[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[64 * 64 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    scale * (y - t) * (y - t)
}

/// The loss after the output row as its own function of `y` and the element's words, with
/// its derivative in `y` (outputs `[value, d value / d y]`).
fn loss(src: &str) -> Function {
    match compile_str(src).expect("the loss compiles").reverse {
        Reverse::Gradient(f) => f,
        Reverse::Jacobian(..) => unreachable!("a scalar result"),
    }
}

/// The plan of an `I-H-H-1` network laid out as the functions above write it.
fn plan(
    (element_words, first_input): (u32, u32),
    (inputs, hidden): (u32, u32),
    loss: &Function,
) -> NetworkPlan<'_> {
    let w2 = inputs * hidden + hidden;
    let w3 = w2 + hidden * hidden + hidden;
    let layer = |offset: u32, columns: u32| LayerWords {
        weights: WordIndex {
            offset,
            row_stride: columns,
            column_stride: 1,
        },
        bias: offset + hidden * columns,
    };
    NetworkPlan {
        element_words,
        first_input,
        inputs,
        hidden,
        first: layer(0, inputs),
        second: layer(w2, hidden),
        output: WordIndex {
            offset: w3,
            row_stride: 1,
            column_stride: 0,
        },
        output_bias: w3 + hidden,
        loss,
        shared_words: w3 + hidden + 1,
        shared_uniform: true,
    }
}

/// The generated adjoint's spec with the cooperative kernel's WGSL and workgroup size.
fn cooperative(generated: &'static KernelSpec, plan: &NetworkPlan) -> &'static KernelSpec {
    assert!(plan.supported());
    let wgsl = emit_network_adjoint("fn net(..) -> f32", plan);
    Box::leak(Box::new(KernelSpec {
        label: "net::cooperative",
        wgsl: Box::leak(wgsl.into_boxed_str()),
        workgroup_size: network_workgroup_size(plan),
        ..*generated
    }))
}

/// Every f32 word of a `Pod` value, as f64.
fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t))
        .iter()
        .map(|x| *x as f64)
        .collect()
}

fn uniform_array<const N: usize>(rng: &mut Rng, scale: f64) -> [f32; N] {
    std::array::from_fn(|_| rng.uniform(-scale, scale))
}

/// The kernel's values and shared gradient on `batch` against `oracle`'s per-element
/// `(value, shared gradient words)`, summed in f64 (each word within 1e-5 of the sum of
/// its terms' magnitudes), and the same bits on a second run.
fn check<A: bytemuck::Pod, S: bytemuck::Pod>(
    name: &str,
    spec: &'static KernelSpec,
    batch: &[A],
    shared: &S,
    oracle: impl Fn(&A) -> (f32, Vec<f64>),
) {
    let d = device();
    let input: &[f32] = bytemuck::cast_slice(batch);
    let run = || {
        let mut values = vec![0.0f32; batch.len()];
        let mut sg = vec![0.0f32; spec.shared_grad_words()];
        d.launch_shared(spec, input, &words32(shared), &mut [&mut values], &mut sg)
            .expect("launch");
        (values, sg)
    };
    let (values, sg) = run();
    let per_element: Vec<(f32, Vec<f64>)> = batch.iter().map(&oracle).collect();
    for (i, (v, _)) in per_element.iter().enumerate() {
        // v = s (y - t)^2 with y a sum of 33 or 65 terms of order one: v's error is about
        // 2 s |y - t| 1e-6, relative to v large where y is near t.
        let tol = 1e-5 * v.abs() + 4e-6 * v.abs().sqrt();
        assert!(
            (values[i] - v).abs() <= tol,
            "{name}: value {i}: {} against {v}",
            values[i]
        );
    }
    for (w, g) in sg.iter().enumerate() {
        let want: f64 = per_element.iter().map(|p| p.1[w]).sum();
        let scale: f64 = per_element
            .iter()
            .map(|p| p.1[w].abs())
            .sum::<f64>()
            .max(1e-20);
        let e = (*g as f64 - want).abs() / scale;
        assert!(
            e < 1e-5,
            "{name}: shared word {w}: {g} against {want} ({e:e})"
        );
    }
    assert_eq!(sg, run().1, "{name}: not bit-identical");
}

fn words32<T: bytemuck::Pod>(t: &T) -> Vec<f32> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t)).to_vec()
}

#[test]
fn the_cooperative_adjoint_of_an_8_32_32_1_network_is_the_batch_sum() {
    if !device().is_gpu() {
        return; // the kernel is WGSL only; CI runs this on lavapipe (GRADFUSE_REQUIRE_GPU=1)
    }
    let loss = loss(
        "fn loss(y: f32, #[constant] x: [f32; 8], #[constant] t: f32) -> f32 { (y - t) * (y - t) }",
    );
    let spec = cooperative(&net32::ADJOINT_KERNEL, &plan((9, 0), (8, 32), &loss));
    let mut rng = Rng(71);
    let shared = net32::Shared {
        w1: uniform_array(&mut rng, 0.4),
        w2: uniform_array(&mut rng, 0.2),
        w3: uniform_array(&mut rng, 0.3),
    };
    // Within one chunk; past one workgroup's run, cut mid-chunk.
    for n in [37usize, 3001] {
        let batch: Vec<net32::Args> = (0..n)
            .map(|_| net32::Args {
                x: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        check(&format!("8-32-32-1, {n}"), spec, &batch, &shared, |a| {
            let (v, _, g) = net32::value_and_grad(a, &shared);
            (v, words(&g))
        });
    }
}

#[test]
fn the_cooperative_adjoint_of_a_3_64_64_1_network_is_the_batch_sum() {
    if !device().is_gpu() {
        return; // as above
    }
    let loss = loss(
        "fn loss(y: f32, #[constant] scale: f32, #[constant] p: [f32; 3], #[constant] t: f32) \
         -> f32 { scale * (y - t) * (y - t) }",
    );
    let spec = cooperative(&net64::ADJOINT_KERNEL, &plan((5, 1), (3, 64), &loss));
    let mut rng = Rng(72);
    let shared = net64::Shared {
        w1: uniform_array(&mut rng, 0.6),
        w2: uniform_array(&mut rng, 0.15),
        w3: uniform_array(&mut rng, 0.2),
    };
    for n in [100usize, 2777] {
        let batch: Vec<net64::Args> = (0..n)
            .map(|_| net64::Args {
                scale: rng.uniform(0.5, 2.0),
                p: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        check(&format!("3-64-64-1, {n}"), spec, &batch, &shared, |a| {
            let (v, _, g) = net64::value_and_grad(a, &shared);
            (v, words(&g))
        });
    }
}
