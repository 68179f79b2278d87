//! Arrays in the CPU versions: `[f32; N]` (or `[S; N]`) values, updated in place when
//! nothing reads the old value again ([`crate::ir::in_place`], the analysis the WGSL
//! emitter reads too), else copied.

use super::tokens::{Scalar, ident, operand};
use crate::ir::{Function, InPlace, Op, ValueId};
use proc_macro2::TokenStream;
use quote::quote;

/// `[k]` for a constant index, `[(k).clamp(0, n - 1) as usize]` for one computed at run
/// time (lowering proves indices in range; the clamp keeps any other index defined).
pub(super) fn index_of(f: &Function, names: &[String], index: ValueId, n: usize) -> TokenStream {
    match f.node(index).op {
        Op::Int(k) => {
            let k = k.clamp(0, n as i64 - 1) as usize;
            quote!([#k])
        }
        _ => {
            let k = operand(f, names, index, Scalar::F32);
            let last = n as i32 - 1;
            quote!([(#k).clamp(0i32, #last) as usize])
        }
    }
}

/// The statements of array-valued node `i`; an update in place gives node `i` the name
/// of the array it updates.
pub(super) fn array_stmt(
    f: &Function,
    names: &mut [String],
    i: usize,
    scalar: Scalar,
    inplace: &InPlace,
) -> TokenStream {
    let node = &f.nodes[i];
    let n = node.ty.words();
    let o = |names: &[String], v: &ValueId| operand(f, names, *v, scalar);
    let mutability = if inplace.mutated[i] {
        quote!(mut)
    } else {
        quote!()
    };
    let name = ident(&names[i]);
    match &node.op {
        Op::ArrayNew(elems) if elems.iter().all(|e| *e == elems[0]) => {
            let x = o(names, &elems[0]);
            quote!(let #mutability #name = [#x; #n];)
        }
        Op::ArrayNew(elems) => {
            let e: Vec<TokenStream> = elems.iter().map(|v| o(names, v)).collect();
            quote!(let #mutability #name = [#(#e),*];)
        }
        Op::ArraySet {
            array,
            index,
            value,
        } => {
            let (k, v) = (index_of(f, names, *index, n), o(names, value));
            let (target, copy) = updated(names, i, *array, inplace);
            quote!(#copy #target #k = #v;)
        }
        Op::ArrayAdd(a, b) => {
            let b = o(names, b);
            let (target, copy) = updated(names, i, *a, inplace);
            quote! {
                #copy
                for k in 0..#n {
                    #target[k] = #target[k] + #b[k];
                }
            }
        }
        Op::Select {
            cond,
            then,
            otherwise,
        } => {
            let (c, t, e) = (o(names, cond), o(names, then), o(names, otherwise));
            quote!(let #mutability #name = if #c { #t } else { #e };)
        }
        op => unreachable!("not an array operation: {op:?}"),
    }
}

/// The variable node `i` writes and the statement that makes it: the updated array's own
/// (node `i` takes its name) when the update is in place, else a mutable copy.
fn updated(
    names: &mut [String],
    i: usize,
    array: ValueId,
    inplace: &InPlace,
) -> (syn::Ident, TokenStream) {
    if inplace.updates[i] {
        names[i] = names[array.index()].clone();
        (ident(&names[i]), TokenStream::new())
    } else {
        let (name, old) = (ident(&names[i]), ident(&names[array.index()]));
        (name.clone(), quote!(let mut #name = #old;))
    }
}
