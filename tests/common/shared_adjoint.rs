//! An adjoint kernel that sums shared gradients, compiled at run time and checked against
//! the f64 interpreter's reverse mode over a batch.

use super::compiled::compiled_spec;
use super::{Rng, device};
use gradfuse::Error;
use gradfuse_shaders_gen::abi::KernelKind;
use gradfuse_shaders_gen::{ad, compile_str, interp};

/// Runs the adjoint of `src` (`m` element words in [-1, 1], then `shared` shared words in
/// [-0.6, 0.6], drawn from `seed`) over `n` elements, a period of `distinct` random
/// elements repeated so that the oracle evaluates each once, and checks values and
/// gradients (of three copies of each element) and the batch's shared gradient against
/// the interpreter. Failures name `label` and print the source.
pub fn check_shared_adjoint(
    label: &str,
    src: &str,
    (m, shared_words): (usize, usize),
    (n, distinct): (usize, usize),
    seed: u64,
) -> Result<(), Error> {
    let c = compile_str(src).unwrap_or_else(|e| panic!("{label}: {e:?}\n{src}"));
    let spec = compiled_spec("shared_adjoint", &c, KernelKind::Adjoint);
    let mut rng = Rng(seed);
    let elements: Vec<Vec<f32>> = (0..distinct)
        .map(|_| (0..m).map(|_| rng.uniform(-1.0, 1.0)).collect())
        .collect();
    let shared: Vec<f32> = (0..shared_words).map(|_| rng.uniform(-0.6, 0.6)).collect();
    let input: Vec<f32> = (0..n)
        .flat_map(|i| elements[i % distinct].clone())
        .collect();
    let (mut values, mut grads) = (vec![0.0f32; n], vec![0.0f32; n * m]);
    let mut shared_grad = vec![0.0f32; shared_words];
    device().launch_shared(
        spec,
        &input,
        &shared,
        &mut [&mut values, &mut grads],
        &mut shared_grad,
    )?;
    let reverse = ad::reverse(&c.lowered.primal);
    let (mut sum, mut magnitude) = (vec![0.0f64; shared_words], vec![0.0f64; shared_words]);
    let copies = |k: usize| (n / distinct + usize::from(k < n % distinct)) as f64;
    for (k, e) in elements.iter().enumerate() {
        let words: Vec<f64> = e.iter().chain(&shared).map(|&v| v as f64).collect();
        let all = interp::eval(&reverse, &words);
        let scale = all.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for i in (k..n).step_by(distinct).take(3) {
            let got = std::iter::once(values[i]).chain(grads[i * m..(i + 1) * m].iter().copied());
            for (w, (g, want)) in got.zip(&all[..1 + m]).enumerate() {
                assert!(
                    (g as f64 - want).abs() <= 1e-4 * scale,
                    "{label}, element {i}, output word {w}: {g} against {want}\n{src}"
                );
            }
        }
        for (j, g) in all[1 + m..].iter().enumerate() {
            sum[j] += copies(k) * g;
            magnitude[j] += copies(k) * g.abs();
        }
    }
    let largest = magnitude.iter().fold(1.0f64, |m, v| m.max(*v));
    for (j, (got, want)) in shared_grad.iter().zip(&sum).enumerate() {
        assert!(
            (*got as f64 - want).abs() <= 1e-4 * largest,
            "{label}, n {n}: shared word {j}: {got} against {want}\n{src}"
        );
    }
    Ok(())
}
