//! Forward mode: each value carried with its tangent, loops as one loop carrying both
//! (the primal computed once). The partial derivatives are the derivative table's
//! ([`mod@super::partials`]), the same the reverse mode uses.

use super::partials::partials;
use crate::ir::{Builder, Function, Loop, LoopKind, Op, ValueId};
use crate::ops::Func;
use proc_macro2::Span;

/// Forward mode: the result takes `2 * n` inputs (the primal words, then one tangent word
/// per primal word) and has the outputs `[outputs..., tangent of each output...]`.
pub fn forward(f: &Function) -> Function {
    forward_active(f, &vec![true; f.num_inputs as usize])
}

/// Forward mode with tangents only for the inputs marked in `active` (the others, such as
/// `#[constant]` arguments, have tangent zero): the result takes the primal words, then one
/// tangent word per active input, in order.
///
/// A loop becomes one loop carrying its values and their tangents (the body's forward
/// mode), so the primal is computed once.
pub fn forward_active(f: &Function, active: &[bool]) -> Function {
    let n = f.num_inputs;
    let extra = active.iter().filter(|a| **a).count() as u32;
    let mut b = Builder::new(n + extra);
    let inputs: Vec<ValueId> = (0..n)
        .map(|w| b.push(Op::Input(w), Span::call_site(), None))
        .collect();
    let mut k = n;
    let tangents: Vec<Option<ValueId>> = active
        .iter()
        .map(|a| {
            a.then(|| {
                k += 1;
                b.push(Op::Input(k - 1), Span::call_site(), None)
            })
        })
        .collect();
    let (outs, tans) = forward_into(f, &mut b, &inputs, &tangents);
    let mut outputs = outs;
    for (t, o) in tans.into_iter().zip(&f.outputs) {
        outputs.push(t.unwrap_or_else(|| b.constant(0.0, f.node(*o).span)));
    }
    b.finish(outputs)
}

/// Builds into `b`: `f` on `inputs` and the tangent of every output given the tangents of
/// the inputs (`None`: zero). Returns the outputs and their tangents.
pub(super) fn forward_into(
    f: &Function,
    b: &mut Builder,
    inputs: &[ValueId],
    input_tangents: &[Option<ValueId>],
) -> (Vec<ValueId>, Vec<Option<ValueId>>) {
    let mut sweep = Tangents {
        map: Vec::with_capacity(f.nodes.len()),
        tan: vec![None; f.nodes.len()],
        loop_tangent_slot: Default::default(),
    };
    for (i, node) in f.nodes.iter().enumerate() {
        let (id, t) = match &node.op {
            Op::Input(w) => {
                let id = inputs[*w as usize];
                if let Some(name) = &node.name {
                    b.name(id, name);
                }
                (id, input_tangents[*w as usize])
            }
            _ => sweep.node(f, b, i),
        };
        if let (Some(t), Some(name)) = (t, &node.name) {
            b.name(t, &format!("t_{name}"));
        }
        sweep.map.push(id);
        sweep.tan[i] = t;
    }
    let outs = f.outputs.iter().map(|o| sweep.map[o.index()]).collect();
    let tans = f.outputs.iter().map(|o| sweep.tan[o.index()]).collect();
    (outs, tans)
}

/// The forward sweep of [`forward_into`]: each node of `f` so far in the output, and its
/// tangent where it has one.
struct Tangents {
    map: Vec<ValueId>,
    tan: Vec<Option<ValueId>>,
    /// For each loop node: where each carried value's tangent is among its new results.
    loop_tangent_slot: std::collections::HashMap<usize, Vec<Option<u32>>>,
}

impl Tangents {
    fn m(&self, v: &ValueId) -> ValueId {
        self.map[v.index()]
    }

