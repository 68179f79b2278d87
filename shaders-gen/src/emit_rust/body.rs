//! The statements of a CPU version: one `let` per IR node, loops, and the Rust expression
//! of every operation, over `f32` or a generic `S: gradfuse::Real`.

use super::arrays::{array_stmt, index_of};
use super::tokens::{Scalar, ident, literal, operand};
use crate::ir::{Function, Loop, LoopInput, LoopKind, Op, Ty, ValueId, in_place};
use crate::names::{fresh, local_names_with, reserved};
use crate::ops::{Func, RustForm};
use proc_macro2::TokenStream;
use quote::quote;
use std::collections::HashSet;

/// The `let` statements computing every node of `f` but its inputs, and the name of each
/// node. Input nodes must be bound by the caller to `names[i]`.
pub(super) struct Body {
    pub(super) names: Vec<String>,
    pub(super) stmts: TokenStream,
    /// Which nodes the caller binds or stores whole, and which inputs need a `let`.
    views: Views,
}

/// A function's arrays as the code around its body sees them: array arguments bound whole
/// (`let w = shared.w;`), not word by word, and arrays stored whole into a gradient
/// field, not word by word. So the CPU versions grow with the source, not with array
/// lengths.
struct Views {
    /// Array nodes that are argument words in order: `(first word, length)`.
    bound: Vec<Option<(u32, u32)>>,
    /// Inputs read by something other than a bound array (or returned).
    needed: Vec<bool>,
    /// Nodes the body does not write: the bound arrays, and reads of arrays stored whole
    /// that nothing else reads.
    skip: HashSet<usize>,
}

impl Views {
    /// `covered[p]`: output `p` is stored as part of a whole array.
    fn of(f: &Function, covered: &[bool]) -> Self {
        let n = f.nodes.len();
        let bound: Vec<Option<(u32, u32)>> = (0..n).map(|i| f.input_array(i)).collect();
        let read_by_node = f.read_by_node();
        let mut needed = vec![false; n];
        for (j, node) in f.nodes.iter().enumerate() {
            if bound[j].is_none() {
                for v in node.op.operands() {
                    needed[v.index()] = true;
                }
            }
        }
        let mut whole_only = vec![true; n];
        for (p, o) in f.outputs.iter().enumerate() {
            needed[o.index()] = true;
            whole_only[o.index()] &= covered.get(p) == Some(&true);
        }
        let mut skip: HashSet<usize> = (0..n).filter(|i| bound[*i].is_some()).collect();
        for (i, node) in f.nodes.iter().enumerate() {
            if matches!(node.op, Op::ArrayGet { .. }) && whole_only[i] && !read_by_node[i] {
                skip.insert(i);
            }
        }
        Views {
            bound,
            needed,
            skip,
        }
    }
}

pub(super) fn body(f: &Function, scalar: Scalar) -> Body {
    body_storing(f, scalar, &[])
}

/// [`body`] of a function whose outputs `p` with `covered[p]` are stored as part of a
/// whole array (see `ItemPlan::grad_literal`).
pub(super) fn body_storing(f: &Function, scalar: Scalar, covered: &[bool]) -> Body {
    let mut taken = reserved();
    let mut names = local_names_with(f, &mut taken);
    let views = Views::of(f, covered);
    let stmts = nodes(f, &mut names, scalar, &mut taken, |_| false, &views.skip);
    Body {
        names,
        stmts,
        views,
    }
}

