//! Kernel reverse passes that recompute their forward values a segment at a time, unrolled.
//!
//! The kernels unroll a loop that indexes arrays when it is short ([`super::UNROLL_BUDGET`]),
//! and the reverse transform of straight-line code reads every forward value it needs where
//! the forward pass left it: a loop that carries `W` words through `T` trips keeps `T x W`
//! values alive until the reverse pass reaches them. `s += table[i] * p; p = p * y + c` over
//! 256 words kept 512 values a thread (two elements), past the 255 registers an NVIDIA GPU
//! gives a thread; its adjoint spilled and ran at 45% of its roofline on the H100.
//!
//! Such a loop is kept through the reverse transform instead and cut into segments
//! ([`super::checkpoint_long_loops`]): the outer recording loop keeps each segment's
//! starting values (the checkpoints), and each trip of the outer reverse loop runs its
//! segment forward again from its checkpoint, then back. [`unroll_loops`] then unrolls every
//! loop of that reverse pass: the same straight-line code, but with about `2 sqrt(T) x W`
//! values alive, for one more forward pass over the loop. Each checkpoint is read through
//! [`Func::Fresh`]: without it the driver finds every recomputed value equal to the one the
//! forward pass computed (the same operations on the same value) and keeps that alive, and
//! the kernel is the unrolled one again, spills and all (its SASS was the same to within
//! four instructions). On the H100 at 2^24 the 256-word table's adjoint took 3.07 ms
//! unrolled and 2.33 ms recomputed in segments of 16 (BENCHMARKS.md, "Recomputed
//! segments").

use super::checkpoint::segment_length;
use crate::ir::{Builder, Function, Loop, LoopKind, Op, Ty, ValueId};
use crate::ops::Func;

/// `lowered` unrolled as the kernels unroll it ([`super::unroll_indexed_loops`]), but for
/// the loops whose tapes [`super::checkpoint_long_loops`] would cut, kept to be cut and, after
/// the reverse transform, unrolled by [`unroll_loops`]. `None` when no loop is kept that
/// way, or when another loop stays (one too long to unroll, say): `unroll_loops` unrolls
/// every loop, so the function must have no loop it should keep.
pub fn keeping_long_tapes(lowered: &Function) -> Option<Function> {
    // Asked only of the loops the budget would unroll.
    let kept_count = std::cell::Cell::new(0);
    let keep = |_: &Function, l: &Loop| {
        let cut = segment_length(l).is_some() && !has_loop(&l.body);
        kept_count.set(kept_count.get() + usize::from(cut));
        cut
    };
    let kept = super::unroll_indexed_loops_keeping(lowered, &keep);
    let loops = kept
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Loop(_)))
        .count();
    (loops > 0 && loops == kept_count.get()).then_some(kept)
}

/// Whether `f` runs a loop.
fn has_loop(f: &Function) -> bool {
    f.nodes.iter().any(|n| matches!(n.op, Op::Loop(_)))
}

/// Whether `f` runs a recording loop: in a reverse loop's body, that the loop recomputes
/// its segments from the checkpoints it reads.
fn records(f: &Function) -> bool {
    f.nodes
        .iter()
        .any(|n| matches!(&n.op, Op::Loop(l) if l.kind == LoopKind::Recording))
}

/// `f` with every loop unrolled, forward, recording and reverse, nested ones first; a
/// reverse loop reads its recording loop's carried values at the start of each trip, as
/// the loop would from its tape, through [`Func::Fresh`] where it runs its segment again
/// from them (module doc). It computes the same values by the same operations.
pub fn unroll_loops(f: &Function) -> Function {
    let mut b = Builder::like(f);
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    // Each unrolled loop's final carried values, and each forward or recording loop's
    // first index and carried values at the start of each trip, by node.
    let mut finals: Vec<Option<Vec<ValueId>>> = vec![None; f.nodes.len()];
    let mut tapes: Vec<Option<(i64, Vec<Vec<ValueId>>)>> = vec![None; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        let m = |v: ValueId| map[v.index()];
        let id = match &node.op {
            Op::Loop(l) => {
                let body = unroll_loops(&l.body);
                let init: Vec<ValueId> = l.init.iter().map(|v| m(*v)).collect();
                let captures: Vec<ValueId> = l.captures.iter().map(|v| m(*v)).collect();
                let span = node.span;
                let carried = match l.kind {
                    LoopKind::Forward | LoopKind::Recording => {
                        let (carried, tape) =
                            forward_trips(&mut b, (&body, l, span), init, &captures);
                        // A recording loop whose tape no reverse loop reads may have
                        // become a forward one (optimize): every forward loop's trips are
                        // kept, for the reverse loop that still names it.
                        tapes[i] = Some((l.start, tape));
                        carried
                    }
                    LoopKind::Reverse { tape, .. } => {
                        let (first, recorded) = tapes[tape.index()]
                            .as_ref()
                            .expect("a reverse loop follows its recording loop");
                        let fresh = records(&l.body);
                        let mut carried = init;
                        for index in (l.start..l.end).rev() {
                            let taped = &recorded[(index - first) as usize];
                            let taped: Vec<ValueId> = taped
                                .iter()
                                .map(|v| match (fresh, b.ty(*v)) {
                                    (true, Ty::F32) => b.call(Func::Fresh, vec![*v], span),
                                    _ => *v,
                                })
                                .collect();
                            carried = reverse_trip(
                                &mut b,
                                (&body, index, span),
                                &carried,
                                &captures,
                                &taped,
                            );
                        }
                        carried
                    }
                };
                finals[i] = Some(carried);
                // The loop node itself is never read but through its results.
                b.constant(0.0, span)
            }
            Op::Result(l, k) if finals[l.index()].is_some() => {
                let carried = finals[l.index()].as_deref().unwrap_or_default();
                super::unrolled_result(&mut b, carried, *k, node.name.as_deref())
            }
            op => b.push(op.map_operands(m), node.span, node.name.clone()),
        };
        map.push(id);
    }
    let outputs = f.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(outputs)
}

/// The final carried values of forward loop `l` (its body `body`, unrolled) run from
/// `init`, and the carried values at the start of each trip: the kernels' unroller
/// ([`super::inline_trips`]) one trip at a time.
fn forward_trips(
    b: &mut Builder,
    (body, l, span): (&Function, &Loop, proc_macro2::Span),
    init: Vec<ValueId>,
    captures: &[ValueId],
) -> (Vec<ValueId>, Vec<Vec<ValueId>>) {
    let mut carried = init;
    let mut tape = Vec::with_capacity(l.trip_count().max(0) as usize);
    for index in l.start..l.end {
        tape.push(carried.clone());
        carried = super::inline_trips(b, body, (index..index + 1, span), carried, captures);
    }
    (carried, tape)
}

/// The carried values after reverse trip `index` of `body` from `carried`, its taped
/// inputs `taped`: the body's inputs are `[i, carried..., captures..., taped...]`.
fn reverse_trip(
    b: &mut Builder,
    (body, index, span): (&Function, i64, proc_macro2::Span),
    carried: &[ValueId],
    captures: &[ValueId],
    taped: &[ValueId],
) -> Vec<ValueId> {
    let inputs: Vec<ValueId> = std::iter::once(b.int(index, span))
        .chain(carried.iter().copied())
        .chain(captures.iter().copied())
        .chain(taped.iter().copied())
        .collect();
    let values = crate::ad::inline(body, b, &inputs, false);
    body.outputs.iter().map(|o| values[o.index()]).collect()
}
