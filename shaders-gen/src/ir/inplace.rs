//! Which array updates the emitters may write in place: the one analysis both the WGSL and
//! the Rust emitter read, so that the two versions make the same choices.
//!
//! An [`Op::ArraySet`] (or [`Op::ArrayAdd`]) makes a new array value. When the old value
//! is read by nothing after it and its storage belongs to this function (not a loop
//! capture, which the next iteration reads again), the new value can take the old one's
//! variable: one store instead of a copy of the whole array.

use super::{Function, Op, Ty};

/// The in-place decisions for one function.
pub struct InPlace {
    /// For each node: it updates its array operand's variable instead of copying it.
    pub updates: Vec<bool>,
    /// For each node: a later node updates the variable this node's value lives in (it
    /// must be declared mutable).
    pub mutated: Vec<bool>,
    /// For each node: the node whose variable holds its value (itself, unless it is an
    /// in-place update).
    pub root: Vec<usize>,
}

/// The decisions for `f`, where `owned_input(w)` says whether input `w`'s storage may be
/// updated in place (a loop's carried value may; a capture may not).
pub fn in_place(f: &Function, owned_input: impl Fn(u32) -> bool) -> InPlace {
    let n = f.nodes.len();
    let last = f.last_uses();
    let mut owned = vec![false; n];
    let mut updates = vec![false; n];
    let mut mutated = vec![false; n];
    let mut root: Vec<usize> = (0..n).collect();
    for (i, node) in f.nodes.iter().enumerate() {
        if !matches!(node.ty, Ty::Array(_)) {
            continue;
        }
        owned[i] = match node.op {
            Op::Input(w) => owned_input(w),
            Op::ArrayNew(_) | Op::Select { .. } | Op::Result(..) => true,
            Op::ArraySet { .. } | Op::ArrayAdd(..) => true,
            _ => false,
        };
        let target = match node.op {
            Op::ArraySet { array, .. } => Some(array),
            Op::ArrayAdd(a, b) if a != b => Some(a),
            _ => None,
        };
        if let Some(a) = target
            && owned[a.index()]
            && last[a.index()] == Some(i)
        {
            updates[i] = true;
            root[i] = root[a.index()];
            mutated[root[i]] = true;
        }
    }
    InPlace {
        updates,
        mutated,
        root,
    }
}
