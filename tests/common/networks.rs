//! Networks as users write them, for the tests of the cooperative network kernels, and
//! how those tests hold a batch's values and shared gradients to an oracle's.

use super::Rng;

/// The three activations the cooperative kernel computes, as users write them.
pub const ACTIVATIONS: [&str; 3] = ["s.tanh()", "s.max(0.0)", "1.0 / (1.0 + (-s).exp())"];

/// `samples::deep_network`'s `src` with hidden layer `l`'s activation `activations[l - 1]`,
/// each in its own row's statement (`h1[j] = ..`, `h2[j] = ..`).
pub fn with_layer_activations(mut src: String, activations: &[&str]) -> String {
    for (l, a) in (1..).zip(activations) {
        src = src.replacen(&format!("h{l}[j] = s.tanh()"), &format!("h{l}[j] = {a}"), 1);
    }
    src
}

/// Every f32 word of a `Pod` value, as f64.
pub fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t))
        .iter()
        .map(|x| *x as f64)
        .collect()
}

pub fn uniform_array<const N: usize>(rng: &mut Rng, scale: f64) -> [f32; N] {
    std::array::from_fn(|_| rng.uniform(-scale, scale))
}

/// The kernel's values and shared gradient (from `launch`) against `oracle`'s per-element
/// `(value, shared gradient words)`, summed in f64, and the same bits from a second launch.
/// Each word is held to 1e-5 of the sum of its terms' magnitudes, or of a thousandth of the
/// largest such sum where that is more: a word whose every term is small comes from units
/// that few elements bring past a relu's kink, where the sum `s` is small after
/// cancellation and its f32 error large beside it (a `W2` word of the 6-32-32-1 relu
/// network of terms 3.4e-5 in all erred by 3.7e-5 of that on lavapipe; one of 2.8e-4 in a
/// 3-32-32-3 by 1.2e-5 on the H200).
pub fn check<A>(
    name: &str,
    batch: &[A],
    launch: impl Fn() -> (Vec<f32>, Vec<f64>),
    oracle: impl Fn(&A) -> (f32, Vec<f64>),
) {
    let (values, sg) = launch();
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
    let magnitude = |w: usize| -> f64 { per_element.iter().map(|p| p.1[w].abs()).sum() };
    let largest = (0..sg.len()).map(magnitude).fold(1e-20, f64::max);
    for (w, g) in sg.iter().enumerate() {
        let want: f64 = per_element.iter().map(|p| p.1[w]).sum();
        let scale = magnitude(w).max(1e-3 * largest);
        let e = (g - want).abs() / scale;
        assert!(
            e < 1e-5,
            "{name}: shared word {w}: {g} against {want} ({e:e})"
        );
    }
    assert_eq!(sg, launch().1, "{name}: not bit-identical");
}

/// Shared words of network `src`.
pub fn shared_words_of(src: &str) -> usize {
    let c = gradfuse_shaders_gen::compile_str(src).expect("compiles");
    c.lowered.layout.shared_words as usize
}

/// [`check_against_interpreter`] on `n` elements of `words` words, uniform in [-1, 1],
/// and shared words uniform in [-0.3, 0.3], drawn from `seed`.
pub fn check_at_random(name: &str, src: &str, (words, n): (usize, usize), seed: u64) {
    let mut rng = Rng(seed);
    let shared: Vec<f32> = (0..shared_words_of(src))
        .map(|_| rng.uniform(-0.3, 0.3))
        .collect();
    let input: Vec<f32> = (0..n * words).map(|_| rng.uniform(-1.0, 1.0)).collect();
    check_against_interpreter(name, src, words, &shared, &input);
}

/// Network `src`'s cooperative adjoint on `input` (rows of `words`) and `shared`, against
/// the f64 interpreter's reverse mode of the unoptimized IR.
pub fn check_against_interpreter(
    name: &str,
    src: &str,
    words: usize,
    shared: &[f32],
    input: &[f32],
) {
    use super::compiled::compiled_spec;
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::{ad, compile_str, interp};
    let c = compile_str(src).expect("compiles");
    assert!(c.wgsl_reverse.contains("register-blocked"), "{name}");
    let spec = compiled_spec("net", &c, KernelKind::Adjoint);
    assert!(!spec.bounds_checks, "{name}: compiled with bounds checks");
    let n = input.len() / words;
    let mut values = vec![0.0f32; n];
    let mut sg = vec![0.0f32; spec.shared_grad_words()];
    super::device()
        .launch_shared(spec, input, shared, &mut [&mut values], &mut sg)
        .expect("launch");
    let reverse = ad::reverse(&c.lowered.primal);
    let mut per_element = Vec::with_capacity(n);
    for e in 0..n {
        let row = input[e * words..(e + 1) * words].iter().chain(shared);
        let all = interp::eval(&reverse, &row.map(|v| *v as f64).collect::<Vec<_>>());
        per_element.push((all[0] as f32, all[1 + words..].to_vec()));
    }
    check(
        name,
        &per_element,
        || (values.clone(), sg.iter().map(|v| *v as f64).collect()),
        |p| p.clone(),
    );
}
