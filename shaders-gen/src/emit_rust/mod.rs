//! IR to Rust tokens: the CPU versions (`eval`, `value_and_grad`, `jvp`), the `Args` and
//! `Grad` structs, the WGSL constants and the typed launchers, all in a module named after
//! the function.

use crate::Compiled;
use crate::abi::{self, KernelKind};
use crate::ir::{Function, Loop, LoopInput, LoopKind, Op, Ty, ValueId};
use crate::lower::ParamKind;
use crate::names::{fresh, local_names_with, reserved};
use crate::ops::{Func, RustForm};
use proc_macro2::TokenStream;
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
        Op::Int(k) => {
            let k = proc_macro2::Literal::i32_suffixed(k as i32);
            quote!(#k)
        }
        _ => {
            let id = ident(&names[v.index()]);
            quote!(#id)
        }
    }
}

fn body(f: &Function, scalar: Scalar) -> Body {
    let mut taken = reserved();
    let names = local_names_with(f, &mut taken);
    let stmts = nodes(f, &names, scalar, &mut taken);
    Body { names, stmts }
}

/// The statements of every node of `f` but its inputs (bound by the caller).
fn nodes(
    f: &Function,
    names: &[String],
    scalar: Scalar,
    taken: &mut std::collections::HashSet<String>,
) -> TokenStream {
    let mut stmts = TokenStream::new();
    // Per loop node: the variables of its carried values, and its tape.
    let mut carried: std::collections::HashMap<usize, Vec<syn::Ident>> = Default::default();
    let mut tapes: std::collections::HashMap<usize, syn::Ident> = Default::default();
    for (i, node) in f.nodes.iter().enumerate() {
        let o = |v: &ValueId| operand(f, names, *v, scalar);
        let e = match &node.op {
            Op::Input(_) | Op::Const(_) | Op::Int(_) => continue,
            Op::Loop(l) => {
                let (vars, tape, code) = rust_loop(f, names, i, l, scalar, taken, &tapes);
                stmts.extend(code);
                carried.insert(i, vars);
                if let Some(t) = tape {
                    tapes.insert(i, t);
                }
                continue;
            }
            Op::Result(l, k) => {
                let var = &carried[&l.index()][*k as usize];
                quote!(#var)
            }
            Op::CustomGrad {
                value,
                args,
                partials,
            } => match scalar {
                Scalar::F32 => o(value),
                Scalar::Generic => {
                    let (v, a, p) = (
                        o(value),
                        args.iter().map(o).collect::<Vec<_>>(),
                        partials.iter().map(o).collect::<Vec<_>>(),
                    );
                    quote!(<S as ::gradfuse::Real>::custom_grad(#v, &[#(#a),*], &[#(#p),*]))
                }
            },
            Op::IntBin(op, a, b) => {
                let op: TokenStream = op.symbol().parse().expect("operator");
                let (a, b) = (o(a), o(b));
                quote!(#a #op #b)
            }
            Op::IntToF32(a) => {
                let a = o(a);
                match scalar {
                    Scalar::F32 => quote!((#a as f32)),
                    Scalar::Generic => quote!(<S as ::gradfuse::Real>::from_f64(#a as f64)),
                }
            }
            Op::Index { elems, index } => {
                let e: Vec<TokenStream> = elems.iter().map(o).collect();
                let last = (elems.len() - 1) as i32;
                let index = o(index);
                quote!([#(#e),*][(#index).clamp(0i32, #last) as usize])
            }
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
    stmts
}

/// A loop as Rust: `let mut` carried values, `for` over the index (reversed for a reverse
/// loop), the body with its inputs bound, the carried values updated. A recording loop
/// keeps a tape of its carried values (f32: recording loops only occur in reverse mode).
#[allow(clippy::too_many_arguments)]
fn rust_loop(
    f: &Function,
    names: &[String],
    i: usize,
    l: &Loop,
    scalar: Scalar,
    taken: &mut std::collections::HashSet<String>,
    tapes: &std::collections::HashMap<usize, syn::Ident>,
) -> (Vec<syn::Ident>, Option<syn::Ident>, TokenStream) {
    let body = &l.body;
    let c = l.init.len();
    let input_name = |w: usize, fallback: &str| {
        body.input_name(w as u32)
            .map_or_else(|| fallback.to_string(), crate::names::sanitize)
    };
    let index = ident(&fresh(taken, &input_name(0, "i")));
    let vars: Vec<syn::Ident> = (0..c)
        .map(|k| {
            ident(&fresh(
                taken,
                &format!("{}_next", input_name(1 + k, "carried")),
            ))
        })
        .collect();
    let inits: Vec<TokenStream> = l
        .init
        .iter()
        .map(|v| operand(f, names, *v, scalar))
        .collect();
    let mut code = quote!(#(let mut #vars = #inits;)*);
    let (start, end) = (l.start as i32, l.end as i32);
    let trip = l.trip_count() as usize;
    let tape = (l.kind == LoopKind::Recording).then(|| ident(&fresh(taken, "tape")));
    let mut head = TokenStream::new();
    if let Some(tape) = &tape {
        let len = (trip * c).max(1);
        code.extend(quote!(let mut #tape = ::std::vec![0.0f32; #len];));
        for (k, var) in vars.iter().enumerate() {
            let v = if l.carried_ty(k) == Ty::Bool {
                quote!(if #var { 1.0f32 } else { 0.0f32 })
            } else {
                quote!(#var)
            };
            let (cc, kk) = (c as i32, k as i32);
            head.extend(quote!(#tape[((#index - #start) * #cc + #kk) as usize] = #v;));
        }
    }
    let bnames = local_names_with(body, taken);
    let taped_from = match l.kind {
        // No tape when the body reads no taped value (the forward loop did not record).
        LoopKind::Reverse { tape, taped } => {
            tapes.get(&tape.index()).map(|t| (t.clone(), tape, taped))
        }
        _ => None,
    };
    let used = body.used_inputs();
    for (n, node) in body.nodes.iter().enumerate() {
        let Op::Input(w) = node.op else { continue };
        let w = w as usize;
        if !used[w] {
            continue;
        }
        let src = match l.input(w) {
            LoopInput::Index => quote!(#index),
            LoopInput::Carried(k) => {
                let v = &vars[k];
                quote!(#v)
            }
            LoopInput::Capture(j) => operand(f, names, l.captures[j], scalar),
            LoopInput::Taped(k) => {
                let (tape, tape_loop, taped) = taped_from.clone().expect("a reverse loop");
                let (taped, kk) = (taped as i32, k as i32);
                let read = quote!(#tape[((#index - #start) * #taped + #kk) as usize]);
                let bool_taped = match &f.node(tape_loop).op {
                    Op::Loop(tl) => tl.carried_ty(k) == Ty::Bool,
                    _ => false,
                };
                if bool_taped {
                    quote!((#read != 0.0f32))
                } else {
                    read
                }
            }
        };
        let name = ident(&bnames[n]);
        head.extend(quote!(let #name = #src;));
    }
    let inner = nodes(body, &bnames, scalar, taken);
    let outs: Vec<TokenStream> = body
        .outputs
        .iter()
        .map(|o| operand(body, &bnames, *o, scalar))
        .collect();
    let range = match l.kind {
        LoopKind::Reverse { .. } => quote!((#start..#end).rev()),
        _ => quote!(#start..#end),
    };
    code.extend(quote! {
        for #index in #range {
            #head
            #inner
            #(#vars = #outs;)*
        }
    });
    let _ = i;
    (vars, tape, code)
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

/// The fields of one generated struct: names and f32 types.
fn struct_fields<'a>(
    params: impl Iterator<Item = &'a crate::lower::Param>,
) -> (Vec<&'a syn::Ident>, Vec<TokenStream>) {
    params
        .map(|p| {
            let ty = match p.kind {
                ParamKind::Scalar => quote!(f32),
                ParamKind::Array(n) => quote!([f32; #n]),
            };
            (&p.name, ty)
        })
        .unzip()
}

/// Emits the whole expansion of `#[differentiable]` for a compiled function.
pub fn emit(item: &syn::ItemFn, c: &Compiled) -> TokenStream {
    let sig = &c.lowered.sig;
    let layout = &c.lowered.layout;
    let name = &sig.name;
    let vis = &sig.vis;
    let fname = name.to_string();
    let words = layout.words as usize;
    let has_shared = layout.shared_words > 0;

    // eval's parameters: every argument in order.
    let fields: Vec<&syn::Ident> = sig.params.iter().map(|p| &p.name).collect();
    let s_types: Vec<TokenStream> = sig
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Scalar => quote!(S),
            ParamKind::Array(n) => quote!([S; #n]),
        })
        .collect();
    // Args: per-element arguments; Grad: those that are not #[constant]; Shared and
    // SharedGrad: the #[shared] ones.
    let (arg_fields, arg_types) = struct_fields(sig.params.iter().filter(|p| !p.shared));
    let (grad_fields, grad_types) =
        struct_fields(sig.params.iter().filter(|p| !p.shared && !p.constant));
    let (shared_fields, shared_types) = struct_fields(sig.params.iter().filter(|p| p.shared));
    let grad_list = layout.grad_words();
    let grad_count = grad_list.len();

    // How to read IR input w from struct values (args.x, shared.w[1]) or eval's params.
    // Parameters are referred to by the user's own identifiers: their spans carry the
    // hygiene of the code that wrote them (a macro_rules! caller, say).
    let access = |args: Option<&TokenStream>, shared: Option<&TokenStream>, w: u32| {
        let (slot, j) = layout.input_slot(w);
        let field = &sig
            .params
            .iter()
            .find(|p| p.name == slot.name)
            .expect("every slot is a parameter")
            .name;
        let base = if slot.shared { shared } else { args };
        let head = match base {
            Some(b) => quote!(#b.#field),
            None => quote!(#field),
        };
        match j {
            None => head,
            Some(j) => quote!(#head[#j]),
        }
    };
    // Builds a Grad (or SharedGrad) literal from consecutive outputs starting at `first`.
    let struct_from = |f: &Function, names: &[String], first: usize, shared: bool| {
        let mut k = first;
        let inits: Vec<TokenStream> = layout
            .slots
            .iter()
            .filter(|slot| slot.shared == shared && (shared || slot.differentiable))
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
        if shared {
            quote!(SharedGrad { #(#inits),* })
        } else {
            quote!(Grad { #(#inits),* })
        }
    };
    let args_ref = quote!(args);
    let shared_ref = quote!(shared);

    // eval<S>: the primal.
    let ev = body(&c.primal, Scalar::Generic);
    let ev_loads = loads(&c.primal, &ev.names, |w| access(None, None, w));
    let ev_stmts = &ev.stmts;
    let ev_out = operand(&c.primal, &ev.names, c.primal.outputs[0], Scalar::Generic);

    // value_and_grad: the adjoint.
    let adj = body(&c.adjoint, Scalar::F32);
    let adj_loads = loads(&c.adjoint, &adj.names, |w| {
        access(Some(&args_ref), Some(&shared_ref), w)
    });
    let adj_stmts = &adj.stmts;
    let adj_value = operand(&c.adjoint, &adj.names, c.adjoint.outputs[0], Scalar::F32);
    let adj_grad = struct_from(&c.adjoint, &adj.names, 1, false);
    let adj_shared_grad = struct_from(&c.adjoint, &adj.names, 1 + grad_count, true);

    // jvp: the tangent. Its inputs: the arguments, then one tangent word per gradient
    // word (the element's, then the shared ones).
    let tan = body(&c.tangent, Scalar::F32);
    let tangent_ref = quote!(tangent);
    let shared_tangent_ref = quote!(shared_tangent);
    let n_inputs = layout.words + layout.shared_words;
    let tan_loads = loads(&c.tangent, &tan.names, |w| {
        if w < n_inputs {
            access(Some(&args_ref), Some(&shared_ref), w)
        } else if ((w - n_inputs) as usize) < grad_count {
            access(Some(&tangent_ref), None, grad_list[(w - n_inputs) as usize])
        } else {
            let k = w - n_inputs - grad_count as u32;
            access(None, Some(&shared_tangent_ref), layout.words + k)
        }
    });
    let tan_stmts = &tan.stmts;
    let tan_value = operand(&c.tangent, &tan.names, c.tangent.outputs[0], Scalar::F32);
    let tan_dir = operand(&c.tangent, &tan.names, c.tangent.outputs[1], Scalar::F32);

    let wgsl_forward = &c.wgsl_forward;
    let wgsl_adjoint = &c.wgsl_adjoint;
    // eval's arguments from `a: &Args` and `s: &Shared`, in the user's order.
    let eval_args: Vec<TokenStream> = sig
        .params
        .iter()
        .map(|p| {
            let f = &p.name;
            if p.shared { quote!(s.#f) } else { quote!(a.#f) }
        })
        .collect();

    let spec = |kind: KernelKind, cpu: &syn::Ident| -> TokenStream {
        let label = format!("{fname}::{}", kind.entry_point());
        let entry = kind.entry_point();
        let wgsl = match kind {
            KernelKind::Forward => quote!(WGSL_FORWARD),
            KernelKind::Adjoint => quote!(WGSL_ADJOINT),
            KernelKind::Jacobian => quote!(WGSL_JACOBIAN),
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
        let shared = if has_shared {
            let (sb, sw) = (abi::SHARED_BINDING, layout.shared_words);
            let reduction = if kind == KernelKind::Adjoint {
                let (partials, rp, ri, ro) = (
                    abi::PARTIALS_BINDING,
                    abi::REDUCE_PARAMS_BINDING,
                    abi::REDUCE_INPUT_BINDING,
                    abi::REDUCE_OUTPUT_BINDING,
                );
                let rlabel = format!("{fname}::reduce");
                quote!(Some(::gradfuse::ReductionSpec {
                    partials_binding: #partials,
                    label: #rlabel,
                    wgsl: WGSL_REDUCE,
                    entry_point: "reduce",
                    params_binding: #rp,
                    input_binding: #ri,
                    output_binding: #ro,
                }))
            } else {
                quote!(None)
            };
            let uniform = abi::shared_in_uniform(sw);
            quote!(Some(&::gradfuse::SharedSpec {
                binding: #sb,
                words: #sw,
                uniform: #uniform,
                reduction: #reduction,
            }))
        } else {
            quote!(None)
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
                cpu: #cpu,
            }
        }
    };
    let cpu_fwd = format_ident!("cpu_forward");
    let cpu_adj = format_ident!("cpu_adjoint");
    let fwd_spec = spec(KernelKind::Forward, &cpu_fwd);
    let adj_spec = if c.jacobian_mode.is_some() {
        spec(KernelKind::Jacobian, &format_ident!("cpu_jacobian"))
    } else {
        spec(KernelKind::Adjoint, &cpu_adj)
    };
    let mod_doc = format!(
        "Generated by `#[differentiable]` from [`{fname}`](fn@{fname}): its generic CPU \
         version, CPU reverse and forward mode, WGSL kernels and their batched launcher."
    );
    let args_doc = format!(
        "The per-element arguments of `{fname}` ({words} f32 words, no padding){}.",
        if has_shared {
            "; `#[shared]` ones are in [`Shared`]"
        } else {
            ""
        }
    );
    let grad_doc = format!(
        "The gradient of `{fname}` in the per-element arguments: one field per argument \
         (but `#[constant]` ones), with the argument's type."
    );

    // The parts that differ with #[shared] arguments.
    let shared_items = has_shared.then(|| {
        let wgsl_reduce = c.wgsl_reduce.as_deref().unwrap_or_default();
        let sw = layout.shared_words as usize;
        let shared_doc = format!(
            "The `#[shared]` arguments of `{fname}`: one value for the whole batch ({sw} f32 \
             words)."
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
            // SAFETY: #[repr(C)] of f32 and [f32; N] fields only.
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

            /// The WGSL module of the second pass of the shared-gradient reduction.
            pub const WGSL_REDUCE: &str = #wgsl_reduce;
        }
    });
    let (vg_sig, vg_ret) = if has_shared {
        (
            quote!(pub fn value_and_grad(args: &Args, shared: &Shared) -> (f32, Grad, SharedGrad)),
            quote!((#adj_value, #adj_grad, #adj_shared_grad)),
        )
    } else {
        (
            quote!(pub fn value_and_grad(args: &Args) -> (f32, Grad)),
            quote!((#adj_value, #adj_grad)),
        )
    };
    let jvp_sig = if has_shared {
        quote!(pub fn jvp(args: &Args, shared: &Shared, tangent: &Grad, shared_tangent: &SharedGrad) -> (f32, f32))
    } else {
        quote!(pub fn jvp(args: &Args, tangent: &Grad) -> (f32, f32))
    };
    // The CPU versions for the runtime: element words, then shared words in; value, the
    // element's gradient words, then its shared gradient words out.
    let read_shared = if has_shared {
        quote!(let s: &Shared = &::gradfuse::bytemuck::cast_slice::<f32, Shared>(&words[#words..])[0];)
    } else {
        quote!()
    };
    let call_vg = if has_shared {
        quote!(let (v, g, sg) = value_and_grad(a, s);)
    } else {
        quote!(let (v, g) = value_and_grad(a);)
    };
    let copy_grads = if grad_count > 0 {
        quote!(out[1..1 + #grad_count].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&g)));)
    } else {
        quote!(let _ = g;)
    };
    let copy_shared_grads = has_shared.then(|| {
        quote!(out[1 + #grad_count..].copy_from_slice(::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(&sg)));)
    });
    let launcher = launcher(has_shared, grad_count > 0);
    let scalar_api = quote! {
            /// The value and the full gradient, by reverse mode on the CPU.
            #[inline]
            #vg_sig {
                #adj_loads
                #adj_stmts
                #vg_ret
            }

            /// The value and the directional derivative along the tangent, by forward mode.
            #[inline]
            #jvp_sig {
                #tan_loads
                #tan_stmts
                (#tan_value, #tan_dir)
            }

            /// The WGSL module of the forward (value) kernel.
            pub const WGSL_FORWARD: &str = #wgsl_forward;
            /// The WGSL module of the adjoint (value and gradient) kernel.
            pub const WGSL_ADJOINT: &str = #wgsl_adjoint;

            fn cpu_forward(words: &[f32], out: &mut [f32]) {
                let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
                #read_shared
                out[0] = eval::<f32>(#(#eval_args),*);
            }

            fn cpu_adjoint(words: &[f32], out: &mut [f32]) {
                let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
                #read_shared
                #call_vg
                out[0] = v;
                #copy_grads
                #copy_shared_grads
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

            #launcher
    };
    let api = if c.jacobian_mode.is_some() {
        let rows = struct_from_rows(c, &adj);
        vector_api(c, &adj, &tan, &eval_args, &rows, (&fwd_spec, &adj_spec))
    } else {
        scalar_api
    };
    let eval_ret = if c.jacobian_mode.is_some() {
        result_type(c, &quote!(S))
    } else {
        quote!(S)
    };
    let ev_out = if c.jacobian_mode.is_some() {
        let outs: Vec<TokenStream> = c
            .primal
            .outputs
            .iter()
            .map(|o| operand(&c.primal, &ev.names, *o, Scalar::Generic))
            .collect();
        pack(c, &outs)
    } else {
        ev_out
    };

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
            #[doc = #args_doc]
            #[repr(C)]
            #[derive(Clone, Copy, Debug, PartialEq)]
            pub struct Args {
                #(#[doc = "Argument of the same name."] pub #arg_fields: #arg_types,)*
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

            #shared_items


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

            #api
        }
    }
}

/// The result type of a vector function over scalar type `s`: `[s; M]`, or the tuple.
fn result_type(c: &Compiled, s: &TokenStream) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let ts: Vec<TokenStream> = parts
                .iter()
                .map(|p| match p {
                    ParamKind::Scalar => quote!(#s),
                    ParamKind::Array(n) => quote!([#s; #n]),
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
fn pack(c: &Compiled, words: &[TokenStream]) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let mut at = 0;
            let items: Vec<TokenStream> = parts
                .iter()
                .map(|p| match p {
                    ParamKind::Scalar => {
                        at += 1;
                        words[at - 1].clone()
                    }
                    ParamKind::Array(n) => {
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
fn unpack(c: &Compiled, v: &TokenStream) -> TokenStream {
    match &c.lowered.sig.result_parts {
        Some(parts) => {
            let mut words = Vec::new();
            for (k, p) in parts.iter().enumerate() {
                let k = syn::Index::from(k);
                match p {
                    ParamKind::Scalar => words.push(quote!(#v.#k)),
                    ParamKind::Array(n) => {
                        words.extend((0..*n).map(|j| quote!(#v.#k[#j])));
                    }
                }
            }
            quote!([#(#words),*])
        }
        None => quote!(#v),
    }
}

/// For a vector function: the `Grad` literal of each Jacobian row from the adjoint's
/// outputs `[values (M), rows (M x gradient words)...]`.
fn struct_from_rows(c: &Compiled, adj: &Body) -> Vec<TokenStream> {
    let layout = &c.lowered.layout;
    let m = layout.results as usize;
    let g = layout.grad_words().len();
    let f = &c.adjoint;
    (0..m)
        .map(|k| {
            let mut at = m + k * g;
            let inits: Vec<TokenStream> = layout
                .slots
                .iter()
                .filter(|slot| slot.differentiable && !slot.shared)
                .map(|slot| {
                    let field = format_ident!("{}", slot.name);
                    match slot.len {
                        None => {
                            let v = operand(f, &adj.names, f.outputs[at], Scalar::F32);
                            at += 1;
                            quote!(#field: #v)
                        }
                        Some(n) => {
                            let vs: Vec<TokenStream> = (0..n)
                                .map(|j| operand(f, &adj.names, f.outputs[at + j], Scalar::F32))
                                .collect();
                            at += n;
                            quote!(#field: [#(#vs),*])
                        }
                    }
                })
                .collect();
            quote!(Grad { #(#inits),* })
        })
        .collect()
}

/// The CPU versions, WGSL, kernel descriptions and launchers of a function with an
/// `[f32; M]` result: `value_and_jacobian` in place of `value_and_grad`.
fn vector_api(
    c: &Compiled,
    adj: &Body,
    tan: &Body,
    eval_args: &[TokenStream],
    rows: &[TokenStream],
    (fwd_spec, jac_spec): (&TokenStream, &TokenStream),
) -> TokenStream {
    let layout = &c.lowered.layout;
    let m = layout.results as usize;
    let words = layout.words as usize;
    let g = layout.grad_words().len();
    let has_grads = g > 0;
    let f = &c.adjoint;
    let values: Vec<TokenStream> = (0..m)
        .map(|k| operand(f, &adj.names, f.outputs[k], Scalar::F32))
        .collect();
    let t = &c.tangent;
    let tan_values: Vec<TokenStream> = (0..m)
        .map(|k| operand(t, &tan.names, t.outputs[k], Scalar::F32))
        .collect();
    let tan_dirs: Vec<TokenStream> = (0..m)
        .map(|k| operand(t, &tan.names, t.outputs[m + k], Scalar::F32))
        .collect();
    let (adj_stmts, tan_stmts) = (&adj.stmts, &tan.stmts);
    // Input loads: value_and_jacobian and jvp read `args` (and `tangent`).
    let access = |base: &TokenStream, w: u32| {
        let (slot, j) = layout.input_slot(w);
        let field = format_ident!("{}", slot.name);
        match j {
            None => quote!(#base.#field),
            Some(j) => quote!(#base.#field[#j]),
        }
    };
    let args = quote!(args);
    let tangent = quote!(tangent);
    let grad_list = layout.grad_words();
    let adj_loads = loads(f, &adj.names, |w| access(&args, w));
    let n = layout.words;
    let tan_loads = loads(t, &tan.names, |w| {
        if w < n {
            access(&args, w)
        } else {
            access(&tangent, grad_list[(w - n) as usize])
        }
    });
    let wgsl_forward = &c.wgsl_forward;
    let wgsl_jacobian = &c.wgsl_adjoint;
    let mode_doc = match c.jacobian_mode {
        Some(crate::ad::JacobianMode::Forward) => format!(
            "The Jacobian is computed by {g} forward sweeps (one per argument word with a \
             gradient: fewer than the {m} results)."
        ),
        _ => format!(
            "The Jacobian is computed by {m} reverse sweeps (one per result word: no more \
             than the {g} argument words with a gradient)."
        ),
    };
    let copy_jacobian = if has_grads {
        quote!(out[#m..].copy_from_slice(::gradfuse::bytemuck::cast_slice(&j[..]));)
    } else {
        quote!(let _ = j;)
    };
    let jac_alloc = if has_grads {
        quote!(let mut jacobians: ::std::vec::Vec<Jacobian> = ::gradfuse::bytemuck::zeroed_vec(args.len());)
    } else {
        quote!(let jacobians: ::std::vec::Vec<Jacobian> = ::std::vec![[Grad {}; #m]; args.len()];)
    };
    let jac_outputs = if has_grads {
        quote!(&mut [
            ::gradfuse::bytemuck::cast_slice_mut(&mut values[..]),
            ::gradfuse::bytemuck::cast_slice_mut(&mut jacobians[..])
        ])
    } else {
        quote!(&mut [::gradfuse::bytemuck::cast_slice_mut(&mut values[..])])
    };
    let value_ty = result_type(c, &quote!(f32));
    // Arrays are their own words; tuples are rebuilt from them.
    let collect_values = if c.lowered.sig.result_parts.is_some() {
        quote!(values.iter().map(value_of).collect())
    } else {
        quote!(values)
    };
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
        pub fn words_of(v: Value) -> [f32; #m] {
            #words_of_v
        }

        /// A result from its words.
        pub fn value_of(w: &[f32; #m]) -> Value {
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

        /// The WGSL module of the forward (value) kernel.
        pub const WGSL_FORWARD: &str = #wgsl_forward;
        /// The WGSL module of the Jacobian (values and Jacobian) kernel.
        pub const WGSL_JACOBIAN: &str = #wgsl_jacobian;

        fn cpu_forward(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            out[..#m].copy_from_slice(&words_of(eval::<f32>(#(#eval_args),*)));
        }

        fn cpu_jacobian(words: &[f32], out: &mut [f32]) {
            let a: &Args = &::gradfuse::bytemuck::cast_slice::<f32, Args>(&words[..#words])[0];
            let (v, j) = value_and_jacobian(a);
            out[..#m].copy_from_slice(&words_of(v));
            #copy_jacobian
        }

        /// The forward kernel's launch description.
        pub static FORWARD_KERNEL: ::gradfuse::KernelSpec = #fwd_spec;
        /// The Jacobian kernel's launch description.
        pub static JACOBIAN_KERNEL: ::gradfuse::KernelSpec = #jac_spec;

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
            /// The values of every element: one thread per element.
            pub fn value(&self, args: &[Args]) -> ::core::result::Result<::std::vec::Vec<Value>, ::gradfuse::Error> {
                let mut values = ::std::vec![[0.0f32; #m]; args.len()];
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
                let mut values = ::std::vec![[0.0f32; #m]; args.len()];
                #jac_alloc
                self.device.launch(
                    &JACOBIAN_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    #jac_outputs,
                )?;
                Ok((#collect_values, jacobians))
            }
        }
    }
}

/// The `impl Kernel` of the batched launches.
fn launcher(has_shared: bool, has_grads: bool) -> TokenStream {
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
        quote!(&mut [values, ::gradfuse::bytemuck::cast_slice_mut(grads)])
    } else {
        quote!(&mut [values])
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
    if !has_shared {
        return quote! {
            impl Kernel<'_> {
                /// The value of every element: one thread per element.
                pub fn value(&self, args: &[Args]) -> ::core::result::Result<#vec<f32>, #err> {
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
                ) -> ::core::result::Result<(#vec<f32>, #vec<Grad>), #err> {
                    let mut values = ::std::vec![0.0f32; args.len()];
                    #grads_alloc
                    self.value_and_grad_into(args, &mut values, &mut grads)?;
                    Ok((values, grads))
                }

                #into_doc
                pub fn value_and_grad_into(
                    &self,
                    args: &[Args],
                    values: &mut [f32],
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
        };
    }
    quote! {
        impl Kernel<'_> {
            /// The value of every element, with the batch's `shared` arguments: one thread
            /// per element.
            pub fn value(
                &self,
                args: &[Args],
                shared: &Shared,
            ) -> ::core::result::Result<#vec<f32>, #err> {
                let mut values = ::std::vec![0.0f32; args.len()];
                self.device.launch_shared(
                    &FORWARD_KERNEL,
                    ::gradfuse::bytemuck::cast_slice(args),
                    ::gradfuse::bytemuck::cast_slice(::core::slice::from_ref(shared)),
                    &mut [&mut values[..]],
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
            ) -> ::core::result::Result<(#vec<f32>, #vec<Grad>, SharedGrad), #err> {
                let mut values = ::std::vec![0.0f32; args.len()];
                #grads_alloc
                let shared_grad = self.value_and_grad_into(args, shared, &mut values, &mut grads)?;
                Ok((values, grads, shared_grad))
            }

            #into_doc
            pub fn value_and_grad_into(
                &self,
                args: &[Args],
                shared: &Shared,
                values: &mut [f32],
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
