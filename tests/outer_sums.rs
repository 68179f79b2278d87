//! Shared gradients of a kept loop's rows summed as outer products (`outer_sums` in the
//! WGSL emitter): a dense layer's weight gradient `D^T H` over the batch, its factors and
//! columns staged chunk by chunk through workgroup memory. Checked against the CPU reverse
//! mode's per-element gradients summed here in f64 (no summation code shared with the
//! kernel), on batches that end mid-run and mid-chunk, bit-identical over runs.

mod common;

use common::{Rng, device, f64_devices};
use gradfuse::differentiable;

/// An 8-32-32-1 tanh network: the second layer's loop is kept, its rows 32 words apart
/// (a divisor of 256: a thread's words share one column). Its target `t` has a gradient,
/// which keeps its adjoint one element a thread (with `t` constant the network gets the
/// workgroup's matrix products instead: `tests/networks_cooperative.rs`).
#[differentiable]
pub fn net32(
    #[constant] x: [f32; 8],
    t: f32,
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

/// Rows 24 words apart (not a divisor of 256: a thread's words have columns of their
/// own), a loop that starts at 1, and a row of one word per trip whose column is a
/// word of a per-element array (`x[0]`), sharing the wide row's factor.
#[differentiable]
pub fn offset_rows(
    #[constant] x: [f32; 3],
    #[shared] w1: [f32; 72],
    #[shared] w2: [f32; 600],
) -> f32 {
    let mut h1 = [0.0; 24];
    for j in 0..24 {
        h1[j] = (w1[j * 3] * x[0] + w1[j * 3 + 1] * x[1] + w1[j * 3 + 2] * x[2]).tanh();
    }
    let mut y = 0.0;
    for j in 1..25 {
        let mut s = w2[576 + j - 1] * x[0];
        for k in 0..24 {
            s += w2[(j - 1) * 24 + k] * h1[k];
        }
        y += s.tanh() * (j as f32) * 0.05;
    }
    y * y
}

/// The f64 twin of a kept dense layer: 3-32-32-1.
#[differentiable]
pub fn net64(
    #[constant] x: [f64; 3],
    #[constant] t: f64,
    #[shared] w1: [f64; 128],
    #[shared] w2: [f64; 1056],
    #[shared] w3: [f64; 33],
) -> f64 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[96 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * x[k];
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

/// A 6-64-40-1 network: the second layer's 40 rows are 64 words apart, so a thread owns
/// 10 of them (4 rows per 256 words, not a whole number of the 256 words' rows); its
/// biases are a row of one word per trip; the first layer's rows are 6 words apart (not
/// a divisor of 256). Its `x` has a gradient, which keeps its adjoint one element a
/// thread (with `x` constant the workgroup's matrix products take it, the 40 rows padded
/// to 64: `tests/networks_cooperative.rs`).
#[differentiable]
pub fn padded_rows(
    x: [f32; 6],
    #[shared] w1: [f32; 448],
    #[shared] w2: [f32; 2600],
    #[shared] w3: [f32; 41],
) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[384 + j];
        for k in 0..6 {
            s += w1[j * 6 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 40];
    for j in 0..40 {
        let mut s = w2[2560 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[40];
    for k in 0..40 {
        y += w3[k] * h2[k];
    }
    y * y
}

/// A 3-64-1 coordinate network: its output layer reads 65 shared words, enough to be a
/// candidate loop, but a row of one word a trip times the record of another loop is not
/// summed as outer products. That must not cost the first layer its outer sums: its 256
/// words were streamed one by one through the workgroup when the output layer could not be
/// summed (a 3-64-64-1 network's adjoint ran 1.3x slower for it on the H200).
#[differentiable]
pub fn coords(
    #[constant] p: [f32; 3],
    #[constant] t: f32,
    #[shared] w1: [f32; 256],
    #[shared] w2: [f32; 65],
) -> f32 {
    let mut h = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[192 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * p[k];
        }
        h[j] = s.tanh();
    }
    let mut y = w2[64];
    for k in 0..64 {
        y += w2[k] * h[k];
    }
    (y - t) * (y - t)
}

/// Every f32 word of a `Pod` value, as f64.
fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t))
        .iter()
        .map(|x| *x as f64)
        .collect()
}

/// Every word of a `Pod` value of f64 words.
fn words64<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f64>(bytemuck::bytes_of(t)).to_vec()
}

