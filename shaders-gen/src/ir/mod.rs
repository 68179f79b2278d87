//! The intermediate representation: an arena of typed SSA nodes with source spans.
//!
//! A [`Function`] maps a fixed number of inputs (the flattened argument words, see
//! [`crate::abi`]; a loop body's inputs may be arrays) to a list of outputs. Arrays are
//! values of type [`Ty::Array`]: built from words by [`Op::ArrayNew`], read by
//! [`Op::ArrayGet`] and updated by [`Op::ArraySet`], which makes a new array value (the
//! emitters write it in place when the old value is read no more, see
//! [`Function::last_uses`]). So an index computed at run time costs one memory access, its
//! adjoint one add into one word, and a loop over an array stays a loop carrying the array.
//! The [`Builder`] folds reads and writes at constant indices as it goes, so an array only
//! indexed by constants (an unrolled loop) leaves no array behind. Nodes are kept in
//! definition order, so the arena order is a valid evaluation
//! order and the reverse pass can walk it backwards. `if`/`else` and mutation need no
//! control flow here: lowering renames assigned variables (SSA) and merges branches with
//! [`Op::Select`]. A loop is one [`Op::Loop`] node owning its body, a [`Function`] of the
//! index, the carried values and the captures, read through [`Op::Result`]; every pass
//! goes through [`Function::nodes`] in order, copies nodes with [`Op::map_operands`] and
//! recurses into loop bodies.
//!
//! A function prints as text (`Display`, in `text`) for snapshots of each pass.

mod builder;
mod inplace;
mod layers;
mod ranges;
mod text;

pub use builder::Builder;
pub use inplace::{InPlace, in_place};
pub use layers::{Activation, AtZero, DenseLayer, DotRow, dense_layer, dense_layers, dot_row};
pub use ranges::{IntFact, affine_in_index, int_facts, stride_in_index};

use crate::ops::Func;
use proc_macro2::Span;

/// Index of a node in [`Function::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The arena index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The type of an IR value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A 32-bit float on the device, evaluated in f64 by the interpreter.
    F32,
    /// The result of a comparison.
    Bool,
    /// A loop index or integer arithmetic on one (indices only: never a result).
    Int,
    /// A [`Op::Loop`] node itself: its values are read through [`Op::Result`].
    Region,
    /// An array of this many `F32` words.
    Array(u32),
}

impl Ty {
    /// Whether values of this type have derivatives: `F32` and arrays of it.
    pub fn is_real(self) -> bool {
        matches!(self, Ty::F32 | Ty::Array(_))
    }

    /// How many `F32` words a value of this type holds (a tape slot, an output).
    pub fn words(self) -> usize {
        match self {
            Ty::Array(n) => n as usize,
            _ => 1,
        }
    }
}

/// A comparison between two floats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    /// The operator as written in Rust, and in WGSL but for `!=` on floats
    /// (`emit_wgsl::body::comparison` says why).
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// Applies the comparison (IEEE semantics: every comparison with NaN but `!=` is false).
    pub fn apply(self, a: f64, b: f64) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }
}

/// Integer arithmetic on loop indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
}

impl IntOp {
    /// The operator as written in Rust, and in WGSL but for `!=` on floats
    /// (`emit_wgsl::body::comparison` says why).
    pub fn symbol(self) -> &'static str {
        match self {
            IntOp::Add => "+",
            IntOp::Sub => "-",
            IntOp::Mul => "*",
        }
    }

    /// Applies it.
    pub fn apply(self, a: i64, b: i64) -> i64 {
        match self {
            IntOp::Add => a + b,
            IntOp::Sub => a - b,
            IntOp::Mul => a * b,
        }
    }
}

/// Which way a loop runs, and what it keeps for the reverse pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoopKind {
    /// `for i in start..end`.
    Forward,
    /// A forward loop that also records its carried values at the start of every
    /// iteration (the tape its reverse loop reads).
    Recording,
    /// `for i in (start..end).rev()`: the body's trailing inputs are the carried values of
    /// the recording loop `tape` at iteration `i`, read from its tape.
    Reverse {
        /// The [`LoopKind::Recording`] loop whose tape this loop reads.
        tape: ValueId,
        /// How many carried values that loop records.
        taped: u32,
    },
}

