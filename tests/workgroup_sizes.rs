//! Kernels whose workgroup size the runtime chooses (`override gf_workgroup_size`): the
//! value, tangent and adjoint kernels of a function with 41 gradient words (stored in rounds
//! of 64 elements, or of the workgroup where it is smaller), adjoints whose gradients go
//! through the stage whole (9 words) or in permuted chunks (21 words) and Jacobians in
//! chunks of f64s (those in chunks of words and of `vec4`s: `tests/wide_outputs.rs`), and
//! kernels that load wide argument rows through workgroup memory give the same bits at
//! every size the runtime may
//! pick, and the values and derivatives of the CPU versions and of central differences of
//! the f64 interpreter. The runtime's choice (timed on the device; a recorded launch's on
//! its resident rows) is one of those sizes and later launches run at it; kernels that sum shared gradients, whose order of
//! additions a size would change, keep theirs.

mod common;

use common::sizes::{SIZES, launch_at, same_bits_at_every_size, stores_at_every_size};
use common::{Rng, central_differences, device};
use gradfuse::differentiable;

/// A differentiable function, and its source as `$src` for the f64 interpreter's oracle.
macro_rules! with_source {
    ($src:ident: $($f:tt)*) => {
        #[differentiable]
        $($f)*
        const $src: &str = stringify!($($f)*);
    };
}

with_source! { SRC:
    fn ring(a: [f32; 40], s: f32) -> f32 {
        let mut b = [0.0; 40];
        for i in 0..40 {
            b[i] = (a[i] * s).tanh();
        }
        let mut acc = 0.0;
        for i in 0..39 {
            acc += b[i] * a[i + 1] - b[i + 1] * a[i];
        }
        acc * acc + s
    }
}

/// Locals named like the override and the rounds' own names.
#[differentiable]
fn named_like_the_sizes(a: [f32; 40], s: f32) -> f32 {
    let mut gf_workgroup_size = 0.0;
    for i in 0..40 {
        let grads_per_round = (a[i] * s).sin();
        gf_workgroup_size += grads_per_round * a[39 - i];
    }
    gf_workgroup_size
}

with_source! { ELASTIC:
    /// Rows of 64 words and little work per word: loaded through workgroup memory in
    /// rounds (a row stage), each thread taking its own row's slice.
    fn elastic(u: [f32; 32], k: [f32; 32]) -> f32 {
        let mut e = 0.0;
        for i in 1..31 {
            let d = u[i + 1] - 2.0 * u[i] + u[i - 1];
            e += k[i] * d * d + 0.1 * u[i] * u[i - 1];
        }
        e
    }
}

/// 9 gradient words: staged whole (`grad_stage`).
#[differentiable]
fn staged(a: [f32; 8], s: f32) -> f32 {
    let mut acc = s;
    for i in 0..8 {
        acc += (a[i] * s).sin() * a[7 - i];
    }
    acc
}

/// 21 gradient words: a permuted chunk of 16, then 5.
#[differentiable]
fn chunked(a: [f32; 20], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..19 {
        acc += (a[i] * s).tanh() * a[i + 1];
    }
    acc * s
}

/// A 2 x 6 Jacobian in f64: permuted chunks of 8 and 4 words (the stage's f64 width, 16
/// banks).
#[differentiable]
fn jacobian_f64(x: [f64; 6]) -> [f64; 2] {
    let mut r = [0.0; 2];
    for j in 0..2 {
        let mut t = 0.0;
        for k in 0..6 {
            t += (x[k] * (j as f64 + 1.0)).sin() * x[5 - k];
        }
        r[j] = t;
    }
    r
}

#[differentiable]
fn with_table(x: f32, #[shared] t: [f32; 4]) -> f32 {
    (x * t[0] + t[1]).sin() * t[2] + t[3]
}

/// 1,000 elements (a last workgroup only partly in the batch at every size) of 41 words.
fn arguments(seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..1000 * 41).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

