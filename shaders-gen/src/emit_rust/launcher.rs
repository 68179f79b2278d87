//! The `impl Kernel` of a function with an `f32` result: batched `value`,
//! `value_and_grad` and `value_and_grad_into`, with and without `#[shared]` arguments.

use proc_macro2::TokenStream;
use quote::quote;

/// The `impl Kernel` of the batched launches.
pub(super) fn launcher(has_shared: bool, has_grads: bool, float: &TokenStream) -> TokenStream {
    let parts = LauncherParts::new(has_grads, float);
    if has_shared {
        shared_launcher(&parts)
    } else {
        plain_launcher(&parts)
    }
}

/// The pieces both forms of the batched launches share.
struct LauncherParts {
    vec: TokenStream,
    err: TokenStream,
    float: TokenStream,
    /// Allocates `grads`, one `Grad` per element.
    grads_alloc: TokenStream,
    /// The `_into` launchers' output slices.
    into_outputs: TokenStream,
    /// Checks `grads`' length where no kernel buffer does.
    grads_check: TokenStream,
    into_doc: TokenStream,
}

impl LauncherParts {
    fn new(has_grads: bool, float: &TokenStream) -> LauncherParts {
        let vec = quote!(::std::vec::Vec);
        let err = quote!(::gradfuse::Error);
        let grads_alloc = if has_grads {
            // Zeroed pages from the allocator, not a pass of writes: the launch overwrites
            // every word.
            quote!(let mut grads: #vec<Grad> = ::gradfuse::bytemuck::zeroed_vec(args.len());)
        } else {
            quote!(let mut grads: #vec<Grad> = ::std::vec![Grad {}; args.len()];)
        };
        // The `_into` launchers write into the caller's slices; the others allocate and call
        // them.
        let into_outputs = if has_grads {
            quote!(&mut [
                ::gradfuse::bytemuck::cast_slice_mut(values),
                ::gradfuse::bytemuck::cast_slice_mut(grads)
            ])
        } else {
            quote!(&mut [::gradfuse::bytemuck::cast_slice_mut(values)])
        };
        // Without gradient words the kernel has no gradient buffer to check `grads` against.
        let grads_check = if has_grads {
            quote!()
        } else {
            quote! {
                if grads.len() != args.len() {
                    return Err(::gradfuse::Error::ShapeMismatch {
                        what: "grads (one per element)".into(),
                        expected: args.len(),
                        got: grads.len(),
                    });
                }
            }
        };
        let into_doc = quote! {
            /// [`Self::value_and_grad`] into the caller's slices (one entry per element each):
            /// nothing is allocated, and memory the caller reuses is not touched for the first
            /// time (page faults cost as much as the readback on large batches). On an error the
            /// slices' contents are unspecified.
        };
        LauncherParts {
            vec,
            err,
            float: float.clone(),
            grads_alloc,
            into_outputs,
            grads_check,
            into_doc,
        }
    }
}

/// The batched launches of a function without `#[shared]` arguments.
fn plain_launcher(parts: &LauncherParts) -> TokenStream {
    let LauncherParts {
        vec,
        err,
        float,
        grads_alloc,
        into_outputs,
        grads_check,
        into_doc,
    } = parts;
    quote! {
            impl Kernel<'_> {
                /// The value of every element: one thread per element.
                pub fn value(&self, args: &[Args]) -> ::core::result::Result<#vec<#float>, #err> {
                    let mut values: #vec<#float> = ::std::vec![0.0; args.len()];
                    self.device.launch(
                        &FORWARD_KERNEL,
                        ::gradfuse::bytemuck::cast_slice(args),
                        &mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..])],
                    )?;
                    Ok(values)
                }

                /// The value and the full gradient of every element, from one fused kernel.
                pub fn value_and_grad(
                    &self,
                    args: &[Args],
                ) -> ::core::result::Result<(#vec<#float>, #vec<Grad>), #err> {
                    let mut values: #vec<#float> = ::std::vec![0.0; args.len()];
                    #grads_alloc
                    self.value_and_grad_into(args, &mut values, &mut grads)?;
                    Ok((values, grads))
                }

                #into_doc
                pub fn value_and_grad_into(
                    &self,
                    args: &[Args],
                    values: &mut [#float],
                    grads: &mut [Grad],
                ) -> ::core::result::Result<(), #err> {
                    #grads_check
                    self.device.launch(
                        &ADJOINT_KERNEL,
                        ::gradfuse::bytemuck::cast_slice(args),
                        #into_outputs,
                    )
                }
            }
    }
}

