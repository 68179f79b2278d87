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
    let new_tys: Vec<Ty> = stores.iter().map(|(k, ..)| l.carried_ty(*k)).collect();
    let values: Vec<ValueId> = stores.iter().map(|(_, _, v)| *v).collect();
    let body = with_calls_read_back(body, body_tys, &new_tys, &values, |b, p, map, after| {
        let (_, index, value) = stores[p];
        let get = Op::ArrayGet {
            array: after,
            index: map[index.index()],
        };
        b.push(get, body.node(value).span, None)
    });
    Some(StoredReads {
        body,
        carried: stores.iter().map(|(k, ..)| *k).collect(),
    })
}

/// A forward loop's body for its reverse loop, with the calls that give carried scalars
/// their next values read from the next iteration's tape instead.
pub(super) struct NextReads {
    /// The body, with one more input after all others per carried scalar in `carried`: its
    /// value after the iteration.
    pub body: Function,
    /// The carried scalars whose next values the body reads, in input order.
    pub carried: Vec<usize>,
}

/// `body` (the body of `l`, or it with stored values read back; inputs of types
/// `body_tys`) with each call that is a carried scalar's next value, and whose partials
/// read its result and nothing else, read from a new input: that scalar after the iteration.
/// The reverse loop has it at no cost, as the taped value of the iteration it ran just
/// before (the forward loop's result for the last), where it ran the call again: an
/// `h = (w * h + x).tanh()` scan's adjoint called `tanh` three times a step, now twice (on
/// the H100 a 512-step scan's took 33.4 ms at 2^24 this way, 44.1 ms recomputing,
/// BENCHMARKS.md "Next values from the tape"). `None` when no call qualifies.
pub(super) fn read_next_values(l: &Loop, body: &Function, body_tys: &[Ty]) -> Option<NextReads> {
    let calls: Vec<(usize, ValueId)> = (0..l.init.len())
        .filter(|k| l.carried_ty(*k) == Ty::F32)
        .map(|k| (k, body.outputs[k]))
        // Reading the result saves the call only where the partials need it and nothing
        // else (`tanh`, `exp`, `sqrt`): a sum's partials need neither, and reading it
        // back would only add a word to the tape.
        .filter(|(_, v)| partials_read(body, *v) == Some((false, true)))
        .collect();
    // A call that is the next value of two carried scalars is read from the first.
    let calls: Vec<(usize, ValueId)> = calls
        .iter()
        .enumerate()
        .filter(|(p, (_, v))| calls[..*p].iter().all(|(_, w)| w != v))
        .map(|(_, c)| *c)
        .collect();
    if calls.is_empty() {
        return None;
    }
    let new_tys: Vec<Ty> = calls.iter().map(|(k, _)| l.carried_ty(*k)).collect();
    let values: Vec<ValueId> = calls.iter().map(|(_, v)| *v).collect();
    let body = with_calls_read_back(body, body_tys, &new_tys, &values, |_, _, _, after| after);
    Some(NextReads {
        body,
        carried: calls.iter().map(|(k, _)| *k).collect(),
    })
}

/// `body` (inputs of types `body_tys`) with one more input per type of `new_tys`, and each
/// call `calls[p]` replaced by the value `read(b, p, map, input)` makes of the new input
/// `p` (`map`: the new ids of the nodes before it), its derivative still the call's
/// partials, taken at that value.
fn with_calls_read_back(
    body: &Function,
    body_tys: &[Ty],
    new_tys: &[Ty],
    calls: &[ValueId],
    read: impl Fn(&mut Builder, usize, &[ValueId], ValueId) -> ValueId,
) -> Function {
    let mut tys = body_tys.to_vec();
    let first_new = tys.len() as u32;
    tys.extend(new_tys);
    let mut b = Builder::with_inputs(tys);
    let mut map: Vec<ValueId> = Vec::with_capacity(body.nodes.len());
    for (i, node) in body.nodes.iter().enumerate() {
        let span = node.span;
        let id = match (calls.iter().position(|v| v.index() == i), &node.op) {
            (Some(p), Op::Call(func, args)) => {
                let input = b.push(Op::Input(first_new + p as u32), span, None);
                let value = read(&mut b, p, &map, input);
                let args: Vec<ValueId> = args.iter().map(|a| map[a.index()]).collect();
                let partials = partials(*func, &mut b, &args, value, span);
                let op = Op::CustomGrad {
                    value,
                    args,
                    partials,
                };
                b.push(op, span, node.name.clone())
            }
            _ => b.push(
                node.op.map_operands(|v| map[v.index()]),
                span,
                node.name.clone(),
            ),
        };
        map.push(id);
    }
    let outputs = body.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(outputs)
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
    partials_read(body, value).is_some_and(|(args, _)| !args)
}

/// Whether the partials of the call `value` read its arguments, and whether they read its
/// result (`None`: not a call).
fn partials_read(body: &Function, value: ValueId) -> Option<(bool, bool)> {
    let Op::Call(func, args) = &body.node(value).op else {
        return None;
    };
    let mut b = Builder::with_inputs(vec![Ty::F32; args.len() + 1]);
    let span = Span::call_site();
    let inputs: Vec<ValueId> = (0..=args.len() as u32)
        .map(|w| b.push(Op::Input(w), span, None))
        .collect();
    let (args, result) = inputs.split_at(args.len());
    let partials = partials(*func, &mut b, args, result[0], span);
    let used = b.finish(partials).used_inputs();
    Some((used[..args.len()].iter().any(|u| *u), used[args.len()]))
}
