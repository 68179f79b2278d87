//! The statements of a CPU version: one `let` per IR node, loops, and the Rust expression
//! of every operation, over `f32` or a generic `S: gradfuse::Real`.

use crate::ir::{Function, Loop, LoopInput, LoopKind, Op, Ty, ValueId};
use crate::names::{fresh, local_names_with, reserved};
use crate::ops::{Func, RustForm};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// Whether code is emitted for `f32` or for a generic `S: gradfuse::Real`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scalar {
    F32,
    Generic,
}

pub(super) fn literal(v: f64, scalar: Scalar) -> TokenStream {
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
pub(super) struct Body {
    pub(super) names: Vec<String>,
    pub(super) stmts: TokenStream,
}

pub(super) fn ident(name: &str) -> syn::Ident {
    format_ident!("{}", name)
}

pub(super) fn operand(f: &Function, names: &[String], v: ValueId, scalar: Scalar) -> TokenStream {
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

pub(super) fn body(f: &Function, scalar: Scalar) -> Body {
    let mut taken = reserved();
    let names = local_names_with(f, &mut taken);
    let stmts = nodes(f, &names, scalar, &mut taken);
    Body { names, stmts }
}

/// The statements of every node of `f` but its inputs (bound by the caller).
pub(super) fn nodes(
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
pub(super) fn rust_loop(
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
pub(super) fn loads(
    f: &Function,
    names: &[String],
    access: impl Fn(u32) -> TokenStream,
) -> TokenStream {
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
