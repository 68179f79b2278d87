//! What is known of each integer value before it runs: the values it can take, the power
//! of two that divides all of them, and how it splits into another value plus a constant.
//!
//! Lowering proves every index in range (integers are loop indices, literals and `+ - *`
//! on them), so the emitters need not clamp an index again where this analysis proves it
//! too, and a read of `words[8 * j + 3]` from a buffer of 4-word elements can take element
//! `2 * j` and its fourth lane, a constant, instead of dividing the index at run time.

use super::{Function, IntOp, Op, ValueId};

/// The largest power of two [`IntFact::multiple`] records (zero is a multiple of all).
const MAX_MULTIPLE: i64 = 1 << 16;

/// What is known of one integer value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntFact {
    /// The least value it can take.
    pub lo: i64,
    /// The greatest value it can take.
    pub hi: i64,
    /// A power of two (at most 2^16) that divides every value it takes.
    pub multiple: i64,
    /// The value is `base + offset`: `base` a node of the same function whose own fact
    /// holds its multiple, or no node for a constant.
    pub base: Option<ValueId>,
    /// See `base`.
    pub offset: i64,
}

impl IntFact {
    /// The constant `k`.
    pub fn constant(k: i64) -> Self {
        IntFact {
            lo: k,
            hi: k,
            multiple: power_of_two_dividing(k),
            base: None,
            offset: k,
        }
    }

    /// A value from `lo` to `hi` known no better (a loop index: its input's fact); the
    /// node that holds it becomes its base.
    pub fn between(lo: i64, hi: i64) -> Self {
        if lo == hi {
            return Self::constant(lo);
        }
        IntFact {
            lo,
            hi,
            multiple: 1,
            base: None,
            offset: 0,
        }
    }

    /// Whether every value lies in `0..len`.
    pub fn within(&self, len: usize) -> bool {
        self.lo >= 0 && self.hi < len as i64
    }
}

/// The largest power of two (up to [`MAX_MULTIPLE`]) dividing `k`.
fn power_of_two_dividing(k: i64) -> i64 {
    if k == 0 {
        MAX_MULTIPLE
    } else {
        1i64 << k.trailing_zeros().min(MAX_MULTIPLE.trailing_zeros())
    }
}

/// The facts of `f`'s integer nodes (`None` for other nodes and for integers nothing is
/// known of), given those of its inputs (`inputs[w]`; a loop body's index and captures).
pub fn int_facts(f: &Function, inputs: &[Option<IntFact>]) -> Vec<Option<IntFact>> {
    let mut facts: Vec<Option<IntFact>> = Vec::with_capacity(f.nodes.len());
    for (i, node) in f.nodes.iter().enumerate() {
        let id = ValueId(i as u32);
        let fact = match &node.op {
            Op::Int(k) => Some(IntFact::constant(*k)),
            Op::Input(w) => inputs
                .get(*w as usize)
                .copied()
                .flatten()
                .map(|x| based(x.lo, x.hi, x.multiple, (Some(id), 0))),
            Op::IntBin(op, a, b) => match (facts[a.index()], facts[b.index()]) {
                (Some(a), Some(b)) => int_bin(*op, a, b).map(|(lo, hi, multiple)| {
                    // `base + constant` keeps the base: its multiple is what the split needs.
                    let split = match (op, a.lo == a.hi, b.lo == b.hi) {
                        (IntOp::Add, false, true) => (a.base, a.offset + b.lo),
                        (IntOp::Add, true, false) => (b.base, b.offset + a.lo),
                        (IntOp::Sub, false, true) => (a.base, a.offset - b.lo),
                        _ => (Some(id), 0),
                    };
                    based(lo, hi, multiple, split)
                }),
                _ => None,
            },
            _ => None,
        };
        facts.push(fact);
    }
    facts
}

/// The fact of a value from `lo` to `hi`, every value a multiple of `multiple`, equal to
/// `base + offset` (`split`) unless it is a constant.
fn based(lo: i64, hi: i64, multiple: i64, split: (Option<ValueId>, i64)) -> IntFact {
    if lo == hi {
        return IntFact::constant(lo);
    }
    let (base, offset) = split;
    IntFact {
        lo,
        hi,
        multiple,
        base,
        offset,
    }
}

