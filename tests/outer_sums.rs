//! Shared gradients summed as outer products (a dense layer's `d_s[j] * x[k]` words and
//! its bias words `d_s[j]`): the batch sums against the CPU version's own, summed in f64,
//! whose per-element gradients match the f64 interpreter; bit-identical reruns; batches of
//! one element, of part of a chunk, and of several passes per thread; and words that are
//! products but not at affine places, which stay staged one by one.

mod common;

use common::{Rng, device};
use gradfuse_shaders_gen::{ad, compile_str, interp};

with_source! {
    WIDE_SRC,
    // A 6-40-1 tanh layer, unrolled: d/d w1 is a 40 x 7 outer product (inputs and one),
    // d/d w2 a 1 x 41 one (the hidden values and one); d/d s is a word of its own.
    #[gradfuse::differentiable]
    pub fn wide_layer(
        #[constant] x: [f32; 6],
        #[constant] t: f32,
        #[shared] w1: [f32; 280],
        #[shared] w2: [f32; 41],
        #[shared] s: f32,
    ) -> f32 {
        let mut y = w2[40];
        for j in 0..40 {
            let mut a = w1[240 + j];
            for k in 0..6 {
                a += w1[j * 6 + k] * x[k];
            }
            y += w2[j] * a.tanh();
        }
        let e = y - t + s.sin() * x[0];
        e * e
    }
}

// Two layers of products of hidden and input values, rows of 6 words in one array and
// of 7 in the next: one outer product of x and all 48 sums, but its words are not at
// places affine in (j, k). The 7th word of each wb row gets no gradient.
#[gradfuse::differentiable]
pub fn split_rows(
    #[constant] x: [f32; 6],
    #[shared] wa: [f32; 144],
    #[shared] wb: [f32; 168],
) -> f32 {
    let mut y = 0.0;
    for j in 0..24 {
        let mut a = 0.0;
        for k in 0..6 {
            a += wa[j * 6 + k] * x[k];
        }
        y += a.tanh();
    }
    for j in 0..24 {
        let mut a = 0.0;
        for k in 0..6 {
            a += wb[j * 7 + k] * x[k];
        }
        y += a.tanh();
    }
    y * y
}

/// Shared words of `wide_layer`: w1, w2, s.
const WIDE_SHARED: usize = 280 + 41 + 1;

fn wide_shared(rng: &mut Rng) -> wide_layer::Shared {
    wide_layer::Shared {
        w1: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
        w2: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
        s: rng.uniform(-1.0, 1.0),
    }
}

fn wide_batch(rng: &mut Rng, n: usize) -> Vec<wide_layer::Args> {
    (0..n)
        .map(|_| wide_layer::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            t: rng.uniform(-0.5, 0.5),
        })
        .collect()
}

fn f32s<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t))
        .iter()
        .map(|v| *v as f64)
        .collect()
}

/// The largest difference between `got` and `want`, each word scaled by the sum of its
/// terms' magnitudes (a sum in another order may differ by a few ulps of that).
fn sum_error(got: &[f64], want: &[f64], magnitude: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .zip(magnitude)
        .map(|((g, w), m)| (g - w).abs() / m.max(1e-30))
        .fold(0.0, f64::max)
}

#[test]
fn the_layers_gradients_are_outer_products_and_the_rest_is_staged() {
    let wgsl = wide_layer::WGSL_ADJOINT;
    assert!(wgsl.contains("// d/d w1: 40 x 7 words, an outer product"));
    assert!(wgsl.contains("// d/d w2: 1 x 41 words, an outer product"));
    // s's word is staged on its own; no w1 or w2 word is.
    assert!(wgsl.contains("stage_count++; // d/d s"));
    assert!(
        !wgsl.contains("stage_count++; // d/d w1") && !wgsl.contains("stage_count++; // d/d w2")
    );
    // The stage holds 16 KiB of factors; the tiles' sums go to the owners at the end.
    assert!(wgsl.contains("var<workgroup> reduce_stage: array<f32, 4096>;"));
    assert!(wgsl.contains("owned_sums[outer_k] += outer_sum;"));
}

#[test]
fn the_cpu_version_matches_the_oracle() {
    let c = compile_str(WIDE_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    let mut rng = Rng(71);
    let shared = wide_shared(&mut rng);
    for a in wide_batch(&mut rng, 3) {
        let mut words = f32s(&a);
        words.extend(f32s(&shared));
        let all = interp::eval(&reverse, &words);
        let (v, _, g) = wide_layer::value_and_grad(&a, &shared);
        assert!((v as f64 - all[0]).abs() <= 1e-5 * all[0].abs().max(1.0));
        // The value, then x and t (no gradient: constants), then the shared words.
        let want = &all[all.len() - WIDE_SHARED..];
        for (k, (g, w)) in f32s(&g).iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1e-2),
                "word {k}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn batch_sums_match_the_cpu_and_rerun_bit_identical() {
    let mut rng = Rng(72);
    let shared = wide_shared(&mut rng);
    let kernel = wide_layer::kernel(device());
    // One element; part of one chunk past the first workgroup's 512; four elements per
    // thread (several passes of the element loop, and a last run part way).
    for n in [1, 700, 300_000] {
        let batch = wide_batch(&mut rng, n);
        let (values, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
        let (mut want, mut magnitude) = (vec![0.0f64; WIDE_SHARED], vec![0.0f64; WIDE_SHARED]);
        for (a, v) in batch.iter().zip(&values) {
            let (cv, _, g) = wide_layer::value_and_grad(a, &shared);
            assert!((v - cv).abs() <= 1e-5 * cv.abs().max(1.0));
            for (k, g) in f32s(&g).into_iter().enumerate() {
                want[k] += g;
                magnitude[k] += g.abs();
            }
        }
        let e = sum_error(&f32s(&sg), &want, &magnitude);
        assert!(e < 1e-5, "{n} elements: shared gradient off by {e:e}");
        let (_, _, again) = kernel.value_and_grad(&batch, &shared).expect("launch");
        assert_eq!(
            bytemuck::bytes_of(&sg),
            bytemuck::bytes_of(&again),
            "{n} elements: a rerun differs"
        );
    }
}

#[test]
fn products_at_places_not_affine_stay_staged_and_sum_right() {
    let wgsl = split_rows::WGSL_ADJOINT;
    assert!(!wgsl.contains("an outer product"));
    assert!(!wgsl.contains("// d/d wb[6]"), "no gradient flows to it");
    assert!(
        wgsl.contains("stage_count++; // d/d wa[7]")
            && wgsl.contains("stage_count++; // d/d wb[8]")
    );
    let mut rng = Rng(73);
    let shared = split_rows::Shared {
        wa: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
        wb: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
    };
    let batch: Vec<split_rows::Args> = (0..700)
        .map(|_| split_rows::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
        })
        .collect();
    let (_, _, sg) = split_rows::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let (mut want, mut magnitude) = (vec![0.0f64; 312], vec![0.0f64; 312]);
    for a in &batch {
        let (_, _, g) = split_rows::value_and_grad(a, &shared);
        for (k, g) in f32s(&g).into_iter().enumerate() {
            want[k] += g;
            magnitude[k] += g.abs();
        }
    }
    let e = sum_error(&f32s(&sg), &want, &magnitude);
    assert!(e < 1e-5, "shared gradient off by {e:e}");
}
