//! IR to Rust tokens: the CPU versions (`eval`, `value_and_grad`, `jvp`), the `Args` and
//! `Grad` structs, the WGSL constants and the typed launchers, all in a module named after
//! the function.
//!
//! [`emit`] reads as its parts: an `ItemPlan` holds what every part asks of the
//! signature (which words a field is, which launcher); the data types, `eval`, the kernel
//! descriptions (`spec`), then the scalar-result items (`scalar`, `launcher`) or the
//! vector-result ones (`vector`) are each built by a function from it. `body` writes
//! the statements of one IR function.

mod arrays;
mod body;
mod gathered;
mod hessian;
mod launcher;
mod residuals;
mod scalar;
mod spec;
mod tangent;
mod tokens;
mod vector;

use crate::Compiled;
use crate::abi::ArgLayout;
use crate::ir::Function;
use crate::signature::{Param, Precision, Shape, Signature};
use body::{body, loads};
use proc_macro2::TokenStream;
use quote::quote;
use tokens::{Scalar, operand};

/// What every part of the expansion reads of the compiled function.
struct ItemPlan<'a> {
    c: &'a Compiled,
    sig: &'a Signature,
    layout: &'a ArgLayout,
    /// The function's name, as text.
    fname: String,
    /// Per-element argument words.
    words: usize,
    has_shared: bool,
    /// Argument words with a gradient, in `Grad`'s order.
    grad_list: Vec<u32>,
}

impl<'a> ItemPlan<'a> {
    fn new(c: &'a Compiled) -> Self {
        let layout = &c.lowered.layout;
        ItemPlan {
            c,
            sig: &c.lowered.sig,
            layout,
            fname: c.lowered.sig.name.to_string(),
            words: layout.words as usize,
            has_shared: layout.shared_words > 0,
            grad_list: layout.grad_words(),
        }
    }

    /// The concrete float type of the CPU versions.
    fn scalar(&self) -> Scalar {
        Scalar::of(self.sig.precision)
    }

    /// `f32` or `f64`.
    fn float_ty(&self) -> TokenStream {
        tokens::float_ty(self.sig.precision)
    }

    /// 4-byte words of the per-element arguments: the runtime's unit, in which the CPU
    /// versions receive them.
    fn words4(&self) -> usize {
        self.words * self.sig.precision.words_per_scalar() as usize
    }

    /// The start of a CPU version: its output words (4-byte, 8-byte aligned by the runtime)
    /// seen as f64 in an f64 function.
    fn out_view(&self) -> TokenStream {
        match self.sig.precision {
            Precision::F32 => quote!(),
            Precision::F64 => {
                quote!(let out: &mut [f64] = ::gradfuse::bytemuck::cast_slice_mut(out);)
            }
        }
    }

    fn grad_count(&self) -> usize {
        self.grad_list.len()
    }

