//! Which kernel [`crate::compile`] writes for a scalar function's value and adjoint: the
//! cooperative network kernels of the workgroup's matrix products
//! ([`crate::emit_wgsl::emit_network_value`], [`crate::emit_wgsl::emit_network_adjoint`])
//! with a kernel of one element a thread as their fallback, or one element a thread alone.

use crate::abi::{self, KernelKind};
use crate::ir::{self, Function};
use crate::launch::KernelForm;
use crate::{cooperative, emit_wgsl, opt};

/// A kernel as [`crate::compile`] chose it: its WGSL and form, and where that form needs more
/// workgroup memory than every device has, the WGSL of one element a thread.
pub(crate) struct ChosenKernel {
    pub(crate) wgsl: String,
    pub(crate) form: KernelForm,
    pub(crate) fallback: Option<String>,
}

/// The value kernel of a scalar function whose lowered primal is `f` (`primal`: the other
/// kernels' unrolled one): for some networks the workgroup's matrix products
/// (`emit_wgsl::network`), for every other function one element a thread. Returns its
/// WGSL, its form and the IR of the value kernel of one element a thread (which the
/// gathered value kernel is).
pub(crate) fn value_kernel(
    sig: &str,
    layout: &abi::ArgLayout,
    f: &Function,
    primal: &Function,
) -> (ChosenKernel, Function) {
    // The value kernel unrolls layers over shared weights further (where there are none,
    // its primal is the other kernels').
    let layers = shared_layer(layout);
    let value_unrolled =
        if (f.nodes.iter()).any(|n| matches!(&n.op, ir::Op::Loop(l) if layers(f, l))) {
            opt::unroll_indexed_loops_wider(f, &layers)
        } else {
            primal.clone()
        };
    let value_primal = opt::for_value_kernel(&value_unrolled);
    // The workgroup's products compute a network's value where one element a thread keeps
    // a layer as a loop (past `opt::VALUE_UNROLL_BUDGET`; of 64 rows:
    // `NetworkPlan::value_supported`): the 8-64-64-64-1's ran 2.0x faster so on the H200
    // (24.8 -> 12.4 ms at 2^24). Where every layer unrolls, one element a thread reading its
    // weights at constant offsets is the faster: 6.91 against 7.64 ms for the 8-64-64-1,
    // 1.63 against 2.69 for the 8-32-32-1 (BENCHMARKS.md).
    let keeps_layer = (value_unrolled.nodes.iter())
        .any(|n| matches!(&n.op, ir::Op::Loop(l) if layers(&value_unrolled, l)));
    let plan = keeps_layer
        .then(|| cooperative::network_value_plan(layout, f))
        .flatten();
    let per_element = emit_wgsl::emit_kernel(sig, layout, KernelKind::Forward, &value_primal);
    let kernel = match plan {
        Some(plan) => ChosenKernel {
            wgsl: emit_wgsl::emit_network_value(sig, &plan),
            form: network_form(&plan, plan.value_workgroup_bytes()),
            fallback: Some(per_element),
        },
        None => ChosenKernel {
            wgsl: per_element,
            form: KernelForm::PER_ELEMENT,
            fallback: None,
        },
    };
    (kernel, value_primal.into_owned())
}

/// The adjoint kernel of a scalar function whose lowered primal is `f`: for a network the
/// cooperative kernel supports, the workgroup's matrix products; for every other function
/// `kernel_adjoint` at `elements` a thread.
pub(crate) fn adjoint_kernel(
    sig: &str,
    layout: &abi::ArgLayout,
    f: &Function,
    kernel_adjoint: &Function,
    elements: u32,
) -> ChosenKernel {
    let per_element = || {
        emit_wgsl::emit_kernel_with_elements(
            sig,
            layout,
            KernelKind::Adjoint,
            kernel_adjoint,
            elements,
        )
    };
    match cooperative::network_plan(layout, f) {
        Some(plan) => ChosenKernel {
            wgsl: emit_wgsl::emit_network_adjoint(sig, &plan),
            form: network_form(&plan, plan.workgroup_bytes()),
            fallback: Some(per_element()),
        },
        None => ChosenKernel {
            wgsl: per_element(),
            form: KernelForm::PER_ELEMENT,
            fallback: None,
        },
    }
}

/// The form of a cooperative network kernel of `plan` (value or adjoint) declaring
/// `workgroup_bytes` of workgroup memory: its workgroup size, no bounds checks (every index
/// is in range by construction), shared words from storage.
fn network_form(plan: &emit_wgsl::NetworkPlan, workgroup_bytes: u32) -> KernelForm {
    KernelForm {
        workgroup_size: emit_wgsl::network_workgroup_size(plan),
        bounds_checks: false,
        shared_uniform: emit_wgsl::NETWORK_SHARED_UNIFORM,
        workgroup_bytes,
        divides_chunks: true,
    }
}

/// Whether a top-level loop is a layer over `#[shared]` weights, which the value kernel
/// unrolls up to [`opt::VALUE_UNROLL_BUDGET`] operations: its trips are independent
/// ([`ir::Loop::maps_carried_arrays`]) and it reads a `#[shared]` array.
///
/// Unrolled, each weight is read at a constant offset where the loop computes one per
/// trip. On the H100 (BENCHMARKS.md, "Value kernels: layers over shared weights
/// unrolled") an 8-64-64-1 network's value kernel went from 0.723 to 0.447 ms at 2^20
/// and from 10.58 to 7.01 ms at 2^24; an 8-32-32-1's from 0.137 to 0.125 ms and 1.94 to
/// 1.69 ms. With every loop under the wider budget unrolled instead, recurrences over
/// shared sequences lost up to 1.4x, a layer over per-element weights 3.2x and tangent
/// kernels up to 4.3x: those keep the base budget.
fn shared_layer(layout: &abi::ArgLayout) -> impl Fn(&Function, &ir::Loop) -> bool + '_ {
    |f: &Function, l: &ir::Loop| l.maps_carried_arrays() && shared_array_words(layout, f, l) > 0
}

/// Words of the `#[shared]` arrays loop `l` of `f` reads (the arrays it captures that
/// hold shared words).
pub(crate) fn shared_array_words(layout: &abi::ArgLayout, f: &Function, l: &ir::Loop) -> usize {
    let shared = layout.words..layout.words + layout.shared_words;
    let is_shared =
        |w: &ir::ValueId| matches!(f.node(*w).op, ir::Op::Input(i) if shared.contains(&i));
    (l.captures.iter())
        .filter_map(|c| match &f.node(*c).op {
            ir::Op::ArrayNew(ws) if ws.iter().any(is_shared) => Some(ws.len()),
            _ => None,
        })
        .sum()
}