/// The statements of every node of `f` but its inputs (bound by the caller), whose inputs
/// `owned(w)` may be updated in place. A node updating an array in place takes the name of
/// the array it updates.
pub(super) fn nodes(
    f: &Function,
    names: &mut [String],
    scalar: Scalar,
    taken: &mut crate::names::Taken,
    owned: impl Fn(u32) -> bool,
    skip: &HashSet<usize>,
) -> TokenStream {
    let inplace = in_place(f, owned);
    let mut stmts = TokenStream::new();
    // Per loop node: the variables of its carried values, and its tape.
    let mut carried: std::collections::HashMap<usize, Vec<syn::Ident>> = Default::default();
    let mut tapes: std::collections::HashMap<usize, syn::Ident> = Default::default();
    for (i, node) in f.nodes.iter().enumerate() {
        if skip.contains(&i) {
            continue;
        }
        if matches!(node.ty, Ty::Array(_)) && !matches!(node.op, Op::Input(_) | Op::Result(..)) {
            stmts.extend(array_stmt(f, names, i, scalar, &inplace));
            continue;
        }
        let e = match &node.op {
            Op::Input(_) | Op::Const(_) | Op::Int(_) => continue,
            Op::Loop(l) => {
                let (vars, tape, code) =
                    rust_loop(f, names, (ValueId(i as u32), l), scalar, taken, &tapes);
                stmts.extend(code);
                carried.insert(i, vars);
                if let Some(t) = tape {
                    tapes.insert(i, t);
                }
                continue;
            }
            Op::Result(l, k) => {
                let var = &carried[&l.index()][*k as usize];
                if inplace.mutated[i] {
                    let name = ident(&names[i]);
                    stmts.extend(quote!(let mut #name = #var;));
                    continue;
                }
                quote!(#var)
            }
            op => node_expr(f, names, op, scalar),
        };
        let name = ident(&names[i]);
        stmts.extend(quote!(let #name = #e;));
    }
    stmts
}

/// The Rust expression of a node that is one (not an input, a constant, a loop, its
/// result or an array value).
fn node_expr(f: &Function, names: &[String], op: &Op, scalar: Scalar) -> TokenStream {
    let o = |v: &ValueId| operand(f, names, *v, scalar);
    match op {
        Op::CustomGrad {
            value,
            args,
            partials,
        } => match scalar {
            Scalar::F32 | Scalar::F64 => o(value),
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
                Scalar::F64 => quote!((#a as f64)),
                Scalar::Generic => quote!(<S as ::gradfuse::Real>::from_f64(#a as f64)),
            }
        }
        Op::ArrayGet { array, index } => {
            let k = index_of(f, names, *index, f.node(*array).ty.words());
            let a = o(array);
            quote!(#a #k)
        }
        Op::ArrayNew(_) | Op::ArraySet { .. } | Op::ArrayAdd(..) => {
            unreachable!("array values are written by array_stmt")
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
        Op::Call(func, args) => call_expr(*func, args.iter().map(o).collect()),
        Op::Input(_) | Op::Const(_) | Op::Int(_) | Op::Loop(_) | Op::Result(..) => {
            unreachable!("inputs, constants, loops and their results are written by nodes")
        }
    }
}

/// A call of `func` on the expressions `a`, in the Rust form the function table gives it.
fn call_expr(func: Func, a: Vec<TokenStream>) -> TokenStream {
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

/// A loop as Rust: `let mut` carried values, `for` over the index (reversed for a reverse
/// loop), the body with its inputs bound, the carried values updated. A recording loop
/// keeps a tape of its carried values (f32: recording loops only occur in reverse mode).
/// Array inputs are the carried variables and the captured values themselves, not copies.
pub(super) fn rust_loop(
    f: &Function,
    names: &[String],
    (id, l): (ValueId, &Loop),
    scalar: Scalar,
    taken: &mut crate::names::Taken,
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
    let start = l.start as i32;
    let tape = (l.kind == LoopKind::Recording).then(|| ident(&fresh(taken, "tape")));
    let mut head = TokenStream::new();
    if let Some(tape) = &tape {
        let (alloc, record) = record_tape(f, (id, l), tape, (&index, &vars), scalar);
        code.extend(alloc);
        head.extend(record);
    }
    let mut bnames = local_names_with(body, taken);
    let taped_from = match l.kind {
        // No tape when the body reads no taped value (the forward loop did not record).
        LoopKind::Reverse { tape, .. } => tapes.get(&tape.index()).map(|t| (t.clone(), tape)),
        _ => None,
    };
    let loop_vars = LoopVars {
        index: &index,
        vars: &vars,
        taped_from,
    };
    head.extend(bind_body_inputs(
        f,
        names,
        l,
        &loop_vars,
        &mut bnames,
        scalar,
    ));
    let owned = |w: u32| {
        matches!(
            l.input(w as usize),
            LoopInput::Carried(_) | LoopInput::Taped(_)
        )
    };
    let inner = nodes(body, &mut bnames, scalar, taken, owned, &HashSet::new());
    let outs: Vec<TokenStream> = body
        .outputs
        .iter()
        .map(|o| operand(body, &bnames, *o, scalar))
        .collect();
    let end = l.end as i32;
    let range = match l.kind {
        LoopKind::Reverse { .. } => quote!((#start..#end).rev()),
        _ => quote!(#start..#end),
    };
    let assign = assign_carried(&vars, &outs, taken);
    code.extend(quote! {
        for #index in #range {
            #head
            #inner
            #assign
        }
    });
    (vars, tape, code)
}

/// The variables of a loop's Rust: its index, its carried values, and the tape a reverse
/// loop reads (with the recording loop's node).
struct LoopVars<'a> {
    index: &'a syn::Ident,
    vars: &'a [syn::Ident],
    taped_from: Option<(syn::Ident, ValueId)>,
}

/// A recording loop's tape: its allocation before the loop, and the statements at the
/// head of each iteration that record its carried values.
fn record_tape(
    f: &Function,
    (id, l): (ValueId, &Loop),
    tape: &syn::Ident,
    (index, vars): (&syn::Ident, &[syn::Ident]),
    scalar: Scalar,
) -> (TokenStream, TokenStream) {
    let start = l.start as i32;
    let (offsets, words) = f.tape_layout(id);
    let len = (l.trip_count() as usize * words).max(1);
    let zero = literal(0.0, scalar);
    let alloc = quote!(let mut #tape = ::std::vec![#zero; #len];);
    let mut head = TokenStream::new();
    for (k, var) in vars.iter().enumerate() {
        let Some(off) = offsets[k] else { continue };
        let at = quote!(((#index - #start) as usize * #words + #off));
        head.extend(match l.carried_ty(k) {
            Ty::Bool => {
                let one = literal(1.0, scalar);
                quote!(#tape[#at] = if #var { #one } else { #zero };)
            }
            Ty::Array(n) => {
                let n = n as usize;
                quote!(#tape[#at..#at + #n].copy_from_slice(&#var);)
            }
            _ => quote!(#tape[#at] = #var;),
        });
    }
    (alloc, head)
}

/// The statements binding the inputs the body of loop `l` uses: its index, carried values,
/// captures and taped values (an array input names the variable itself, in `bnames`, and
/// binds nothing; a taped array is copied out of the tape).
fn bind_body_inputs(
    f: &Function,
    names: &[String],
    l: &Loop,
    lv: &LoopVars<'_>,
    bnames: &mut [String],
    scalar: Scalar,
) -> TokenStream {
    let (body, index, vars) = (&l.body, lv.index, lv.vars);
    let start = l.start as i32;
    let mut head = TokenStream::new();
    let used = body.used_inputs();
    for (n, node) in body.nodes.iter().enumerate() {
        let Op::Input(w) = node.op else { continue };
        let w = w as usize;
        if !used[w] {
            continue;
        }
        let is_array = matches!(node.ty, Ty::Array(_));
        let src = match l.input(w) {
            LoopInput::Index => quote!(#index),
            LoopInput::Carried(k) if is_array => {
                bnames[n] = vars[k].to_string();
                continue;
            }
            LoopInput::Carried(k) => {
                let v = &vars[k];
                quote!(#v)
            }
            LoopInput::Capture(j) if is_array => {
                bnames[n] = names[l.captures[j].index()].clone();
                continue;
            }
            LoopInput::Capture(j) => operand(f, names, l.captures[j], scalar),
            LoopInput::Taped(k) => {
                let (tape, tape_loop) = lv.taped_from.clone().expect("a reverse loop");
                let Op::Loop(tl) = &f.node(tape_loop).op else {
                    unreachable!("a tape belongs to a loop")
                };
                let (offsets, words) = f.tape_layout(tape_loop);
                let off = offsets[k].expect("a taped value read is recorded");
                let at = quote!(((#index - #start) as usize * #words + #off));
                match tl.carried_ty(k) {
                    Ty::Bool => {
                        let zero = literal(0.0, scalar);
                        quote!((#tape[#at] != #zero))
                    }
                    Ty::Array(len) => {
                        let (name, len) = (ident(&bnames[n]), len as usize);
                        let zero = literal(0.0, scalar);
                        head.extend(quote! {
                            let mut #name = [#zero; #len];
                            #name.copy_from_slice(&#tape[#at..#at + #len]);
                        });
                        continue;
                    }
                    _ => quote!(#tape[#at]),
                }
            }
        };
        let name = ident(&bnames[n]);
        head.extend(quote!(let #name = #src;));
    }
    head
}

/// The carried variables take the body's outputs at the end of an iteration; an output that
/// is a carried variable itself (updated in place, or another one's) is read before any is
/// assigned, and a variable that is its own output is left alone.
fn assign_carried(
    vars: &[syn::Ident],
    outs: &[TokenStream],
    taken: &mut crate::names::Taken,
) -> TokenStream {
    let var_names: Vec<String> = vars.iter().map(ToString::to_string).collect();
    let out_names: Vec<String> = outs.iter().map(ToString::to_string).collect();
    let crossing = out_names
        .iter()
        .zip(&var_names)
        .any(|(o, v)| o != v && var_names.contains(o));
    let mut ts = TokenStream::new();
    if crossing {
        let temps: Vec<syn::Ident> = var_names
            .iter()
            .map(|v| ident(&fresh(taken, &format!("{v}_new"))))
            .collect();
        ts.extend(quote!(#(let #temps = #outs;)*));
        ts.extend(quote!(#(#vars = #temps;)*));
    } else {
        for ((var, o), (vn, on)) in vars.iter().zip(outs).zip(var_names.iter().zip(&out_names)) {
            if vn != on {
                ts.extend(quote!(#var = #o;));
            }
        }
    }
    ts
}

/// `let name = access;` for every input word read one by one, and `let name = run;` for
/// every array argument (`run(first, len)`: the argument itself when those words are one
/// whole argument; else the array is spelled word by word).
pub(super) fn loads(
    f: &Function,
    body: &Body,
    access: impl Fn(u32) -> TokenStream,
    run: impl Fn(u32, u32) -> Option<TokenStream>,
) -> TokenStream {
    let mut ts = TokenStream::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let name = || ident(&body.names[i]);
        if let Some((first, len)) = body.views.bound[i] {
            let a = run(first, len).unwrap_or_else(|| {
                let words = (first..first + len).map(&access);
                quote!([#(#words),*])
            });
            let name = name();
            ts.extend(quote!(let #name = #a;));
        } else if let Op::Input(w) = node.op
            && body.views.needed[i]
        {
            let (name, a) = (name(), access(w));
            ts.extend(quote!(let #name = #a;));
        }
    }
    ts
}
