//! The tangent kernel's items, for scalar and vector results alike: `WGSL_TANGENT`, its
//! CPU version, its launch description, and the batched `jvp` launcher (forward mode on
//! the GPU: each element's values and their directional derivatives along its own
//! tangent, and the batch's shared tangent).

use super::ItemPlan;
use super::spec::kernel_spec;
use crate::abi::KernelKind;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// `WGSL_TANGENT`, `cpu_tangent`, `TANGENT_KERNEL` and `Kernel::jvp`. `vector`: the
/// function has an `[f32; M]` or tuple result (`jvp` returns `Value`s).
pub(super) fn tangent_api(plan: &ItemPlan, vector: bool) -> TokenStream {
    let layout = plan.layout;
    // Offsets in the runtime's 4-byte words (an f64 is two; the runtime aligns rows to 8).
    let wps = plan.sig.precision.words_per_scalar() as usize;
    let (w, g, s) = (
        plan.words4(),
        plan.grad_count() * wps,
        layout.shared_words as usize * wps,
    );
    let (float, out_view) = (plan.float_ty(), plan.out_view());
    let m = layout.results as usize;
    let wgsl = &plan.c.wgsl_tangent;
    let spec = kernel_spec(plan, KernelKind::Tangent, &format_ident!("cpu_tangent"));
    let cast = quote!(::gradfuse::bytemuck::cast_slice);
    let read_tangent = if g > 0 {
        quote!(let t: &Grad = &#cast::<f32, Grad>(&words[#w..#w + #g])[0];)
    } else {
        quote!(let t: &Grad = &Grad {};)
    };
    let (read_shared, call) = if s > 0 {
        (
            quote! {
                let s: &Shared = &#cast::<f32, Shared>(&words[#w + #g..#w + #g + #s])[0];
                let st: &SharedGrad = &#cast::<f32, SharedGrad>(&words[#w + #g + #s..])[0];
            },
            quote!(jvp(a, s, t, st)),
        )
    } else {
        (quote!(), quote!(jvp(a, t)))
    };
    let store = if vector {
        quote! {
            out[..#m].copy_from_slice(&words_of(v));
            out[#m..].copy_from_slice(&words_of(d));
        }
    } else {
        quote! {
            out[0] = v;
            out[1] = d;
        }
    };
    let launcher = jvp_launcher(vector, m, (g > 0, s > 0), &float);
    quote! {
        /// The WGSL module of the tangent (values and directional derivatives) kernel: each
        /// element's words followed by its tangent (`Grad`'s words), and the shared words
        /// followed by the shared tangent.
        pub const WGSL_TANGENT: &str = #wgsl;

        fn cpu_tangent(words: &[f32], out: &mut [f32]) {
            let a: &Args = &#cast::<f32, Args>(&words[..#w])[0];
            #out_view
            #read_tangent
            #read_shared
            let (v, d) = #call;
            #store
        }

        /// The tangent kernel's launch description.
        pub static TANGENT_KERNEL: ::gradfuse::KernelSpec = #spec;

        #launcher
    }
}

/// `Kernel::jvp`: the batch's rows and tangents interleaved into the tangent kernel's
/// input rows, one launch, values and derivatives back.
fn jvp_launcher(
    vector: bool,
    m: usize,
    (has_grads, has_shared): (bool, bool),
    float: &TokenStream,
) -> TokenStream {
    let cast = quote!(::gradfuse::bytemuck::cast_slice);
    let (vec, err) = (quote!(::std::vec::Vec), quote!(::gradfuse::Error));
    // A `Grad` without words is a zero-sized type: no slice of words to cast.
    let tangent_words = if has_grads {
        quote!(#cast(tangents))
    } else {
        quote!(&[])
    };
    let (out_ty, zero, collect) = if vector {
        (
            quote!(Value),
            quote!([0.0 as #float; #m]),
            quote!(|v: #vec<[#float; #m]>| v.iter().map(value_of).collect::<#vec<Value>>()),
        )
    } else {
        (
            quote!(#float),
            quote!(0.0 as #float),
            quote!(|v: #vec<#float>| v),
        )
    };
    let (shared_params, launch) = if has_shared {
        (
            quote!(shared: &Shared,),
            quote! {
                let mut shared_words: #vec<f32> = #cast(::core::slice::from_ref(shared)).to_vec();
                shared_words.extend_from_slice(#cast(::core::slice::from_ref(shared_tangent)));
                self.device.launch_shared(
                    &TANGENT_KERNEL,
                    &words,
                    &shared_words,
                    &mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..]), ::gradfuse::bytemuck::cast_slice_mut(&mut derivatives[..])],
                    &mut [],
                )?;
            },
        )
    } else {
        (
            quote!(),
            quote! {
                self.device.launch(
                    &TANGENT_KERNEL,
                    &words,
                    &mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..]), ::gradfuse::bytemuck::cast_slice_mut(&mut derivatives[..])],
                )?;
            },
        )
    };
    let shared_tangent = has_shared.then(|| quote!(shared_tangent: &SharedGrad,));
    let doc = if has_shared {
        "The value of every element and its directional derivative along the element's \
         tangent and the batch's `shared_tangent` (`tangents`: one per element), by forward \
         mode: one thread per element, no reverse pass."
    } else {
        "The value of every element and its directional derivative along its tangent \
         (`tangents`: one per element), by forward mode: one thread per element, no reverse \
         pass."
    };
    quote! {
        impl Kernel<'_> {
            #[doc = #doc]
            pub fn jvp(
                &self,
                args: &[Args],
                #shared_params
                tangents: &[Grad],
                #shared_tangent
            ) -> ::core::result::Result<(#vec<#out_ty>, #vec<#out_ty>), #err> {
                let words = ::gradfuse::tangent_rows(args.len(), #cast(args), tangents.len(), #tangent_words)?;
                let mut values = ::std::vec![#zero; args.len()];
                let mut derivatives = ::std::vec![#zero; args.len()];
                #launch
                let collect = #collect;
                Ok((collect(values), collect(derivatives)))
            }
        }
    }
}
