//! Hand-edited variants of corpus kernels, timed beside the generated ones.
//!
//! `GRADFUSE_CORPUS_VARIANTS=dir`: every kernel the run times is written to
//! `dir/<function>.<kernel>.wgsl`, and each `dir/<function>.<kernel>~<name>.wgsl` found
//! there is timed as one more row, `<function>~<name>`, with the generated kernel's
//! buffers, once it has computed what the generated kernel computes (values, gradients and
//! shared gradients on 3,000 elements). A change to the generator is tried as text first.

use gradfuse::{Device, Error, KernelSpec};

/// The generated kernel `spec` with its WGSL replaced (leaked: specs are `'static`).
fn with_wgsl(spec: &'static KernelSpec, label: String, wgsl: String) -> &'static KernelSpec {
    Box::leak(Box::new(KernelSpec {
        label: Box::leak(label.into_boxed_str()),
        wgsl: Box::leak(wgsl.into_boxed_str()),
        ..*spec
    }))
}

/// Writes `spec`'s WGSL into `dir` and returns the variants of it found there, each as
/// `(name, spec)`.
pub fn variants_of(
    dir: &std::path::Path,
    function: &str,
    spec: &'static KernelSpec,
) -> Vec<(String, &'static KernelSpec)> {
    let kernel = spec.entry_point;
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(format!("{function}.{kernel}.wgsl")), spec.wgsl);
    let prefix = format!("{function}.{kernel}~");
    let mut found: Vec<(String, &'static KernelSpec)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().to_string();
            let name = file
                .strip_prefix(&prefix)?
                .strip_suffix(".wgsl")?
                .to_string();
            let wgsl = std::fs::read_to_string(e.path()).ok()?;
            Some((name, wgsl))
        })
        .map(|(name, wgsl)| {
            let label = format!("{function}~{name}::{kernel}");
            (name, with_wgsl(spec, label, wgsl))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Fails unless `variant` computes what `generated` does on `input`: every output word
/// within 1e-4 of its size (at least 1), every shared-gradient word within 1e-4 of the
/// largest.
pub fn check(
    d: &Device,
    generated: &'static KernelSpec,
    variant: &'static KernelSpec,
    input: &[f32],
) -> Result<(), Error> {
    let n = input.len() / generated.input_words as usize;
    let shared: Vec<f32> = (0..generated.shared_words())
        .map(|w| 0.3 * ((w as f32) * 0.37).sin())
        .collect();
    let run = |s: &'static KernelSpec| -> Result<(Vec<f32>, Vec<f32>), Error> {
        let mut outs: Vec<Vec<f32>> = s
            .outputs
            .iter()
            .map(|o| vec![0.0; n * o.words as usize])
            .collect();
        let mut grad = vec![0.0; s.shared_grad_words()];
        let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
        d.launch_shared(s, input, &shared, &mut views, &mut grad)?;
        Ok((outs.concat(), grad))
    };
    let (want, want_grad) = run(generated)?;
    let (got, got_grad) = run(variant)?;
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0f32, f32::max);
    let largest = want_grad.iter().fold(1e-30f32, |m, w| m.max(w.abs()));
    let worst_grad = got_grad
        .iter()
        .zip(&want_grad)
        .map(|(g, w)| (g - w).abs() / largest)
        .fold(0.0f32, f32::max);
    // A NaN where the generated kernel has none (the corpus's inputs overflow some
    // functions: both then agree on the NaN).
    let new_nan = got
        .iter()
        .zip(&want)
        .any(|(g, w)| g.is_nan() && !w.is_nan());
    if worst > 1e-4 || worst_grad > 1e-4 || new_nan {
        return Err(Error::Validation {
            label: variant.label.into(),
            message: format!(
                "disagrees with the generated kernel: outputs by {worst:e}, shared gradient \
                 by {worst_grad:e}"
            ),
        });
    }
    Ok(())
}
