//! Automatic differentiation on the IR: forward (tangent) and reverse (adjoint) transforms.
//!
//! Both transforms take a [`Function`] and return a new one that computes the primal
//! outputs and the derivatives, built through a [`Builder`] (so shared subexpressions of
//! primal and derivative code are computed once). Partial derivatives come from
//! `partials.rs`, the one derivative table both modes read. Reverse mode and the Jacobian
//! are here; forward mode is `forward.rs`, second order (forward-over-reverse) `hessian.rs`.

mod forward;
mod guards;
mod hessian;
mod partials;
mod stored;

use crate::ir::{Builder, Function, Loop, LoopKind, Op, Ty, ValueId};
use crate::ops::Func;
use forward::forward_into;
pub use forward::{forward, forward_active};
use guards::{Guard, guard_and, guard_or, mask};
pub use hessian::{HessianForm, hessian, hvp};
use partials::partials;
use proc_macro2::Span;
use std::collections::HashMap;
pub(crate) use stored::stores_a_word_per_iteration;

/// Copies `f`'s nodes into `b` with its inputs replaced by `inputs`, returning the new id
/// of each old node. With `record`, loops become recording loops (for a reverse pass).
pub(crate) fn inline(
    f: &Function,
    b: &mut Builder,
    inputs: &[ValueId],
    record: bool,
) -> Vec<ValueId> {
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    for node in &f.nodes {
        let id = match &node.op {
            Op::Input(w) => {
                let id = inputs[*w as usize];
                if let Some(name) = &node.name {
                    b.name(id, name);
                }
                id
            }
            op => {
                let mut op = op.map_operands(|v| map[v.index()]);
                if let (true, Op::Loop(l)) = (record, &mut op)
                    && l.kind == LoopKind::Forward
                {
                    l.kind = LoopKind::Recording;
                }
                b.push(op, node.span, node.name.clone())
            }
        };
        map.push(id);
    }
    map
}

/// The loop behind a loop node.
fn loop_of(f: &Function, v: ValueId) -> &Loop {
    match &f.node(v).op {
        Op::Loop(l) => l,
        _ => unreachable!("a Result reads a loop node"),
    }
}

/// `acc` with `term` added into the word at `index`: the adjoint of reading that word,
/// one add, however long the array (a missing accumulator is the zero array of `ty`).
fn add_at(
    b: &mut Builder,
    acc: Option<ValueId>,
    ty: Ty,
    index: ValueId,
    term: ValueId,
    span: proc_macro2::Span,
) -> ValueId {
    let array = acc.unwrap_or_else(|| b.zero(ty, span));
    let old = b.push(Op::ArrayGet { array, index }, span, None);
    let value = b.call(Func::Add, vec![old, term], span);
    b.set(array, index, value, span)
}

/// Sends `term` (already masked) to operand `v`, under guard `h`.
fn send(
    b: &mut Builder,
    adj: &mut [Option<ValueId>],
    guard: &mut [Option<Guard>],
    span: Span,
    v: ValueId,
    term: ValueId,
    h: Guard,
) {
    adj[v.index()] = Some(b.accumulate(adj[v.index()], term, span));
    guard[v.index()] = Some(guard_or(b, guard[v.index()], h, span));
}

