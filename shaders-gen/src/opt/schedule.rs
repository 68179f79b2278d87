//! The order of a function's top-level nodes: each group of outputs computed whole before
//! the next group's work starts.
//!
//! A Jacobian in reverse mode is built as the primal of every result, then one reverse
//! sweep per result, so every primal value a sweep reads stays alive from the primal
//! through every sweep before it, and every Jacobian word until the stores at the end. A
//! 4 x 16 Jacobian of a `sin` per term kept about 100 values live at once. Ordered by
//! result instead (result `k`'s primal, its sweep, then result `k + 1`'s), what one row
//! needs dies with that row, and the row's words can be stored as soon as they are
//! computed (`emit_wgsl::stores`). On the H100, the order alone changed nothing; with the
//! rows stored as they are computed, a 4 x 16 Jacobian ran 2.4 times faster
//! (BENCHMARKS.md, "Jacobian rows stored as they are computed").
//!
//! The driver does not reorder this itself: a call like `gf_sin` has branches, so the
//! kernel is hundreds of basic blocks, and a scheduler moves instructions only within one.
//!
//! Value kernels are ordered by their outputs too, where that keeps far fewer values
//! alive ([`for_value_kernel`]).

use crate::ir::{Function, Node, Op, ValueId};
use std::borrow::Cow;

/// `f` with its top-level nodes reordered: the nodes that the outputs of `groups[0]` need
/// first (each after its operands, in the order the outputs and operands are listed),
/// then those `groups[1]` needs that are not computed yet, and so on; any node no group
/// needs at the end, in its old order. Loop bodies are not touched (a loop is one node).
/// The result computes the same outputs: only the order of independent nodes changes.
pub fn outputs_in_groups(f: &Function, groups: &[Vec<usize>]) -> Function {
    let n = f.nodes.len();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    for group in groups {
        for &o in group {
            place_with_operands(f, f.outputs[o].index(), &mut placed, &mut order);
        }
    }
    order.extend((0..n).filter(|&i| !placed[i]));
    let mut new_index = vec![ValueId(0); n];
    for (at, &old) in order.iter().enumerate() {
        new_index[old] = ValueId(at as u32);
    }
    let nodes = order
        .iter()
        .map(|&old| {
            let node = &f.nodes[old];
            Node {
                op: node.op.map_operands(|v| new_index[v.index()]),
                ty: node.ty,
                span: node.span,
                name: node.name.clone(),
            }
        })
        .collect();
    Function {
        num_inputs: f.num_inputs,
        nodes,
        outputs: f.outputs.iter().map(|v| new_index[v.index()]).collect(),
    }
}

/// Values alive at once, at most, in `f`'s top-level order as the kernels emit it: an
/// input from the start (arguments are loaded first), any other value from its node to
/// its last top-level use (a loop reading it is a use). Constants and integers are
/// literals and count for nothing. Outputs stay alive to the end.
pub fn max_live(f: &Function) -> usize {
    most_alive(f, true, false)
}

/// [`max_live`] with each output alive only to its last use in `f`: for a kernel that
/// consumes its outputs as they are made (an adjoint adding each gradient word into a sum).
pub fn max_live_within(f: &Function) -> usize {
    most_alive(f, false, false)
}

/// [`max_live`] with each input alive from its first use: the driver loads an argument
/// where it is used, whatever line the kernel loads it on (an unrolled layer's 4,000
/// `#[shared]` weights read into `let`s at the top ran as fast read where used).
fn max_live_from_first_use(f: &Function) -> usize {
    most_alive(f, true, true)
}

/// [`max_live`], [`max_live_within`] and [`max_live_from_first_use`]: outputs alive to
/// the end or not, inputs from the start or their first use.
fn most_alive(f: &Function, outputs_to_the_end: bool, inputs_at_first_use: bool) -> usize {
    let n = f.nodes.len();
    let mut last_use: Vec<Option<usize>> = vec![None; n];
    let mut first_use: Vec<Option<usize>> = vec![None; n];
    for (at, node) in f.nodes.iter().enumerate() {
        for v in node.op.operands() {
            last_use[v.index()] = Some(at);
            first_use[v.index()].get_or_insert(at);
        }
    }
    if outputs_to_the_end {
        for v in &f.outputs {
            last_use[v.index()] = Some(n);
        }
    }
    // +1 where a value comes alive, -1 just after its last use.
    let mut change = vec![0i64; n + 2];
    for (at, node) in f.nodes.iter().enumerate() {
        let Some(last) = last_use[at] else { continue };
        let born = match node.op {
            Op::Const(_) | Op::Int(_) => continue,
            Op::Input(_) if inputs_at_first_use => first_use[at].unwrap_or(last),
            Op::Input(_) => 0,
            _ => at,
        };
        change[born] += 1;
        change[last + 1] -= 1;
    }
    let mut live = 0i64;
    let mut most = 0i64;
    for c in change {
        live += c;
        most = most.max(live);
    }
    most as usize
}

/// Values alive at once past which a value kernel's order is worth changing.
const MANY_LIVE: usize = 64;

