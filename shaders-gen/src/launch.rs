//! How the runtime launches a generated kernel: its buffers, their words, its shared
//! arguments and its work, as data. The macro quotes it into a `gradfuse::KernelSpec`
//! (`emit_rust/spec.rs`); benches and tests that compile functions at run time build their
//! specs from the same description, so a kernel is launched one way whoever compiled it.

use crate::abi::{self, KernelKind};
use crate::ir::Function;
use crate::signature::Precision;
use crate::{Compiled, Reverse};

/// The launch of one kernel of a compiled function. Word counts are 4-byte words, as the
/// runtime counts them (an f64 is two).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLaunch {
    /// Which kernel.
    pub kind: KernelKind,
    /// Argument words per element (for a tangent kernel, the arguments and their tangents).
    pub input_words: u32,
    /// The output buffers: `(binding, words per element)`.
    pub outputs: Vec<(u32, u32)>,
    /// The `#[shared]` arguments, for a function that has any.
    pub shared: Option<SharedLaunch>,
    /// Operations per element, loops counted by their trips: what the runtime sizes chunks
    /// by (and benches hold against the device's arithmetic rate).
    pub work_per_element: u64,
    /// The kernel's float type.
    pub precision: Precision,
    /// Threads per workgroup.
    pub workgroup_size: u32,
    /// Whether the runtime compiles it with wgpu's bounds checks ([`KernelForm`]).
    pub bounds_checks: bool,
    /// Workgroup memory a device must have to run it ([`KernelForm::workgroup_bytes`]).
    pub workgroup_bytes: u32,
}

/// How one kernel of a compiled function is compiled and bound: what a kernel of one
/// element a thread has ([`KernelForm::PER_ELEMENT`]), or the cooperative network
/// kernels' own (`emit_wgsl::network`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelForm {
    /// Threads per workgroup.
    pub workgroup_size: u32,
    /// Whether the runtime compiles it with wgpu's bounds checks: not the cooperative
    /// network kernels, whose every index is in range by construction (`emit_wgsl::network`'s
    /// module doc says why and what it costs).
    pub bounds_checks: bool,
    /// Whether it reads `#[shared]` words from a uniform buffer where there are few enough
    /// ([`abi::shared_in_uniform`]): not the cooperative network kernels, whose lanes read
    /// different weights at once (the constant cache serves one address at a time).
    pub shared_uniform: bool,
    /// Bytes of workgroup memory a device must have to run it: 0 for a kernel of one
    /// element a thread, which declares no more than the 16 KiB WebGPU guarantees every
    /// device (or sizes what it declares by the device's), and the cooperative network
    /// kernels' matrices, up to 48 KiB, which Apple's and most mobile GPUs lack (32 KiB).
    /// Where a device has less, the runtime launches the function's kernel of one element
    /// a thread instead ([`crate::Compiled::adjoint_fallback`]).
    pub workgroup_bytes: u32,
    /// Whether the kernel divides a launch's elements among the workgroups dispatched
    /// itself (the cooperative network kernels, in chunks), so that a reducing launch may
    /// dispatch as many workgroups as it has runs for ([`SharedLaunch::divides_chunks`]).
    pub divides_chunks: bool,
}

impl KernelForm {
    /// The form of a kernel of one element a thread, which every gathered kernel is too.
    pub const PER_ELEMENT: KernelForm = KernelForm {
        workgroup_size: abi::WORKGROUP_SIZE,
        bounds_checks: true,
        shared_uniform: true,
        workgroup_bytes: 0,
        divides_chunks: false,
    };
}

