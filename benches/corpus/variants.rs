//! Hand-edited variants of corpus kernels, timed beside the generated ones.
//!
//! `GRADFUSE_CORPUS_VARIANTS=dir`: every kernel the run times is written to
//! `dir/<function>.<kernel>.wgsl`, and each `dir/<function>.<kernel>~<name>.wgsl` found
//! there is timed as one more row, `<function>~<name>`, with the generated kernel's
//! buffers, once it has computed what the generated kernel computes (values, gradients and
//! shared gradients on 3,000 elements). A change to the generator is tried as text first.

use super::ceilings;
use gradfuse::{Device, Error, KernelSpec};

/// The generated kernel `spec` with its WGSL replaced (leaked: specs are `'static`), and
/// its workgroup size the variant's own `@workgroup_size` (a variant may change the launch
/// shape).
fn with_wgsl(spec: &'static KernelSpec, label: String, wgsl: String) -> &'static KernelSpec {
    let workgroup_size = wgsl
        .split("@workgroup_size(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(spec.workgroup_size);
    Box::leak(Box::new(KernelSpec {
        label: Box::leak(label.into_boxed_str()),
        wgsl: Box::leak(wgsl.into_boxed_str()),
        workgroup_size,
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

/// Fails unless `variant` computes what `generated` does on `input`
/// ([`ceilings::disagreement`]): every output word within 1e-4 of its size (at least 1),
/// every shared-gradient word within 1e-4 of the largest.
/// A device that would run a fallback for either fails ([`ceilings::disagreement`]).
pub fn check(
    d: &Device,
    generated: &'static KernelSpec,
    variant: &'static KernelSpec,
    input: &[f32],
) -> Result<(), Error> {
    let (outputs, sums) = ceilings::disagreement(d, generated, variant, input)?;
    if outputs > 1e-4 || sums > 1e-4 {
        return Err(Error::Validation {
            label: variant.label.into(),
            message: format!(
                "disagrees with the generated kernel: outputs by {outputs:e}, shared \
                 gradient by {sums:e}"
            ),
        });
    }
    Ok(())
}