#[test]
fn staged_and_chunked_stores_give_the_same_bits_at_every_size() {
    assert!(staged::WGSL_ADJOINT.contains("grad_stage: array<f32, gf_workgroup_size * 9u>"));
    assert!(chunked::WGSL_ADJOINT.contains("out_stage: array<f32, gf_workgroup_size * 16u>"));
    stores_at_every_size(&staged::ADJOINT_KERNEL, 1e-4);
    stores_at_every_size(&chunked::ADJOINT_KERNEL, 1e-4);
    // The plain functions, for the record: what the kernels differentiate.
    let a: [f32; 8] = std::array::from_fn(|i| i as f32 * 0.1);
    assert_eq!(staged(a, 0.0), 0.0);
    assert_eq!(chunked([0.0; 20], 1.0), 0.0);
}

#[test]
fn f64_chunks_give_the_same_bits_at_every_size() {
    assert_eq!(jacobian_f64([0.0; 6]), [0.0; 2]);
    let stage = "var<workgroup> out_stage: array<f64, gf_workgroup_size * 8u>;";
    assert!(jacobian_f64::WGSL_JACOBIAN.contains(stage));
    if device().is_gpu() && !device().has_f64() {
        return;
    }
    stores_at_every_size(&jacobian_f64::JACOBIAN_KERNEL, 1e-9);
}

/// The tangent kernel's rows for `input`'s rows of `words` words (every word with a
/// gradient): each row, then a random direction in each of its words.
fn tangent_rows(input: &[f32], words: usize, rng: &mut Rng) -> Vec<f32> {
    (input.chunks(words))
        .flat_map(|args| {
            let dir: Vec<f32> = (0..words).map(|_| rng.uniform(-1.0, 1.0)).collect();
            args.iter().copied().chain(dir).collect::<Vec<f32>>()
        })
        .collect()
}

fn close(got: f32, want: f64) -> bool {
    (got as f64 - want).abs() <= 2e-3 * (1.0 + want.abs())
}

#[test]
fn adjoints_stored_in_rounds_give_the_same_bits_at_every_size() {
    assert!(ring::WGSL_ADJOINT.contains("grads_per_round = min(64u, gf_workgroup_size)"));
    let input = arguments(1);
    let outs = same_bits_at_every_size(&ring::ADJOINT_KERNEL, &input);
    let (values, grads) = (&outs[0], &outs[1]);
    for e in [0, 1, 255, 256, 511, 999] {
        let words: Vec<f64> = input[e * 41..][..41].iter().map(|&w| w as f64).collect();
        let which: Vec<usize> = (0..41).collect();
        let (value, want) = central_differences(SRC, &words, &which);
        assert!(close(values[e], value), "{e}: {} vs {value}", values[e]);
        for w in 0..41 {
            let got = grads[e * 41 + w];
            assert!(close(got, want[w]), "{e}, word {w}: {got} vs {}", want[w]);
        }
    }
}

#[test]
fn values_and_tangents_give_the_same_bits_at_every_size() {
    let input = arguments(2);
    let values = same_bits_at_every_size(&ring::FORWARD_KERNEL, &input);
    // The tangent kernel's rows: the arguments, then a direction in each gradient word.
    let mut rng = Rng(3);
    let rows = tangent_rows(&input, 41, &mut rng);
    let tangents = same_bits_at_every_size(&ring::TANGENT_KERNEL, &rows);
    for e in [0, 300, 999] {
        let words: Vec<f64> = input[e * 41..][..41].iter().map(|&w| w as f64).collect();
        let which: Vec<usize> = (0..41).collect();
        let (value, grad) = central_differences(SRC, &words, &which);
        assert!(close(values[0][e], value), "{e}: value");
        let a: [f32; 40] = std::array::from_fn(|i| input[e * 41 + i]);
        assert!(
            close(ring(a, input[e * 41 + 40]), value),
            "{e}: the plain function"
        );
        let dir = &rows[e * 82 + 41..][..41];
        let want: f64 = grad.iter().zip(dir).map(|(g, &d)| g * d as f64).sum();
        // Two outputs: the values, and the derivatives along the directions.
        assert!(
            close(tangents[0][e], value),
            "{e}: the tangent kernel's value"
        );
        let got = tangents[1][e];
        assert!(close(got, want), "{e}: {got} vs {want}");
    }
}

