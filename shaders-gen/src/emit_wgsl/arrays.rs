//! Arrays in WGSL: every array value lives in a function-scope `var`, indexed at run time;
//! an update writes one word of the old value's `var` when nothing reads the old value
//! again ([`crate::ir::in_place`]), else a copy. A `#[shared]` array only read is never
//! copied at all: its reads index the shared-argument buffer directly.

use super::COMPONENTS;
use super::body::Ctx;
use crate::abi;
use crate::ir::{Function, Op, ValueId};
use crate::names::Taken;
use crate::names::fresh;
use std::fmt::Write;

/// Whether every reader of node `v` of `f` reads one word of it, directly or through a
/// loop that captures it (and reads its words only): such an array need not exist in
/// memory when its words can be read elsewhere.
pub(super) fn only_words_read(f: &Function, v: usize) -> bool {
    let id = ValueId(v as u32);
    if f.outputs.contains(&id) {
        return false;
    }
    f.nodes.iter().all(|n| match &n.op {
        Op::ArrayGet { index, .. } => *index != id,
        Op::Loop(l) => {
            !l.init.contains(&id)
                && l.captures.iter().enumerate().all(|(j, c)| {
                    let w = (1 + l.init.len() + j) as u32;
                    *c != id
                        || l.body
                            .nodes
                            .iter()
                            .position(|b| b.op == Op::Input(w))
                            .is_none_or(|input| only_words_read(&l.body, input))
                })
        }
        op => !op.operands().contains(&id),
    })
}