/// Reverse mode for a function with one output.
///
/// The result has the same inputs and the outputs `[value, d value / d input_0, ...]`:
/// one gradient per input word, in input order. Adjoints are accumulated sparsely: a value
/// that does not influence the output gets no adjoint node, and a partial derivative that
/// is identically zero (`floor`, `signum`, ...) contributes no term, so no `0 * inf` NaN
/// can appear from a derivative that is zero by definition.
///
/// `if`/`else` arrives as [`Op::Select`], both branches computed. The branch not taken may
/// hold NaN or infinite partials (`if x > 0.0 { x.sqrt() } else { 0.0 }` at `x = -1`), and
/// a zero adjoint times a NaN partial is NaN. So each node carries a guard, the condition
/// under which its adjoint flows at all (the `or` over its uses of the use's guard `and`
/// the select condition on the way); every term a guarded node sends to its operands is
/// `select(term, 0, guard)`. Nodes used unconditionally cost nothing extra (a guard that
/// always holds, such as `c || !c`, is recognized), and the derivative is exactly that of
/// the branch taken.
///
/// A loop runs forward recording its carried values (a tape of trip count × carried
/// words), and its adjoint is a loop running backwards over the vector-Jacobian product
/// of its body, which reads the tape: see [`vjp`].
pub fn reverse(f: &Function) -> Function {
    assert_eq!(f.outputs.len(), 1, "reverse mode seeds one scalar output");
    let mut b = Builder::like(f);
    let inputs: Vec<ValueId> = (0..f.num_inputs)
        .map(|w| b.push(Op::Input(w), Span::call_site(), None))
        .collect();
    let one = b.constant(1.0, f.node(f.outputs[0]).span);
    let (primal, grads) = vjp_into(f, &mut b, &inputs, &[Some(one)], &[], &f.input_types());
    let mut outputs = vec![primal[0]];
    outputs.extend(grads);
    b.finish(outputs)
}

/// The vector-Jacobian product of `f`: a function of `[f's inputs..., one seed per output]`
/// whose outputs are `[outputs..., sum over k of seed_k * d output_k / d input_w for each
/// input w]` (an array input's adjoint is an array). Seeds of outputs that are not real
/// are ignored (they get an input all the same, so the layout is fixed).
///
/// The inputs marked in `accumulating` take one more input each, after the seeds, of their
/// own type: the adjoint accumulated so far, which their adjoint output adds to (for
/// arrays, word by word where they are read, never a whole-array sum).
pub fn vjp(f: &Function, accumulating: &[bool]) -> Function {
    vjp_typed(f, accumulating, f.input_types())
}

/// [`vjp`] of a function whose inputs have the types `input_tys` (a loop body's, which
/// its nodes alone may not tell: [`crate::ir::Loop::body_input_types`]).
fn vjp_typed(f: &Function, accumulating: &[bool], input_tys: Vec<Ty>) -> Function {
    let n = f.num_inputs;
    let m = f.outputs.len() as u32;
    let mut tys = input_tys.clone();
    tys.extend(f.outputs.iter().map(|o| f.node(*o).ty));
    tys.extend(
        (0..n as usize)
            .filter(|w| accumulating.get(*w) == Some(&true))
            .map(|w| input_tys[w]),
    );
    let mut b = Builder::with_inputs(tys);
    let inputs: Vec<ValueId> = (0..n)
        .map(|w| b.push(Op::Input(w), Span::call_site(), None))
        .collect();
    let seeds: Vec<Option<ValueId>> = (0..m)
        .map(|k| {
            let out = f.outputs[k as usize];
            f.node(out).ty.is_real().then(|| {
                let name = f.node(out).name.as_ref().map(|s| format!("d_{s}"));
                b.push(Op::Input(n + k), Span::call_site(), name)
            })
        })
        .collect();
    let mut next = n + m;
    let acc: Vec<Option<ValueId>> = (0..n as usize)
        .map(|w| {
            (accumulating.get(w) == Some(&true)).then(|| {
                next += 1;
                let name = f.input_name(w as u32).map(|s| format!("d_{s}"));
                b.push(Op::Input(next - 1), Span::call_site(), name)
            })
        })
        .collect();
    let (primal, grads) = vjp_into(f, &mut b, &inputs, &seeds, &acc, &input_tys);
    let mut outputs = primal;
    outputs.extend(grads);
    b.finish(outputs)
}

