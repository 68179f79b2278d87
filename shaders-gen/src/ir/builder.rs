//! The [`Builder`]: how every pass appends nodes, sharing identical ones and folding array
//! accesses at constant indices as it goes.

use super::{CmpOp, Function, IntOp, Node, Op, Ty, ValueId};
use crate::ops::Func;
use proc_macro2::Span;
use std::collections::HashMap;

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
    ArrayNew(Vec<ValueId>),
    ArrayGet(ValueId, ValueId),
    ArraySet(ValueId, ValueId, ValueId),
    ArrayAdd(ValueId, ValueId),
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
        Op::ArrayNew(elems) => OpKey::ArrayNew(elems.clone()),
        Op::ArrayGet { array, index } => OpKey::ArrayGet(*array, *index),
        Op::ArraySet {
            array,
            index,
            value,
        } => OpKey::ArraySet(*array, *index, *value),
        Op::ArrayAdd(a, b) => OpKey::ArrayAdd(*a, *b),
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
    /// The type of each input, for [`Op::Input`] nodes.
    input_tys: Vec<Ty>,
}

/// Arrays up to this many words fold a write at a constant index into a new
/// [`Op::ArrayNew`] (a literal of all its words); longer ones keep the [`Op::ArraySet`],
/// so generated code never spells out a long array once per write.
const FOLD_SET_WORDS: usize = 32;

impl Builder {
    /// An empty function with `num_inputs` scalar inputs.
    pub fn new(num_inputs: u32) -> Self {
        Self::with_inputs(vec![Ty::F32; num_inputs as usize])
    }

    /// An empty function with inputs of these types.
    pub fn with_inputs(input_tys: Vec<Ty>) -> Self {
        Builder {
            func: Function {
                num_inputs: input_tys.len() as u32,
                nodes: Vec::new(),
                outputs: Vec::new(),
            },
            dedup: HashMap::new(),
            input_tys,
        }
    }

    /// An empty function with the inputs of `f`.
    pub fn like(f: &Function) -> Self {
        Self::with_inputs(f.input_types())
    }

    /// The constant integer behind `v`, if it is one.
    pub fn int_value(&self, v: ValueId) -> Option<i64> {
        match self.func.nodes[v.index()].op {
            Op::Int(k) => Some(k),
            _ => None,
        }
    }

    /// The value `op` folds to without a node of its own, if it does: reads of arrays at
    /// constant indices (through writes, to the word written), and writes at constant
    /// indices into short array literals.
    fn fold_array(&self, op: &Op) -> Option<Result<ValueId, Op>> {
        match *op {
            Op::ArrayGet { array, index } => {
                let k = self.int_value(index);
                match &self.func.nodes[array.index()].op {
                    Op::ArrayNew(elems) => {
                        let at = |k: i64| elems[k.clamp(0, elems.len() as i64 - 1) as usize];
                        match k {
                            Some(k) => Some(Ok(at(k))),
                            None if elems.iter().all(|e| *e == elems[0]) => Some(Ok(elems[0])),
                            None => None,
                        }
                    }
                    &Op::ArraySet {
                        array: inner,
                        index: j,
                        value,
                    } => {
                        let len = self.func.nodes[array.index()].ty.words() as i64;
                        let clamp = |x: i64| x.clamp(0, len - 1);
                        match (k, self.int_value(j)) {
                            _ if j == index => Some(Ok(value)),
                            (Some(k), Some(j)) if clamp(k) == clamp(j) => Some(Ok(value)),
                            (Some(_), Some(_)) => Some(Err(Op::ArrayGet {
                                array: inner,
                                index,
                            })),
                            _ => None,
                        }
                    }
                    _ => None,
                }
            }
            Op::ArraySet {
                array,
                index,
                value,
            } => {
                let k = self.int_value(index)?;
                match &self.func.nodes[array.index()].op {
                    Op::ArrayNew(elems) if elems.len() <= FOLD_SET_WORDS => {
                        let mut elems = elems.clone();
                        let at = k.clamp(0, elems.len() as i64 - 1) as usize;
                        elems[at] = value;
                        Some(Err(Op::ArrayNew(elems)))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Adds `op` (or finds the identical node already there, or the value it folds to)
    /// and returns its value.
    pub fn push(&mut self, op: Op, span: Span, name: Option<String>) -> ValueId {
        let mut op = op;
        while let Some(folded) = self.fold_array(&op) {
            match folded {
                Ok(v) => {
                    if let Some(name) = name {
                        self.name(v, &name);
                    }
                    return v;
                }
                Err(simpler) => op = simpler,
            }
        }
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
            Op::Input(w) => self.input_tys.get(*w as usize).copied().unwrap_or(Ty::F32),
            Op::ArrayNew(elems) => Ty::Array(elems.len() as u32),
            Op::ArraySet { array, .. } | Op::ArrayAdd(array, _) => {
                self.func.nodes[array.index()].ty
            }
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

    /// `acc + term`, where a missing accumulator is zero (element-wise for arrays): how
    /// both AD modes sum the terms of a derivative.
    pub fn accumulate(&mut self, acc: Option<ValueId>, term: ValueId, span: Span) -> ValueId {
        match acc {
            None => term,
            Some(a) if matches!(self.ty(a), Ty::Array(_)) => {
                self.push(Op::ArrayAdd(a, term), span, None)
            }
            Some(a) => self.call(Func::Add, vec![a, term], span),
        }
    }

    /// Whether `v` is the constant zero (a derivative term that adds nothing).
    pub fn is_const_zero(&self, v: ValueId) -> bool {
        self.const_value(v) == Some(0.0)
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

    /// A new input of type `ty`, after the existing ones (loop bodies discover what they
    /// read as they are lowered).
    pub fn add_input(&mut self, ty: Ty, span: Span, name: Option<String>) -> ValueId {
        let w = self.func.num_inputs;
        self.func.num_inputs += 1;
        self.input_tys.push(ty);
        self.push(Op::Input(w), span, name)
    }

    /// The array of these words.
    pub fn array(&mut self, words: Vec<ValueId>, span: Span) -> ValueId {
        self.push(Op::ArrayNew(words), span, None)
    }

    /// A zero of type `ty` (`F32` or an array).
    pub fn zero(&mut self, ty: Ty, span: Span) -> ValueId {
        let z = self.constant(0.0, span);
        match ty {
            Ty::Array(n) => self.array(vec![z; n as usize], span),
            _ => z,
        }
    }

    /// `array` with the word at `index` replaced by `value`.
    pub fn set(&mut self, array: ValueId, index: ValueId, value: ValueId, span: Span) -> ValueId {
        self.push(
            Op::ArraySet {
                array,
                index,
                value,
            },
            span,
            None,
        )
    }

    /// `array[k]` at a constant index.
    pub fn get(&mut self, array: ValueId, k: usize, span: Span) -> ValueId {
        let index = self.int(k as i64, span);
        self.push(Op::ArrayGet { array, index }, span, None)
    }

    /// The words of an array value, read at constant indices (folded where they are known).
    pub fn words_of(&mut self, array: ValueId, span: Span) -> Vec<ValueId> {
        let n = self.ty(array).words();
        (0..n).map(|k| self.get(array, k, span)).collect()
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