impl Ctx<'_> {
    /// Finds the arrays of consecutive `#[shared]` words that are only read word by word
    /// (the kernel or the enclosing loop told which values are shared words or arrays).
    pub(super) fn plan_shared_arrays(&mut self) {
        let f = self.f;
        for (i, node) in f.nodes.iter().enumerate() {
            let Op::ArrayNew(elems) = &node.op else {
                continue;
            };
            let words: Option<Vec<u32>> = elems
                .iter()
                .map(|e| self.shared_word.get(&e.index()).copied())
                .collect();
            let Some(words) = words else { continue };
            let consecutive = words
                .iter()
                .enumerate()
                .all(|(k, w)| *w == words[0] + k as u32);
            if consecutive && only_words_read(f, i) {
                self.shared_array.insert(i, words[0]);
            }
        }
    }

    /// For each node, whether it needs a value of its own: not when its only readers are
    /// arrays of shared words that are never built.
    pub(super) fn needed(&self) -> Vec<bool> {
        let mut needed = vec![false; self.f.nodes.len()];
        for (j, n) in self.f.nodes.iter().enumerate() {
            if !self.shared_array.contains_key(&j) {
                for v in n.op.operands() {
                    needed[v.index()] = true;
                }
            }
        }
        for o in &self.f.outputs {
            needed[o.index()] = true;
        }
        needed
    }

    /// `index` into an array of `n` words: a constant, the index itself where it is proven
    /// in range, else clamped into range at run time.
    fn index_text(&self, index: ValueId, n: usize) -> String {
        match self.f.node(index).op {
            Op::Int(k) => format!("{}", k.clamp(0, n as i64 - 1)),
            _ if self.ints[index.index()].is_some_and(|x| x.within(n)) => self.operand(index),
            _ => format!("clamp({}, 0i, {}i)", self.operand(index), n - 1),
        }
    }

    /// The shared word at `index` of the `n` words from `first` on (a WGSL `u32`).
    pub(super) fn shared_word_at(&self, first: u32, index: ValueId, n: usize) -> String {
        format!("{first}u + u32({})", self.index_text(index, n))
    }

    /// A read of `array[index]`.
    pub(super) fn array_get(&self, array: ValueId, index: ValueId) -> String {
        if let Some(read) = self.quad_reads.get(&(array.index(), index.index())) {
            return read.clone();
        }
        let n = self.f.node(array).ty.words();
        let Some(first) = self.shared_array.get(&array.index()) else {
            return format!("{}[{}]", self.operand(array), self.index_text(index, n));
        };
        if !self.shared_uniform {
            return format!("shared_args[{}]", self.shared_word_at(*first, index, n));
        }
        if let Some(read) = self.uniform_lane_read(*first, index, n) {
            return read;
        }
        let u = abi::uniform_lanes(self.precision);
        let at = self.shared_word_at(*first, index, n);
        format!("shared_args[({at}) / {u}u][({at}) % {u}u]")
    }

    /// The read of shared word `first + index` from the uniform buffer's 16-byte elements
    /// with a constant lane, where `index` is proven in `0..n` and is `base + offset` with
    /// every value of `base` a multiple of the lanes (`8 * j + 3`): element `base / lanes`
    /// plus a constant, no division of the index and no lane chosen at run time.
    fn uniform_lane_read(&self, first: u32, index: ValueId, n: usize) -> Option<String> {
        let u = abi::uniform_lanes(self.precision) as i64;
        let fact = self.ints[index.index()].filter(|x| x.within(n))?;
        let base = fact.base?;
        let base_fact = self.ints[base.index()]?;
        let constant = first as i64 + fact.offset;
        if base_fact.multiple % u != 0 || base_fact.lo < 0 || constant < 0 {
            return None;
        }
        let lane = COMPONENTS[(constant % u) as usize];
        let element = match constant / u {
            0 => format!("u32({}) / {u}u", self.operand(base)),
            q => format!("u32({}) / {u}u + {q}u", self.operand(base)),
        };
        Some(format!("shared_args[{element}].{lane}"))
    }

    /// The statements of array-valued node `i` (or none, for an array of shared words
    /// read in place); it may take the name of the array it updates.
    pub(super) fn emit_array_node(
        &mut self,
        i: usize,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
    ) {
        let f = self.f;
        let node = &f.nodes[i];
        let n = node.ty.words();
        let name = self.name(i).clone();
        match &node.op {
            Op::ArrayNew(_) if self.shared_array.contains_key(&i) => {}
            Op::ArrayNew(elems) if elems.iter().all(|e| *e == elems[0]) => {
                let _ = writeln!(
                    out,
                    "{indent}var {name}: array<{}, {n}>;",
                    self.precision.name()
                );
                if f.node(elems[0]).op != Op::Const(0.0) {
                    let x = self.operand(elems[0]);
                    let k = fresh(taken, "k");
                    let _ = writeln!(
                        out,
                        "{indent}for (var {k} = 0i; {k} < {n}i; {k}++) {{ {name}[{k}] = {x}; }}"
                    );
                }
            }
            Op::ArrayNew(elems) => {
                let e: Vec<String> = elems.iter().map(|v| self.operand(*v)).collect();
                let _ = writeln!(
                    out,
                    "{indent}var {name} = array<{}, {n}>({});",
                    self.precision.name(),
                    e.join(", ")
                );
            }
            Op::ArraySet {
                array,
                index,
                value,
            } => {
                let target = self.updated(i, *array, indent, out);
                let k = self.index_text(*index, n);
                let _ = writeln!(out, "{indent}{target}[{k}] = {};", self.operand(*value));
            }
            Op::ArrayAdd(a, b) => {
                let target = self.updated(i, *a, indent, out);
                let (k, b) = (fresh(taken, "k"), self.operand(*b));
                let _ = writeln!(
                    out,
                    "{indent}for (var {k} = 0i; {k} < {n}i; {k}++) {{ {target}[{k}] += {b}[{k}]; }}"
                );
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => {
                let _ = writeln!(
                    out,
                    "{indent}var {name} = {};\n{indent}if ({}) {{ {name} = {}; }}",
                    self.operand(*otherwise),
                    self.operand(*cond),
                    self.operand(*then)
                );
            }
            op => unreachable!("not an array operation: {op:?}"),
        }
    }

    /// The variable node `i` writes: its operand `array`'s own (it takes that name) when
    /// the update is in place, else a new copy.
    fn updated(&mut self, i: usize, array: ValueId, indent: &str, out: &mut String) -> String {
        // An element's update of an array all elements share would write theirs too.
        let shared_by_all = self.uniform[array.index()] && !self.uniform[i];
        if self.inplace.updates[i] && !shared_by_all {
            let name = self.name(array.index()).clone();
            self.set_name(i, name);
        } else {
            let _ = writeln!(
                out,
                "{indent}var {} = {};",
                self.name(i),
                self.operand(array)
            );
        }
        self.name(i).clone()
    }
}
