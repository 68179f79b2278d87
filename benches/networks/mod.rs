//! The network table of the GPU bench (`--networks`): per-element I-H-H-1 tanh networks
//! with shared weights, `value_and_grad` with the shared gradient summed over the batch,
//! against the arithmetic ceiling measured in the same run. `benches/networks/jax_networks.py`
//! times JAX on the same networks (run it in the same session on the same device).

use crate::common::{NET32_SRC, NET64_SRC, net32, net64};
use gradfuse::{Error, KernelSpec};

/// One network of the table.
struct Network {
    name: &'static str,
    /// Input, hidden and output widths.
    dims: (usize, usize, usize),
    forward: &'static KernelSpec,
    adjoint: &'static KernelSpec,
    /// Its source, for the adjoint's variants.
    src: &'static str,
}

impl Network {
    /// Multiply-adds per element: the forward pass's products, and twice as many in the
    /// reverse pass (the adjoint of each product feeds both factors). The tanh and the loss
    /// are not counted: this is the work a batched matrix product would do.
    fn fmas(&self, gradient: bool) -> f64 {
        let (i, h, o) = self.dims;
        let forward = (i * h + h * h + h * o) as f64;
        if gradient { 3.0 * forward } else { forward }
    }
}

/// The table's rows, for `sizes` (log2 of the batch), timed by `time(spec, input)`; each
/// adjoint also with its workgroup sum cut out (`cut`, wrong sums: the reverse pass's own
/// time), and with 1, 2 and 4 elements per thread (`elements(adjoint, source, count)`,
/// checked against the adjoint); each value kernel also with its shared words' lanes
/// divided at run time (`divided`, checked against it).
pub fn table(
    sizes: &[u32],
    fma_rate: f64,
    inputs: impl Fn(usize, u32) -> Vec<f32>,
    time: impl Fn(&'static KernelSpec, &[f32]) -> Result<f64, Error>,
    cut: impl Fn(&'static KernelSpec) -> Option<&'static KernelSpec>,
    divided: impl Fn(&'static KernelSpec) -> Result<&'static KernelSpec, Error>,
    elements: impl Fn(&'static KernelSpec, &str, u32) -> Result<&'static KernelSpec, Error>,
) -> String {
    let networks = networks();
    let mut out = String::from(
        "| network | kernel | n | ms | FMAs per element | GFMA/s | % of FMA ceiling |\n|---|---|---|---|---|---|---|\n",
    );
    for net in &networks {
        for &log_n in sizes {
            let n = 1usize << log_n;
            // x (8 words) and the target per element.
            let input = inputs(n, 9);
            let mut kernels = vec![
                ("value", Ok(net.forward), false),
                (
                    "value, lanes divided at run time",
                    divided(net.forward),
                    false,
                ),
                ("value_and_grad", Ok(net.adjoint), true),
            ];
            // A cooperative adjoint sums over its warps, not through a stage to cut.
            if let Some(cut) = cut(net.adjoint) {
                kernels.push(("value_and_grad, sum cut", Ok(cut), true));
            }
            for (e, label) in [
                (1, "value_and_grad, 1 element per thread"),
                (2, "value_and_grad, 2 elements per thread"),
                (4, "value_and_grad, 4 elements per thread"),
            ] {
                kernels.push((label, elements(net.adjoint, net.src, e), true));
            }
            for (kernel, spec, grad) in kernels {
                let row = match spec.and_then(|spec| time(spec, &input)) {
                    Ok(t) => rate_cells(t, n, net.fmas(grad), fma_rate, true),
                    Err(e) => format!("skipped: {e} | | |"),
                };
                out.push_str(&format!(
                    "| {} | {kernel} | 2^{log_n} | {row} |\n",
                    net.name
                ));
            }
        }
    }
    out
}

/// A row's time (ms), FMAs per element (`with_fmas`), rate (GFMA/s) and % of the FMA
/// ceiling, for `n` elements of `fmas` each in `t` seconds.
fn rate_cells(t: f64, n: usize, fmas: f64, fma_rate: f64, with_fmas: bool) -> String {
    let rate = n as f64 * fmas / t;
    let fmas = if with_fmas {
        format!(" | {fmas:.0}")
    } else {
        String::new()
    };
    format!(
        "{:.3}{fmas} | {:.0} | {:.1}%",
        t * 1e3,
        rate / 1e9,
        100.0 * rate / fma_rate
    )
}

/// The table's networks.
fn networks() -> [Network; 2] {
    [
        Network {
            name: "8-32-32-1",
            dims: (8, 32, 1),
            forward: &net32::FORWARD_KERNEL,
            adjoint: &net32::ADJOINT_KERNEL,
            src: NET32_SRC,
        },
        Network {
            name: "8-64-64-1",
            dims: (8, 64, 1),
            forward: &net64::FORWARD_KERNEL,
            adjoint: &net64::ADJOINT_KERNEL,
            src: NET64_SRC,
        },
    ]
}

/// Hand-edited variants of the networks' adjoints, to find where a kernel's time goes
/// before changing the generator: for each network, `dir/<network>.wgsl` is its adjoint
/// as generated (written there when missing, to copy and edit), and each
/// `dir/<network>~<label>.wgsl` is timed on the same buffers next to it, with how far its
/// results are from the adjoint's (`disagreement(adjoint, variant)`: the largest relative
/// difference of an output and of a shared-gradient word; a variant that cuts work for
/// timing is expected to disagree).
pub fn variants_table(
    dir: &std::path::Path,
    sizes: &[u32],
    fma_rate: f64,
    inputs: impl Fn(usize, u32) -> Vec<f32>,
    time: impl Fn(&'static KernelSpec, &[f32]) -> Result<f64, Error>,
    variant: impl Fn(&'static KernelSpec, &'static str, String) -> &'static KernelSpec,
    disagreement: impl Fn(&'static KernelSpec, &'static KernelSpec) -> Result<(f32, f32), Error>,
) -> Result<String, Error> {
    let io = |e: std::io::Error| Error::Validation {
        label: dir.display().to_string(),
        message: e.to_string(),
    };
    let mut out = String::from(
        "| network | kernel | n | ms | GFMA/s | % of FMA ceiling | output, shared-gradient disagreement |\n|---|---|---|---|---|---|---|\n",
    );
    for net in networks() {
        let base = dir.join(format!("{}.wgsl", net.name));
        if !base.exists() {
            std::fs::write(&base, net.adjoint.wgsl).map_err(io)?;
        }
        let mut kernels = vec![("value_and_grad".to_string(), net.adjoint)];
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for path in files {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let Some(label) = name.as_deref().and_then(|n| {
                n.strip_prefix(&format!("{}~", net.name))?
                    .strip_suffix(".wgsl")
            }) else {
                continue;
            };
            let label: &'static str =
                Box::leak(format!("{} ({label})", net.adjoint.label).into_boxed_str());
            let wgsl = std::fs::read_to_string(&path).map_err(io)?;
            kernels.push((label.to_string(), variant(net.adjoint, label, wgsl)));
        }
        let agreement: Vec<String> = kernels
            .iter()
            .map(|(_, spec)| match disagreement(net.adjoint, spec) {
                Ok((o, s)) => format!("{o:.1e}, {s:.1e}"),
                Err(e) => format!("failed: {e}"),
            })
            .collect();
        for &log_n in sizes {
            let n = 1usize << log_n;
            let input = inputs(n, 9);
            for ((label, spec), agree) in kernels.iter().zip(&agreement) {
                let row = match time(spec, &input) {
                    Ok(t) => rate_cells(t, n, net.fmas(true), fma_rate, false),
                    Err(e) => format!("skipped: {e} | |"),
                };
                out.push_str(&format!(
                    "| {} | {label} | 2^{log_n} | {row} | {agree} |\n",
                    net.name
                ));
            }
        }
    }
    Ok(out)
}
