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
use std::collections::HashMap;
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
                    *c != id
                        || l.capture_node(j)
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
    /// arrays of shared words that are never built, or values hoisted into the prologue
    /// (which loads their words itself).
    pub(super) fn needed(&self) -> Vec<bool> {
        let mut needed = vec![false; self.f.nodes.len()];
        for (j, n) in self.f.nodes.iter().enumerate() {
            if !self.shared_array.contains_key(&j)
                && !self.element_array.contains_key(&j)
                && !self.hoisted.contains(&j)
            {
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

    /// Word `first + index` of a run of `n` words (a WGSL `u32`): a shared word, or a word
    /// of the element's argument row.
    pub(super) fn word_at(&self, first: u32, index: ValueId, n: usize) -> String {
        format!("{first}u + u32({})", self.index_text(index, n))
    }

    /// A read of `array[index]`.
    pub(super) fn array_get(&self, array: ValueId, index: ValueId) -> String {
        if let Some(read) = self.quad_reads.get(&(array.index(), index.index())) {
            return read.clone();
        }
        let n = self.f.node(array).ty.words();
        if let Some(first) = self.element_array.get(&array.index()) {
            return self.element_word_read(*first, index, n);
        }
        let Some(first) = self.shared_array.get(&array.index()) else {
            return format!("{}[{}]", self.operand(array), self.index_text(index, n));
        };
        if !self.shared_uniform {
            return format!("shared_args[{}]", self.word_at(*first, index, n));
        }
        if let Some(read) = self.uniform_lane_read(*first, index, n) {
            return read;
        }
        let u = abi::uniform_lanes(self.precision);
        let at = self.word_at(*first, index, n);
        format!("shared_args[({at}) / {u}u][({at}) % {u}u]")
    }

    /// The read of word `first + index` of the element's argument row, where `index` is in
    /// `0..n`: from `args`'s vector at the row's base plus a constant, with a constant lane,
    /// where [`Ctx::vector_and_lane`] finds one.
    fn element_word_read(&self, first: u32, index: ValueId, n: usize) -> String {
        let in_base = crate::names::element_name("in_base", self.element);
        let u = self.row_lanes;
        let at = self.word_at(first, index, n);
        if u == 1 {
            return format!("args[{in_base} + {at}]");
        }
        match self.vector_and_lane(first, index, n, u) {
            Some((vector, lane)) => format!("args[{in_base} + {vector}].{lane}"),
            None => format!("args[{in_base} + ({at}) / {u}u][({at}) % {u}u]"),
        }
    }

    /// The read of shared word `first + index` from the uniform buffer's 16-byte elements
    /// with a constant lane, where [`Ctx::vector_and_lane`] finds one.
    fn uniform_lane_read(&self, first: u32, index: ValueId, n: usize) -> Option<String> {
        let u = abi::uniform_lanes(self.precision);
        let (vector, lane) = self.vector_and_lane(first, index, n, u)?;
        Some(format!("shared_args[{vector}].{lane}"))
    }

    /// Word `first + index` of a buffer of `u`-lane vectors as a vector index and a
    /// constant lane, where `index` is proven in `0..n` and is `base + offset` with every
    /// value of `base` a multiple of the lanes (`8 * j + 3`): vector `base / u` plus a
    /// constant, no division of the index and no lane chosen at run time.
    fn vector_and_lane(
        &self,
        first: u32,
        index: ValueId,
        n: usize,
        u: u32,
    ) -> Option<(String, &'static str)> {
        let u = i64::from(u);
        let fact = self.ints[index.index()].filter(|x| x.within(n))?;
        let base = fact.base?;
        let base_fact = self.ints[base.index()]?;
        let constant = i64::from(first) + fact.offset;
        if base_fact.multiple % u != 0 || base_fact.lo < 0 || constant < 0 {
            return None;
        }
        let vector = format!(
            "u32({}) / {u}u{}",
            self.operand(base),
            super::plus((constant / u) as usize)
        );
        Some((vector, COMPONENTS[(constant % u) as usize]))
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
            Op::ArrayNew(_)
                if self.shared_array.contains_key(&i) || self.element_array.contains_key(&i) => {}
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

/// Arrays of a per-element argument read from the argument buffer at their index instead
/// of copied into a `var` first: the arrays (top-level [`Op::ArrayNew`] nodes of `f`) of
/// [`ELEMENT_ARRAY_MIN_WORDS`] or more consecutive argument words below `row_words`, each
/// word read by nothing else, that are only read word by word, at least once at an index
/// computed at run time, and at most [`ELEMENT_ARRAY_MAX_READS_PER_WORD`] times per word
/// (trips counted). Such an array would live in the thread's private memory, where a copy
/// costs a load, a store and a load per word, against the direct read's one load. On the
/// H100 (BENCHMARKS.md, "Functions the corpus does not hold"), a 4-24-24-2 network with
/// per-element weights, its 576-word layer read once in its value and tangent kernels, ran
/// 3.2x and 3.0x faster so; its adjoint, which reads the layer twice (forward and
/// reverse), ran 1.26x slower, and keeps the copy. By node, the array's first word.
pub(super) fn element_arrays(f: &Function, row_words: u32) -> HashMap<usize, u32> {
    // An output counts as a reader: a word returned as it is must still be loaded.
    let users = super::streams::reader_counts(f);
    let mut out = HashMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let Op::ArrayNew(elems) = &node.op else {
            continue;
        };
        let words: Option<Vec<u32>> = elems
            .iter()
            .map(|e| match f.node(*e).op {
                Op::Input(w) if w < row_words && users[e.index()] == 1 => Some(w),
                _ => None,
            })
            .collect();
        let Some(words) = words else { continue };
        let n = words.len();
        let consecutive = words
            .iter()
            .enumerate()
            .all(|(k, w)| *w == words[0] + k as u32);
        if !consecutive || n < ELEMENT_ARRAY_MIN_WORDS || !only_words_read(f, i) {
            continue;
        }
        let reads = reads_of(f, ValueId(i as u32), 1);
        if reads.at_run_time && reads.count <= ELEMENT_ARRAY_MAX_READS_PER_WORD * n as u64 {
            out.insert(i, words[0]);
        }
    }
    out
}

/// Arrays shorter than this stay copied: a few words in private memory cost little, and
/// their reads are often many.
pub(super) const ELEMENT_ARRAY_MIN_WORDS: usize = 32;

/// Arrays read more often than this per word, trips counted, stay copied: a direct read
/// is a load from the argument row, 4 bytes of each thread's row hundreds of bytes apart,
/// where a copy's reads are coalesced loads from private memory (an adjoint that read its
/// layer twice ran slower, above).
pub(super) const ELEMENT_ARRAY_MAX_READS_PER_WORD: u64 = 1;

/// How an array is read in a function: reads of one word, trips of enclosing loops counted,
/// and whether any is at an index computed at run time.
#[derive(Default)]
struct Reads {
    count: u64,
    at_run_time: bool,
}

/// The reads of array `v` of `f`, each counted `times` times.
fn reads_of(f: &Function, v: ValueId, times: u64) -> Reads {
    let mut out = Reads::default();
    for n in &f.nodes {
        match &n.op {
            Op::ArrayGet { array, index } if *array == v => {
                out.count += times;
                out.at_run_time |= !matches!(f.node(*index).op, Op::Int(_));
            }
            Op::Loop(l) => {
                for (j, c) in l.captures.iter().enumerate() {
                    if *c == v
                        && let Some(input) = l.capture_node(j)
                    {
                        let trips = l.trip_count() as u64;
                        let inner = reads_of(&l.body, ValueId(input as u32), times * trips);
                        out.count += inner.count;
                        out.at_run_time |= inner.at_run_time;
                    }
                }
            }
            _ => {}
        }
    }
    out
}
