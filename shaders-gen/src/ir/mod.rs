//! The intermediate representation: an arena of typed SSA nodes with source spans.
//!
//! A [`Function`] maps a fixed number of scalar inputs (the flattened argument words, see
//! [`crate::abi`]) to a list of scalar outputs. Arrays never reach the IR as values:
//! lowering scalarizes them, and an index computed at run time is an [`Op::Index`] over the
//! elements. Nodes are kept in definition order, so the arena order is a valid evaluation
//! order and the reverse pass can walk it backwards. `if`/`else` and mutation need no
//! control flow here: lowering renames assigned variables (SSA) and merges branches with
//! [`Op::Select`]. A loop is one [`Op::Loop`] node owning its body, a [`Function`] of the
//! index, the carried values and the captures, read through [`Op::Result`]; every pass
//! goes through [`Function::nodes`] in order, copies nodes with [`Op::map_operands`] and
//! recurses into loop bodies.
//!
//! A function prints as text (`Display`, in `text`) for snapshots of each pass.

mod text;

use crate::ops::Func;
use proc_macro2::Span;
use std::collections::HashMap;

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
    /// The operator as written in both Rust and WGSL.
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
    /// The operator as written in both Rust and WGSL.
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

    /// The type of carried value `k`.
    pub fn carried_ty(&self, k: usize) -> Ty {
        self.body.node(self.body.outputs[k]).ty
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
    /// `elems[index]` with an integer index computed at run time, clamped into range (an
    /// index that lowering cannot prove in range reads the nearest element; never
    /// undefined behaviour).
    Index {
        /// The array's elements.
        elems: Vec<ValueId>,
        /// A [`Ty::Int`] value.
        index: ValueId,
    },
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
            Op::Index { elems, index } => elems.iter().chain([index]).copied().collect(),
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
            Op::Index { elems, index } => Op::Index {
                elems: elems.iter().map(|v| m(*v)).collect(),
                index: m(*index),
            },
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

    /// How many nodes are not inputs or constants: a size measure for tests and benches.
    pub fn op_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_)))
            .count()
    }
}

/// Hashable identity of an operation, for common-subexpression elimination.
#[derive(Clone, PartialEq, Eq, Hash)]
enum OpKey {
    Input(u32),
    Const(u64),
    Call(Func, Vec<ValueId>),
    Cmp(CmpOp, ValueId, ValueId),
    Not(ValueId),
    And(ValueId, ValueId),
    Or(ValueId, ValueId),
    Select(ValueId, ValueId, ValueId),
    Int(i64),
    IntBin(IntOp, ValueId, ValueId),
    IntToF32(ValueId),
    Index(Vec<ValueId>, ValueId),
    /// Loops are never shared: each is its own node.
    Unique(u32),
    Result(ValueId, u32),
    Custom(ValueId, Vec<ValueId>, Vec<ValueId>),
}

fn op_key(op: &Op) -> OpKey {
    match op {
        Op::Input(i) => OpKey::Input(*i),
        Op::Const(c) => OpKey::Const(c.to_bits()),
        Op::Call(f, args) => OpKey::Call(*f, args.clone()),
        Op::Cmp(c, a, b) => OpKey::Cmp(*c, *a, *b),
        Op::Not(a) => OpKey::Not(*a),
        Op::Int(v) => OpKey::Int(*v),
        Op::IntBin(o, a, b) => OpKey::IntBin(*o, *a, *b),
        Op::IntToF32(a) => OpKey::IntToF32(*a),
        Op::Index { elems, index } => OpKey::Index(elems.clone(), *index),
        Op::Loop(_) => OpKey::Unique(0),
        Op::Result(l, k) => OpKey::Result(*l, *k),
        Op::CustomGrad {
            value,
            args,
            partials,
        } => OpKey::Custom(*value, args.clone(), partials.clone()),
        Op::And(a, b) => OpKey::And(*a, *b),
        Op::Or(a, b) => OpKey::Or(*a, *b),
        Op::Select {
            cond,
            then,
            otherwise,
        } => OpKey::Select(*cond, *then, *otherwise),
    }
}

/// Appends nodes to a [`Function`], sharing identical nodes (hash-consing) as it goes.
///
/// Every pass builds its output through a `Builder`, so common subexpressions never
/// survive a pass, and [`crate::opt`] only has to fold and prune.
pub struct Builder {
    func: Function,
    dedup: HashMap<OpKey, ValueId>,
}

impl Builder {
    /// An empty function with `num_inputs` scalar inputs.
    pub fn new(num_inputs: u32) -> Self {
        Builder {
            func: Function {
                num_inputs,
                nodes: Vec::new(),
                outputs: Vec::new(),
            },
            dedup: HashMap::new(),
        }
    }