/// Builds into `b`: `f` on `inputs` (loops recording), then the adjoint of every input
/// given the seeds of the outputs, added to `acc[w]` where given. Returns the primal
/// outputs and one adjoint per input (zero where none flows).
fn vjp_into(
    f: &Function,
    b: &mut Builder,
    inputs: &[ValueId],
    seeds: &[Option<ValueId>],
    acc: &[Option<ValueId>],
    input_tys: &[Ty],
) -> (Vec<ValueId>, Vec<ValueId>) {
    let mut sweep = Sweep {
        f,
        map: inline(f, b, inputs, true),
        adj: vec![None; f.nodes.len()],
        guard: vec![None; f.nodes.len()],
        loop_adj: Default::default(),
        input_adj: vec![None; f.num_inputs as usize],
    };
    // An accumulated adjoint starts as the input node's adjoint, so reads add into it.
    let mut acc_left: Vec<Option<ValueId>> = acc.to_vec();
    acc_left.resize(f.num_inputs as usize, None);
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Input(w) = node.op
            && let Some(a) = acc_left[w as usize].take()
        {
            sweep.adj[i] = Some(a);
            sweep.guard[i] = Some(Guard::Always);
        }
    }
    for (out, seed) in f.outputs.iter().zip(seeds) {
        if let Some(s) = seed
            && !b.is_const_zero(*s)
        {
            let span = f.node(*out).span;
            let o = out.index();
            sweep.adj[o] = Some(b.accumulate(sweep.adj[o], *s, span));
            sweep.guard[o] = Some(Guard::Always);
        }
    }
    for i in (0..f.nodes.len()).rev() {
        sweep.node(b, i);
    }
    let primal: Vec<ValueId> = f.outputs.iter().map(|o| sweep.map[o.index()]).collect();
    let grads = (sweep.input_adj.into_iter())
        .zip(acc_left)
        .zip(input_tys)
        .map(|((a, left), ty)| a.or(left).unwrap_or_else(|| b.zero(*ty, Span::call_site())))
        .collect();
    (primal, grads)
}

/// The reverse sweep of [`vjp_into`] over `f`'s nodes, last to first: each node's adjoint
/// so far and when it flows, sent on to its operands.
struct Sweep<'f> {
    f: &'f Function,
    /// Each node of `f` in the output (its primal, inlined).
    map: Vec<ValueId>,
    adj: Vec<Option<ValueId>>,
    guard: Vec<Option<Guard>>,
    /// Adjoints of each loop's final carried values, gathered from its Result nodes.
    loop_adj: HashMap<usize, Vec<Option<ValueId>>>,
    input_adj: Vec<Option<ValueId>>,
}