/// The range and multiple of `a op b`; `None` where a bound overflows.
fn int_bin(op: IntOp, a: IntFact, b: IntFact) -> Option<(i64, i64, i64)> {
    let (lo, hi, multiple) = match op {
        IntOp::Add => (
            a.lo.checked_add(b.lo)?,
            a.hi.checked_add(b.hi)?,
            a.multiple.min(b.multiple),
        ),
        IntOp::Sub => (
            a.lo.checked_sub(b.hi)?,
            a.hi.checked_sub(b.lo)?,
            a.multiple.min(b.multiple),
        ),
        IntOp::Mul => {
            let corners = [
                a.lo.checked_mul(b.lo)?,
                a.lo.checked_mul(b.hi)?,
                a.hi.checked_mul(b.lo)?,
                a.hi.checked_mul(b.hi)?,
            ];
            (
                *corners.iter().min()?,
                *corners.iter().max()?,
                a.multiple.saturating_mul(b.multiple).min(MAX_MULTIPLE),
            )
        }
    };
    // WGSL computes in i32: a bound past it is not a fact about the kernel.
    if lo < i32::MIN as i64 || hi > i32::MAX as i64 {
        return None;
    }
    Some((lo, hi, multiple))
}

/// Loop-body value `v` as `stride × (loop index) + offset` (the index is the body's input
/// 0), if it is built so from the index and constants: where a loop's trips read or write
/// (`outer_sums`' rows, `ad`'s stored values).
pub fn affine_in_index(f: &Function, v: ValueId) -> Option<(i64, i64)> {
    let (stride, offset) = affine_with(f, v, &|_| false)?;
    Some((stride, offset?))
}

/// The stride of loop-body value `v` in the loop index, where `v` is the index times a
/// constant plus integers the same in every trip: constants and the `invariant` inputs
/// (a loop's captures). Where a trip's word moves with the trip (`streams`' groups).
pub fn stride_in_index(f: &Function, v: ValueId, invariant: &dyn Fn(u32) -> bool) -> Option<i64> {
    Some(affine_with(f, v, invariant)?.0)
}