    /// Adds `op` (or finds the identical node already there) and returns its value.
    pub fn push(&mut self, op: Op, span: Span, name: Option<String>) -> ValueId {
        // `+`, `*`, `&&` and `||` are commutative (IEEE arithmetic included): one operand
        // order, so that `100 * b` and `b * 100` are one node.
        let op = match op {
            Op::Call(f @ (Func::Add | Func::Mul), mut args) => {
                args.sort();
                Op::Call(f, args)
            }
            Op::And(a, b) => Op::And(a.min(b), a.max(b)),
            Op::Or(a, b) => Op::Or(a.min(b), a.max(b)),
            op => op,
        };
        let key = match op_key(&op) {
            OpKey::Unique(_) => OpKey::Unique(self.func.nodes.len() as u32),
            k => k,
        };
        if let Some(&id) = self.dedup.get(&key) {
            let node = &mut self.func.nodes[id.index()];
            if node.name.is_none() {
                node.name = name;
            }
            return id;
        }
        let ty = match &op {
            Op::Cmp(..) | Op::Not(_) | Op::And(..) | Op::Or(..) => Ty::Bool,
            Op::Select { then, .. } => self.func.nodes[then.index()].ty,
            Op::Int(_) | Op::IntBin(..) => Ty::Int,
            Op::Loop(_) => Ty::Region,
            Op::Result(l, k) => match &self.func.nodes[l.index()].op {
                Op::Loop(lp) => lp.body.node(lp.body.outputs[*k as usize]).ty,
                _ => Ty::F32,
            },
            _ => Ty::F32,
        };
        let id = ValueId(self.func.nodes.len() as u32);
        self.func.nodes.push(Node { op, ty, span, name });
        self.dedup.insert(key, id);
        id
    }

    /// The input word `index`.
    pub fn input(&mut self, index: u32, span: Span, name: Option<String>) -> ValueId {
        self.push(Op::Input(index), span, name)
    }

    /// A constant.
    pub fn constant(&mut self, value: f64, span: Span) -> ValueId {
        self.push(Op::Const(value), span, None)
    }

    /// A call of a table function.
    pub fn call(&mut self, func: Func, args: Vec<ValueId>, span: Span) -> ValueId {
        self.push(Op::Call(func, args), span, None)
    }

    /// A comparison.
    pub fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId, span: Span) -> ValueId {
        self.push(Op::Cmp(op, a, b), span, None)
    }

    /// `!a`.
    pub fn not(&mut self, a: ValueId, span: Span) -> ValueId {
        self.push(Op::Not(a), span, None)
    }

    /// `a && b`.
    pub fn and(&mut self, a: ValueId, b: ValueId, span: Span) -> ValueId {
        self.push(Op::And(a, b), span, None)
    }

    /// `a || b`.
    pub fn or(&mut self, a: ValueId, b: ValueId, span: Span) -> ValueId {
        self.push(Op::Or(a, b), span, None)
    }

    /// `if cond { then } else { otherwise }`.
    pub fn select(
        &mut self,
        cond: ValueId,
        then: ValueId,
        otherwise: ValueId,
        span: Span,
    ) -> ValueId {
        self.push(
            Op::Select {
                cond,
                then,
                otherwise,
            },
            span,
            None,
        )
    }

    /// The node behind a value built so far.
    pub fn node(&self, id: ValueId) -> &Node {
        &self.func.nodes[id.index()]
    }

    /// Gives `id` a name for emitted code if it has none.
    pub fn name(&mut self, id: ValueId, name: &str) {
        let node = &mut self.func.nodes[id.index()];
        if node.name.is_none() && !matches!(node.op, Op::Const(_)) {
            node.name = Some(name.to_string());
        }
    }

    /// An integer constant.
    pub fn int(&mut self, value: i64, span: Span) -> ValueId {
        self.push(Op::Int(value), span, None)
    }

    /// A new input, after the existing ones (loop bodies discover what they read as they
    /// are lowered).
    pub fn add_input(&mut self, span: Span, name: Option<String>) -> ValueId {
        let w = self.func.num_inputs;
        self.func.num_inputs += 1;
        self.push(Op::Input(w), span, name)
    }

    /// How many inputs so far.
    pub fn num_inputs(&self) -> u32 {
        self.func.num_inputs
    }

    /// The type of a value built so far.
    pub fn ty(&self, id: ValueId) -> Ty {
        self.func.nodes[id.index()].ty
    }

    /// The constant value of `id`, if it is a constant.
    pub fn const_value(&self, id: ValueId) -> Option<f64> {
        match self.func.nodes[id.index()].op {
            Op::Const(c) => Some(c),
            _ => None,
        }
    }

    /// Finishes the function with these outputs.
    pub fn finish(mut self, outputs: Vec<ValueId>) -> Function {
        self.func.outputs = outputs;
        self.func
    }
}