    /// Node `i` (not an input) in the output, and its tangent.
    fn node(&mut self, f: &Function, b: &mut Builder, i: usize) -> (ValueId, Option<ValueId>) {
        let node = &f.nodes[i];
        let span = node.span;
        let name = node.name.clone();
        match &node.op {
            Op::Call(func, args) => {
                let margs: Vec<ValueId> = args.iter().map(|v| self.m(v)).collect();
                let id = b.push(Op::Call(*func, margs.clone()), span, name);
                let partials = partials(*func, b, &margs, id, span);
                (
                    id,
                    self.chain(b, args.iter().copied().zip(partials), true, span),
                )
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let c = self.m(cond);
                let id = b.select(c, self.m(then), self.m(otherwise), span);
                let t = match (self.tan[then.index()], self.tan[otherwise.index()]) {
                    (None, None) => None,
                    (t, o) => {
                        let zero = b.zero(node.ty, span);
                        Some(b.select(c, t.unwrap_or(zero), o.unwrap_or(zero), span))
                    }
                };
                (id, t)
            }
            Op::ArrayNew(_) | Op::ArrayGet { .. } | Op::ArraySet { .. } | Op::ArrayAdd(..) => {
                self.array_node(b, node)
            }
            Op::Loop(l) => {
                let tape_slots = match l.kind {
                    LoopKind::Reverse { tape, .. } => Some(&self.loop_tangent_slot[&tape.index()]),
                    _ => None,
                };
                let (id, slots) = forward_loop(f, l, (&self.map, &self.tan), tape_slots, b, span);
                self.loop_tangent_slot.insert(i, slots);
                (id, None)
            }
            Op::CustomGrad { args, partials, .. } => {
                let id = b.push(node.op.map_operands(|v| self.m(&v)), span, name);
                let partials: Vec<ValueId> = partials.iter().map(|p| self.m(p)).collect();
                (
                    id,
                    self.chain(b, args.iter().copied().zip(partials), false, span),
                )
            }
            Op::Result(l, k) => {
                let id = b.push(Op::Result(self.m(l), *k), span, name);
                let t = self.loop_tangent_slot[&l.index()][*k as usize]
                    .map(|s| b.push(Op::Result(self.m(l), s), span, None));
                (id, t)
            }
            op => (b.push(op.map_operands(|v| self.m(&v)), span, name), None),
        }
    }

    /// An array operation (`node`) in the output, and its tangent: the same operation on
    /// the tangents.
    fn array_node(&self, b: &mut Builder, node: &crate::ir::Node) -> (ValueId, Option<ValueId>) {
        let (span, name) = (node.span, node.name.clone());
        match &node.op {
            Op::ArrayNew(elems) => {
                let id = b.push(
                    Op::ArrayNew(elems.iter().map(|e| self.m(e)).collect()),
                    span,
                    name,
                );
                let t = elems
                    .iter()
                    .any(|e| self.tan[e.index()].is_some())
                    .then(|| {
                        let zero = b.constant(0.0, span);
                        let t = (elems.iter())
                            .map(|e| self.tan[e.index()].unwrap_or(zero))
                            .collect();
                        b.push(Op::ArrayNew(t), span, None)
                    });
                (id, t)
            }
            Op::ArrayGet { array, index } => {
                let k = self.m(index);
                let id = b.push(
                    Op::ArrayGet {
                        array: self.m(array),
                        index: k,
                    },
                    span,
                    name,
                );
                let t = self.tan[array.index()].map(|ta| {
                    b.push(
                        Op::ArrayGet {
                            array: ta,
                            index: k,
                        },
                        span,
                        None,
                    )
                });
                (id, t)
            }
            Op::ArraySet {
                array,
                index,
                value,
            } => {
                let id = b.push(node.op.map_operands(|v| self.m(&v)), span, name);
                (
                    id,
                    self.array_set(b, node.ty, [*array, *index, *value], span),
                )
            }
            Op::ArrayAdd(x, y) => {
                let id = b.push(Op::ArrayAdd(self.m(x), self.m(y)), span, name);
                let t = match (self.tan[x.index()], self.tan[y.index()]) {
                    (None, None) => None,
                    (Some(t), None) | (None, Some(t)) => Some(t),
                    (Some(p), Some(q)) => Some(b.push(Op::ArrayAdd(p, q), span, None)),
                };
                (id, t)
            }
            _ => unreachable!("array_node is called for array operations"),
        }
    }

