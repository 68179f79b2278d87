//! Checkpointed loops: long loops cut into segments, so that a reverse pass records one
//! segment at a time.
//!
//! A reverse loop reads its recording loop's tape, every iteration's carried values, which
//! a GPU thread keeps in function-scope memory: past a few hundred bytes that is local
//! memory, which lives in DRAM and costs each thread a write and a read per word. A loop of
//! `T` iterations carrying `W` words records `T x W` words; `s += table[i] * p; p = p * y +
//! c` over a 1,024-word table recorded 2,048 words a thread, 8 KiB, and its adjoint kernel
//! ran at 6% of its roofline on the H100 (BENCHMARKS.md).
//!
//! Cut into `S` segments of `K` iterations, `for s in 0..S { for j in 0..K { body(start +
//! s * K + j) } }` (then a loop of the `T - S * K` left over), the loop is one the reverse
//! transform already handles: the outer recording loop records the carried values at each
//! segment's start (`S x W` words: the checkpoints), and each iteration of the outer
//! reverse loop runs its segment forward again from its checkpoint, recording `K x W`
//! words, then back. With `K` near `sqrt(T)` the tape falls from `T x W` to about `2
//! sqrt(T) x W` words for one more forward pass over the loop; the operations and their
//! order are the same, so every value is too.

use crate::ir::{Builder, Function, IntOp, Loop, LoopKind, Op, Ty, ValueId};
use proc_macro2::Span;

/// Most words a loop's tape (iterations times carried words) may hold before the loop is
/// cut into segments for the reverse pass: 1 KiB a thread in `f32`.
pub const MAX_TAPE_WORDS: usize = 256;

/// `f` with every forward loop whose tape would pass [`MAX_TAPE_WORDS`] (but a layer's:
/// `segment_length`) cut into segments of about `sqrt(T)` iterations, nested loops first: the
/// function to derive a GPU kernel's reverse pass from (module doc). It computes the same
/// values, by the same operations in the same order.
pub fn checkpoint_long_loops(f: &Function) -> Function {
    let mut b = Builder::like(f);
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    for node in &f.nodes {
        let mut op = node.op.map_operands(|v| map[v.index()]);
        let id = match &mut op {
            Op::Loop(l) if l.kind == LoopKind::Forward => {
                l.body = checkpoint_long_loops(&l.body);
                match segment_length(l) {
                    Some(k) => {
                        // The body's input types from the values it starts from and
                        // captures (a body need not read all of them).
                        let mut tys = vec![Ty::Int];
                        tys.extend(l.init.iter().chain(&l.captures).map(|v| b.ty(*v)));
                        segmented(&mut b, l, &tys, k, node.span)
                    }
                    None => b.push(op, node.span, node.name.clone()),
                }
            }
            _ => b.push(op, node.span, node.name.clone()),
        };
        map.push(id);
    }
    let outputs = f.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(outputs)
}

/// The iterations of a segment of `l`, when `l` is to be cut: its tape would pass
/// [`MAX_TAPE_WORDS`] and it is no layer, whose reverse pass reads the words it stored one
/// per iteration from the array after the loop (`ad/stored.rs`), which a cut loop would
/// lose. A loop that carries arrays it rewrites (a time step of a mass-spring chain) is
/// cut like one carrying scalars: on the H100 at 2^23 a chain of 8 masses stepped 32
/// times, 16 words carried, took 4.72 ms with its 512-word tape and 1.61 ms cut
/// (BENCHMARKS.md, "Loops that carry arrays, checkpointed").
pub(super) fn segment_length(l: &Loop) -> Option<i64> {
    let trips = l.trip_count();
    let words = l.carried_words();
    if crate::ad::stores_a_word_per_iteration(l)
        || trips < 4
        || trips as usize * words <= MAX_TAPE_WORDS
    {
        return None;
    }
    Some((trips as f64).sqrt().ceil() as i64)
}

/// Pushes `l` cut into segments of `k` iterations (and the iterations left over) into `b`;
/// returns the node whose results are `l`'s.
fn segmented(b: &mut Builder, l: &Loop, body_tys: &[Ty], k: i64, span: Span) -> ValueId {
    let segments = l.trip_count() / k;
    let c = l.init.len();
    let index_name = l.body.input_name(0).unwrap_or("i").to_string();
    // The segment's body: `[s, carried..., captures...]`, running the segment's `k`
    // iterations as an inner loop that captures the segment's first index.
    let mut ob = Builder::with_inputs(body_tys.to_vec());
    let s = ob.input(0, span, Some(format!("{index_name}_segment")));
    let k_int = ob.int(k, span);
    let start = ob.int(l.start, span);
    let offset = ob.push(Op::IntBin(IntOp::Mul, s, k_int), span, None);
    let first = ob.push(Op::IntBin(IntOp::Add, offset, start), span, None);
    // The body's input `w`, under the body's name for it.
    let input = |ob: &mut Builder, w: usize| {
        let name = l.body.input_name(w as u32).map(String::from);
        ob.input(w as u32, span, name)
    };
    let carried: Vec<ValueId> = (1..=c).map(|w| input(&mut ob, w)).collect();
    let mut captures: Vec<ValueId> = (1 + c..body_tys.len()).map(|w| input(&mut ob, w)).collect();
    captures.push(first);
    let inner = Loop {
        start: 0,
        end: k,
        init: carried,
        captures,
        body: segment_body(&l.body, body_tys, &index_name, span),
        kind: LoopKind::Forward,
    };
    let inner = ob.push(Op::Loop(Box::new(inner)), span, None);
    let results = (0..c as u32)
        .map(|j| ob.push(Op::Result(inner, j), span, None))
        .collect();
    let outer = b.push(
        Op::Loop(Box::new(Loop {
            start: 0,
            end: segments,
            init: l.init.clone(),
            captures: l.captures.clone(),
            body: ob.finish(results),
            kind: LoopKind::Forward,
        })),
        span,
        None,
    );
    if segments * k == l.trip_count() {
        return outer;
    }
    // The iterations left over, as the loop they were.
    let init = (0..c as u32)
        .map(|j| b.push(Op::Result(outer, j), span, None))
        .collect();
    let rest = Loop {
        start: l.start + segments * k,
        end: l.end,
        init,
        captures: l.captures.clone(),
        body: l.body.clone(),
        kind: LoopKind::Forward,
    };
    b.push(Op::Loop(Box::new(rest)), span, None)
}

/// The inner loop's body: `[j, carried..., captures..., first]`, running `body` at index
/// `first + j`.
fn segment_body(body: &Function, outer_tys: &[Ty], index_name: &str, span: Span) -> Function {
    let mut tys = outer_tys.to_vec();
    tys.push(Ty::Int);
    let n = tys.len() as u32;
    let mut ib = Builder::with_inputs(tys);
    let j = ib.input(0, span, Some(format!("{index_name}_in_segment")));
    let first = ib.input(n - 1, span, Some(format!("{index_name}_first")));
    let index = ib.push(
        Op::IntBin(IntOp::Add, first, j),
        span,
        Some(index_name.to_string()),
    );
    let mut inputs = vec![index];
    inputs.extend((1..n - 1).map(|w| ib.input(w, span, body.input_name(w).map(String::from))));
    let values = crate::ad::inline(body, &mut ib, &inputs, false);
    let outputs = body.outputs.iter().map(|o| values[o.index()]).collect();
    ib.finish(outputs)
}
