//! `Sources`, `Sinks` and the launches with gathered arguments: each per-element argument
//! read from its own buffer or from rows of a parameter block through an index, its
//! gradient scattered back per element or per block row. Typed: an argument's source and
//! sink hold values of the argument's own type, so binding a block of rows of another shape
//! does not compile.

use super::ItemPlan;
use super::spec::gathered_spec;
use crate::GatheredWgsl;
use crate::abi::KernelKind;
use crate::signature::{Param, Shape};
use proc_macro2::TokenStream;
use quote::format_ident;
use quote::quote;

fn value_type(p: &Param) -> TokenStream {
    match p.kind {
        Shape::Scalar => quote!(f32),
        Shape::Array(n) => quote!([f32; #n]),
    }
}

fn words(p: &Param) -> u32 {
    match p.kind {
        Shape::Scalar => 1,
        Shape::Array(n) => n as u32,
    }
}

/// The items, for a function with per-element arguments (none without); `wgsl`: its
/// gathered kernels, where it has them (else a launch assembles argument rows first).
pub(super) fn gathered_api(plan: &ItemPlan, wgsl: Option<&GatheredWgsl>) -> TokenStream {
    let each: Vec<&Param> = plan.sig.params.iter().filter(|p| !p.shared).collect();
    if each.is_empty() {
        return quote!();
    }
    let with_grad: Vec<&Param> = each.iter().copied().filter(|p| !p.constant).collect();
    let names: Vec<&syn::Ident> = each.iter().map(|p| &p.name).collect();
    let types: Vec<TokenStream> = each.iter().map(|p| value_type(p)).collect();
    let grad_names: Vec<&syn::Ident> = with_grad.iter().map(|p| &p.name).collect();
    let grad_types: Vec<TokenStream> = with_grad.iter().map(|p| value_type(p)).collect();
    let (mut args_at, mut grad_at) = (0u32, 0u32);
    let mut value_fields = Vec::new();
    let mut grad_fields = Vec::new();
    for p in &each {
        let (name, w) = (&p.name, words(p));
        let grad_offset = if p.constant {
            quote!(::core::option::Option::None)
        } else {
            quote!(::core::option::Option::Some(#grad_at))
        };
        let sink = if p.constant {
            quote!(::core::option::Option::None)
        } else {
            quote!(::core::option::Option::Some(sinks.#name.raw()))
        };
        let field = |grad_offset: &TokenStream, sink: &TokenStream| {
            quote! {
                ::gradfuse::GatherField {
                    words: #w,
                    args_offset: #args_at,
                    grad_offset: #grad_offset,
                    source: sources.#name.parts(),
                    sink: #sink,
                }
            }
        };
        let none = quote!(::core::option::Option::None);
        value_fields.push(field(&none, &none));
        grad_fields.push(field(&grad_offset, &sink));
        args_at += w;
        if !p.constant {
            grad_at += w;
        }
    }
    let has_grads = !with_grad.is_empty();
    let buf = quote!(::gradfuse::Buffer);
    let (shared_param, shared_bind, shared_grad_param, shared_grad_bind) = if plan.has_shared {
        (
            quote!(shared: &#buf<Shared>,),
            quote!(::core::option::Option::Some(shared.raw())),
            quote!(shared_grad: &#buf<SharedGrad>,),
            quote!(::core::option::Option::Some(shared_grad.raw())),
        )
    } else {
        let none = quote!(::core::option::Option::None);
        (quote!(), none.clone(), quote!(), none)
    };
    let (sinks_item, sinks_param) = if has_grads {
        (
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
            },
            quote!(sinks: &Sinks<'_>,),
        )
    } else {
        (quote!(), quote!())
    };
    let err = quote!(::gradfuse::Error);
    let (kernels, fwd_gathered, adj_gathered) = match wgsl {
        Some(w) => {
            let (fwd, adj) = (&w.forward, &w.adjoint);
            let fwd_spec = gathered_spec(plan, KernelKind::Forward, &format_ident!("cpu_forward"));
            let adj_spec = gathered_spec(plan, KernelKind::Adjoint, &format_ident!("cpu_adjoint"));
            (
                quote! {
                    /// The WGSL module of the gathered forward kernel: each per-element
                    /// argument read from a buffer of its own, directly or through an index.
                    pub const WGSL_FORWARD_GATHERED: &str = #fwd;
                    /// The WGSL module of the gathered adjoint kernel.
                    pub const WGSL_ADJOINT_GATHERED: &str = #adj;
                    /// The gathered forward kernel's launch description.
                    pub static FORWARD_GATHERED_KERNEL: ::gradfuse::GatheredSpec = #fwd_spec;
                    /// The gathered adjoint kernel's launch description.
                    pub static ADJOINT_GATHERED_KERNEL: ::gradfuse::GatheredSpec = #adj_spec;
                },
                quote!(::core::option::Option::Some(&FORWARD_GATHERED_KERNEL)),
                quote!(::core::option::Option::Some(&ADJOINT_GATHERED_KERNEL)),
            )
        }
        None => {
            let none = quote!(::core::option::Option::None);
            (quote!(), none.clone(), none)
        }
    };
    quote! {
        #kernels

        /// Where each per-element argument comes from in the launches with gathered
        /// arguments: its own buffer (`Source::Each`, one value per element) or rows of a
        /// parameter block read through an index (`Source::Gather`).
        #[derive(Clone, Copy, Debug)]
        pub struct Sources<'b> {
            #(#[doc = "The argument of the same name."] pub #names: ::gradfuse::Source<'b, #types>,)*
        }

        #sinks_item

        impl Kernel<'_> {
            /// Records the value of every element into `values`, each argument read from
            /// its source. Lengths and indices are checked now; nothing runs before the
            /// recording is submitted.
            pub fn value_gathered(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                #shared_param
                values: &#buf<f32>,
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
                values: &#buf<f32>,
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
                    },
                )
            }
        }
    }
}