/// [`affine_in_index`] where `invariant` inputs are integers the same in every trip: the
/// offset is `None` where it depends on one.
fn affine_with(
    f: &Function,
    v: ValueId,
    invariant: &dyn Fn(u32) -> bool,
) -> Option<(i64, Option<i64>)> {
    let sum = |x: Option<i64>, y: Option<i64>, op: fn(i64, i64) -> Option<i64>| match (x, y) {
        (Some(x), Some(y)) => op(x, y).map(Some),
        _ => Some(None),
    };
    match &f.node(v).op {
        Op::Int(k) => Some((0, Some(*k))),
        Op::Input(0) => Some((1, Some(0))),
        Op::Input(w) if invariant(*w) => Some((0, None)),
        Op::IntBin(op, a, b) => {
            let (x, y) = (
                affine_with(f, *a, invariant)?,
                affine_with(f, *b, invariant)?,
            );
            let scaled = |(s, o): (i64, Option<i64>), k: i64| {
                let o = match o {
                    Some(o) => Some(o.checked_mul(k)?),
                    None => None,
                };
                Some((s.checked_mul(k)?, o))
            };
            match op {
                IntOp::Add => Some((x.0.checked_add(y.0)?, sum(x.1, y.1, i64::checked_add)?)),
                IntOp::Sub => Some((x.0.checked_sub(y.0)?, sum(x.1, y.1, i64::checked_sub)?)),
                IntOp::Mul => match (x, y) {
                    ((0, Some(k)), other) | (other, (0, Some(k))) => scaled(other, k),
                    ((0, None), (0, None)) => Some((0, None)),
                    _ => None,
                },
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, Ty};
    use proc_macro2::Span;

    /// `j` (input 0, an integer) and `op(j)` built from it.
    fn of_index(build: impl FnOnce(&mut Builder, ValueId) -> ValueId) -> (Function, ValueId) {
        let mut b = Builder::with_inputs(vec![Ty::Int]);
        let j = b.input(0, Span::call_site(), None);
        let v = build(&mut b, j);
        (b.finish(vec![]), v)
    }

    fn int_bin(b: &mut Builder, op: IntOp, x: ValueId, y: ValueId) -> ValueId {
        b.push(Op::IntBin(op, x, y), Span::call_site(), None)
    }

    #[test]
    fn a_stride_counts_captures_as_the_same_in_every_trip() {
        // Inputs: `j`, then a capture `c`: `2 (j + c) + 3`, `c j`, `j + c`.
        let mut b = Builder::with_inputs(vec![Ty::Int, Ty::Int]);
        let j = b.input(0, Span::call_site(), None);
        let c = b.input(1, Span::call_site(), None);
        let (two, three) = (b.int(2, Span::call_site()), b.int(3, Span::call_site()));
        let jc = int_bin(&mut b, IntOp::Add, j, c);
        let doubled = int_bin(&mut b, IntOp::Mul, two, jc);
        let moved = int_bin(&mut b, IntOp::Add, doubled, three);
        let product = int_bin(&mut b, IntOp::Mul, c, j);
        let f = b.finish(vec![]);
        let capture = |w: u32| w == 1;
        assert_eq!(stride_in_index(&f, moved, &capture), Some(2));
        assert_eq!(stride_in_index(&f, jc, &capture), Some(1));
        assert_eq!(stride_in_index(&f, product, &capture), None);
        // Not a capture: nothing is known of it.
        assert_eq!(stride_in_index(&f, jc, &|_| false), None);
        // Without captures, the offset is known too.
        let (g, k) = of_index(|b, j| {
            let (two, three) = (b.int(2, Span::call_site()), b.int(3, Span::call_site()));
            let m = int_bin(b, IntOp::Mul, j, two);
            int_bin(b, IntOp::Sub, m, three)
        });
        assert_eq!(affine_in_index(&g, k), Some((2, -3)));
    }

    #[test]
    fn an_affine_index_splits_into_an_aligned_base_and_a_constant() {
        let mut scaled = None;
        let (f, k) = of_index(|b, j| {
            let (c32, c9, c1) = (
                b.int(32, Span::call_site()),
                b.int(9, Span::call_site()),
                b.int(1, Span::call_site()),
            );
            let m = int_bin(b, IntOp::Mul, j, c32);
            scaled = Some(m);
            let p = int_bin(b, IntOp::Add, m, c9);
            int_bin(b, IntOp::Sub, p, c1)
        });
        let facts = int_facts(&f, &[Some(IntFact::between(0, 31))]);
        let fk = facts[k.index()].expect("k is known");
        assert_eq!((fk.lo, fk.hi), (8, 31 * 32 + 8));
        assert_eq!((fk.base, fk.offset), (scaled, 8));
        assert_eq!(facts[scaled.unwrap().index()].map(|x| x.multiple), Some(32));
        assert!(fk.within(1056) && !fk.within(1000));
    }

    #[test]
    fn a_constant_plus_an_index_keeps_the_index_as_base() {
        let (f, k) = of_index(|b, j| {
            let c = b.int(1024, Span::call_site());
            int_bin(b, IntOp::Add, c, j)
        });
        let fk = int_facts(&f, &[Some(IntFact::between(0, 31))])[k.index()].unwrap();
        assert_eq!(
            (fk.base, fk.offset, fk.lo, fk.hi),
            (Some(ValueId(0)), 1024, 1024, 1055)
        );
    }

    #[test]
    fn nothing_is_known_of_an_input_without_a_fact_or_past_i32() {
        let (f, m) = of_index(|b, j| {
            let big = b.int(1 << 40, Span::call_site());
            int_bin(b, IntOp::Mul, j, big)
        });
        let j = ValueId(0);
        assert_eq!(int_facts(&f, &[None])[j.index()], None);
        let facts = int_facts(&f, &[Some(IntFact::between(0, 3))]);
        assert!(facts[j.index()].is_some() && facts[m.index()].is_none());
    }
}