    /// How to read IR input `w` from struct values (`args.x`, `shared.w[1]`) or, with no
    /// base, from `eval`'s parameters. Parameters are referred to by the user's own
    /// identifiers: their spans carry the hygiene of the code that wrote them (a
    /// `macro_rules!` caller, say).
    fn access(
        &self,
        args: Option<&TokenStream>,
        shared: Option<&TokenStream>,
        w: u32,
    ) -> TokenStream {
        let (slot, j) = self.layout.input_slot(w);
        let head = self.field(args, shared, slot);
        match j {
            None => head,
            Some(j) => quote!(#head[#j]),
        }
    }

    /// The whole parameter of `slot` (`args.x`, `shared.w`, or `eval`'s `w`), read by the
    /// user's own identifier.
    fn field(
        &self,
        args: Option<&TokenStream>,
        shared: Option<&TokenStream>,
        slot: &crate::abi::ParamSlot,
    ) -> TokenStream {
        let field = &self
            .sig
            .params
            .iter()
            .find(|p| p.name == slot.name)
            .expect("every slot is a parameter")
            .name;
        match if slot.shared { shared } else { args } {
            Some(b) => quote!(#b.#field),
            None => quote!(#field),
        }
    }

    /// IR inputs `w..w + n` read from struct values as one array when they are a whole
    /// array argument (`shared.w`), else `None`.
    fn access_run(
        &self,
        args: Option<&TokenStream>,
        shared: Option<&TokenStream>,
        w: u32,
        n: u32,
    ) -> Option<TokenStream> {
        let (slot, j) = self.layout.input_slot(w);
        (j == Some(0) && slot.len == Some(n as usize)).then(|| self.field(args, shared, slot))
    }

    /// `covered[p]`: output `p` of `f` is stored as a word of a whole array, for the
    /// literals starting at each of `firsts` (`(first output, shared)`): a field whose
    /// words are the words of one array value in order (but for a few patches) is that
    /// value, not a list of reads.
    fn covered(&self, f: &Function, firsts: &[(usize, bool)]) -> Vec<bool> {
        let mut covered = vec![false; f.outputs.len()];
        for (first, shared) in firsts {
            let mut k = *first;
            for slot in self.grad_slots(*shared) {
                let n = slot.len.unwrap_or(1);
                if slot.len.is_some()
                    && let Some(whole) = f.output_array(&f.outputs[k..k + n])
                {
                    covered[k..k + n].iter_mut().for_each(|c| *c = true);
                    for (j, _) in whole.patches {
                        covered[k + j] = false;
                    }
                }
                k += n;
            }
        }
        covered
    }

    /// The slots of a `Grad` (element words with a gradient) or `SharedGrad` literal.
    fn grad_slots(&self, shared: bool) -> impl Iterator<Item = &crate::abi::ParamSlot> {
        self.layout
            .slots
            .iter()
            .filter(move |slot| slot.shared == shared && (shared || slot.differentiable))
    }

    /// A `Grad` (or `SharedGrad`) literal from consecutive outputs of `f` starting at
    /// `first`.
    fn grad_literal(
        &self,
        f: &Function,
        names: &[String],
        first: usize,
        shared: bool,
    ) -> TokenStream {
        let mut k = first;
        let inits: Vec<TokenStream> = self
            .grad_slots(shared)
            .map(|slot| {
                let field = tokens::ident(&slot.name);
                match slot.len {
                    None => {
                        let v = operand(f, names, f.outputs[k], self.scalar());
                        k += 1;
                        quote!(#field: #v)
                    }
                    Some(n) if f.output_array(&f.outputs[k..k + n]).is_some() => {
                        let whole = f.output_array(&f.outputs[k..k + n]).expect("checked");
                        let v = operand(f, names, whole.array, self.scalar());
                        k += n;
                        if whole.patches.is_empty() {
                            quote!(#field: #v)
                        } else {
                            let (at, p): (Vec<usize>, Vec<TokenStream>) = whole
                                .patches
                                .iter()
                                .map(|(j, p)| (*j, operand(f, names, *p, self.scalar())))
                                .unzip();
                            quote!(#field: { let mut g = #v; #(g[#at] = #p;)* g })
                        }
                    }
                    Some(n) => {
                        let vs: Vec<TokenStream> = (0..n)
                            .map(|j| operand(f, names, f.outputs[k + j], self.scalar()))
                            .collect();
                        k += n;
                        quote!(#field: [#(#vs),*])
                    }
                }
            })
            .collect();
        if shared {
            quote!(SharedGrad { #(#inits),* })
        } else {
            quote!(Grad { #(#inits),* })
        }
    }

    /// `eval`'s arguments from `a: &Args` and `s: &Shared`, in the user's order.
    fn eval_args(&self) -> Vec<TokenStream> {
        self.sig
            .params
            .iter()
            .map(|p| {
                let f = &p.name;
                if p.shared { quote!(s.#f) } else { quote!(a.#f) }
            })
            .collect()
    }
}

/// The fields of one generated struct: names and types (over `float`, `f32` or `f64`).
fn struct_fields<'a>(
    params: impl Iterator<Item = &'a Param>,
    float: &TokenStream,
) -> (Vec<&'a syn::Ident>, Vec<TokenStream>) {
    params
        .map(|p| {
            let ty = match p.kind {
                Shape::Scalar => quote!(#float),
                Shape::Array(n) => quote!([#float; #n]),
            };
            (&p.name, ty)
        })
        .unzip()
}

/// Emits the whole expansion of `#[differentiable]` for a compiled function.
pub fn emit(item: &syn::ItemFn, c: &Compiled) -> TokenStream {
    let plan = ItemPlan::new(c);
    let (name, vis) = (&plan.sig.name, &plan.sig.vis);
    let mod_doc = format!(
        "Generated by `#[differentiable]` from [`{}`](fn@{}): its generic CPU \
         version, CPU reverse and forward mode, WGSL kernels and their batched launcher.",
        plan.fname, plan.fname
    );
    let data_types = data_types(&plan);
    let eval = eval_fn(&plan);
    let vector = c.cpu.reverse.jacobian_mode().is_some();
    let api = if vector {
        vector::vector_api(&plan)
    } else {
        scalar::scalar_api(&plan)
    };
    let tangent = tangent::tangent_api(&plan, vector);
    let second = c
        .second
        .as_ref()
        .map(|s| hessian::second_order_api(&plan, s));
    quote! {
        // The language loops over index ranges (it has no iterators): clippy's advice to
        // iterate instead does not apply.
        #[allow(clippy::needless_range_loop)]
        #item

        #[doc = #mod_doc]
        #[allow(
            unused_variables,
            unused_parens,
            unused_mut,
            unused_assignments,
            non_snake_case,
            clippy::all,
            clippy::pedantic,
            clippy::nursery
        )]
        #vis mod #name {
            #data_types

            #eval

            /// Batched launches of this function's kernels on a device.
            #[derive(Clone, Copy, Debug)]
            pub struct Kernel<'d> {
                device: &'d ::gradfuse::Device,
            }

            /// The batched kernels of this function on `device` (GPU, or CPU with rayon).
            pub fn kernel(device: &::gradfuse::Device) -> Kernel<'_> {
                Kernel { device }
            }

            #api

            #tangent

            #second
        }
    }
}

/// `Args` and `Grad`, and with `#[shared]` arguments `Shared`, `SharedGrad` and the
/// reduction's second kernel.
fn data_types(plan: &ItemPlan) -> TokenStream {
    let (sig, fname, words) = (plan.sig, &plan.fname, plan.words);
    // Args: per-element arguments; Grad: those that are not #[constant]; Shared and
    // SharedGrad: the #[shared] ones.
    let float = tokens::float_ty(sig.precision);
    let (arg_fields, arg_types) = struct_fields(sig.params.iter().filter(|p| !p.shared), &float);
    let (grad_fields, grad_types) = struct_fields(
        sig.params.iter().filter(|p| !p.shared && !p.constant),
        &float,
    );
    let args_doc = format!(
        "The per-element arguments of `{fname}` ({words} {} words, no padding){}.",
        sig.precision,
        if plan.has_shared {
            "; `#[shared]` ones are in [`Shared`]"
        } else {
            ""
        }
    );
    let grad_doc = format!(
        "The gradient of `{fname}` in the per-element arguments: one field per argument \
         (but `#[constant]` ones), with the argument's type."
    );
    let shared_items = plan.has_shared.then(|| shared_types(plan));
    let floats = ["Args", "Grad"].map(|t| tokens::floats_impl(t, sig.precision));
    quote! {
        #[doc = #args_doc]
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct Args {
            #(#[doc = "Argument of the same name."] pub #arg_fields: #arg_types,)*
        }
        // SAFETY: #[repr(C)] of float and [float; N] fields of one type only: no padding,
        // every bit pattern is valid, zero is valid.
        unsafe impl ::gradfuse::bytemuck::Zeroable for Args {}
        unsafe impl ::gradfuse::bytemuck::Pod for Args {}

        #[doc = #grad_doc]
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct Grad {
            #(#[doc = "Derivative in the argument of the same name."] pub #grad_fields: #grad_types,)*
        }
        // SAFETY: as for Args.
        unsafe impl ::gradfuse::bytemuck::Zeroable for Grad {}
        unsafe impl ::gradfuse::bytemuck::Pod for Grad {}

        #(#floats)*

        #shared_items
    }
}

/// `Shared`, `SharedGrad` and `WGSL_REDUCE`.
fn shared_types(plan: &ItemPlan) -> TokenStream {
    let fname = &plan.fname;
    let float = tokens::float_ty(plan.sig.precision);
    let (shared_fields, shared_types) =
        struct_fields(plan.sig.params.iter().filter(|p| p.shared), &float);
    let wgsl_reduce = plan.c.wgsl_reduce.as_deref().unwrap_or_default();
    let floats = ["Shared", "SharedGrad"].map(|t| tokens::floats_impl(t, plan.sig.precision));
    let sw = plan.layout.shared_words as usize;
    let shared_doc = format!(
        "The `#[shared]` arguments of `{fname}`: one value for the whole batch ({sw} {} \
         words).",
        plan.sig.precision
    );
    let shared_grad_doc = format!(
        "The gradient in the `#[shared]` arguments of `{fname}`; from a batch launch, the \
         gradient of the sum of the batch's values."
    );
    quote! {
        #[doc = #shared_doc]
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct Shared {
            #(#[doc = "Argument of the same name."] pub #shared_fields: #shared_types,)*
        }
        // SAFETY: #[repr(C)] of float and [float; N] fields of one type only.
        unsafe impl ::gradfuse::bytemuck::Zeroable for Shared {}
        unsafe impl ::gradfuse::bytemuck::Pod for Shared {}

        #[doc = #shared_grad_doc]
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct SharedGrad {
            #(#[doc = "Derivative in the argument of the same name."] pub #shared_fields: #shared_types,)*
        }
        // SAFETY: as for Shared.
        unsafe impl ::gradfuse::bytemuck::Zeroable for SharedGrad {}
        unsafe impl ::gradfuse::bytemuck::Pod for SharedGrad {}

        #(#floats)*

        /// The WGSL module of the second pass of the shared-gradient reduction.
        pub const WGSL_REDUCE: &str = #wgsl_reduce;
    }
}

/// `eval<S: Real>`: the primal over any scalar type.
fn eval_fn(plan: &ItemPlan) -> TokenStream {
    let c = plan.c;
    let fields: Vec<&syn::Ident> = plan.sig.params.iter().map(|p| &p.name).collect();
    let s_types: Vec<TokenStream> = plan
        .sig
        .params
        .iter()
        .map(|p| match p.kind {
            Shape::Scalar => quote!(S),
            Shape::Array(n) => quote!([S; #n]),
        })
        .collect();
    let ev = body(&c.cpu.primal, Scalar::Generic);
    let ev_loads = loads(
        &c.cpu.primal,
        &ev,
        |w| plan.access(None, None, w),
        |w, n| plan.access_run(None, None, w, n),
    );
    let ev_stmts = &ev.stmts;
    let (eval_ret, ev_out) = if c.cpu.reverse.jacobian_mode().is_some() {
        let outs: Vec<TokenStream> = c
            .cpu
            .primal
            .outputs
            .iter()
            .map(|o| operand(&c.cpu.primal, &ev.names, *o, Scalar::Generic))
            .collect();
        (vector::result_type(c, &quote!(S)), vector::pack(c, &outs))
    } else {
        let out = operand(
            &c.cpu.primal,
            &ev.names,
            c.cpu.primal.outputs[0],
            Scalar::Generic,
        );
        (quote!(S), out)
    };
    quote! {
        /// The function for any [`gradfuse::Real`](::gradfuse::Real): `f32`, `f64`, or
        /// `gradfuse::Dual` for forward-mode derivatives.
        #[inline]
        pub fn eval<S: ::gradfuse::Real>(#(#fields: #s_types),*) -> #eval_ret {
            #[allow(unused_imports)]
            use ::gradfuse::Real as _;
            #ev_loads
            #ev_stmts
            #ev_out
        }
    }
}