    /// The sum of each partial times its argument's tangent (arguments without one add
    /// nothing, nor with `skip_zero` partials known to be zero: the table's, where a user's
    /// custom partial is multiplied as written); `None` where nothing is added.
    fn chain(
        &self,
        b: &mut Builder,
        args: impl IntoIterator<Item = (ValueId, ValueId)>,
        skip_zero: bool,
        span: Span,
    ) -> Option<ValueId> {
        let mut acc = None;
        for (arg, p) in args {
            if let Some(ta) = self.tan[arg.index()]
                && !(skip_zero && b.is_const_zero(p))
            {
                let term = b.call(Func::Mul, vec![p, ta], span);
                acc = Some(b.accumulate(acc, term, span));
            }
        }
        acc
    }

    /// The tangent of `array` with `value` written at `index` (an array of type `ty`): the
    /// array's tangent with the value's written there.
    fn array_set(
        &self,
        b: &mut Builder,
        ty: crate::ir::Ty,
        [array, index, value]: [ValueId; 3],
        span: Span,
    ) -> Option<ValueId> {
        match (self.tan[array.index()], self.tan[value.index()]) {
            (None, None) => None,
            (ta, tv) => {
                let ta = ta.unwrap_or_else(|| b.zero(ty, span));
                let tv = tv.unwrap_or_else(|| b.constant(0.0, span));
                let index = self.m(&index);
                let set = Op::ArraySet {
                    array: ta,
                    index,
                    value: tv,
                };
                Some(b.push(set, span, None))
            }
        }
    }
}

