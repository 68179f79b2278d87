//! `Sources`, `Sinks` and the launches with gathered arguments: each per-element argument
//! read from its own buffer or from rows of a parameter block through an index, its
//! gradient scattered back per element or per block row. Typed: an argument's source and
//! sink hold values of the argument's own type, so binding a block of rows of another shape
//! does not compile.

use super::ItemPlan;
use super::spec::gathered_spec;
use crate::GatheredWgsl;
use crate::abi::KernelKind;
use crate::signature::{Param, Precision, Shape};
use proc_macro2::TokenStream;
use quote::format_ident;
use quote::quote;

/// The type of an argument's values in its source and sink buffers.
fn value_type(p: &Param, float: &TokenStream) -> TokenStream {
    match p.kind {
        Shape::Scalar => quote!(#float),
        Shape::Array(n) => quote!([#float; #n]),
    }
}

/// An argument's 4-byte words (the runtime's unit: an f64 is two).
fn words(p: &Param, precision: Precision) -> u32 {
    let scalars = match p.kind {
        Shape::Scalar => 1,
        Shape::Array(n) => n as u32,
    };
    scalars * precision.words_per_scalar()
}

/// The items, for a function with per-element arguments (none without); `wgsl`: its
/// gathered kernels, where it has them (else a launch assembles argument rows first).
pub(super) fn gathered_api(plan: &ItemPlan, wgsl: Option<&GatheredWgsl>) -> TokenStream {
    let each: Vec<&Param> = plan.sig.params.iter().filter(|p| !p.shared).collect();
    if each.is_empty() {
        return quote!();
    }
    let (float, precision) = (plan.float_ty(), plan.sig.precision);
    let with_grad: Vec<&Param> = each.iter().copied().filter(|p| !p.constant).collect();
    let names: Vec<&syn::Ident> = each.iter().map(|p| &p.name).collect();
    let types: Vec<TokenStream> = each.iter().map(|p| value_type(p, &float)).collect();
    let grad_names: Vec<&syn::Ident> = with_grad.iter().map(|p| &p.name).collect();
    let grad_types: Vec<TokenStream> = with_grad.iter().map(|p| value_type(p, &float)).collect();
    let value_fields = fields_without_grads(&each, precision);
    let grad_fields = fields_with_grads(&each, precision);
    let has_grads = !with_grad.is_empty();
    let buf = quote!(::gradfuse::Buffer);
    let (shared_param, shared_bind, shared_grad_param, shared_grad_bind) =
        shared_bindings(plan.has_shared);
    let (sinks_item, sinks_param) = if has_grads {
        (
            sinks_item(&grad_names, &grad_types),
            quote!(sinks: &Sinks<'_>,),
        )
    } else {
        (quote!(), quote!())
    };
    let err = quote!(::gradfuse::Error);
    let (kernels, fwd_gathered, adj_gathered) = gathered_kernels(plan, wgsl, KernelKind::Adjoint);
    let sources_item = sources_item(&names, &types);
    // Least squares solves in f32.
    let residuals = (has_grads && !plan.has_shared && precision == Precision::F32)
        .then(|| gathered_residuals(&each, &adj_gathered, &value_fields));
    quote! {
        #kernels

        #sources_item

        #sinks_item

        #residuals

        impl Kernel<'_> {
            /// Records the value of every element into `values`, each argument read from
            /// its source. Lengths and indices are checked now; nothing runs before the
            /// recording is submitted.
            pub fn value_gathered(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                #shared_param
                values: &#buf<#float>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch_gathered(
                    self.device,
                    &FORWARD_KERNEL,
                    #fwd_gathered,
                    &[#(#value_fields),*],
                    ::gradfuse::GatherOutputs {
                        shared: #shared_bind,
                        values: values.raw(),
                        shared_grad: ::core::option::Option::None,
                        jacobians: ::core::option::Option::None,
                    },
                )
            }

            /// Records the value of every element into `values` and each argument's
            /// gradient into its sink (summed per block row for gathered arguments, in a
            /// fixed order: the same bits on every run), each argument read from its source.
            pub fn value_and_grad_gathered(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                #shared_param
                values: &#buf<#float>,
                #sinks_param
                #shared_grad_param
            ) -> ::core::result::Result<(), #err> {
                rec.launch_gathered(
                    self.device,
                    &ADJOINT_KERNEL,
                    #adj_gathered,
                    &[#(#grad_fields),*],
                    ::gradfuse::GatherOutputs {
                        shared: #shared_bind,
                        values: values.raw(),
                        shared_grad: #shared_grad_bind,
                        jacobians: ::core::option::Option::None,
                    },
                )
            }
        }
    }
}

/// Each per-element argument's `GatherField`: its words, where they are in the argument
/// row and in the gradient row (none for a `#[constant]` one), its source and its sink.
fn fields_with_grads(each: &[&Param], precision: Precision) -> Vec<TokenStream> {
    let (mut args_at, mut grad_at) = (0u32, 0u32);
    let mut grad_fields = Vec::new();
    for p in each {
        let (name, w) = (&p.name, words(p, precision));
        let (grad_offset, sink) = if p.constant {
            let none = quote!(::core::option::Option::None);
            (none.clone(), none)
        } else {
            (
                quote!(::core::option::Option::Some(#grad_at)),
                quote!(::core::option::Option::Some(sinks.#name.raw())),
            )
        };
        grad_fields.push(quote! {
            ::gradfuse::GatherField {
                words: #w,
                args_offset: #args_at,
                grad_offset: #grad_offset,
                source: sources.#name.parts(),
                sink: #sink,
            }
        });
        args_at += w;
        if !p.constant {
            grad_at += w;
        }
    }
    grad_fields
}

/// The launches' `shared` parameter and binding, and `shared_grad`'s, for a function with
/// `#[shared]` arguments (empty parameters and `None` bindings without).
fn shared_bindings(has_shared: bool) -> (TokenStream, TokenStream, TokenStream, TokenStream) {
    let buf = quote!(::gradfuse::Buffer);
    if has_shared {
        (
            quote!(shared: &#buf<Shared>,),
            quote!(::core::option::Option::Some(shared.raw())),
            quote!(shared_grad: &#buf<SharedGrad>,),
            quote!(::core::option::Option::Some(shared_grad.raw())),
        )
    } else {
        let none = quote!(::core::option::Option::None);
        (quote!(), none.clone(), quote!(), none)
    }
}

/// The `Sinks` struct: one field per argument with a gradient.
fn sinks_item(grad_names: &[&syn::Ident], grad_types: &[TokenStream]) -> TokenStream {
    let buf = quote!(::gradfuse::Buffer);
    quote! {
        /// Where each argument's gradient goes in
        /// [`Kernel::value_and_grad_gathered`]: one entry per element for an argument
        /// whose source is `Source::Each`, one per block row (the gradient of the batch
        /// sum in that row, summed in a fixed order) for `Source::Gather`. Gradients
        /// bound to one buffer add up.
        #[derive(Clone, Copy, Debug)]
        pub struct Sinks<'b> {
            #(#[doc = "The gradient of the argument of the same name."] pub #grad_names: &'b #buf<#grad_types>,)*
        }
    }
}

/// The least-squares residuals of a gathered function: a residual term's Jacobian block
/// is its element's gradient row, the adjoint kernel's per-element gradients bound as
/// they are (nothing scattered).
fn gathered_residuals(
    each: &[&Param],
    adj_gathered: &TokenStream,
    value_fields: &[TokenStream],
) -> TokenStream {
    let none = quote!(::core::option::Option::None);
    super::residuals::residuals_impl(
        each,
        1,
        quote!(self.value_gathered(rec, sources, values)),
        quote! {
            rec.launch_gathered(
                self.device,
                &ADJOINT_KERNEL,
                #adj_gathered,
                &[#(#value_fields),*],
                ::gradfuse::GatherOutputs {
                    shared: #none,
                    values: values.raw(),
                    shared_grad: #none,
                    jacobians: ::core::option::Option::Some(jacobians.raw()),
                },
            )
        },
    )
}

/// The `Sources` struct: one field per per-element argument.
fn sources_item(names: &[&syn::Ident], types: &[TokenStream]) -> TokenStream {
    quote! {
        /// Where each per-element argument comes from in the launches with gathered
        /// arguments: its own buffer (`Source::Each`, one value per element) or rows of a
        /// parameter block read through an index (`Source::Gather`).
        #[derive(Clone, Copy, Debug)]
        pub struct Sources<'b> {
            #(#[doc = "The argument of the same name."] pub #names: ::gradfuse::Source<'b, #types>,)*
        }
    }
}

/// The gathered kernels' WGSL and specs (forward, and `reverse`: the adjoint or the
/// Jacobian kernel), and how a launcher names each (`None` where there are none).
fn gathered_kernels(
    plan: &ItemPlan,
    wgsl: Option<&GatheredWgsl>,
    reverse: KernelKind,
) -> (TokenStream, TokenStream, TokenStream) {
    let Some(w) = wgsl else {
        let none = quote!(::core::option::Option::None);
        return (quote!(), none.clone(), none);
    };
    let (fwd, rev) = (&w.forward, &w.reverse);
    let (rev_cpu, rev_wgsl, rev_static, rev_doc) = match reverse {
        KernelKind::Jacobian => (
            "cpu_jacobian",
            quote!(WGSL_JACOBIAN_GATHERED),
            quote!(JACOBIAN_GATHERED_KERNEL),
            "The WGSL module of the gathered Jacobian kernel.",
        ),
        _ => (
            "cpu_adjoint",
            quote!(WGSL_ADJOINT_GATHERED),
            quote!(ADJOINT_GATHERED_KERNEL),
            "The WGSL module of the gathered adjoint kernel.",
        ),
    };
    let fwd_spec = gathered_spec(plan, KernelKind::Forward, &format_ident!("cpu_forward"));
    let rev_spec = gathered_spec(plan, reverse, &format_ident!("{rev_cpu}"));
    let items = quote! {
        /// The WGSL module of the gathered forward kernel: each per-element argument read
        /// from a buffer of its own, directly or through an index.
        pub const WGSL_FORWARD_GATHERED: &str = #fwd;
        #[doc = #rev_doc]
        pub const #rev_wgsl: &str = #rev;
        /// The gathered forward kernel's launch description.
        pub static FORWARD_GATHERED_KERNEL: ::gradfuse::GatheredSpec = #fwd_spec;
        /// The gathered reverse kernel's launch description.
        pub static #rev_static: ::gradfuse::GatheredSpec = #rev_spec;
    };
    (
        items,
        quote!(::core::option::Option::Some(&FORWARD_GATHERED_KERNEL)),
        quote!(::core::option::Option::Some(&#rev_static)),
    )
}

/// The `GatherField` of each per-element argument, with no gradient (value and Jacobian
/// launches, which scatter nothing).
fn fields_without_grads(each: &[&Param], precision: Precision) -> Vec<TokenStream> {
    let mut args_at = 0u32;
    each.iter()
        .map(|p| {
            let (name, w) = (&p.name, words(p, precision));
            let field = quote! {
                ::gradfuse::GatherField {
                    words: #w,
                    args_offset: #args_at,
                    grad_offset: ::core::option::Option::None,
                    source: sources.#name.parts(),
                    sink: ::core::option::Option::None,
                }
            };
            args_at += w;
            field
        })
        .collect()
}

/// The items of a function with an `[f32; M]` or tuple result (no `#[shared]` arguments):
/// `Sources`, and launches of values and of values with each element's Jacobian block.
pub(super) fn jacobian_gathered_api(
    plan: &ItemPlan,
    wgsl: Option<&GatheredWgsl>,
    has_grads: bool,
) -> TokenStream {
    let each: Vec<&Param> = plan.sig.params.iter().filter(|p| !p.shared).collect();
    if each.is_empty() {
        return quote!();
    }
    let (float, precision) = (plan.float_ty(), plan.sig.precision);
    let names: Vec<&syn::Ident> = each.iter().map(|p| &p.name).collect();
    let types: Vec<TokenStream> = each.iter().map(|p| value_type(p, &float)).collect();
    let sources_item = sources_item(&names, &types);
    let (kernels, fwd_gathered, jac_gathered) = gathered_kernels(plan, wgsl, KernelKind::Jacobian);
    let fields = fields_without_grads(&each, precision);
    let m = plan.layout.results as usize;
    let (buf, err) = (quote!(::gradfuse::Buffer), quote!(::gradfuse::Error));
    let none = quote!(::core::option::Option::None);
    let outputs = |jacobians: TokenStream| {
        quote! {
            ::gradfuse::GatherOutputs {
                shared: #none,
                values: values.raw(),
                shared_grad: #none,
                jacobians: #jacobians,
            }
        }
    };
    let value_outputs = outputs(none.clone());
    let jacobian_launch = has_grads.then(|| {
        let jac_outputs = outputs(quote!(::core::option::Option::Some(jacobians.raw())));
        quote! {
            /// Records the values of every element into `values` and its Jacobian block
            /// (a row per result word, the derivative in each argument word with a
            /// gradient of the element's own rows: nothing is summed) into `jacobians`,
            /// each argument read from its source.
            pub fn value_and_jacobian_gathered(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                values: &#buf<[#float; #m]>,
                jacobians: &#buf<Jacobian>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch_gathered(
                    self.device,
                    &JACOBIAN_KERNEL,
                    #jac_gathered,
                    &[#(#fields),*],
                    #jac_outputs,
                )
            }
        }
    });
    let residuals = (has_grads && precision == Precision::F32).then(|| {
        super::residuals::residuals_impl(
            &each,
            m,
            quote!(self.value_gathered(rec, sources, &values.cast()?)),
            quote!(self.value_and_jacobian_gathered(
                rec,
                sources,
                &values.cast()?,
                &jacobians.cast()?
            )),
        )
    });
    quote! {
        #kernels

        #sources_item

        #residuals

        impl Kernel<'_> {
            /// Records the values of every element into `values` (its result words), each
            /// argument read from its source. Lengths and indices are checked now; nothing
            /// runs before the recording is submitted.
            pub fn value_gathered(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                values: &#buf<[#float; #m]>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch_gathered(
                    self.device,
                    &FORWARD_KERNEL,
                    #fwd_gathered,
                    &[#(#fields),*],
                    #value_outputs,
                )
            }

            #jacobian_launch
        }
    }
}
