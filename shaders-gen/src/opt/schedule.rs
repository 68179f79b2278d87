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

use crate::ir::{Function, Node, ValueId};

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
}
