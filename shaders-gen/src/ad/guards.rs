//! Guards: the condition under which a node's adjoint flows, kept small enough to walk.
//!
//! Reverse mode gives every node the `or`, over its uses, of the use's guard `and` the
//! select conditions on the way (see [`super::reverse`]); these are the helpers that build
//! those conditions without letting them grow with the trips of an unrolled loop.

use crate::ir::{Builder, Op, ValueId};
use proc_macro2::Span;
use std::collections::{HashMap, HashSet};

/// When a node's adjoint flows: always, or only where a condition (a bool in the output
/// function) holds.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Guard {
    Always,
    When(ValueId),
}

pub(super) fn guard_or(b: &mut Builder, g: Option<Guard>, h: Guard, span: Span) -> Guard {
    match (g, h) {
        (None, h) => h,
        (Some(Guard::Always), _) | (_, Guard::Always) => Guard::Always,
        (Some(Guard::When(x)), Guard::When(y)) if x == y => Guard::When(x),
        (Some(Guard::When(x)), Guard::When(y)) => {
            if let Some(g) = common_conjunct(b, x, y) {
                return Guard::When(g);
            }
            let either = b.or(x, y, span);
            if is_tautology(b, either) {
                Guard::Always
            } else {
                Guard::When(either)
            }
        }
    }
}

/// `g` where `x` and `y` are `g && c` and `g && !c` (either conjunct first): the guard of
/// a value used in both branches of a select reached under `g`. Without it, a value
/// updated under a condition in every trip of an unrolled loop (`if t[i] < 0.0 { v *= 2.0
/// }`) and then compared got a guard that named the one before it twice a trip, and every
/// walk over it took 2^trips steps: 64 trips never compiled (`tests/fuzz_grammar.rs`).
fn common_conjunct(b: &Builder, x: ValueId, y: ValueId) -> Option<ValueId> {
    let (&Op::And(x1, x2), &Op::And(y1, y2)) = (&b.node(x).op, &b.node(y).op) else {
        return None;
    };
    let not = |p: ValueId, q: ValueId| matches!(b.node(p).op, Op::Not(n) if n == q);
    let complementary = |p, q| not(p, q) || not(q, p);
    let pairs = [(x1, x2), (x2, x1)];
    pairs.into_iter().find_map(|(g, p)| {
        [(y1, y2), (y2, y1)]
            .into_iter()
            .any(|(h, q)| g == h && complementary(p, q))
            .then_some(g)
    })
}

/// Whether a condition built of `! && ||` over comparisons holds whatever the comparisons
/// give: a value used on every path of an `if`/`else` chain gets the guard `c || !c` (or
/// longer), and needs no mask. Decided by the truth table over its atoms; conditions with
/// more than `MAX_ATOMS` (10) atoms are taken as not always true (masking stays correct).
/// Each walk visits a node once: conditions share their parts, and a walk of the tree they
/// spell would be exponential in their depth.
fn is_tautology(b: &Builder, cond: ValueId) -> bool {
    const MAX_ATOMS: usize = 10;
    fn atoms(b: &Builder, v: ValueId, seen: &mut HashSet<ValueId>, out: &mut Vec<ValueId>) -> bool {
        if !seen.insert(v) {
            return true;
        }
        match b.node(v).op {
            Op::Not(a) => atoms(b, a, seen, out),
            Op::And(x, y) | Op::Or(x, y) => atoms(b, x, seen, out) && atoms(b, y, seen, out),
            _ => {
                out.push(v);
                out.len() <= MAX_ATOMS
            }
        }
    }
    fn holds(
        b: &Builder,
        v: ValueId,
        bits: &dyn Fn(ValueId) -> bool,
        memo: &mut HashMap<ValueId, bool>,
    ) -> bool {
        if let Some(&h) = memo.get(&v) {
            return h;
        }
        let h = match b.node(v).op {
            Op::Not(a) => !holds(b, a, bits, memo),
            Op::And(x, y) => holds(b, x, bits, memo) & holds(b, y, bits, memo),
            Op::Or(x, y) => holds(b, x, bits, memo) | holds(b, y, bits, memo),
            _ => bits(v),
        };
        memo.insert(v, h);
        h
    }
    let mut list = Vec::new();
    atoms(b, cond, &mut HashSet::new(), &mut list)
        && (0..1u32 << list.len()).all(|bits| {
            let atom = |v: ValueId| {
                let k = list.iter().position(|a| *a == v).unwrap_or(0);
                bits & (1 << k) != 0
            };
            holds(b, cond, &atom, &mut HashMap::new())
        })
}

pub(super) fn guard_and(b: &mut Builder, g: Guard, c: ValueId, span: Span) -> Guard {
    match g {
        Guard::Always => Guard::When(c),
        Guard::When(x) => Guard::When(b.and(x, c, span)),
    }
}

/// `term` where guard `g` lets it flow, else zero.
pub(super) fn mask(b: &mut Builder, g: Guard, term: ValueId, span: Span) -> ValueId {
    match g {
        Guard::When(c) => {
            let zero = b.zero(b.ty(term), span);
            b.select(c, term, zero, span)
        }
        Guard::Always => term,
    }
}