impl Sweep<'_> {
    /// Sends `term` (already masked) to operand `v`, under guard `h`.
    fn send(&mut self, b: &mut Builder, span: Span, v: ValueId, term: ValueId, h: Guard) {
        send(b, &mut self.adj, &mut self.guard, span, v, term, h);
    }

    /// Node `i`'s adjoint sent to its operands, where one has reached it.
    fn node(&mut self, b: &mut Builder, i: usize) {
        let f = self.f;
        let node = &f.nodes[i];
        let span = node.span;
        let is_loop = matches!(node.op, Op::Loop(_));
        let a = match self.adj[i] {
            Some(a) => a,
            None if is_loop && self.loop_adj.contains_key(&i) => b.constant(0.0, span),
            None => return,
        };
        let g = self.guard[i].unwrap_or(Guard::Always);
        if let Some(name) = &node.name
            && !is_loop
        {
            b.name(a, &format!("d_{name}"));
        }
        match &node.op {
            Op::Input(w) => {
                let w = *w as usize;
                self.input_adj[w] = Some(b.accumulate(self.input_adj[w], a, span));
            }
            Op::Const(_)
            | Op::Cmp(..)
            | Op::Not(_)
            | Op::And(..)
            | Op::Or(..)
            | Op::Int(_)
            | Op::IntBin(..)
            | Op::IntToF32(_) => {}
            Op::Call(func, args) => {
                let margs: Vec<ValueId> = args.iter().map(|v| self.map[v.index()]).collect();
                let partials = partials(*func, b, &margs, self.map[i], span);
                self.products(b, (a, g, span), args.iter().copied().zip(partials), true);
            }
            Op::ArrayGet { array, index } => {
                // One add into the word read. No mask: the partial is exactly 1, so a zero
                // adjoint stays zero.
                let ty = f.node(*array).ty;
                let k = self.map[index.index()];
                let v = array.index();
                self.adj[v] = Some(add_at(b, self.adj[v], ty, k, a, span));
                self.guard[v] = Some(guard_or(b, self.guard[v], g, span));
            }
            Op::ArraySet {
                array,
                index,
                value,
            } => {
                let k = self.map[index.index()];
                let d_value = b.push(Op::ArrayGet { array: a, index: k }, span, None);
                let zero = b.constant(0.0, span);
                let d_array = b.set(a, k, zero, span);
                self.send(b, span, *value, d_value, g);
                self.send(b, span, *array, d_array, g);
            }
            Op::ArrayNew(elems) => {
                for (k, e) in elems.iter().enumerate() {
                    if f.node(*e).ty.is_real() && !matches!(f.node(*e).op, Op::Const(_)) {
                        let d = b.get(a, k, span);
                        self.send(b, span, *e, d, g);
                    }
                }
            }
            Op::ArrayAdd(x, y) => {
                self.send(b, span, *x, a, g);
                self.send(b, span, *y, a, g);
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => self.select(b, (a, g, span), node.ty, [*cond, *then, *otherwise]),
            Op::CustomGrad { args, partials, .. } => {
                // The user's partials; nothing flows into how the value was computed.
                let partials: Vec<ValueId> = partials.iter().map(|p| self.map[p.index()]).collect();
                self.products(b, (a, g, span), args.iter().copied().zip(partials), false);
            }
            Op::Result(l, k) => {
                let slots = (self.loop_adj.entry(l.index()))
                    .or_insert_with(|| vec![None; loop_of(f, *l).init.len()]);
                slots[*k as usize] = Some(b.accumulate(slots[*k as usize], a, span));
                self.guard[l.index()] = Some(guard_or(b, self.guard[l.index()], g, span));
            }
            Op::Loop(l) => self.reverse(b, i, l, g),
        }
    }

    /// Adjoint `a` (under `g`) times each partial, sent to its argument (with `skip_zero`,
    /// a partial known to be zero sends nothing: the table's, where a user's custom
    /// partial is multiplied as written).
    fn products(
        &mut self,
        b: &mut Builder,
        (a, g, span): (ValueId, Guard, Span),
        args: impl IntoIterator<Item = (ValueId, ValueId)>,
        skip_zero: bool,
    ) {
        for (arg, p) in args {
            if skip_zero && b.is_const_zero(p) {
                continue;
            }
            let term = b.call(Func::Mul, vec![a, p], span);
            let term = mask(b, g, term, span);
            self.send(b, span, arg, term, g);
        }
    }

    /// A select's adjoint (of type `ty`): to the branch taken, each under its condition.
    fn select(
        &mut self,
        b: &mut Builder,
        (a, g, span): (ValueId, Guard, Span),
        ty: Ty,
        [cond, then, otherwise]: [ValueId; 3],
    ) {
        let zero = b.zero(ty, span);
        let c = self.map[cond.index()];
        let not_c = b.not(c, span);
        for (branch, taken) in [(then, c), (otherwise, not_c)] {
            let (t, e) = if taken == c { (a, zero) } else { (zero, a) };
            let to_branch = b.select(c, t, e, span);
            let h = guard_and(b, g, taken, span);
            self.send(b, span, branch, to_branch, h);
        }
    }

    /// Loop node `i` (`l`), reached under `g`: its reverse loop, whose results are the
    /// adjoints of the initial carried values and of the captures.
    fn reverse(&mut self, b: &mut Builder, i: usize, l: &Loop, g: Guard) {
        let f = self.f;
        let span = f.nodes[i].span;
        let seeds = self.loop_adj.remove(&i).unwrap_or_default();
        // An array capture's adjoint so far: the reverse loop adds into it, word by word,
        // and its result is the whole adjoint.
        let cap_acc: Vec<Option<ValueId>> = (l.captures.iter())
            .map(|cap| match f.node(*cap).ty {
                ty @ Ty::Array(_) => {
                    let so_far = self.adj[cap.index()].take();
                    Some(so_far.unwrap_or_else(|| b.zero(ty, span)))
                }
                _ => None,
            })
            .collect();
        let rev = reverse_loop(f, l, self.map[i], &self.map, &seeds, &cap_acc, b, span);
        let Some(rev) = rev else {
            for (cap, acc) in l.captures.iter().zip(&cap_acc) {
                if acc.is_some() {
                    self.adj[cap.index()] = *acc;
                }
            }
            return;
        };
        // Results of the reverse loop: adjoints of the real carried values' initial
        // values, then of the real captures.
        let mut r = 0u32;
        for (k, init) in l.init.iter().enumerate() {
            if l.carried_ty(k).is_real() {
                let term = b.push(Op::Result(rev, r), span, None);
                let term = mask(b, g, term, span);
                self.send(b, span, *init, term, g);
                r += 1;
            }
        }
        for (cap, acc) in l.captures.iter().zip(&cap_acc) {
            if !f.node(*cap).ty.is_real() {
                continue;
            }
            let term = b.push(Op::Result(rev, r), span, None);
            r += 1;
            let term = match (acc, g) {
                // Where the loop's adjoint does not flow, the adjoint so far.
                (Some(acc), Guard::When(c)) => b.select(c, term, *acc, span),
                (Some(_), Guard::Always) => term,
                (None, _) => mask(b, g, term, span),
            };
            self.send(b, span, *cap, term, g);
        }
    }
}