#[test]
fn rows_loaded_through_workgroup_memory_give_the_same_bits_at_every_size() {
    // Each round's loads reach `2 * size` threads past the thread's own: the stage is
    // the workgroup's rows at any size.
    for wgsl in [
        elastic::WGSL_FORWARD,
        elastic::WGSL_ADJOINT,
        elastic::WGSL_TANGENT,
    ] {
        assert!(wgsl.contains("the group loads them through"), "{wgsl}");
        assert!(wgsl.contains("(gf_workgroup_size + lid)"), "{wgsl}");
    }
    let mut rng = Rng(4);
    let input: Vec<f32> = (0..1000 * 64).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let values = same_bits_at_every_size(&elastic::FORWARD_KERNEL, &input);
    let outs = same_bits_at_every_size(&elastic::ADJOINT_KERNEL, &input);
    let rows = tangent_rows(&input, 64, &mut rng);
    let tangents = same_bits_at_every_size(&elastic::TANGENT_KERNEL, &rows);
    // Elements of the first and last workgroups at every size, and one inside.
    for e in [0, 31, 32, 255, 256, 600, 999] {
        let words: Vec<f64> = input[e * 64..][..64].iter().map(|&w| w as f64).collect();
        let which: Vec<usize> = (0..64).collect();
        let (value, want) = central_differences(ELASTIC, &words, &which);
        assert!(
            close(values[0][e], value),
            "{e}: {} vs {value}",
            values[0][e]
        );
        assert!(close(outs[0][e], value), "{e}: the adjoint's value");
        for w in 0..64 {
            let got = outs[1][e * 64 + w];
            assert!(close(got, want[w]), "{e}, word {w}: {got} vs {}", want[w]);
        }
        let dir = &rows[e * 128 + 64..][..64];
        let along: f64 = want.iter().zip(dir).map(|(g, &d)| g * d as f64).sum();
        assert!(
            close(tangents[0][e], value),
            "{e}: the tangent kernel's value"
        );
        assert!(
            close(tangents[1][e], along),
            "{e}: {} vs {along}",
            tangents[1][e]
        );
    }
    // The plain function, for the record: what the kernels compute.
    let u: [f32; 32] = std::array::from_fn(|i| input[i]);
    let k: [f32; 32] = std::array::from_fn(|i| input[32 + i]);
    assert!(close(elastic(u, k), values[0][0] as f64));
}

#[test]
fn the_chosen_size_is_timed_and_later_launches_run_at_it() {
    let d = device();
    let spec = &named_like_the_sizes::ADJOINT_KERNEL;
    let input = arguments(4);
    let before = launch_at(d, spec, 256, &input);
    let times = d.choose_workgroup_size(spec, &input).expect("timing");
    let chosen = d.workgroup_size_of(spec);
    if !d.is_gpu() {
        assert!(times.is_empty());
        assert_eq!(chosen, 256);
        return;
    }
    let sizes: Vec<u32> = times.iter().map(|t| t.0).collect();
    assert_eq!(sizes, SIZES);
    assert!(times.iter().all(|t| t.1 > 0.0 && t.1.is_finite()));
    let time_of = |size: u32| times.iter().find(|t| t.0 == size).map(|t| t.1);
    let (own, fastest) = (time_of(256).unwrap(), time_of(chosen).unwrap());
    // Another size only where it was faster by the margin, and then the fastest.
    assert!(
        chosen == 256 || fastest <= 0.97 * own,
        "{times:?} -> {chosen}"
    );
    assert!(times.iter().all(|t| t.1 >= fastest || chosen == 256));
    // A launch through the typed API runs at the chosen size, to the same bits.
    let args: Vec<named_like_the_sizes::Args> = (input.chunks(41))
        .map(|w| named_like_the_sizes::Args {
            a: std::array::from_fn(|i| w[i]),
            s: w[40],
        })
        .collect();
    let (values, grads) = named_like_the_sizes::kernel(d)
        .value_and_grad(&args)
        .expect("launch");
    for (e, g) in grads.iter().enumerate() {
        assert_eq!(values[e].to_bits(), before[0][e].to_bits(), "{e}: value");
        let (_, cpu) = named_like_the_sizes::value_and_grad(&args[e]);
        let plain = named_like_the_sizes(args[e].a, args[e].s);
        assert!(close(values[e], plain as f64), "{e}: the plain function");
        for w in 0..40 {
            assert_eq!(
                g.a[w].to_bits(),
                before[1][e * 41 + w].to_bits(),
                "{e}, a[{w}]"
            );
            assert!(
                close(g.a[w], cpu.a[w] as f64),
                "{e}, a[{w}]: against the CPU"
            );
        }
        assert!(close(g.s, cpu.s as f64), "{e}, s: against the CPU");
    }
}