/// The batch's shared gradient `got` against the per-element ones summed in f64: each
/// word within `tol` of the sum, relative to the sum of the terms' magnitudes (a sum's
/// rounding is relative to them).
fn assert_batch_sum(what: &str, got: &[f64], per_element: &[Vec<f64>], tol: f64) {
    assert_eq!(got.len(), per_element[0].len(), "{what}: words");
    for (w, g) in got.iter().enumerate() {
        let want: f64 = per_element.iter().map(|p| p[w]).sum();
        let scale: f64 = per_element
            .iter()
            .map(|p| p[w].abs())
            .sum::<f64>()
            .max(1e-20);
        let e = (g - want).abs() / scale;
        assert!(
            e < tol,
            "{what}: shared word {w}: {g} against {want} ({e:e})"
        );
    }
}

fn uniform_array<const N: usize>(rng: &mut Rng, scale: f64) -> [f32; N] {
    std::array::from_fn(|_| rng.uniform(-scale, scale))
}

#[test]
fn the_kept_layers_rows_are_summed_as_outer_products() {
    // The kernels this file tests take the path it is about.
    for (name, src) in [
        ("net32", net32::WGSL_ADJOINT),
        ("offset_rows", offset_rows::WGSL_ADJOINT),
        ("net64", net64::WGSL_ADJOINT),
    ] {
        assert!(
            src.contains("var<workgroup> outer_stage"),
            "{name}: no outer products"
        );
    }
    // Both layers are kept loops in the adjoint (the value kernel unrolls them: its
    // weights read at constant offsets, `tests/unrolled_layers.rs`): each records its
    // rows' factor once per trip, and none of their adds is staged.
    assert_eq!(net32::WGSL_ADJOINT.matches("var rec").count(), 2);
    assert!(net32::WGSL_ADJOINT.contains("] = d_s;"));
    assert!(net32::WGSL_ADJOINT.contains("] = d_s_1;"));
    assert!(!net32::WGSL_ADJOINT.contains("stage_count++; // d/d w1"));
    assert!(!net32::WGSL_ADJOINT.contains("stage_count++; // d/d w2"));
    // Its stage takes what workgroup memory the device has: the runtime sets the constant
    // the kernel declares (the tests above run with it, on any device).
    assert!(net32::WGSL_ADJOINT.contains(&format!(
        "override {}: u32 = 16384u;",
        gradfuse::WORKGROUP_BYTES_OVERRIDE
    )));
    assert_eq!(net32::WGSL_FORWARD.matches("for (var").count(), 0);
    // Each thread sums a block of words: 32 x 32 words in 2 x 2 blocks (the largest of which
    // every thread gets one), one row of one word per trip in blocks of one word.
    assert!(net32::WGSL_ADJOINT.contains("var tile_w2: array<vec4<f32>, 2>;"));
    assert!(offset_rows::WGSL_ADJOINT.contains("var tile_w2_1: array<vec4<f32>, 1>;"));
    // offset_rows's one-word row (the bias times `x[0]`) shares the record of the wide
    // row, and the loop from 1 records trip `j` at `j - 1`.
    assert!(offset_rows::WGSL_ADJOINT.contains(" - 1i] = "));
    assert!(!offset_rows::WGSL_ADJOINT.contains("stage_count++; // d/d w2"));
}