/// The reverse loop of loop `l` (recorded as `recording` in the output), given the
/// adjoints of its final carried values, or `None` when no adjoint reaches it.
///
/// Its carried values are the adjoints of the real carried values, then accumulators of the
/// adjoints of the real captures (an array capture's starts at `cap_acc`, its adjoint so
/// far, and each iteration adds into the words it read); its body is the vector-Jacobian
/// product of `l`'s body at the taped carried values of iteration `i`, run from the last
/// iteration to the first. It also captures the carried arrays after `l` whose stored
/// values it reads rather than computes again (`stored.rs`).
#[allow(clippy::too_many_arguments)]
fn reverse_loop(
    f: &Function,
    l: &Loop,
    recording: ValueId,
    map: &[ValueId],
    seeds: &[Option<ValueId>],
    cap_acc: &[Option<ValueId>],
    b: &mut Builder,
    span: Span,
) -> Option<ValueId> {
    let c = l.init.len();
    let mut body_tys = l.body_input_types(f);
    // The body's reads of what the forward loop stored come after its captures.
    let stored = stored::read_stored_values(l, &body_tys);
    let (body, stored_carried) = match &stored {
        Some(s) => (&s.body, s.carried.as_slice()),
        None => (&l.body, &[][..]),
    };
    body_tys.extend(stored_carried.iter().map(|k| l.carried_ty(*k)));
    // Then its reads of carried scalars' next values, which the reverse loop carries.
    let next = stored::read_next_values(l, body, &body_tys);
    let (body, next_carried) = match &next {
        Some(n) => (&n.body, n.carried.as_slice()),
        None => (body, &[][..]),
    };
    body_tys.extend(next_carried.iter().map(|k| l.carried_ty(*k)));
    let carried_real: Vec<usize> = (0..c).filter(|k| l.carried_ty(*k).is_real()).collect();
    let captures_real: Vec<usize> = (0..l.captures.len())
        .filter(|j| f.node(l.captures[*j]).ty.is_real())
        .collect();
    if seeds.iter().all(|s| s.is_none()) || carried_real.is_empty() {
        return None;
    }
    let mut accumulating = vec![false; body.num_inputs as usize];
    for j in &captures_real {
        accumulating[1 + c + j] = cap_acc[*j].is_some();
    }
    let g = vjp_typed(body, &accumulating, body_tys.clone());
    let shape = ReverseShape {
        carried: c,
        carried_real: &carried_real,
        captures_real: &captures_real,
        captured: l.captures.len() + stored_carried.len(),
        next: next_carried,
        accumulating: &accumulating,
    };
    let rbody = reverse_body(body, &g, &body_tys, &shape, span);
    let carried_ty = |k: usize| body_tys[1 + k];
    let mut init: Vec<ValueId> = carried_real
        .iter()
        .map(|k| {
            seeds
                .get(*k)
                .copied()
                .flatten()
                .unwrap_or_else(|| b.zero(carried_ty(*k), span))
        })
        .collect();
    init.extend(
        captures_real
            .iter()
            .map(|j| cap_acc[*j].unwrap_or_else(|| b.constant(0.0, span))),
    );
    // The next values of the last iteration: the forward loop's results.
    init.extend(
        next_carried
            .iter()
            .map(|k| b.push(Op::Result(recording, *k as u32), span, None)),
    );
    let mut captures: Vec<ValueId> = l.captures.iter().map(|v| map[v.index()]).collect();
    captures.extend(
        stored_carried
            .iter()
            .map(|k| b.push(Op::Result(recording, *k as u32), span, None)),
    );
    Some(b.push(
        Op::Loop(Box::new(Loop {
            start: l.start,
            end: l.end,
            init,
            captures,
            body: rbody,
            kind: LoopKind::Reverse {
                tape: recording,
                taped: c as u32,
            },
        })),
        span,
        None,
    ))
}