/// The `#[shared]` arguments of a kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SharedLaunch {
    /// Their words.
    pub words: u32,
    /// Whether the kernel reads them from a uniform buffer rather than storage
    /// ([`abi::shared_in_uniform`]).
    pub uniform: bool,
    /// Whether the kernel writes partial sums of their gradient for the second pass of the
    /// reduction (`Compiled::wgsl_reduce`): adjoint kernels do.
    pub reduced: bool,
    /// Batch elements each thread of the kernel computes side by side
    /// ([`crate::Compiled::adjoint_elements`] for the adjoint, else 1).
    pub elements_per_thread: u32,
    /// Whether the adjoint divides a launch's elements among the dispatched workgroups
    /// itself ([`KernelForm::divides_chunks`]): the runtime then dispatches a reducing
    /// launch's full count of workgroups rather than whole multiples of runs.
    pub divides_chunks: bool,
}

/// The launch of kernel `kind` of `c`. A Hessian kind for a function without a Hessian
/// kernel has no work.
pub fn kernel_launch(c: &Compiled, kind: KernelKind) -> KernelLaunch {
    let form = match kind {
        KernelKind::Forward => c.forward_form,
        KernelKind::Adjoint => c.adjoint_form,
        _ => KernelForm::PER_ELEMENT,
    };
    launch_of(c, kind, form)
}

/// The launch of kernel `kind` of `c` as one element a thread computes it, whatever the
/// plain kernel does: the gathered variant's (`Compiled::wgsl_gathered`) and the fallback's
/// (`Compiled::forward_fallback`, `Compiled::adjoint_fallback`).
pub fn per_element_launch(c: &Compiled, kind: KernelKind) -> KernelLaunch {
    launch_of(c, kind, KernelForm::PER_ELEMENT)
}

/// The launch of kernel `kind` of `c` compiled and bound as `form` says.
fn launch_of(c: &Compiled, kind: KernelKind, form: KernelForm) -> KernelLaunch {
    let base = &c.lowered.layout;
    let tangent_layout;
    let layout = if kind == KernelKind::Tangent {
        tangent_layout = base.tangent_layout();
        &tangent_layout
    } else {
        base
    };
    let wps = layout.precision.words_per_scalar();
    let work_per_element = kernel_ir(c, kind).map_or(0, Function::work);
    // A tangent kernel's shared words are followed by their tangents.
    let shared = (layout.shared_words > 0).then(|| SharedLaunch {
        words: layout.shared_words * wps,
        uniform: abi::shared_in_uniform(layout.shared_words, layout.precision)
            && form.shared_uniform,
        reduced: kind == KernelKind::Adjoint,
        elements_per_thread: if kind == KernelKind::Adjoint {
            c.adjoint_elements
        } else {
            1
        },
        divides_chunks: form.divides_chunks && kind == KernelKind::Adjoint,
    });
    KernelLaunch {
        kind,
        input_words: layout.words * wps,
        outputs: kind
            .outputs(layout)
            .iter()
            .map(|(binding, words, _)| (*binding, words * wps))
            .collect(),
        shared,
        work_per_element,
        precision: layout.precision,
        workgroup_size: form.workgroup_size,
        bounds_checks: form.bounds_checks,
        workgroup_bytes: form.workgroup_bytes,
    }
}

/// The IR that kernel `kind` of `c` runs per element (none: a function without a Hessian
/// kernel).
pub fn kernel_ir(c: &Compiled, kind: KernelKind) -> Option<&Function> {
    match kind {
        KernelKind::Forward => Some(&c.primal),
        KernelKind::Adjoint | KernelKind::Jacobian => Some(c.reverse.function()),
        KernelKind::Tangent => Some(&c.tangent),
        KernelKind::Hessian => c
            .second
            .as_ref()
            .and_then(|s| s.hessian.as_ref())
            .map(|h| &h.function),
    }
}

/// The reverse kernel's kind: the adjoint for an `f32` result, the Jacobian kernel for a
/// vector result.
pub fn reverse_kind(c: &Compiled) -> KernelKind {
    match c.reverse {
        Reverse::Gradient(_) => KernelKind::Adjoint,
        Reverse::Jacobian(..) => KernelKind::Jacobian,
    }
}