/// `f`, for a value kernel: its nodes in the order its outputs need them (each after its
/// operands, depth first, [`outputs_in_groups`] with one group), where the order as
/// written keeps `MANY_LIVE` (64) values or more alive at once and that order a quarter
/// fewer, inputs counted from their first use; else `f` as it is, borrowed.
///
/// A function that maps a per-element array element by element and then combines the
/// results computes every mapped value before the first is used, each through a call with
/// branches the driver does not schedule across. On the H100 (BENCHMARKS.md, "Value
/// kernels ordered by their outputs"), the corpus's `array_64` value kernel went from 129
/// to 68 values alive and from 0.317 to 0.244 ms (57% to 74% of its roofline), `array_32`'s
/// from 65 to 36 and 0.241 to 0.227 ms. The same order lost elsewhere: forward kernels of
/// 20 or fewer values alive up to 9%, and tangent and adjoint kernels up to 1.7x (a
/// tangent's order pairs each primal value with its tangent; by outputs it kept more
/// alive), so it is not applied to them. Inputs counted alive from the kernel's start,
/// an 8-64-64-1 network's unrolled layers (4,801 shared words) were left in their order,
/// every second-layer activation computed before the first was used: 0.646 ms at 2^20
/// on the H100, against 0.447 ordered (BENCHMARKS.md, "Value kernels: layers over shared
/// weights unrolled").
pub fn for_value_kernel(f: &Function) -> Cow<'_, Function> {
    let before = max_live_from_first_use(f);
    if before < MANY_LIVE {
        return Cow::Borrowed(f);
    }
    let ordered = outputs_in_groups(f, &[(0..f.outputs.len()).collect()]);
    if max_live_from_first_use(&ordered) * 4 <= before * 3 {
        Cow::Owned(ordered)
    } else {
        Cow::Borrowed(f)
    }
}

/// Appends node `root` to `order` after every operand it needs that is not placed yet,
/// depth first, operands in order (iteratively: a chain of sums is thousands deep).
fn place_with_operands(f: &Function, root: usize, placed: &mut [bool], order: &mut Vec<usize>) {
    if placed[root] {
        return;
    }
    // (node, its operands, how many of them are handled)
    let mut stack: Vec<(usize, Vec<ValueId>, usize)> = vec![(root, f.nodes[root].op.operands(), 0)];
    placed[root] = true;
    while let Some((node, operands, next)) = stack.last_mut() {
        if let Some(&v) = operands.get(*next) {
            *next += 1;
            let v = v.index();
            if !placed[v] {
                placed[v] = true;
                stack.push((v, f.nodes[v].op.operands(), 0));
            }
        } else {
            order.push(*node);
            stack.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::eval;
    use crate::ir::{Builder, Op};
    use crate::ops::Func;
    use proc_macro2::Span;

    /// Two results of one input, each a chain of its own: ordered by result, the second
    /// chain's nodes all come after the first result.
    #[test]
    fn groups_order_the_chains_and_keep_the_values() {
        let span = Span::call_site();
        let mut b = Builder::new(1);
        let x = b.push(Op::Input(0), span, None);
        let mut a = x;
        let mut c = x;
        let mut chain_a = Vec::new();
        for k in 0..4 {
            let ka = b.constant(k as f64 + 2.0, span);
            a = b.push(Op::Call(Func::Mul, vec![a, ka]), span, None);
            chain_a.push(a);
            let kc = b.constant(k as f64 + 10.0, span);
            let s = b.push(Op::Call(Func::Sin, vec![c]), span, None);
            c = b.push(Op::Call(Func::Add, vec![s, kc]), span, None);
        }
        let f = b.finish(vec![a, c]);
        let g = outputs_in_groups(&f, &[vec![1], vec![0]]);
        assert_eq!(g.nodes.len(), f.nodes.len());
        let pos_c = g.outputs[1].index();
        let first_a = g
            .nodes
            .iter()
            .position(|n| matches!(&n.op, Op::Call(Func::Mul, _)))
            .expect("the first chain's products are kept");
        assert!(first_a > pos_c, "the second result is computed first");
        for x in [0.3, -1.7, 2.5] {
            assert_eq!(eval(&f, &[x]), eval(&g, &[x]));
        }
        // Every node still comes after its operands.
        for (i, node) in g.nodes.iter().enumerate() {
            for v in node.op.operands() {
                assert!(v.index() < i, "node {i} reads {v:?} before it is computed");
            }
        }
    }

    /// `words` inputs mapped by `tanh` one by one, then summed pairwise (`array_64`'s
    /// shape): every mapped value is computed before the sum starts.
    fn map_then_combine(words: usize) -> Function {
        let span = Span::call_site();
        let mut b = Builder::new(words as u32);
        let xs: Vec<ValueId> = (0..words)
            .map(|w| b.push(Op::Input(w as u32), span, None))
            .collect();
        let ts: Vec<ValueId> = xs
            .iter()
            .map(|&x| b.push(Op::Call(Func::Tanh, vec![x]), span, None))
            .collect();
        let mut acc = b.push(Op::Call(Func::Mul, vec![ts[0], xs[1]]), span, None);
        for w in 1..words - 1 {
            let p = b.push(Op::Call(Func::Mul, vec![ts[w], xs[w + 1]]), span, None);
            acc = b.push(Op::Call(Func::Add, vec![acc, p]), span, None);
        }
        b.finish(vec![acc])
    }

    #[test]
    fn a_value_kernel_of_many_live_values_is_ordered_by_its_output() {
        let f = map_then_combine(64);
        // Every input but the first (its `tanh` was its last use) and every mapped value,
        // alive at the first product.
        assert_eq!(max_live(&f), 127);
        let g = for_value_kernel(&f);
        assert!(max_live(&g) <= 70, "{} alive after ordering", max_live(&g));
        let xs: Vec<f64> = (0..64).map(|w| (w as f64 * 0.37).sin()).collect();
        assert_eq!(eval(&f, &xs), eval(&g, &xs));
    }

    #[test]
    fn a_value_kernel_of_few_live_values_keeps_its_order() {
        let f = map_then_combine(16);
        assert_eq!(max_live(&f), 31);
        let g = for_value_kernel(&f);
        let ops = |f: &Function| {
            f.nodes
                .iter()
                .map(|n| format!("{:?}", n.op))
                .collect::<Vec<_>>()
        };
        assert_eq!(ops(&f), ops(&g));
    }
}