/// Which of a loop's values its reverse loop carries and reads: `carried` carried values
/// (the real ones, `carried_real`, get adjoints), the real captures (`captures_real`, whose
/// adjoints are accumulated: in place where `accumulating`), `captured` values its
/// body reads (the captures, then the stored carried values), and the carried scalars
/// whose values after the iteration it reads (`next`: it carries each, the taped value of
/// the iteration it ran before).
struct ReverseShape<'a> {
    carried: usize,
    carried_real: &'a [usize],
    captures_real: &'a [usize],
    captured: usize,
    next: &'a [usize],
    accumulating: &'a [bool],
}

/// The body of a reverse loop: `g` (the vector-Jacobian product of the forward `body`,
/// whose inputs have the types `body_tys`) at the taped carried values of the iteration,
/// seeded with the adjoints carried from the next iteration; it returns the adjoints of
/// the previous iteration's carried values, then the captures' accumulated adjoints.
fn reverse_body(
    body: &Function,
    g: &Function,
    body_tys: &[Ty],
    shape: &ReverseShape<'_>,
    span: Span,
) -> Function {
    let (c, carried_real, captures_real) = (shape.carried, shape.carried_real, shape.captures_real);
    let accumulating = shape.accumulating;
    // R's inputs: [i, d_c (real carried), d_captures accumulators, next values, captures,
    // taped carried].
    let (cf, kf, kn) = (carried_real.len(), captures_real.len(), shape.captured);
    let nf = shape.next.len();
    let carried_ty = |k: usize| body_tys[1 + k];
    let mut tys = vec![body_tys[0]];
    tys.extend(carried_real.iter().map(|k| carried_ty(*k)));
    tys.extend(captures_real.iter().map(|j| body_tys[1 + c + j]));
    tys.extend(shape.next.iter().map(|k| carried_ty(*k)));
    tys.extend((0..kn).map(|j| body_tys[1 + c + j]));
    tys.extend((0..c).map(carried_ty));
    let mut r = Builder::with_inputs(tys);
    // The adjoints are named after what they are adjoints of.
    let body_name = |w: usize| body.input_name(w as u32).map(str::to_string);
    let d_name = |w: usize| body_name(w).map(|n| format!("d_{n}"));
    let input =
        |r: &mut Builder, w: usize, name: Option<String>| r.push(Op::Input(w as u32), span, name);
    let index = input(&mut r, 0, body_name(0));
    let d_c: Vec<ValueId> = (0..cf)
        .map(|k| input(&mut r, 1 + k, d_name(1 + carried_real[k])))
        .collect();
    let d_acc: Vec<ValueId> = (0..kf)
        .map(|j| input(&mut r, 1 + cf + j, d_name(1 + c + captures_real[j])))
        .collect();
    let next: Vec<ValueId> = (shape.next.iter().enumerate())
        .map(|(p, k)| {
            let name = body_name(1 + k).map(|n| format!("{n}_after"));
            input(&mut r, 1 + cf + kf + p, name)
        })
        .collect();
    let caps: Vec<ValueId> = (0..kn)
        .map(|j| input(&mut r, 1 + cf + kf + nf + j, body_name(1 + c + j)))
        .collect();
    let taped: Vec<ValueId> = (0..c)
        .map(|k| input(&mut r, 1 + cf + kf + nf + kn + k, body_name(1 + k)))
        .collect();
    // G's inputs: [i, carried, captures, one seed per output (the adjoints of the next
    // iteration's carried values; zero for those that are not real), the accumulators].
    let zero = r.constant(0.0, span);
    let mut g_inputs = vec![index];
    g_inputs.extend(&taped);
    g_inputs.extend(&caps);
    g_inputs.extend(&next);
    for k in 0..c {
        g_inputs.push(match carried_real.iter().position(|x| *x == k) {
            Some(p) => d_c[p],
            None => zero,
        });
    }
    for (p, j) in captures_real.iter().enumerate() {
        if accumulating[1 + c + j] {
            g_inputs.push(d_acc[p]);
        }
    }
    let gmap = inline(g, &mut r, &g_inputs, true);
    // G's outputs: [carried'..., then d input w for w in [i, carried, captures]].
    let d_input = |w: usize| gmap[g.outputs[c + w].index()];
    let mut outputs: Vec<ValueId> = carried_real.iter().map(|k| d_input(1 + k)).collect();
    for (j, acc) in captures_real.iter().zip(&d_acc) {
        let d = d_input(1 + c + j);
        outputs.push(if accumulating[1 + c + j] {
            d
        } else {
            r.call(Func::Add, vec![*acc, d], span)
        });
    }
    // This iteration's taped values are the next values of the one the loop runs next.
    outputs.extend(shape.next.iter().map(|k| taped[*k]));
    r.finish(outputs)
}

