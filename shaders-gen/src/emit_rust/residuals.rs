//! The `gradfuse::Residuals` implementation of a kernel: what a least-squares problem
//! needs to evaluate a function as a residual term (its arguments with a derivative, and
//! launches of its residuals with and without their Jacobian blocks).

use crate::signature::{Param, Shape};
use proc_macro2::TokenStream;
use quote::quote;

/// The impl, for a function with per-element arguments (`each`), some with a derivative,
/// `m` result words; `values` and `jacobians` are the launch expressions (in scope:
/// `self`, `rec`, `sources`, `values` and `jacobians` as `Buffer<f32>`).
pub(super) fn residuals_impl(
    each: &[&Param],
    m: usize,
    values: TokenStream,
    jacobians: TokenStream,
) -> TokenStream {
    let arguments = each.iter().filter(|p| !p.constant).map(|p| {
        let name = &p.name;
        let words = match p.kind {
            Shape::Scalar => 1u32,
            Shape::Array(n) => n as u32,
        };
        quote! {
            ::gradfuse::ResidualArgument {
                name: stringify!(#name),
                words: #words,
                source: sources.#name.parts(),
            }
        }
    });
    let (buf, err) = (quote!(::gradfuse::Buffer), quote!(::gradfuse::Error));
    quote! {
        impl ::gradfuse::Residuals for Kernel<'_> {
            type Sources<'b> = Sources<'b>;
            const RESULT_WORDS: usize = #m;

            fn arguments<'s>(
                sources: &'s Sources<'_>,
            ) -> ::std::vec::Vec<::gradfuse::ResidualArgument<'s>> {
                ::std::vec![#(#arguments),*]
            }

            fn record_values(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                values: &#buf<f32>,
            ) -> ::core::result::Result<(), #err> {
                #values
            }

            fn record_jacobians(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                sources: &Sources<'_>,
                values: &#buf<f32>,
                jacobians: &#buf<f32>,
            ) -> ::core::result::Result<(), #err> {
                #jacobians
            }
        }
    }
}