#[test]
fn recorded_launches_choose_their_size_on_resident_rows() {
    if !device().is_gpu() {
        return;
    }
    // A device of its own, choosing on any adapter (lavapipe's times choose nothing on
    // their own), whose choices no other test makes first.
    let d = gradfuse::Device::gpu().expect("a GPU adapter");
    d.choose_sizes_on_any_adapter();
    let spec = &chunked::FORWARD_KERNEL;
    let mut rng = Rng(5);
    let n = 1 << 18;
    let args: Vec<chunked::Args> = (0..n)
        .map(|_| chunked::Args {
            a: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            s: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let kernel = chunked::kernel(&d);
    // Fewer rows than a choice takes choose nothing.
    let few = d.buffer(&args[..1000]).expect("upload");
    let few_values = d.zeros::<f32>(1000).expect("buffer");
    let mut rec = d.record();
    kernel
        .value_to(&mut rec, &few, &few_values)
        .expect("record");
    rec.submit().expect("submit");
    assert_eq!(d.chosen_workgroup_size(spec), None);
    // The first large recorded launch chooses, on the rows as they are when recorded.
    let rows = d.buffer(&args).expect("upload");
    let values = d.zeros::<f32>(n).expect("buffer");
    let mut rec = d.record();
    kernel.value_to(&mut rec, &rows, &values).expect("record");
    let chosen = d
        .chosen_workgroup_size(spec)
        .expect("chosen while recording");
    assert!(SIZES.contains(&chosen), "{chosen}");
    assert_eq!(d.workgroup_size_of(spec), chosen);
    rec.submit().expect("submit");
    let got: Vec<f32> = d.read(&values).expect("read");
    let at_256 = launch_at(&d, spec, 256, bytemuck::cast_slice(&args));
    for (e, (a, b)) in got.iter().zip(&at_256[0]).enumerate() {
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "{e}: at size {chosen} against 256"
        );
    }
    for e in [0, 1, 4095, n - 1] {
        let want = chunked(args[e].a, args[e].s);
        assert!(close(got[e], want as f64), "{e}: {} vs {want}", got[e]);
    }
}

#[test]
fn kernels_that_sum_shared_gradients_keep_their_size() {
    assert_eq!(with_table(0.0, [1.0, 0.0, 2.0, 3.0]), 3.0);
    let spec = &with_table::ADJOINT_KERNEL;
    assert!(!spec.wgsl.contains("gf_workgroup_size"));
    let d = device();
    if d.is_gpu() {
        let refused = d.at_workgroup_size(spec, 64);
        assert!(
            matches!(refused, Err(gradfuse::Error::Unsupported(_))),
            "{refused:?}"
        );
    }
    let input: Vec<f32> = (0..300).map(|k| k as f32 * 0.01).collect();
    assert!(
        d.choose_workgroup_size(spec, &input)
            .expect("nothing to time")
            .is_empty()
    );
    assert_eq!(d.workgroup_size_of(spec), 256);
    // Its value kernel, which sums nothing, is sized by the runtime.
    assert!(
        with_table::FORWARD_KERNEL
            .wgsl
            .contains("override gf_workgroup_size")
    );
}