/// How [`jacobian`] computes a Jacobian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JacobianMode {
    /// One reverse sweep per output (fewer outputs than inputs).
    Reverse,
    /// One forward sweep per input (fewer inputs than outputs).
    Forward,
}

/// The Jacobian of `f` in the inputs `wrt`: a function of `f`'s inputs with the outputs
/// `[outputs..., d output_k / d input_w for k in outputs, for w in wrt]` (row-major). It
/// takes one reverse sweep per output or one forward sweep per input, whichever is fewer;
/// the sweeps share the primal computation (the builder merges identical nodes).
pub fn jacobian(f: &Function, wrt: &[u32]) -> (Function, JacobianMode) {
    let n = f.num_inputs;
    let m = f.outputs.len();
    let mut b = Builder::new(n);
    let inputs: Vec<ValueId> = (0..n)
        .map(|w| b.push(Op::Input(w), Span::call_site(), None))
        .collect();
    let span = Span::call_site();
    let mode = if m <= wrt.len() {
        JacobianMode::Reverse
    } else {
        JacobianMode::Forward
    };
    let mut values = Vec::new();
    let mut rows: Vec<Vec<ValueId>> = vec![Vec::new(); m];
    match mode {
        JacobianMode::Reverse => {
            for (k, row) in rows.iter_mut().enumerate() {
                let one = b.constant(1.0, span);
                let seeds: Vec<Option<ValueId>> = (0..m).map(|j| (j == k).then_some(one)).collect();
                let (outs, grads) = vjp_into(f, &mut b, &inputs, &seeds, &[], &f.input_types());
                values = outs;
                *row = wrt.iter().map(|w| grads[*w as usize]).collect();
            }
        }
        JacobianMode::Forward => {
            for w in wrt {
                let one = b.constant(1.0, span);
                let tangents: Vec<Option<ValueId>> =
                    (0..n).map(|j| (j == *w).then_some(one)).collect();
                let (outs, tans) = forward_into(f, &mut b, &inputs, &tangents);
                values = outs;
                for (row, t) in rows.iter_mut().zip(tans) {
                    row.push(t.unwrap_or_else(|| b.constant(0.0, span)));
                }
            }
            if wrt.is_empty() {
                let map = inline(f, &mut b, &inputs, false);
                values = f.outputs.iter().map(|o| map[o.index()]).collect();
            }
        }
    }
    let mut outputs = values;
    outputs.extend(rows.into_iter().flatten());
    (b.finish(outputs), mode)
}
