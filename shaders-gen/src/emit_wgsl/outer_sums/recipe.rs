//! A kept loop's factor computed when it is staged, rather than recorded in the loop.
//!
//! Recording a factor writes a per-thread array at the trip's index inside the reverse
//! loop; on the H100 that write cost an 8-64-64-1 network's `value_and_grad` about 1 ms of
//! its 2.7 (BENCHMARKS.md, "Blocks of gradient words per thread"). A dense layer's factor
//! is an element-wise function of arrays the loop reads at its own trip (`(1 - h[j]^2) *
//! d_h[j]`): where every array it reads is one the loop never writes, or writes only at
//! the trip's own index after reading it there, trip `j` sees the array's value from
//! before the loop, so the factor of every trip can be computed after the loop from those
//! values.

use crate::ir::{Loop, LoopInput, Op, ValueId};
use crate::ops::{Func, WgslForm};
use crate::signature::Precision;

/// Most IR nodes a computed factor may take (larger ones are recorded).
const MOST_NODES: u32 = 16;

/// How to compute a factor from values outside the loop, for trip `start + t`.
#[derive(Clone, Debug)]
pub(super) enum Recipe {
    Const(f64),
    /// An outer scalar, the same in every trip.
    Outer(ValueId),
    /// Word `start + t` of an outer array.
    Word(ValueId),
    Call(Func, Vec<Recipe>),
}

impl Recipe {
    /// The recipe of body value `v` of loop `l`, if it is one: `outer_ok` says which outer
    /// values can be named after the loop.
    pub(super) fn of(
        l: &Loop,
        v: ValueId,
        outer_ok: &impl Fn(ValueId) -> bool,
        precision: Precision,
    ) -> Option<Self> {
        let mut budget = MOST_NODES;
        // A trip's index in WGSL is `start + t` with `t` a u32.
        (l.start >= 0).then_some(())?;
        Self::walk(l, v, (outer_ok, precision), &mut budget)
    }

    fn walk(
        l: &Loop,
        v: ValueId,
        (outer_ok, precision): (&impl Fn(ValueId) -> bool, Precision),
        budget: &mut u32,
    ) -> Option<Self> {
        *budget = budget.checked_sub(1)?;
        let f = &l.body;
        match &f.node(v).op {
            Op::Const(c) => Some(Recipe::Const(*c)),
            // Helpers would have to be declared: builtins and operators only.
            Op::Call(func, args) if !matches!(func.wgsl_in(precision), WgslForm::Helper(_)) => {
                let args: Option<Vec<Recipe>> = args
                    .iter()
                    .map(|a| Self::walk(l, *a, (outer_ok, precision), budget))
                    .collect();
                Some(Recipe::Call(*func, args?))
            }
            Op::Input(w) => match l.input(*w as usize) {
                LoopInput::Capture(j) => Some(l.captures[j])
                    .filter(|c| outer_ok(*c))
                    .map(Recipe::Outer),
                _ => None,
            },
            Op::ArrayGet { array, index } => {
                if f.node(*index).op != Op::Input(0) {
                    return None;
                }
                let Op::Input(w) = f.node(*array).op else {
                    return None;
                };
                let outer = match l.input(w as usize) {
                    LoopInput::Capture(j) => l.captures[j],
                    LoopInput::Carried(k) if set_only_at_trip(l, k) => l.init[k],
                    _ => return None,
                };
                outer_ok(outer).then_some(Recipe::Word(outer))
            }
            _ => None,
        }
    }

    /// The outer values it reads, added to `out`.
    pub(super) fn sources(&self, out: &mut Vec<ValueId>) {
        match self {
            Recipe::Const(_) => {}
            Recipe::Outer(v) | Recipe::Word(v) => {
                if !out.contains(v) {
                    out.push(*v);
                }
            }
            Recipe::Call(_, args) => args.iter().for_each(|a| a.sources(out)),
        }
    }

    /// Its WGSL for trip `start + t` (`t` a WGSL `u32`), outer value `v` named `name(v)`.
    pub(super) fn wgsl(
        &self,
        (t, start): (&str, i64),
        name: &impl Fn(ValueId) -> String,
        precision: Precision,
    ) -> String {
        match self {
            Recipe::Const(c) => super::super::float_literal(*c, precision),
            Recipe::Outer(v) => name(*v),
            Recipe::Word(v) => format!("{}[{start}u + {t}]", name(*v)),
            Recipe::Call(func, args) => {
                let a: Vec<String> = args
                    .iter()
                    .map(|a| a.wgsl((t, start), name, precision))
                    .collect();
                match func.wgsl_in(precision) {
                    WgslForm::Infix(op) => format!("({} {op} {})", a[0], a[1]),
                    WgslForm::Prefix(op) => format!("({op}{})", a[0]),
                    WgslForm::Builtin(f) | WgslForm::Helper(f) => format!("{f}({})", a.join(", ")),
                    WgslForm::Template(tpl) => {
                        let mut s = format!("({tpl})");
                        for (k, a) in a.iter().enumerate() {
                            s = s.replace(&format!("{{{k}}}"), a);
                        }
                        s
                    }
                }
            }
        }
    }
}

/// Whether loop `l` writes its carried array `k` only at the trip's index: its next value is
/// the trip's starting array with words set at the loop index alone.
fn set_only_at_trip(l: &Loop, k: usize) -> bool {
    let f = &l.body;
    let mut at = f.outputs[k];
    loop {
        match &f.node(at).op {
            Op::Input(w) => return l.input(*w as usize) == LoopInput::Carried(k),
            Op::ArraySet { array, index, .. } if f.node(*index).op == Op::Input(0) => at = *array,
            _ => return false,
        }
    }
}
