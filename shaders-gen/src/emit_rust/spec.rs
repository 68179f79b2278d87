//! The `KernelSpec` of a kernel: the launch description the runtime reads (bindings,
//! words, workgroup size, the shared-gradient reduction), from [`crate::abi`].

use super::ItemPlan;
use crate::abi::{self, KernelKind};
use crate::launch::{kernel_launch, per_element_launch};
use proc_macro2::TokenStream;
use quote::quote;

/// The `::gradfuse::KernelSpec` of kernel `kind`, whose CPU version is the function `cpu`.
pub(super) fn kernel_spec(plan: &ItemPlan, kind: KernelKind, cpu: &syn::Ident) -> TokenStream {
    let wgsl = match kind {
        KernelKind::Forward => quote!(WGSL_FORWARD),
        KernelKind::Adjoint => quote!(WGSL_ADJOINT),
        KernelKind::Jacobian => quote!(WGSL_JACOBIAN),
        KernelKind::Tangent => quote!(WGSL_TANGENT),
        KernelKind::Hessian => quote!(WGSL_HESSIAN),
    };
    let label = format!("{}::{}", plan.fname, kind.entry_point());
    let fallback = match fallback_names(plan, kind) {
        Some((_, spec)) => quote!(::core::option::Option::Some(&#spec)),
        None => quote!(::core::option::Option::None),
    };
    spec_of(plan, kind, cpu, wgsl, &label, Form::Plain { fallback })
}

/// The names of the WGSL constant and the spec of kernel `kind`'s fallback of one element
/// a thread, for a kernel that has one ([`crate::Compiled::adjoint_fallback`]).
fn fallback_names(plan: &ItemPlan, kind: KernelKind) -> Option<(syn::Ident, syn::Ident)> {
    let name = kind.entry_point().to_uppercase();
    plan.c.fallback(kind).map(|_| {
        (
            quote::format_ident!("WGSL_{name}_FALLBACK"),
            quote::format_ident!("{name}_FALLBACK_KERNEL"),
        )
    })
}

/// The WGSL constants and specs of the value and adjoint kernels' fallbacks of one
/// element a thread, where the function has them: the kernels a device with less workgroup
/// memory than the cooperative network kernels' runs (the runtime picks,
/// `gradfuse::KernelSpec::fallback`).
pub(super) fn fallback_items(plan: &ItemPlan) -> TokenStream {
    let kernels = [
        (KernelKind::Forward, "cpu_forward"),
        (KernelKind::Adjoint, "cpu_adjoint"),
    ];
    let items = kernels.into_iter().filter_map(|(kind, cpu)| {
        let (wgsl, (wgsl_name, spec_name)) = (plan.c.fallback(kind)?, fallback_names(plan, kind)?);
        let label = format!(
            "{}::{} (one element a thread)",
            plan.fname,
            kind.entry_point()
        );
        let cpu = quote::format_ident!("{cpu}");
        let spec = spec_of(
            plan,
            kind,
            &cpu,
            quote!(#wgsl_name),
            &label,
            Form::PerElement,
        );
        Some(quote! {
            /// The WGSL module of one element a thread that devices with too little
            /// workgroup memory for the cooperative kernel run.
            pub const #wgsl_name: &str = #wgsl;
            /// Its launch description.
            pub static #spec_name: ::gradfuse::KernelSpec = #spec;
        })
    });
    quote!(#(#items)*)
}

/// The `::gradfuse::GatheredSpec` of the gathered variant of kernel `kind` (see
/// [`abi::FIELDS_BINDING`]).
pub(super) fn gathered_spec(plan: &ItemPlan, kind: KernelKind, cpu: &syn::Ident) -> TokenStream {
    let wgsl = match kind {
        KernelKind::Forward => quote!(WGSL_FORWARD_GATHERED),
        KernelKind::Adjoint => quote!(WGSL_ADJOINT_GATHERED),
        KernelKind::Jacobian => quote!(WGSL_JACOBIAN_GATHERED),
        KernelKind::Tangent | KernelKind::Hessian => {
            unreachable!("no gathered tangent or Hessian kernel is generated")
        }
    };
    let label = format!("{}::{} (gathered)", plan.fname, kind.entry_point());
    let kernel = spec_of(plan, kind, cpu, wgsl, &label, Form::PerElement);
    let fields = plan.layout.fields().into_iter().enumerate().map(|(k, slot)| {
        let (rows, index) = abi::field_bindings(k as u32);
        // 4-byte words, as the runtime counts them.
        let words = slot.len.unwrap_or(1) as u32 * plan.layout.precision.words_per_scalar();
        quote!(::gradfuse::FieldSpec { rows_binding: #rows, index_binding: #index, words: #words })
    });
    let rows = if plan.layout.has_rows_entry(kind) {
        let (entry, binding) = (abi::ROWS_ENTRY_POINT, abi::ROWS_BINDING);
        let label = format!("{}::{entry}", plan.fname);
        quote!(::core::option::Option::Some(::gradfuse::RowsEntry {
            entry_point: #entry,
            label: #label,
            order_binding: #binding,
        }))
    } else {
        quote!(::core::option::Option::None)
    };
    quote! {
        ::gradfuse::GatheredSpec {
            kernel: #kernel,
            fields: &[#(#fields),*],
            rows: #rows,
        }
    }
}

/// Which of a kernel's launches a spec describes.
enum Form {
    /// The plain kernel's, with the tokens of its fallback (an `Option<&KernelSpec>`).
    Plain { fallback: TokenStream },
    /// One element a thread's: the gathered variant's, or the fallback's.
    PerElement,
}

/// The spec of kernel `kind` whose WGSL constant is `wgsl`, launched as `form` says.
fn spec_of(
    plan: &ItemPlan,
    kind: KernelKind,
    cpu: &syn::Ident,
    wgsl: TokenStream,
    label: &str,
    form: Form,
) -> TokenStream {
    // Gathered kernels and fallbacks compute one element a thread, whatever the plain one
    // does: their shared words too are bound as such a kernel's (a network's gathered
    // adjoint was bound to storage, as its cooperative plain kernel is, and failed to
    // launch).
    let (launch, fallback) = match form {
        Form::Plain { fallback } => (kernel_launch(plan.c, kind), fallback),
        Form::PerElement => (
            per_element_launch(plan.c, kind),
            quote!(::core::option::Option::None),
        ),
    };
    let (wg, bounds_checks) = (launch.workgroup_size, launch.bounds_checks);
    let workgroup_bytes = launch.workgroup_bytes;
    let entry = kind.entry_point();
    let precision = super::tokens::precision_value(launch.precision);
    let outs = launch.outputs.iter().map(
        |(binding, words)| quote!(::gradfuse::OutputSpec { binding: #binding, words: #words }),
    );
    let (maxg, pb, ab) = (
        abi::MAX_WORKGROUPS_PER_DIM,
        abi::PARAMS_BINDING,
        abi::ARGS_BINDING,
    );
    let (input_words, work) = (launch.input_words, launch.work_per_element);
    let shared = match launch.shared {
        Some(shared) => {
            let (sb, sw, uniform) = (abi::SHARED_BINDING, shared.words, shared.uniform);
            let (elements, divides) = (shared.elements_per_thread, shared.divides_chunks);
            let reduction = if shared.reduced {
                let (partials, rp, ri, ro) = (
                    abi::PARTIALS_BINDING,
                    abi::REDUCE_PARAMS_BINDING,
                    abi::REDUCE_INPUT_BINDING,
                    abi::REDUCE_OUTPUT_BINDING,
                );
                let rlabel = format!("{}::reduce", plan.fname);
                let per_group = abi::REDUCE_WORDS_PER_WORKGROUP;
                quote!(Some(::gradfuse::ReductionSpec {
                    partials_binding: #partials,
                    label: #rlabel,
                    wgsl: WGSL_REDUCE,
                    entry_point: "reduce",
                    params_binding: #rp,
                    input_binding: #ri,
                    output_binding: #ro,
                    words_per_workgroup: #per_group,
                    elements_per_thread: #elements,
                    divides_chunks: #divides,
                }))
            } else {
                quote!(None)
            };
            quote!(Some(&::gradfuse::SharedSpec {
                binding: #sb,
                words: #sw,
                uniform: #uniform,
                reduction: #reduction,
            }))
        }
        None => quote!(None),
    };
    quote! {
        ::gradfuse::KernelSpec {
            label: #label,
            wgsl: #wgsl,
            entry_point: #entry,
            workgroup_size: #wg,
            max_workgroups_per_dim: #maxg,
            params_binding: #pb,
            input_binding: #ab,
            input_words: #input_words,
            outputs: &[#(#outs),*],
            shared: #shared,
            work_per_element: #work,
            precision: #precision,
            bounds_checks: #bounds_checks,
            workgroup_bytes: #workgroup_bytes,
            fallback: #fallback,
            cpu: #cpu,
        }
    }
}
