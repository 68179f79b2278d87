//! The second-order items of a function with an `f32` result: `hvp` (the Hessian-vector
//! product on the CPU), and with at most [`crate::MAX_HESSIAN_WORDS`] gradient words the
//! `Hessian` type, `value_grad_hessian` on the CPU, `WGSL_HESSIAN`, its launch description
//! and the batched `Kernel::value_grad_hessian`.

use super::ItemPlan;
use super::body::{body_storing, loads};
use super::spec::kernel_spec;

use crate::SecondOrder;
use crate::abi::KernelKind;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// Every second-order item of `plan`'s function.
pub(super) fn second_order_api(plan: &ItemPlan, second: &SecondOrder) -> TokenStream {
    let hvp = hvp_fn(plan, second);
    let Some(hessian) = &second.hessian else {
        return hvp;
    };
    let (n, words, has_shared) = (plan.grad_count(), plan.words4(), plan.has_shared);
    let (float, out_view) = (plan.float_ty(), plan.out_view());
    let wgsl = &hessian.wgsl;
    let spec = kernel_spec(plan, KernelKind::Hessian, &format_ident!("cpu_hessian"));
    let cast = quote!(::gradfuse::bytemuck::cast);
    let (shared_param, shared_arg, vg) = if has_shared {
        (
            quote!(shared: &Shared,),
            quote!(shared,),
            quote!(let (value, grad, _) = value_and_grad(args, shared);),
        )
    } else {
        (
            quote!(),
            quote!(),
            quote!(let (value, grad) = value_and_grad(args);),
        )
    };
    let read_shared = has_shared.then(|| {
        quote!(let shared: &Shared = &::gradfuse::bytemuck::cast_slice::<f32, Shared>(&words[#words..])[0];)
    });
    let hessian_doc = format!(
        "The Hessian of the value in the per-element gradient words ([`Grad`]'s {n} words, \
         in order), row-major: `h[i][j]` is the derivative in word `i` of the gradient's \
         word `j`. Symmetric to the bit.{}",
        if has_shared {
            " `#[shared]` words are held fixed: no block of the Hessian is in them."
        } else {
            ""
        }
    );
    let launcher = hessian_launcher(has_shared, &float);
    quote! {
        #[doc = #hessian_doc]
        pub type Hessian = [[#float; #n]; #n];

        /// The value, the gradient and the Hessian, on the CPU: each row of the Hessian is
        /// a Hessian-vector product along a unit vector ([`hvp`]).
        pub fn value_grad_hessian(args: &Args, #shared_param) -> (#float, Grad, Hessian) {
            #vg
            let mut hessian: Hessian = [[0.0; #n]; #n];
            for i in 0..#n {
                let mut unit: [#float; #n] = [0.0; #n];
                unit[i] = 1.0;
                let row: [#float; #n] = #cast(hvp(args, #shared_arg &#cast::<[#float; #n], Grad>(unit)));
                // The upper triangle, mirrored: symmetric to the bit, as the kernel's.
                for j in i..#n {
                    hessian[i][j] = row[j];
                    hessian[j][i] = row[j];
                }
            }
            (value, grad, hessian)
        }

        #hvp

        /// The WGSL module of the Hessian (value, gradient and Hessian) kernel: one thread
        /// per element, tangent sweeps of the adjoint by forward-over-reverse.
        pub const WGSL_HESSIAN: &str = #wgsl;

        fn cpu_hessian(words: &[f32], out: &mut [f32]) {
            let args: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            #out_view
            #read_shared
            let (value, grad, hessian) = value_grad_hessian(args, #shared_arg);
            out[0] = value;
            out[1..1 + #n].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&grad)));
            out[1 + #n..].copy_from_slice(::gradfuse::bytemuck::cast_slice(&hessian));
        }

        /// The Hessian kernel's launch description.
        pub static HESSIAN_KERNEL: ::gradfuse::KernelSpec = #spec;

        #launcher
    }
}

/// `hvp`: the Hessian-vector product on the CPU, from [`SecondOrder::cpu_hvp`] (inputs:
/// the element's words, the shared words, then `v`'s).
fn hvp_fn(plan: &ItemPlan, second: &SecondOrder) -> TokenStream {
    let f = &second.cpu_hvp;
    let (n, layout) = (plan.grad_count(), plan.layout);
    let covered = plan.covered(f, &[(0, false)]);
    let b = body_storing(f, plan.scalar(), &covered);
    let (args_ref, shared_ref, v_ref) = (quote!(args), quote!(shared), quote!(direction));
    let n_inputs = layout.words + layout.shared_words;
    // Input `w`: which struct, and which argument word.
    let word = |w: u32| {
        if w < n_inputs {
            (Some(&args_ref), Some(&shared_ref), w)
        } else {
            (Some(&v_ref), None, plan.grad_list[(w - n_inputs) as usize])
        }
    };
    let reads = loads(
        f,
        &b,
        |w| {
            let (a, s, word) = word(w);
            plan.access(a, s, word)
        },
        |w, len| {
            let (a, s, word) = word(w);
            plan.access_run(a, s, word, len)
        },
    );
    let stmts = &b.stmts;
    let result = plan.grad_literal(f, &b.names, 0, false);
    let shared_param = plan.has_shared.then(|| quote!(shared: &Shared,));
    let doc = format!(
        "The Hessian-vector product `H direction` on the CPU, by forward-over-reverse: the \
         derivative of the gradient along `direction` (one sweep, about twice the cost of \
         `value_and_grad`), in the {n} per-element gradient words{}.",
        if plan.has_shared {
            " (`#[shared]` words held fixed)"
        } else {
            ""
        }
    );
    quote! {
        #[doc = #doc]
        #[inline]
        pub fn hvp(args: &Args, #shared_param direction: &Grad) -> Grad {
            #reads
            #stmts
            #result
        }
    }
}

/// `Kernel::value_grad_hessian` and its `_into` form: one launch of the Hessian kernel.
fn hessian_launcher(has_shared: bool, float: &TokenStream) -> TokenStream {
    let (vec, err) = (quote!(::std::vec::Vec), quote!(::gradfuse::Error));
    let cast_mut = quote!(::gradfuse::bytemuck::cast_slice_mut);
    let outputs = quote!(&mut [#cast_mut(&mut values[..]), #cast_mut(&mut grads[..]), #cast_mut(&mut hessians[..])]);
    let (shared_param, shared_arg, launch) = if has_shared {
        (
            quote!(shared: &Shared,),
            quote!(shared,),
            quote! {
                self.device.launch_shared(
                    &HESSIAN_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    ::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(shared)),
                    #outputs,
                    &mut [],
                )?;
            },
        )
    } else {
        (
            quote!(),
            quote!(),
            quote! {
                self.device.launch(&HESSIAN_KERNEL, ::gradfuse::bytemuck::cast_slice(args), #outputs)?;
            },
        )
    };
    quote! {
        impl Kernel<'_> {
            /// The value, the gradient and the Hessian of every element (one thread per
            /// element: tangent sweeps of the adjoint that share one primal pass).
            pub fn value_grad_hessian(
                &self,
                args: &[Args],
                #shared_param
            ) -> ::core::result::Result<(#vec<#float>, #vec<Grad>, #vec<Hessian>), #err> {
                let mut values: #vec<#float> = ::std::vec![0.0; args.len()];
                let mut grads: #vec<Grad> = ::gradfuse::bytemuck::zeroed_vec(args.len());
                let mut hessians: #vec<Hessian> = ::gradfuse::bytemuck::zeroed_vec(args.len());
                self.value_grad_hessian_into(args, #shared_arg &mut values, &mut grads, &mut hessians)?;
                Ok((values, grads, hessians))
            }

            /// [`Self::value_grad_hessian`] into the caller's slices (one entry per element
            /// each): nothing is allocated, and slices in pinned memory (`Device::pinned`)
            /// are copied into straight from the device. On an error the slices' contents
            /// are unspecified.
            pub fn value_grad_hessian_into(
                &self,
                args: &[Args],
                #shared_param
                values: &mut [#float],
                grads: &mut [Grad],
                hessians: &mut [Hessian],
            ) -> ::core::result::Result<(), #err> {
                #launch
                Ok(())
            }
        }
    }
}