/// The batched launches of a function with `#[shared]` arguments: the batch's shared
/// words in, and the gradient of the sum of the values in them out.
fn shared_launcher(parts: &LauncherParts) -> TokenStream {
    let LauncherParts {
        vec,
        err,
        float,
        grads_alloc,
        into_outputs,
        grads_check,
        into_doc,
    } = parts;
    quote! {
        impl Kernel<'_> {
            /// The value of every element, with the batch's `shared` arguments: one thread
            /// per element.
            pub fn value(
                &self,
                args: &[Args],
                shared: &Shared,
            ) -> ::core::result::Result<#vec<#float>, #err> {
                let mut values: #vec<#float> = ::std::vec![0.0; args.len()];
                self.device.launch_shared(
                    &FORWARD_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    ::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(shared)),
                    &mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..])],
                    &mut [],
                )?;
                Ok(values)
            }

            /// The value and the gradient of every element, and the gradient of the sum of
            /// the values in the shared arguments: one fused kernel, whose workgroups reduce
            /// the shared gradients in a fixed order, and a second pass over their partial
            /// sums (no atomics: the same inputs give the same bits on every run).
            pub fn value_and_grad(
                &self,
                args: &[Args],
                shared: &Shared,
            ) -> ::core::result::Result<(#vec<#float>, #vec<Grad>, SharedGrad), #err> {
                let mut values: #vec<#float> = ::std::vec![0.0; args.len()];
                #grads_alloc
                let shared_grad = self.value_and_grad_into(args, shared, &mut values, &mut grads)?;
                Ok((values, grads, shared_grad))
            }

            #into_doc
            pub fn value_and_grad_into(
                &self,
                args: &[Args],
                shared: &Shared,
                values: &mut [#float],
                grads: &mut [Grad],
            ) -> ::core::result::Result<SharedGrad, #err> {
                #grads_check
                let mut shared_grad: SharedGrad = ::gradfuse::bytemuck::Zeroable::zeroed();
                self.device.launch_shared(
                    &ADJOINT_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    ::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(shared)),
                    #into_outputs,
                    ::gradfuse::bytemuck::cast_slice_mut(::core::slice::from_mut(&mut shared_grad)),
                )?;
                Ok(shared_grad)
            }
        }
    }
}

/// The `impl Kernel` of the launches over device-resident buffers: `value_to` and
/// `value_and_grad_to` record into a `gradfuse::Recording`, reading and writing
/// `gradfuse::Buffer`s, with no host round trip.
pub(super) fn resident_launcher(
    has_shared: bool,
    has_grads: bool,
    float: &TokenStream,
) -> TokenStream {
    let buf = quote!(::gradfuse::Buffer);
    let err = quote!(::gradfuse::Error);
    let (shared_param, shared_bind) = if has_shared {
        (
            quote!(shared: &#buf<Shared>,),
            quote!(::core::option::Option::Some(shared.raw())),
        )
    } else {
        (quote!(), quote!(::core::option::Option::None))
    };
    let (shared_grad_param, shared_grad_bind) = if has_shared {
        (
            quote!(shared_grad: &#buf<SharedGrad>,),
            quote!(::core::option::Option::Some(shared_grad.raw())),
        )
    } else {
        (quote!(), quote!(::core::option::Option::None))
    };
    // Without gradient words (every per-element argument #[constant]) there is no `grads`.
    let (grads_param, grads_bind) = if has_grads {
        (quote!(grads: &#buf<Grad>,), quote!(grads.raw()))
    } else {
        (quote!(), quote!())
    };
    let shared_doc = if has_shared {
        "; `shared_grad` receives the gradient of the sum of the values in the shared \
         arguments (summed in a fixed order: the same bits on every run)"
    } else {
        ""
    };
    let vg_doc = format!(
        "Records the value and the gradient of every element of `args` into `values` and \
         `grads` (one entry per element){shared_doc}. Nothing runs before the recording is \
         submitted; lengths are checked now."
    );
    quote! {
        impl Kernel<'_> {
            /// Records the value of every element of `args` into `values` (one entry per
            /// element), buffers of the recording's device. Nothing runs before the
            /// recording is submitted; lengths are checked now.
            pub fn value_to(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                args: &#buf<Args>,
                #shared_param
                values: &#buf<#float>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch(
                    self.device,
                    &FORWARD_KERNEL,
                    ::gradfuse::Bindings {
                        input: args.raw(),
                        shared: #shared_bind,
                        outputs: &[values.raw()],
                        shared_grad: ::core::option::Option::None,
                    },
                )
            }

            #[doc = #vg_doc]
            pub fn value_and_grad_to(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                args: &#buf<Args>,
                #shared_param
                values: &#buf<#float>,
                #grads_param
                #shared_grad_param
            ) -> ::core::result::Result<(), #err> {
                rec.launch(
                    self.device,
                    &ADJOINT_KERNEL,
                    ::gradfuse::Bindings {
                        input: args.raw(),
                        shared: #shared_bind,
                        outputs: &[values.raw(), #grads_bind],
                        shared_grad: #shared_grad_bind,
                    },
                )
            }
        }
    }
}