/// A counted loop: `for i in start..end`, kept as a loop by every emitter (unless
/// [`crate::opt::unroll_indexed_loops`] unrolls it first).
///
/// Its state is `carried` values, from `init` before the first iteration to the body's
/// outputs after each; the body also reads outer values through `captures`. The body is a
/// function of `[i, carried..., captures..., taped...]` (taped only for
/// [`LoopKind::Reverse`]) with one output per carried value. The loop's final carried values
/// are read through [`Op::Result`].
#[derive(Clone, Debug)]
pub struct Loop {
    /// First index.
    pub start: i64,
    /// One past the last index.
    pub end: i64,
    /// Initial carried values (outer values).
    pub init: Vec<ValueId>,
    /// Outer values the body reads.
    pub captures: Vec<ValueId>,
    /// The body.
    pub body: Function,
    /// Direction, and tape.
    pub kind: LoopKind,
}

/// What input `w` of a loop body is: the body's inputs are `[i, carried..., captures...,
/// taped...]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopInput {
    /// The loop index.
    Index,
    /// Carried value `k`.
    Carried(usize),
    /// Capture `j`.
    Capture(usize),
    /// Taped carried value `k` of the recording loop (reverse loops).
    Taped(usize),
}

/// Loops are never merged: a loop equals only itself.
impl PartialEq for Loop {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Loop {
    /// The role of body input `w`.
    pub fn input(&self, w: usize) -> LoopInput {
        let (c, k) = (self.init.len(), self.captures.len());
        match w {
            0 => LoopInput::Index,
            w if w <= c => LoopInput::Carried(w - 1),
            w if w <= c + k => LoopInput::Capture(w - 1 - c),
            w => LoopInput::Taped(w - 1 - c - k),
        }
    }

    /// The body's node that reads capture `j`, if the body reads it.
    pub fn capture_node(&self, j: usize) -> Option<usize> {
        let w = (1 + self.init.len() + j) as u32;
        self.body.nodes.iter().position(|b| b.op == Op::Input(w))
    }

    /// The type of carried value `k`.
    pub fn carried_ty(&self, k: usize) -> Ty {
        self.body.node(self.body.outputs[k]).ty
    }

