//! IR to Rust tokens: the CPU versions (`eval`, `value_and_grad`, `jvp`), the `Args` and
//! `Grad` structs, the WGSL constants and the typed launchers, all in a module named after
//! the function.

use crate::Compiled;
use crate::abi::{self, KernelKind};
use crate::ir::{Function, Op, ValueId};
use crate::lower::ParamKind;
use crate::names::local_names;
use crate::ops::{Func, RustForm};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};

/// Whether code is emitted for `f32` or for a generic `S: gradfuse::Real`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scalar {
    F32,
    Generic,
}

fn literal(v: f64, scalar: Scalar) -> TokenStream {
    match scalar {
        Scalar::F32 => {
            let x = v as f32;
            if x.is_nan() {
                quote!(f32::NAN)
            } else if x == f32::INFINITY {
                quote!(f32::INFINITY)
            } else if x == f32::NEG_INFINITY {
                quote!(f32::NEG_INFINITY)
            } else {
                let lit = proc_macro2::Literal::f32_suffixed(x.abs());
                if x.is_sign_negative() {
                    quote!((-#lit))
                } else {
                    quote!(#lit)
                }
            }
        }
        Scalar::Generic => {
            if v.is_nan() {
                quote!(<S as ::gradfuse::Real>::from_f64(f64::NAN))
            } else if v.is_infinite() {
                if v > 0.0 {
                    quote!(<S as ::gradfuse::Real>::from_f64(f64::INFINITY))
                } else {
                    quote!(<S as ::gradfuse::Real>::from_f64(f64::NEG_INFINITY))
                }
            } else {
                let lit = proc_macro2::Literal::f64_suffixed(v.abs());
                if v.is_sign_negative() {
                    quote!(<S as ::gradfuse::Real>::from_f64(-#lit))
                } else {
                    quote!(<S as ::gradfuse::Real>::from_f64(#lit))
                }
            }
        }
    }
}

/// The `let` statements computing every node of `f` but its inputs, and the name of each
/// node. Input nodes must be bound by the caller to `names[i]`.
struct Body {
    names: Vec<String>,
    stmts: TokenStream,
}

fn ident(name: &str) -> syn::Ident {
    format_ident!("{}", name)
}

fn operand(f: &Function, names: &[String], v: ValueId, scalar: Scalar) -> TokenStream {
    match f.node(v).op {
        Op::Const(c) => literal(c, scalar),
        _ => {
            let id = ident(&names[v.index()]);
            quote!(#id)
        }
    }
}

fn body(f: &Function, scalar: Scalar) -> Body {
    let names = local_names(f);
    let mut stmts = TokenStream::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let o = |v: &ValueId| operand(f, &names, *v, scalar);
        let e = match &node.op {
            Op::Input(_) | Op::Const(_) => continue,
            Op::Cmp(c, a, b) => {
                let op: TokenStream = c.symbol().parse().expect("comparison operator");
                let (a, b) = (o(a), o(b));
                quote!(#a #op #b)
            }
            Op::Not(a) => {
                let a = o(a);
                quote!(!#a)
            }
            Op::And(a, b) => {
                let (a, b) = (o(a), o(b));
                quote!(#a && #b)
            }
            Op::Or(a, b) => {
                let (a, b) = (o(a), o(b));
                quote!(#a || #b)
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let (c, t, e) = (o(cond), o(then), o(otherwise));
                quote!(if #c { #t } else { #e })
            }
            Op::Call(func, args) => {
                let a: Vec<TokenStream> = args.iter().map(o).collect();
                match (func, func.rust()) {
                    (Func::Powi(n), _) => {
                        let x = &a[0];
                        quote!(#x.powi(#n))
                    }
                    (_, RustForm::Infix(op)) => {
                        let op: TokenStream = op.parse().expect("operator");
                        let (x, y) = (&a[0], &a[1]);
                        quote!(#x #op #y)
                    }
                    (_, RustForm::Prefix(op)) => {
                        let op: TokenStream = op.parse().expect("operator");
                        let x = &a[0];
                        quote!(#op #x)
                    }
                    (_, RustForm::Method(m)) => {
                        let m = ident(m);
                        let (x, rest) = (&a[0], &a[1..]);
                        quote!(#x.#m(#(#rest),*))
                    }
                    (_, RustForm::Real(m)) => {
                        let m = ident(m);
                        quote!(::gradfuse::Real::#m(#(#a),*))
                    }
                }
            }
        };
        let name = ident(&names[i]);
        stmts.extend(quote!(let #name = #e;));
    }
    Body { names, stmts }
}

/// `let name = access;` for every input node, where `access(word)` reads that word.
fn loads(f: &Function, names: &[String], access: impl Fn(u32) -> TokenStream) -> TokenStream {
    let mut ts = TokenStream::new();
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Input(w) = node.op {
            let name = ident(&names[i]);
            let a = access(w);
            ts.extend(quote!(let #name = #a;));
        }
    }
    ts
}

/// Emits the whole expansion of `#[differentiable]` for a compiled function.
pub fn emit(item: &syn::ItemFn, c: &Compiled) -> TokenStream {
    let sig = &c.lowered.sig;
    let layout = &c.lowered.layout;
    let name = &sig.name;
    let vis = &sig.vis;
    let fname = name.to_string();
    let words = layout.words as usize;
    let span = Span::call_site();

    // `x`, `p` and their types, for Args/Grad and eval.
    let fields: Vec<&syn::Ident> = sig.params.iter().map(|p| &p.name).collect();
    let f32_types: Vec<TokenStream> = sig
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Scalar => quote!(f32),
            ParamKind::Array(n) => quote!([f32; #n]),
        })
        .collect();
    let s_types: Vec<TokenStream> = sig
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Scalar => quote!(S),
            ParamKind::Array(n) => quote!([S; #n]),
        })
        .collect();
    let word_list = layout.words();
    let grad_list = layout.grad_words();
    // Grad's fields: the arguments that are not #[constant].
    let (grad_fields, grad_types): (Vec<&syn::Ident>, Vec<TokenStream>) = sig
        .params
        .iter()
        .zip(&f32_types)
        .filter(|(p, _)| !p.constant)
        .map(|(p, t)| (&p.name, t.clone()))
        .unzip();
    // How to read word w from a struct value `base` (args.x, args.p[1]) or eval's params.
    // Parameters are referred to by the user's own identifiers: their spans carry the
    // hygiene of the code that wrote them (a macro_rules! caller, say).
    let access = |base: Option<&TokenStream>, w: u32| -> TokenStream {
        let (slot, j) = word_list[w as usize];
        let field = &sig
            .params
            .iter()
            .find(|p| p.name == slot.name)
            .expect("every slot is a parameter")
            .name;
        let head = match base {
            Some(b) => quote!(#b.#field),
            None => quote!(#field),
        };
        match j {
            None => head,
            Some(j) => quote!(#head[#j]),
        }
    };
    // Builds a Grad-shaped struct literal from one output per word.
    let struct_from = |f: &Function, names: &[String], first: usize| -> TokenStream {
        let mut k = first;
        let inits: Vec<TokenStream> = layout
            .slots
            .iter()
            .filter(|slot| slot.differentiable)
            .map(|slot| {
                let field = format_ident!("{}", slot.name);
                match slot.len {
                    None => {
                        let v = operand(f, names, f.outputs[k], Scalar::F32);
                        k += 1;
                        quote!(#field: #v)
                    }
                    Some(n) => {
                        let vs: Vec<TokenStream> = (0..n)
                            .map(|j| operand(f, names, f.outputs[k + j], Scalar::F32))
                            .collect();
                        k += n;
                        quote!(#field: [#(#vs),*])
                    }
                }
            })
            .collect();
        quote!(Grad { #(#inits),* })
    };

    // eval<S>: the primal.
    let ev = body(&c.primal, Scalar::Generic);
    let ev_loads = loads(&c.primal, &ev.names, |w| access(None, w));
    let ev_stmts = &ev.stmts;
    let ev_out = operand(&c.primal, &ev.names, c.primal.outputs[0], Scalar::Generic);

    // value_and_grad: the adjoint.
    let adj = body(&c.adjoint, Scalar::F32);
    let args_ref = quote!(args);
    let adj_loads = loads(&c.adjoint, &adj.names, |w| access(Some(&args_ref), w));
    let adj_stmts = &adj.stmts;
    let adj_value = operand(&c.adjoint, &adj.names, c.adjoint.outputs[0], Scalar::F32);
    let adj_grad = struct_from(&c.adjoint, &adj.names, 1);

    // jvp: the tangent.
    let tan = body(&c.tangent, Scalar::F32);
    let tangent_ref = quote!(tangent);
    let n_words = layout.words;
    let tan_loads = loads(&c.tangent, &tan.names, |w| {
        if w < n_words {
            access(Some(&args_ref), w)
        } else {
            access(Some(&tangent_ref), grad_list[(w - n_words) as usize])
        }
    });
    let tan_stmts = &tan.stmts;
    let tan_value = operand(&c.tangent, &tan.names, c.tangent.outputs[0], Scalar::F32);
    let tan_dir = operand(&c.tangent, &tan.names, c.tangent.outputs[1], Scalar::F32);

    let wgsl_forward = &c.wgsl_forward;
    let wgsl_adjoint = &c.wgsl_adjoint;
    let eval_args: Vec<TokenStream> = fields.iter().map(|f| quote!(a.#f)).collect();

    let spec = |kind: KernelKind, cpu: &syn::Ident| -> TokenStream {
        let label = format!("{fname}::{}", kind.entry_point());
        let entry = kind.entry_point();
        let wgsl = match kind {
            KernelKind::Forward => quote!(WGSL_FORWARD),
            KernelKind::Adjoint => quote!(WGSL_ADJOINT),
        };
        let outs: Vec<TokenStream> = kind
            .outputs(layout)
            .iter()
            .map(|(binding, words, _)| {
                quote!(::gradfuse::OutputSpec { binding: #binding, words: #words })
            })
            .collect();
        let (wg, maxg, pb, ab) = (
            abi::WORKGROUP_SIZE,
            abi::MAX_WORKGROUPS_PER_DIM,
            abi::PARAMS_BINDING,
            abi::ARGS_BINDING,
        );
        let input_words = layout.words;
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
                cpu: #cpu,
            }
        }
    };
    let cpu_fwd = format_ident!("cpu_forward");
    let cpu_adj = format_ident!("cpu_adjoint");
    let fwd_spec = spec(KernelKind::Forward, &cpu_fwd);
    let adj_spec = spec(KernelKind::Adjoint, &cpu_adj);
    let mod_doc = format!(
        "Generated by `#[differentiable]` from [`{fname}`](fn@{fname}): its generic CPU \
         version, CPU reverse and forward mode, WGSL kernels and their batched launcher."
    );
    let args_doc = format!(
        "The arguments of `{fname}` for one batch element ({words} f32 words, no padding)."
    );
    let grad_doc = format!(
        "The gradient of `{fname}`: one field per argument (but `#[constant]` ones), with \
         the argument's type."
    );
    let _ = span;

    quote! {
        #item

        #[doc = #mod_doc]
        #[allow(
            unused_variables,
            unused_parens,
            non_snake_case,
            clippy::all,
            clippy::pedantic,
            clippy::nursery
        )]
        #vis mod #name {
            #[doc = #args_doc]
            #[repr(C)]
            #[derive(Clone, Copy, Debug, PartialEq)]
            pub struct Args {
                #(#[doc = "Argument of the same name."] pub #fields: #f32_types,)*
            }
            // SAFETY: #[repr(C)] of f32 and [f32; N] fields only: no padding, every bit
            // pattern is valid, zero is valid.
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

            /// The function for any [`gradfuse::Real`](::gradfuse::Real): `f32`, `f64`, or
            /// `gradfuse::Dual` for forward-mode derivatives.
            #[inline]
            pub fn eval<S: ::gradfuse::Real>(#(#fields: #s_types),*) -> S {
                #[allow(unused_imports)]
                use ::gradfuse::Real as _;
                #ev_loads
                #ev_stmts
                #ev_out
            }

            /// The value and the full gradient, by reverse mode on the CPU.
            #[inline]
            pub fn value_and_grad(args: &Args) -> (f32, Grad) {
                #adj_loads
                #adj_stmts
                (#adj_value, #adj_grad)
            }

            /// The value and the directional derivative along `tangent`, by forward mode.
            #[inline]
            pub fn jvp(args: &Args, tangent: &Grad) -> (f32, f32) {
                #tan_loads
                #tan_stmts
                (#tan_value, #tan_dir)
            }

            /// The WGSL module of the forward (value) kernel.
            pub const WGSL_FORWARD: &str = #wgsl_forward;
            /// The WGSL module of the adjoint (value and gradient) kernel.
            pub const WGSL_ADJOINT: &str = #wgsl_adjoint;

            fn cpu_forward(words: &[f32], out: &mut [f32]) {
                let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(words)[0];
                out[0] = eval::<f32>(#(#eval_args),*);
            }

            fn cpu_adjoint(words: &[f32], out: &mut [f32]) {
                let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(words)[0];
                let (v, g) = value_and_grad(a);
                out[0] = v;
                out[1..].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&g)));
            }

            /// The forward kernel's launch description.
            pub static FORWARD_KERNEL: ::gradfuse::KernelSpec = #fwd_spec;
            /// The adjoint kernel's launch description.
            pub static ADJOINT_KERNEL: ::gradfuse::KernelSpec = #adj_spec;

            /// Batched launches of this function's kernels on a device.
            #[derive(Clone, Copy, Debug)]
            pub struct Kernel<'d> {
                device: &'d ::gradfuse::Device,
            }

            /// The batched kernels of this function on `device` (GPU, or CPU with rayon).
            pub fn kernel(device: &::gradfuse::Device) -> Kernel<'_> {
                Kernel { device }
            }

            impl Kernel<'_> {
                /// The value of every element: one thread per element.
                pub fn value(&self, args: &[Args]) -> ::core::result::Result<::std::vec::Vec<f32>, ::gradfuse::Error> {
                    let mut values = ::std::vec![0.0f32; args.len()];
                    self.device.launch(
                        &FORWARD_KERNEL,
                        ::gradfuse::bytemuck::cast_slice(args),
                        &mut [&mut values[..]],
                    )?;
                    Ok(values)
                }

                /// The value and the full gradient of every element, from one fused kernel.
                pub fn value_and_grad(
                    &self,
                    args: &[Args],
                ) -> ::core::result::Result<(::std::vec::Vec<f32>, ::std::vec::Vec<Grad>), ::gradfuse::Error> {
                    let mut values = ::std::vec![0.0f32; args.len()];
                    // Zeroed pages from the allocator, not a pass of writes: the launch
                    // overwrites every word.
                    let mut grads: ::std::vec::Vec<Grad> = ::gradfuse::bytemuck::zeroed_vec(args.len());
                    self.device.launch(
                        &ADJOINT_KERNEL,
                        ::gradfuse::bytemuck::cast_slice(args),
                        &mut [&mut values[..], ::gradfuse::bytemuck::cast_slice_mut(&mut grads[..])],
                    )?;
                    Ok((values, grads))
                }
            }
        }
    }
}