/// The forward-mode loop of `l`: it carries `l`'s values, then the tangents of its F32
/// carried values; it captures `l`'s captures, then the tangents of those that have one.
/// Returns the new loop node and, per carried value, the result slot of its tangent.
///
/// A recording loop stays one, and records its tangents with its values; the reverse loop
/// that reads its tape (`tape_slots`: where the recording loop's tangents went, `Some` for
/// a [`LoopKind::Reverse`] loop) reads the values and their tangents back. So forward mode
/// also applies to a reverse pass (forward-over-reverse: Hessian-vector products).
fn forward_loop(
    f: &Function,
    l: &Loop,
    (map, tan): (&[ValueId], &[Option<ValueId>]),
    tape_slots: Option<&Vec<Option<u32>>>,
    b: &mut Builder,
    span: Span,
) -> (ValueId, Vec<Option<u32>>) {
    let body = &l.body;
    let c = l.init.len();
    let kn = l.captures.len();
    let body_tys = l.body_input_types(f);
    let carried_real: Vec<usize> = (0..c).filter(|k| l.carried_ty(*k).is_real()).collect();
    let captures_t: Vec<usize> = (0..kn)
        .filter(|j| tan[l.captures[*j].index()].is_some())
        .collect();
    let (cf, kt) = (carried_real.len(), captures_t.len());
    let (kind, tape_tys) = retaped(l.kind, tape_slots.is_some(), map, b);
    let taped_old = body.num_inputs as usize - 1 - c - kn;
    // The new body's inputs: [i, carried, carried tangents, captures, capture tangents,
    // taped values and tangents].
    let mut tys = body_tys[..1 + c].to_vec();
    tys.extend(carried_real.iter().map(|k| l.carried_ty(*k)));
    tys.extend(&body_tys[1 + c..1 + c + kn]);
    tys.extend(captures_t.iter().map(|j| body_tys[1 + c + j]));
    tys.extend(&tape_tys);
    let mut nb = Builder::with_inputs(tys);
    let inp = |nb: &mut Builder, w: usize| nb.push(Op::Input(w as u32), span, None);
    let index = inp(&mut nb, 0);
    let carried: Vec<ValueId> = (0..c).map(|k| inp(&mut nb, 1 + k)).collect();
    let carried_t: Vec<ValueId> = (0..cf).map(|k| inp(&mut nb, 1 + c + k)).collect();
    let caps: Vec<ValueId> = (0..kn).map(|j| inp(&mut nb, 1 + c + cf + j)).collect();
    let caps_t: Vec<ValueId> = (0..kt).map(|j| inp(&mut nb, 1 + c + cf + kn + j)).collect();
    let tape_base = 1 + c + cf + kn + kt;
    let taped_new: Vec<ValueId> = (0..tape_tys.len())
        .map(|k| inp(&mut nb, tape_base + k))
        .collect();
    let mut body_inputs = vec![index];
    body_inputs.extend(&carried);
    body_inputs.extend(&caps);
    body_inputs.extend(&taped_new[..taped_old.min(taped_new.len())]);
    let mut body_tangents: Vec<Option<ValueId>> = vec![None];
    body_tangents.extend((0..c).map(|k| {
        carried_real
            .iter()
            .position(|x| *x == k)
            .map(|p| carried_t[p])
    }));
    body_tangents
        .extend((0..kn).map(|j| captures_t.iter().position(|x| *x == j).map(|p| caps_t[p])));
    if let Some(slots) = tape_slots {
        body_tangents.extend(slots.iter().map(|s| s.map(|s| taped_new[s as usize])));
    }
    let (outs, tans) = forward_into(body, &mut nb, &body_inputs, &body_tangents);
    let mut outputs = outs;
    for k in &carried_real {
        let t = tans[*k].unwrap_or_else(|| nb.zero(l.carried_ty(*k), span));
        outputs.push(t);
    }
    let new_body = nb.finish(outputs);
    let mut init: Vec<ValueId> = l.init.iter().map(|v| map[v.index()]).collect();
    init.extend(
        carried_real
            .iter()
            .map(|k| tan[l.init[*k].index()].unwrap_or_else(|| b.zero(l.carried_ty(*k), span))),
    );
    let mut captures: Vec<ValueId> = l.captures.iter().map(|v| map[v.index()]).collect();
    captures.extend(
        captures_t
            .iter()
            .map(|j| tan[l.captures[*j].index()].expect("has a tangent")),
    );
    let id = b.push(
        Op::Loop(Box::new(Loop {
            start: l.start,
            end: l.end,
            init,
            captures,
            body: new_body,
            kind,
        })),
        span,
        None,
    );
    let slots = (0..c)
        .map(|k| {
            carried_real
                .iter()
                .position(|x| *x == k)
                .map(|p| (c + p) as u32)
        })
        .collect();
    (id, slots)
}

/// The kind of the forward-mode loop of a loop of kind `kind`, and the types of its taped
/// inputs: a reverse loop reading a tape (`reads_tape`) reads the new recording loop's
/// carried values (the old ones, then their tangents), of the types it carries.
fn retaped(
    kind: LoopKind,
    reads_tape: bool,
    map: &[ValueId],
    b: &Builder,
) -> (LoopKind, Vec<crate::ir::Ty>) {
    match kind {
        LoopKind::Reverse { tape, .. } if reads_tape => {
            let new_tape = map[tape.index()];
            let Op::Loop(rec) = &b.node(new_tape).op else {
                unreachable!("a tape belongs to a loop")
            };
            let tys: Vec<_> = (0..rec.init.len()).map(|k| rec.carried_ty(k)).collect();
            let taped = tys.len() as u32;
            let kind = LoopKind::Reverse {
                tape: new_tape,
                taped,
            };
            (kind, tys)
        }
        kind => (kind, Vec::new()),
    }
}