#[test]
fn network_shared_gradients_are_the_batch_sums_and_bit_identical() {
    let mut rng = Rng(5);
    let shared = net32::Shared {
        w1: uniform_array(&mut rng, 0.4),
        w2: uniform_array(&mut rng, 0.2),
        w3: uniform_array(&mut rng, 0.3),
    };
    // One partial run; many workgroups with a last run cut in its second element's half
    // and its last chunk.
    for n in [37usize, 5000] {
        let batch: Vec<net32::Args> = (0..n)
            .map(|_| net32::Args {
                x: uniform_array(&mut rng, 1.0),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let per_element: Vec<Vec<f64>> = batch
            .iter()
            .map(|a| words(&net32::value_and_grad(a, &shared).2))
            .collect();
        let kernel = net32::kernel(device());
        let (values, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
        for (i, a) in batch.iter().enumerate() {
            let v = net32::value_and_grad(a, &shared).0;
            assert!(
                (values[i] - v).abs() <= 1e-5 * v.abs().max(1e-3),
                "value {i}"
            );
        }
        assert_batch_sum(
            &format!("net32, {n} elements"),
            &words(&sg),
            &per_element,
            1e-5,
        );
        let again = kernel.value_and_grad(&batch, &shared).expect("launch").2;
        assert_eq!(
            bytemuck::bytes_of(&sg),
            bytemuck::bytes_of(&again),
            "net32, {n} elements: not bit-identical"
        );
    }
}

#[test]
fn a_layer_keeps_its_outer_sums_beside_a_loop_without_them() {
    assert!(
        coords::WGSL_ADJOINT.contains("// The loop's rows of d/d w1, summed as outer products")
    );
    assert!(!coords::WGSL_ADJOINT.contains("stage_count++; // d/d w1"));
    let mut rng = Rng(31);
    let shared = coords::Shared {
        w1: uniform_array(&mut rng, 0.6),
        w2: uniform_array(&mut rng, 0.3),
    };
    // A last workgroup cut mid-run.
    let n = 2777;
    let batch: Vec<coords::Args> = (0..n)
        .map(|_| coords::Args {
            p: uniform_array(&mut rng, 1.0),
            t: rng.uniform(-0.5, 0.5),
        })
        .collect();
    let per_element: Vec<Vec<f64>> = batch
        .iter()
        .map(|a| words(&coords::value_and_grad(a, &shared).2))
        .collect();
    let kernel = coords::kernel(device());
    let (values, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
    for (i, a) in batch.iter().enumerate() {
        let v = coords::value_and_grad(a, &shared).0;
        // v = (y - t)^2 with y a sum of 65 terms of order one, good to about 1e-6: v's
        // error is about 2 |y - t| 1e-6, relative to v large where y is near t.
        assert!(
            (values[i] - v).abs() <= 1e-5 * v.abs() + 4e-6 * v.abs().sqrt(),
            "value {i}: {} against {v}",
            values[i]
        );
    }
    assert_batch_sum("coords", &words(&sg), &per_element, 1e-5);
    let again = kernel.value_and_grad(&batch, &shared).expect("launch").2;
    assert_eq!(bytemuck::bytes_of(&sg), bytemuck::bytes_of(&again));
}

#[test]
fn offset_rows_and_scalar_columns_are_the_batch_sums() {
    let mut rng = Rng(9);
    let shared = offset_rows::Shared {
        w1: uniform_array(&mut rng, 0.5),
        w2: uniform_array(&mut rng, 0.2),
    };
    let n = 3001;
    let batch: Vec<offset_rows::Args> = (0..n)
        .map(|_| offset_rows::Args {
            x: uniform_array(&mut rng, 1.0),
        })
        .collect();
    let per_element: Vec<Vec<f64>> = batch
        .iter()
        .map(|a| words(&offset_rows::value_and_grad(a, &shared).2))
        .collect();
    let (_, _, sg) = offset_rows::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    assert_batch_sum("offset_rows", &words(&sg), &per_element, 1e-5);
}

#[test]
fn rows_of_many_words_per_thread_are_the_batch_sums() {
    assert!(padded_rows::WGSL_ADJOINT.contains("var<workgroup> outer_stage"));
    let mut rng = Rng(21);
    let shared = padded_rows::Shared {
        w1: uniform_array(&mut rng, 0.5),
        w2: uniform_array(&mut rng, 0.15),
        w3: uniform_array(&mut rng, 0.3),
    };
    // A last workgroup cut mid-chunk.
    let n = 2900;
    let batch: Vec<padded_rows::Args> = (0..n)
        .map(|_| padded_rows::Args {
            x: uniform_array(&mut rng, 1.0),
        })
        .collect();
    let per_element: Vec<Vec<f64>> = batch
        .iter()
        .map(|a| words(&padded_rows::value_and_grad(a, &shared).2))
        .collect();
    let kernel = padded_rows::kernel(device());
    let (_, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert_batch_sum("padded_rows", &words(&sg), &per_element, 1e-5);
    let again = kernel.value_and_grad(&batch, &shared).expect("launch").2;
    assert_eq!(bytemuck::bytes_of(&sg), bytemuck::bytes_of(&again));
}

#[test]
fn f64_network_shared_gradients_are_the_batch_sums() {
    let mut rng = Rng(13);
    let mut wide =
        |n: usize, s: f64| -> Vec<f64> { (0..n).map(|_| rng.uniform(-s, s) as f64).collect() };
    let shared = net64::Shared {
        w1: wide(128, 0.5).try_into().expect("128 words"),
        w2: wide(1056, 0.2).try_into().expect("1056 words"),
        w3: wide(33, 0.3).try_into().expect("33 words"),
    };
    let n = 1500;
    let batch: Vec<net64::Args> = (0..n)
        .map(|_| net64::Args {
            x: wide(3, 1.0).try_into().expect("3 words"),
            t: wide(1, 0.5)[0],
        })
        .collect();
    let per_element: Vec<Vec<f64>> = batch
        .iter()
        .map(|a| words64(&net64::value_and_grad(a, &shared).2))
        .collect();
    for dev in f64_devices() {
        let (_, _, sg) = net64::kernel(dev)
            .value_and_grad(&batch, &shared)
            .expect("launch");
        assert_batch_sum("net64", &words64(&sg), &per_element, 1e-12);
    }
}

/// Deep networks, compiled at run time: hidden layers of one size share their gradient's
/// zeros in the IR (value numbering merges equal arrays), and each is still summed as outer
/// products; before, all but the first were streamed word by word (1.6 MB of reverse WGSL
/// at 8-64-64-64-1, 181 s to build on lavapipe).
#[test]
fn deep_networks_of_equal_layers_are_the_batch_sums() {
    use gradfuse_shaders_gen::samples::deep_network;
    for (i, hidden, n) in [(5usize, vec![32usize; 3], 300usize), (3, vec![16; 4], 260)] {
        let name = format!("{i}-{hidden:?}-1");
        let src = deep_network(i, &hidden, 1).replace("#[constant] t:", "t:");
        let layers: Vec<usize> = (1..=hidden.len()).collect();
        // `t`, the element's last word, has a gradient.
        check_compiled(&name, &src, (i + 1, i..i + 1, n), &layers, 40 + i as u64);
    }
}

/// A per-element gradient whose zeros are a shared gradient's too: `x` and `w2` have 72
/// words each, so value numbering gives `d_x` and `d_w2` one array of zeros to start from,
/// which `d_w2`'s chain through its kept loop must not take from `d_x`.
#[test]
fn a_shared_gradients_zeros_shared_with_a_per_element_gradient_stay() {
    let src = "fn net(x: [f32; 72], #[constant] t: f32, #[shared] w1: [f32; 584], \
               #[shared] w2: [f32; 72], #[shared] w3: [f32; 9]) -> f32 {
        let mut h1 = [0.0; 8];
        for j in 0..8 {
            let mut s = w1[576 + j];
            for k in 0..72 {
                s += w1[j * 72 + k] * x[k];
            }
            h1[j] = s.tanh();
        }
        let mut h2 = [0.0; 8];
        for j in 0..8 {
            let mut s = w2[64 + j];
            for k in 0..8 {
                s += w2[j * 8 + k] * h1[k];
            }
            h2[j] = s.tanh();
        }
        let mut y = w3[8];
        for k in 0..8 {
            y += w3[k] * h2[k];
        }
        (y - t) * (y - t)
    }";
    check_compiled("72-8-8-1", src, (73, 0..72, 230), &[1, 2], 60);
}

/// Function `src`, compiled at run time, on `n` elements of `words` words (those in
/// `grads` with a gradient) and random shared words: its layers `layers` summed as outer
/// products, and the value, the per-element gradient and the shared gradient against the
/// f64 interpreter's reverse mode of the unoptimized IR.
fn check_compiled(
    name: &str,
    src: &str,
    (words, grads, n): (usize, std::ops::Range<usize>, usize),
    layers: &[usize],
    seed: u64,
) {
    use common::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::{ad, compile_str, interp};
    let c = compile_str(src).expect("compiles");
    for l in layers {
        let label = format!("rows of d/d w{l}, summed as outer products");
        assert!(c.wgsl_reverse.contains(&label), "{name}: layer {l} not");
    }
    let spec = compiled_spec("compiled", &c, KernelKind::Adjoint);
    let mut rng = Rng(seed);
    let shared_words = c.lowered.layout.shared_words as usize;
    let shared: Vec<f32> = (0..shared_words).map(|_| rng.uniform(-0.4, 0.4)).collect();
    let input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
    assert_eq!(spec.outputs.len(), 2, "{name}: the value and the gradient");
    let g = grads.len();
    let (mut values, mut d_element) = (vec![0.0f32; n], vec![0.0f32; n * g]);
    let mut sg = vec![0.0f32; spec.shared_grad_words()];
    device()
        .launch_shared(
            spec,
            &input,
            &shared,
            &mut [&mut values, &mut d_element],
            &mut sg,
        )
        .expect("launch");
    let reverse = ad::reverse(&c.lowered.primal);
    let close = |got: f32, want: f64| (got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0);
    let mut per_element = Vec::with_capacity(n);
    for e in 0..n {
        let row = input[e * words..(e + 1) * words].iter().chain(&shared);
        let all = interp::eval(&reverse, &row.map(|v| *v as f64).collect::<Vec<_>>());
        let (v, want) = (values[e], all[0]);
        assert!(close(v, want), "{name}: value {e}: {v} against {want}");
        for (q, w) in grads.clone().enumerate() {
            let (d, want) = (d_element[e * g + q], all[1 + w]);
            assert!(
                close(d, want),
                "{name}: element {e}, d/d word {w}: {d} against {want}"
            );
        }
        per_element.push(all[1 + words..].to_vec());
    }
    let got: Vec<f64> = sg.iter().map(|v| *v as f64).collect();
    assert_batch_sum(name, &got, &per_element, 1e-5);
}
