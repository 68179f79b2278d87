//! Reverse loops that read what their forward loop stored rather than compute it again.
//!
//! A reverse loop runs its body's primal again at each iteration, for the values its
//! partials need. When iteration `i` of the forward loop stores a value `v` in a carried
//! array at an index no other iteration writes (`i + c`), the array after the loop still
//! holds it, so the reverse loop can read `after[i + c]` instead: a network layer's
//! activation, whose dot product and `tanh` were most of the reverse body's work (a third of
//! a layer's multiply-adds, done again). The derivative still flows into what `v` was
//! computed from: the read is an [`Op::CustomGrad`] whose partials are the table's, taken at
//! the stored value. Only values whose partials need nothing but the result qualify (`tanh`,
//! `exp`, a sum...): for the others the arguments are computed again anyway.

use super::partials::partials;
use crate::ir::{Builder, Function, Loop, Op, Ty, ValueId, affine_in_index};
use proc_macro2::Span;

/// Least work (calls, a nested loop counting [`NESTED_LOOP_WORK`]) in a stored value's
/// computation for a reverse loop to read it rather than compute it: one memory read
/// costs about as much as a couple of arithmetic operations.
const MIN_WORK: usize = 3;

/// What a nested loop counts toward [`MIN_WORK`].
const NESTED_LOOP_WORK: usize = 8;

/// A forward loop's body for its reverse loop, with stored values read back.
pub(super) struct StoredReads {
    /// The body, with one more input after the captures per array in `carried`: that
    /// carried array after the loop.
    pub body: Function,
    /// The carried arrays whose values after the loop the body reads, in input order.
    pub carried: Vec<usize>,
}

/// `l`'s body with each qualifying stored value read from the carried array after the loop
/// (module doc), or `None` when no value qualifies. `body_tys` are the body's input types.
pub(super) fn read_stored_values(l: &Loop, body_tys: &[Ty]) -> Option<StoredReads> {
    let body = &l.body;
    let stores: Vec<(usize, ValueId, ValueId)> = (0..l.init.len())
        .filter_map(|k| stored_value(l, k).map(|(index, value)| (k, index, value)))
        .filter(|(_, _, value)| work_of(body, *value) >= MIN_WORK)
        .filter(|(_, _, value)| partials_need_only_result(body, *value))
        .collect();
    if stores.is_empty() {
        return None;
    }
    let mut tys = body_tys.to_vec();
    let first_new = tys.len() as u32;
    tys.extend(stores.iter().map(|(k, ..)| l.carried_ty(*k)));
    let mut b = Builder::with_inputs(tys);
    let mut map: Vec<ValueId> = Vec::with_capacity(body.nodes.len());
    for (i, node) in body.nodes.iter().enumerate() {
        let id = match stores.iter().position(|(_, _, v)| v.index() == i) {
            Some(p) => {
                let (_, index, _) = stores[p];
                let span = node.span;
                let after = b.push(Op::Input(first_new + p as u32), span, None);
                let stored = b.push(
                    Op::ArrayGet {
                        array: after,
                        index: map[index.index()],
                    },
                    span,
                    None,
                );
                let Op::Call(func, args) = &node.op else {
                    unreachable!("stored_value returns calls")
                };
                let args: Vec<ValueId> = args.iter().map(|a| map[a.index()]).collect();
                let partials = partials(*func, &mut b, &args, stored, span);
                b.push(
                    Op::CustomGrad {
                        value: stored,
                        args,
                        partials,
                    },
                    span,
                    node.name.clone(),
                )
            }
            None => b.push(
                node.op.map_operands(|v| map[v.index()]),
                node.span,
                node.name.clone(),
            ),
        };
        map.push(id);
    }
    let outputs = body.outputs.iter().map(|o| map[o.index()]).collect();
    Some(StoredReads {
        body: b.finish(outputs),
        carried: stores.iter().map(|(k, ..)| *k).collect(),
    })
}

/// Whether some carried array of `l` takes one store per iteration at an index no other
/// iteration writes (a layer's activations): the loop whose reverse pass may read that
/// array after the loop instead of a tape ([`read_stored_values`]).
pub(crate) fn stores_a_word_per_iteration(l: &Loop) -> bool {
    (0..l.init.len()).any(|k| stored_value(l, k).is_some())
}

/// The index and value of carried array `k`'s one store per iteration, when its next value
/// is `carried[i + c] = v` with `v` a call and `i + c` within the array on every iteration
/// (so no iteration's store overwrites another's, and none is clamped onto another's word).
fn stored_value(l: &Loop, k: usize) -> Option<(ValueId, ValueId)> {
    let Ty::Array(len) = l.carried_ty(k) else {
        return None;
    };
    let body = &l.body;
    let Op::ArraySet {
        array,
        index,
        value,
    } = body.node(body.outputs[k]).op
    else {
        return None;
    };
    if body.node(array).op != Op::Input(1 + k as u32)
        || !matches!(body.node(value).op, Op::Call(..))
    {
        return None;
    }
    let (1, offset) = affine_in_index(body, index)? else {
        return None;
    };
    let (first, last) = (l.start + offset, l.end - 1 + offset);
    (l.trip_count() > 0 && first >= 0 && last < len as i64).then_some((index, value))
}

/// The work in `value`'s computation within the body: its calls, a nested loop counting
/// [`NESTED_LOOP_WORK`]; the body's inputs are free.
fn work_of(body: &Function, value: ValueId) -> usize {
    let mut seen = vec![false; body.nodes.len()];
    let mut stack = vec![value];
    let mut work = 0;
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut seen[v.index()], true) {
            continue;
        }
        let op = &body.node(v).op;
        work += match op {
            Op::Call(..) => 1,
            Op::Loop(_) => NESTED_LOOP_WORK,
            _ => 0,
        };
        stack.extend(op.operands());
    }
    work
}

/// Whether the partials of the call `value` read only its result (and constants), so that
/// reading the result back frees its arguments' computation.
fn partials_need_only_result(body: &Function, value: ValueId) -> bool {
    let Op::Call(func, args) = &body.node(value).op else {
        return false;
    };
    let mut b = Builder::with_inputs(vec![Ty::F32; args.len() + 1]);
    let span = Span::call_site();
    let inputs: Vec<ValueId> = (0..=args.len() as u32)
        .map(|w| b.push(Op::Input(w), span, None))
        .collect();
    let (args, result) = inputs.split_at(args.len());
    let partials = partials(*func, &mut b, args, result[0], span);
    let used = b.finish(partials).used_inputs();
    used[..args.len()].iter().all(|u| !u)
}
