//! The items of a function with an `[f32; M]` or tuple result: `value_and_jacobian` in
//! place of `value_and_grad`, and the result's words packed and unpacked.

use super::ItemPlan;
use super::body::{body, body_storing, loads};
use super::spec::kernel_spec;
use super::tokens::operand;
use crate::Compiled;
use crate::abi::KernelKind;
use crate::signature::Shape;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// The result type of a vector function over scalar type `s`: `[s; M]`, or the tuple.
pub(super) fn result_type(c: &Compiled, s: &TokenStream) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let ts: Vec<TokenStream> = parts
                .iter()
                .map(|p| match p {
                    Shape::Scalar => quote!(#s),
                    Shape::Array(n) => quote!([#s; #n]),
                })
                .collect();
            quote!((#(#ts,)*))
        }
        None => {
            let m = c.lowered.layout.results as usize;
            quote!([#s; #m])
        }
    }
}

/// A vector function's result from its words, in order.
pub(super) fn pack(c: &Compiled, words: &[TokenStream]) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let mut at = 0;
            let items: Vec<TokenStream> = parts
                .iter()
                .map(|p| match p {
                    Shape::Scalar => {
                        at += 1;
                        words[at - 1].clone()
                    }
                    Shape::Array(n) => {
                        let w = &words[at..at + n];
                        at += n;
                        quote!([#(#w),*])
                    }
                })
                .collect();
            quote!((#(#items,)*))
        }
        None => quote!([#(#words),*]),
    }
}

/// A vector function's result as its words (`v` a `Value`).
pub(super) fn unpack(c: &Compiled, v: &TokenStream) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let mut words = Vec::new();
            for (k, p) in parts.iter().enumerate() {
                let k = syn::Index::from(k);
                match p {
                    Shape::Scalar => words.push(quote!(#v.#k)),
                    Shape::Array(n) => {
                        words.extend((0..*n).map(|j| quote!(#v.#k[#j])));
                    }
                }
            }
            quote!([#(#words),*])
        }
        None => quote!(#v),
    }
}

/// The CPU versions, WGSL, kernel descriptions and launchers of a function with an
/// `[f32; M]` result: `value_and_jacobian` in place of `value_and_grad`.
pub(super) fn vector_api(plan: &ItemPlan) -> TokenStream {
    let (c, m) = (plan.c, plan.layout.results as usize);
    let has_grads = plan.grad_count() > 0;
    let cpu = vector_cpu_versions(plan);
    let kernels = vector_kernels(plan);
    let resident = resident_launchers(m, has_grads, &plan.float_ty());
    let gathered =
        super::gathered::jacobian_gathered_api(plan, c.wgsl_gathered.as_ref(), has_grads);
    quote! {
        #cpu
        #kernels
        #resident

        #gathered
    }
}

/// How the Jacobian of `c` is computed, for the docs: `m` results, `g` argument words with
/// a gradient.
fn jacobian_mode_doc(c: &crate::Compiled, m: usize, g: usize) -> String {
    match c.cpu.reverse.jacobian_mode() {
        Some(crate::ad::JacobianMode::Forward) => format!(
            "The Jacobian is computed by {g} forward sweeps (one per argument word with a \
             gradient: fewer than the {m} results)."
        ),
        _ => format!(
            "The Jacobian is computed by {m} reverse sweeps (one per result word: no more \
             than the {g} argument words with a gradient)."
        ),
    }
}

/// The result and Jacobian types, their words, and the CPU versions: `value_and_jacobian`
/// by the reverse (or forward) sweeps, and `jvp` by forward mode.
fn vector_cpu_versions(plan: &ItemPlan) -> TokenStream {
    let (c, layout) = (plan.c, plan.layout);
    let m = layout.results as usize;
    let g = plan.grad_count();
    let rows_at: Vec<(usize, bool)> = (0..m).map(|k| (m + k * g, false)).collect();
    let covered = plan.covered(c.cpu.reverse.function(), &rows_at);
    let adj = &body_storing(c.cpu.reverse.function(), plan.scalar(), &covered);
    let tan = &body(&c.cpu.tangent, plan.scalar());
    let float = plan.float_ty();
    let f = c.cpu.reverse.function();
    // Row k of the Jacobian: the adjoint's outputs after the M values, g words a row.
    let rows: Vec<TokenStream> = (0..m)
        .map(|k| plan.grad_literal(f, &adj.names, m + k * g, false))
        .collect();
    let values: Vec<TokenStream> = (0..m)
        .map(|k| operand(f, &adj.names, f.outputs[k], plan.scalar()))
        .collect();
    let t = &c.cpu.tangent;
    let tan_values: Vec<TokenStream> = (0..m)
        .map(|k| operand(t, &tan.names, t.outputs[k], plan.scalar()))
        .collect();
    let tan_dirs: Vec<TokenStream> = (0..m)
        .map(|k| operand(t, &tan.names, t.outputs[m + k], plan.scalar()))
        .collect();
    let (adj_stmts, tan_stmts) = (&adj.stmts, &tan.stmts);
    // Input loads: value_and_jacobian and jvp read `args` (and `tangent`).
    let args = quote!(args);
    let tangent = quote!(tangent);
    let grad_list = &plan.grad_list;
    let adj_loads = loads(
        f,
        adj,
        |w| plan.access(Some(&args), None, w),
        |w, k| plan.access_run(Some(&args), None, w, k),
    );
    let n = layout.words;
    let tangent_word = |w: u32| {
        if w < n {
            (&args, w)
        } else {
            (&tangent, grad_list[(w - n) as usize])
        }
    };
    let tan_loads = loads(
        t,
        tan,
        |w| {
            let (base, word) = tangent_word(w);
            plan.access(Some(base), None, word)
        },
        |w, k| {
            let (base, word) = tangent_word(w);
            plan.access_run(Some(base), None, word, k)
        },
    );
    let mode_doc = jacobian_mode_doc(c, m, g);
    let value_ty = result_type(c, &float);
    let packed_values = pack(c, &values);
    let packed_tan_values = pack(c, &tan_values);
    let packed_tan_dirs = pack(c, &tan_dirs);
    let words_of_v = unpack(c, &quote!(v));
    let w_items: Vec<TokenStream> = (0..m).map(|k| quote!(w[#k])).collect();
    let value_of_w = pack(c, &w_items);
    quote! {
        /// The result type. Result word `k` (the Jacobian's row `k`) is word `k` of it, in
        /// order.
        pub type Value = #value_ty;

        /// The Jacobian: row `k` is the gradient of result word `k`, typed as [`Grad`].
        pub type Jacobian = [Grad; #m];

        /// A result's words, in order.
        pub fn words_of(v: Value) -> [#float; #m] {
            #words_of_v
        }

        /// A result from its words.
        pub fn value_of(w: &[#float; #m]) -> Value {
            #value_of_w
        }

        #[doc = #mode_doc]
        #[inline]
        pub fn value_and_jacobian(args: &Args) -> (Value, Jacobian) {
            #adj_loads
            #adj_stmts
            (#packed_values, [#(#rows),*])
        }

        /// The values and their directional derivatives along the tangent, by forward
        /// mode.
        #[inline]
        pub fn jvp(args: &Args, tangent: &Grad) -> (Value, Value) {
            #tan_loads
            #tan_stmts
            (#packed_tan_values, #packed_tan_dirs)
        }
    }
}

/// The WGSL modules, the kernels' CPU versions and launch descriptions, and the
/// launchers from host slices: `value` and `value_and_jacobian`.
fn vector_kernels(plan: &ItemPlan) -> TokenStream {
    let (c, layout) = (plan.c, plan.layout);
    let m = layout.results as usize;
    let g = plan.grad_count();
    let eval_args = plan.eval_args();
    let fwd_spec = kernel_spec(plan, KernelKind::Forward, &format_ident!("cpu_forward"));
    let jac_spec = kernel_spec(plan, KernelKind::Jacobian, &format_ident!("cpu_jacobian"));
    let words = plan.words4();
    let (float, out_view) = (plan.float_ty(), plan.out_view());
    let has_grads = g > 0;
    let wgsl_forward = &c.wgsl_forward;
    let wgsl_jacobian = &c.wgsl_reverse;
    let mode_doc = jacobian_mode_doc(c, m, g);
    let copy_jacobian = if has_grads {
        quote!(out[#m..].copy_from_slice(::gradfuse::bytemuck::cast_slice(&j[..]));)
    } else {
        quote!(let _ = j;)
    };
    let jac_alloc = if has_grads {
        quote!(let mut jacobians: ::std::vec::Vec<Jacobian> = ::gradfuse::bytemuck::zeroed_vec(args.len());)
    } else {
        quote!(let mut jacobians: ::std::vec::Vec<Jacobian> = ::std::vec![[Grad {}; #m]; args.len()];)
    };
    // The `_into` launch writes into the caller's slices; `value_and_jacobian` allocates
    // and calls it. Without gradient words there is no Jacobian buffer to check against.
    let (jac_outputs, jac_check) = if has_grads {
        let outputs = quote!(&mut [
            ::gradfuse::bytemuck::cast_slice_mut(values),
            ::gradfuse::bytemuck::cast_slice_mut(jacobians)
        ]);
        (outputs, quote!())
    } else {
        let outputs = quote!(&mut [::gradfuse::bytemuck::cast_slice_mut(values)]);
        let check = quote! {
            if jacobians.len() != args.len() {
                return Err(::gradfuse::Error::ShapeMismatch {
                    what: "jacobians (one per element)".into(),
                    expected: args.len(),
                    got: jacobians.len(),
                });
            }
        };
        (outputs, check)
    };
    // Arrays are their own words; tuples are rebuilt from them.
    let collect_values = if c.lowered.sig.result_parts.is_some() {
        quote!(values.iter().map(value_of).collect())
    } else {
        quote!(values)
    };
    quote! {
        /// The WGSL module of the forward (value) kernel.
        pub const WGSL_FORWARD: &str = #wgsl_forward;
        /// The WGSL module of the Jacobian (values and Jacobian) kernel.
        pub const WGSL_JACOBIAN: &str = #wgsl_jacobian;

        fn cpu_forward(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            #out_view
            out[..#m].copy_from_slice(&words_of(eval::<#float>(#(#eval_args),*)));
        }

        fn cpu_jacobian(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            #out_view
            let (v, j) = value_and_jacobian(a);
            out[..#m].copy_from_slice(&words_of(v));
            #copy_jacobian
        }

        /// The forward kernel's launch description.
        pub static FORWARD_KERNEL: ::gradfuse::KernelSpec = #fwd_spec;
        /// The Jacobian kernel's launch description.
        pub static JACOBIAN_KERNEL: ::gradfuse::KernelSpec = #jac_spec;

        impl Kernel<'_> {
            /// The values of every element: one thread per element.
            pub fn value(&self, args: &[Args]) -> ::core::result::Result<::std::vec::Vec<Value>, ::gradfuse::Error> {
                let mut values = ::std::vec![[0.0 as #float; #m]; args.len()];
                self.device.launch(
                    &FORWARD_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    &mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..])],
                )?;
                Ok(#collect_values)
            }

            #[doc = #mode_doc]
            /// One thread per element computes its values and its whole Jacobian.
            pub fn value_and_jacobian(
                &self,
                args: &[Args],
            ) -> ::core::result::Result<(::std::vec::Vec<Value>, ::std::vec::Vec<Jacobian>), ::gradfuse::Error> {
                let mut values = ::std::vec![[0.0 as #float; #m]; args.len()];
                #jac_alloc
                self.value_and_jacobian_into(args, &mut values, &mut jacobians)?;
                Ok((#collect_values, jacobians))
            }

            /// [`Self::value_and_jacobian`] into the caller's slices, one entry per element
            /// each (an element's values as the words of its result): nothing is allocated,
            /// and slices in pinned memory (`Device::pinned`) are copied into straight from
            /// the device. On an error the slices' contents are unspecified.
            pub fn value_and_jacobian_into(
                &self,
                args: &[Args],
                values: &mut [[#float; #m]],
                jacobians: &mut [Jacobian],
            ) -> ::core::result::Result<(), ::gradfuse::Error> {
                #jac_check
                self.device.launch(
                    &JACOBIAN_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    #jac_outputs,
                )
            }
        }
    }
}

/// `value_to` and `value_and_jacobian_to`: launches over resident buffers.
fn resident_launchers(m: usize, has_grads: bool, float: &TokenStream) -> TokenStream {
    let (buf, err) = (quote!(::gradfuse::Buffer), quote!(::gradfuse::Error));
    let none = quote!(::core::option::Option::None);
    let jacobian = has_grads.then(|| {
        quote! {
            /// Records the values of every element of `args` into `values` and its
            /// Jacobian block into `jacobians` (one entry per element). Nothing runs before
            /// the recording is submitted; lengths are checked now.
            pub fn value_and_jacobian_to(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                args: &#buf<Args>,
                values: &#buf<[#float; #m]>,
                jacobians: &#buf<Jacobian>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch(
                    self.device,
                    &JACOBIAN_KERNEL,
                    ::gradfuse::Bindings {
                        input: args.raw(),
                        shared: #none,
                        outputs: &[values.raw(), jacobians.raw()],
                        shared_grad: #none,
                    },
                )
            }
        }
    });
    quote! {
        impl Kernel<'_> {
            /// Records the values of every element of `args` into `values` (its result
            /// words; one entry per element), buffers of the recording's device. Nothing runs
            /// before the recording is submitted; lengths are checked now.
            pub fn value_to(
                &self,
                rec: &mut ::gradfuse::Recording<'_>,
                args: &#buf<Args>,
                values: &#buf<[#float; #m]>,
            ) -> ::core::result::Result<(), #err> {
                rec.launch(
                    self.device,
                    &FORWARD_KERNEL,
                    ::gradfuse::Bindings {
                        input: args.raw(),
                        shared: #none,
                        outputs: &[values.raw()],
                        shared_grad: #none,
                    },
                )
            }

            #jacobian
        }
    }
}