    /// Whether the loop carries arrays only and its body uses them only as the arrays it
    /// writes words of (`h[j] = ..`), never reading one: a map over its trips (a layer's
    /// rows), no trip depending on another, where a recurrence reads what the trip before
    /// left.
    pub fn maps_carried_arrays(&self) -> bool {
        if !(0..self.init.len()).all(|k| matches!(self.carried_ty(k), Ty::Array(_))) {
            return false;
        }
        let body = &self.body;
        let mut written = vec![false; body.nodes.len()];
        for (at, node) in body.nodes.iter().enumerate() {
            match &node.op {
                Op::Input(w) => {
                    written[at] = matches!(self.input(*w as usize), LoopInput::Carried(_));
                }
                Op::ArraySet {
                    array,
                    index,
                    value,
                } if written[array.index()] => {
                    if written[index.index()] || written[value.index()] {
                        return false;
                    }
                    written[at] = true;
                }
                op => {
                    if op.operands().iter().any(|v| written[v.index()]) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// The types of the body's inputs, `[i, carried..., captures..., taped...]`, taken from
    /// the values of `outer` the loop starts from and captures where it has them: a body
    /// that never reads an input has no node to say its type ([`Function::input_types`]
    /// takes it for `f32`), and an array mistaken for a scalar there made the reverse pass
    /// select between arrays as if they were words.
    pub fn body_input_types(&self, outer: &Function) -> Vec<Ty> {
        let mut tys = self.body.input_types();
        let c = self.init.len();
        for (k, v) in self.init.iter().enumerate() {
            tys[1 + k] = outer.node(*v).ty;
        }
        for (j, v) in self.captures.iter().enumerate() {
            tys[1 + c + j] = outer.node(*v).ty;
        }
        tys
    }

    /// How many words the loop's carried values take (arrays their length): what an
    /// iteration would record if its reverse pass read all of them.
    pub fn carried_words(&self) -> usize {
        (0..self.init.len())
            .map(|k| self.carried_ty(k).words())
            .sum()
    }

    /// Iterations.
    pub fn trip_count(&self) -> i64 {
        (self.end - self.start).max(0)
    }
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The scalar input word with this index.
    Input(u32),
    /// A float constant. Stored in f64; emitters print it as the nearest f32.
    Const(f64),
    /// A function from the table in [`crate::ops`] (arithmetic included).
    Call(Func, Vec<ValueId>),
    /// A comparison, of type [`Ty::Bool`].
    Cmp(CmpOp, ValueId, ValueId),
    /// `!a` of a [`Ty::Bool`].
    Not(ValueId),
    /// `a && b` of two [`Ty::Bool`] values (both are computed: nothing has side effects).
    And(ValueId, ValueId),
    /// `a || b` of two [`Ty::Bool`] values.
    Or(ValueId, ValueId),
    /// An integer constant (of type [`Ty::Int`]).
    Int(i64),
    /// Integer arithmetic.
    IntBin(IntOp, ValueId, ValueId),
    /// An integer as a float (`i as f32`).
    IntToF32(ValueId),
    /// An array of these `F32` words (of type [`Ty::Array`]).
    ArrayNew(Vec<ValueId>),
    /// `array[index]`, the index a [`Ty::Int`] clamped into range (lowering proves indices
    /// in range; the clamp makes any other index defined behaviour, never a fault).
    ArrayGet {
        /// An array value.
        array: ValueId,
        /// A [`Ty::Int`] value.
        index: ValueId,
    },
    /// `array` with the word at `index` (clamped like [`Op::ArrayGet`]'s) replaced by
    /// `value`: a new array value.
    ArraySet {
        /// An array value.
        array: ValueId,
        /// A [`Ty::Int`] value.
        index: ValueId,
        /// An `F32` value.
        value: ValueId,
    },
    /// The element-wise sum of two arrays of one length (reverse mode adds adjoints so).
    ArrayAdd(ValueId, ValueId),
    /// A loop (of type [`Ty::Region`]).
    Loop(Box<Loop>),
    /// Carried value `k` of a loop after its last iteration.
    Result(ValueId, u32),
    /// `value`, whose derivative in `args[w]` is `partials[w]`, given by the user
    /// (`#[differentiable(grad = ...)]`) instead of derived from how `value` is computed.
    CustomGrad {
        /// The value.
        value: ValueId,
        /// What it is differentiated in.
        args: Vec<ValueId>,
        /// `d value / d args[w]`.
        partials: Vec<ValueId>,
    },
    /// `if cond { a } else { b }` without a branch: both operands are already computed.
    ///
    /// Of the type of its operands. Lowering turns `if`/`else` into selects; the reverse
    /// transform masks the adjoints of the branch not taken (see [`crate::ad::reverse`]), so
    /// the derivative is that of the branch taken even where the other one is NaN.
    Select {
        /// A [`Ty::Bool`] value.
        cond: ValueId,
        /// The value when `cond` holds.
        then: ValueId,
        /// The value otherwise.
        otherwise: ValueId,
    },
}

impl Op {
    /// The values this operation reads, in order.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            Op::Input(_) | Op::Const(_) => Vec::new(),
            Op::Call(_, args) => args.clone(),
            Op::Cmp(_, a, b) | Op::And(a, b) | Op::Or(a, b) => vec![*a, *b],
            Op::Not(a) | Op::IntToF32(a) | Op::Result(a, _) => vec![*a],
            Op::Int(_) => Vec::new(),
            Op::CustomGrad {
                value,
                args,
                partials,
            } => std::iter::once(value)
                .chain(args)
                .chain(partials)
                .copied()
                .collect(),
            Op::IntBin(_, a, b) => vec![*a, *b],
            Op::ArrayNew(elems) => elems.clone(),
            Op::ArrayGet { array, index } => vec![*array, *index],
            Op::ArraySet {
                array,
                index,
                value,
            } => vec![*array, *index, *value],
            Op::ArrayAdd(a, b) => vec![*a, *b],
            Op::Loop(l) => {
                let mut v: Vec<ValueId> = l.init.iter().chain(&l.captures).copied().collect();
                if let LoopKind::Reverse { tape, .. } = l.kind {
                    v.push(tape);
                }
                v
            }
            Op::Select {
                cond,
                then,
                otherwise,
            } => vec![*cond, *then, *otherwise],
        }
    }

    /// The same operation reading `m(v)` for every operand `v`: how passes copy a node
    /// from one function into another.
    pub fn map_operands(&self, mut m: impl FnMut(ValueId) -> ValueId) -> Op {
        match self {
            Op::Input(w) => Op::Input(*w),
            Op::Const(c) => Op::Const(*c),
            Op::Call(func, args) => Op::Call(*func, args.iter().map(|v| m(*v)).collect()),
            Op::Cmp(c, a, b) => Op::Cmp(*c, m(*a), m(*b)),
            Op::Not(a) => Op::Not(m(*a)),
            Op::Int(v) => Op::Int(*v),
            Op::IntBin(o, a, b) => Op::IntBin(*o, m(*a), m(*b)),
            Op::IntToF32(a) => Op::IntToF32(m(*a)),
            Op::ArrayNew(elems) => Op::ArrayNew(elems.iter().map(|v| m(*v)).collect()),
            Op::ArrayGet { array, index } => Op::ArrayGet {
                array: m(*array),
                index: m(*index),
            },
            Op::ArraySet {
                array,
                index,
                value,
            } => Op::ArraySet {
                array: m(*array),
                index: m(*index),
                value: m(*value),
            },
            Op::ArrayAdd(a, b) => Op::ArrayAdd(m(*a), m(*b)),
            Op::Loop(l) => Op::Loop(Box::new(Loop {
                start: l.start,
                end: l.end,
                init: l.init.iter().map(|v| m(*v)).collect(),
                captures: l.captures.iter().map(|v| m(*v)).collect(),
                body: l.body.clone(),
                kind: match l.kind {
                    LoopKind::Reverse { tape, taped } => LoopKind::Reverse {
                        tape: m(tape),
                        taped,
                    },
                    k => k,
                },
            })),
            Op::Result(l, k) => Op::Result(m(*l), *k),
            Op::CustomGrad {
                value,
                args,
                partials,
            } => Op::CustomGrad {
                value: m(*value),
                args: args.iter().map(|v| m(*v)).collect(),
                partials: partials.iter().map(|v| m(*v)).collect(),
            },
            Op::And(a, b) => Op::And(m(*a), m(*b)),
            Op::Or(a, b) => Op::Or(m(*a), m(*b)),
            Op::Select {
                cond,
                then,
                otherwise,
            } => Op::Select {
                cond: m(*cond),
                then: m(*then),
                otherwise: m(*otherwise),
            },
        }
    }
}

/// Outputs that are the words of one array value but for a few ([`Function::output_array`]).
#[derive(Clone, Debug, PartialEq)]
pub struct OutputArray {
    /// The array.
    pub array: ValueId,
    /// `(word, value)`: the outputs that are not that array's word.
    pub patches: Vec<(usize, ValueId)>,
}

/// One SSA value.
#[derive(Clone, Debug)]
pub struct Node {
    /// What it computes.
    pub op: Op,
    /// Its type.
    pub ty: Ty,
    /// The source token it came from; derivative nodes carry the span of their primal.
    pub span: Span,
    /// A name for emitted code: the `let` binding or parameter it came from, if any.
    pub name: Option<String>,
}

/// A straight-line function of scalar inputs.
#[derive(Clone, Debug)]
pub struct Function {
    /// Number of scalar inputs ([`Op::Input`] indices are below this).
    pub num_inputs: u32,
    /// The arena, in evaluation order.
    pub nodes: Vec<Node>,
    /// The results, in order.
    pub outputs: Vec<ValueId>,
}

impl Function {
    /// The node behind a value.
    pub fn node(&self, id: ValueId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The same function without the inputs not in `keep` (which must be unused); the kept
    /// ones are renumbered in order.
    pub fn without_inputs(&self, keep: &[bool]) -> Function {
        let mut renumber = Vec::with_capacity(keep.len());
        let mut next = 0u32;
        for k in keep {
            renumber.push(next);
            next += u32::from(*k);
        }
        let nodes = self
            .nodes
            .iter()
            .map(|n| Node {
                op: match n.op {
                    // An unused input's node stays (ids do not move), reading nothing.
                    Op::Input(w) if !keep[w as usize] => Op::Const(0.0),
                    Op::Input(w) => Op::Input(renumber[w as usize]),
                    ref op => op.clone(),
                },
                ty: n.ty,
                span: n.span,
                name: n.name.clone(),
            })
            .collect();
        Function {
            num_inputs: next,
            nodes,
            outputs: self.outputs.clone(),
        }
    }

    /// Which carried values of the recording loop `recording` some reverse loop reads from
    /// its tape: the ones it records (a sum's running total is rarely read back).
    pub fn taped_reads(&self, recording: ValueId) -> Vec<bool> {
        let Op::Loop(rec) = &self.node(recording).op else {
            return Vec::new();
        };
        let mut read = vec![false; rec.init.len()];
        for node in &self.nodes {
            let Op::Loop(l) = &node.op else { continue };
            if !matches!(l.kind, LoopKind::Reverse { tape, .. } if tape == recording) {
                continue;
            }
            for (w, used) in l.body.used_inputs().into_iter().enumerate() {
                if let (true, LoopInput::Taped(k)) = (used, l.input(w)) {
                    read[k] = true;
                }
            }
        }
        read
    }

    /// Where each carried value of the recording loop `recording` that is recorded
    /// ([`Function::taped_reads`]) starts among an iteration's words of its tape (arrays take
    /// their length), and how many words an iteration records.
    pub fn tape_layout(&self, recording: ValueId) -> (Vec<Option<usize>>, usize) {
        let Op::Loop(rec) = &self.node(recording).op else {
            return (Vec::new(), 0);
        };
        let mut words = 0;
        let offsets = self
            .taped_reads(recording)
            .into_iter()
            .enumerate()
            .map(|(k, read)| {
                read.then(|| {
                    words += rec.carried_ty(k).words();
                    words - rec.carried_ty(k).words()
                })
            })
            .collect();
        (offsets, words)
    }

    /// The source name of input `w`'s node, if it has one.
    pub fn input_name(&self, w: u32) -> Option<&str> {
        self.nodes
            .iter()
            .find(|n| n.op == Op::Input(w))
            .and_then(|n| n.name.as_deref())
    }

    /// Which inputs some node reads.
    pub fn used_inputs(&self) -> Vec<bool> {
        let mut used = vec![false; self.num_inputs as usize];
        let mut read = vec![false; self.nodes.len()];
        for o in &self.outputs {
            read[o.index()] = true;
        }
        for n in &self.nodes {
            for v in n.op.operands() {
                read[v.index()] = true;
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let (Op::Input(w), true) = (&n.op, read[i]) {
                used[*w as usize] = true;
            }
        }
        used
    }

    /// Operations executed per evaluation: [`Function::op_count`] with each loop's body
    /// counted once per iteration (an arithmetic-ceiling estimate for benches).
    pub fn dynamic_op_count(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => 0,
                Op::Loop(l) => l.trip_count() as usize * l.body.dynamic_op_count(),
                _ => 1,
            })
            .sum()
    }

    /// The input words `first..first + len` when node `v` is an array of consecutive input
    /// words (an array argument as lowering builds it): emitters bind such an array to the
    /// argument itself instead of word by word.
    pub fn input_array(&self, v: usize) -> Option<(u32, u32)> {
        let Op::ArrayNew(elems) = &self.nodes[v].op else {
            return None;
        };
        let word = |e: &ValueId| match self.node(*e).op {
            Op::Input(w) => Some(w),
            _ => None,
        };
        let first = word(elems.first()?)?;
        elems
            .iter()
            .enumerate()
            .all(|(k, e)| word(e) == Some(first + k as u32))
            .then_some((first, elems.len() as u32))
    }

    /// The array `d` when `outputs` are its words in order (`d[0], d[1], ..`), but for a
    /// few words that are other values (the patches: a word also read outside the loops
    /// that made `d`, whose gradient adds both): emitters store such outputs as one array
    /// and the patches, not word by word.
    pub fn output_array(&self, outputs: &[ValueId]) -> Option<OutputArray> {
        let mut array = None;
        let mut patches = Vec::new();
        for (k, o) in outputs.iter().enumerate() {
            match self.node(*o).op {
                Op::ArrayGet { array: d, index }
                    if self.node(index).op == Op::Int(k as i64) && array.is_none_or(|a| a == d) =>
                {
                    array = Some(d);
                }
                _ => patches.push((k, *o)),
            }
        }
        let array = array.filter(|d| self.node(*d).ty == Ty::Array(outputs.len() as u32))?;
        (patches.len() * 2 <= outputs.len()).then_some(OutputArray { array, patches })
    }

    /// For each node, whether another node reads it (outputs aside).
    pub fn read_by_node(&self) -> Vec<bool> {
        let mut read = vec![false; self.nodes.len()];
        for n in &self.nodes {
            for v in n.op.operands() {
                read[v.index()] = true;
            }
        }
        read
    }

    /// The type of each input (an input no node reads is an `F32` word).
    pub fn input_types(&self) -> Vec<Ty> {
        let mut tys = vec![Ty::F32; self.num_inputs as usize];
        for n in &self.nodes {
            if let Op::Input(w) = n.op {
                tys[w as usize] = n.ty;
            }
        }
        tys
    }

    /// For each node, the position of the last reader: the index of the last node that
    /// has it as an operand, `nodes.len()` for an output, `None` for a value nobody reads.
    /// An array whose last reader is an [`Op::ArraySet`] or [`Op::ArrayAdd`] can be
    /// updated in place by it.
    pub fn last_uses(&self) -> Vec<Option<usize>> {
        let mut last = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for v in n.op.operands() {
                last[v.index()] = Some(i);
            }
        }
        for o in &self.outputs {
            last[o.index()] = Some(self.nodes.len());
        }
        last
    }

    /// How many nodes are not inputs or constants: a size measure for tests and benches.
    pub fn op_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_)))
            .count()
    }

    /// Operations one evaluation executes: [`Function::code_size`] with each loop's body
    /// counted once per iteration (a kernel's work per element, for cutting long launches).
    pub fn work(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => 0,
                Op::Loop(l) => {
                    let trips = (l.end - l.start).max(0) as u64;
                    1u64.saturating_add(trips.saturating_mul(l.body.work()))
                }
                _ => 1,
            })
            .fold(0u64, u64::saturating_add)
    }

    /// [`Function::work`] with each operation weighted by `cost` (a benchmark's roofline
    /// counts a transcendental call as the FMAs it takes on the device it measures).
    pub fn weighted_work(&self, cost: &dyn Fn(&Op) -> f64) -> f64 {
        self.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => 0.0,
                Op::Loop(l) => {
                    let trips = (l.end - l.start).max(0) as f64;
                    1.0 + trips * l.body.weighted_work(cost)
                }
                op => cost(op),
            })
            .sum()
    }

    /// Operations in the code: each loop's body counted once, as emitted code grows.
    pub fn code_size(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => 0,
                Op::Loop(l) => 1 + l.body.code_size(),
                _ => 1,
            })
            .sum()
    }
}
