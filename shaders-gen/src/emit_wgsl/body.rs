//! The statements of a kernel: one `let` per IR node, loops, and the WGSL expression of
//! every operation.

mod loops;

use super::float_literal;
use super::outer_sums::OuterLoop;
use super::static_runs::StaticRuns;
use super::streams::{Streams, make_room, stage, stage_at, stage_slot, sum_past};
use crate::ir::{CmpOp, Function, InPlace, IntFact, Op, Ty, ValueId, in_place, int_facts};
use crate::names::Taken;
use crate::names::{element_name, fresh, local_names_with};
use crate::ops::{Func, WgslForm, wgsl_helper_deps};
use crate::signature::Precision;
use std::collections::BTreeSet;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Stands for the node's own name in statements written after it ([`Ctx::after`]).
pub(super) const THIS_VALUE: &str = "{value}";

/// How the statements of one function are written: its value names, and what the kernel
/// around it told it (shared words, statements to add after a node).
pub(super) struct Ctx<'a> {
    pub(super) f: &'a Function,
    pub(super) names: Vec<String>,
    /// For each loop node: the `var`s holding its carried values, per element.
    pub(super) carried: HashMap<usize, Vec<Vec<String>>>,
    /// For each recording loop node: its tape, per element.
    pub(super) tapes: HashMap<usize, Vec<String>>,
    /// Values that are a `#[shared]` word (by node): an index into consecutive ones reads
    /// `shared_args` directly instead of building an array.
    pub(super) shared_word: HashMap<usize, u32>,
    /// Arrays of consecutive `#[shared]` words only read word by word (by node): their
    /// reads index `shared_args` from this word on, and they are never built.
    pub(super) shared_array: HashMap<usize, u32>,
    /// Arrays of consecutive words of the element's argument row only read word by word
    /// (by node, see [`super::arrays::element_arrays`]): their reads index `args` from
    /// this word of the row on, and they are never built.
    pub(super) element_array: HashMap<usize, u32>,
    /// Argument words per element of `args` (its vector lanes).
    pub(super) row_lanes: u32,
    /// Whether the shared words are in a uniform buffer (16-byte elements, see
    /// [`crate::abi::uniform_lanes`]).
    pub(super) shared_uniform: bool,
    /// The float type of every value.
    pub(super) precision: Precision,
    /// Which array updates are written in place.
    pub(super) inplace: InPlace,
    /// Statements to write right after node `i` (the shared gradient's sums, as soon as
    /// their words are computed: fewer values live at once); [`THIS_VALUE`] in them is
    /// node `i`'s name.
    pub(super) after: HashMap<usize, String>,
    /// Nodes not written: reads whose words the kernel takes from their array directly.
    pub(super) skip: HashSet<usize>,
    /// Nodes the prologue computes once per workgroup (`hoist.rs`): the body skips them
    /// and needs no loads for them.
    pub(super) hoisted: HashSet<usize>,
    /// Shared gradients added straight into the workgroup's sums (see `streams`).
    pub(super) streams: Streams,
    /// Loops whose rows of shared gradient are summed as outer products after them, by
    /// loop node (see `outer_sums`).
    pub(super) outer: HashMap<usize, OuterLoop>,
    /// Stages left in the run the stage last made room for.
    run_left: u32,
    /// What each check for room sums, where the kernel knows it (see `static_runs`).
    pub(super) static_runs: Option<StaticRuns>,
    /// `sin(x)` and `cos(x)` nodes of one `x`, each the other's partner: written with one
    /// `gf_sincos` (see [`Ctx::sincos_lane`]).
    sincos: HashMap<usize, usize>,
    /// The `gf_sincos` result the first of a pair wrote, by its partner's node and element.
    sincos_vecs: HashMap<(usize, usize), String>,
    /// In a loop body run by quads of trips (`quads`): the shared words its reads take
    /// from the quad's loaded elements, by `(array, index)` nodes.
    pub(super) quad_reads: HashMap<(usize, usize), String>,
    /// In a loop body whose trips stage at fixed slots ([`super::streams::TripSlots`]): the trip's first
    /// slot, and the stages written so far in the body.
    trip_slot: Option<(String, u32)>,
    /// Batch elements each thread computes side by side (see [`Ctx::set_elements`]).
    pub(super) elements: usize,
    /// The element whose statements are being written.
    pub(super) element: usize,
    /// The names of elements 1.. (element 0's are `names`), for nodes not `uniform`.
    element_names: Vec<Vec<String>>,
    /// For each node, whether it is the same for every element (written once).
    pub(super) uniform: Vec<bool>,
    /// What is known of each integer node (an index proven in range is not clamped).
    pub(super) ints: Vec<Option<IntFact>>,
}

impl<'a> Ctx<'a> {
    /// The context of a kernel's function (its inputs are words, never arrays).
    pub(super) fn new(f: &'a Function, taken: &mut Taken) -> Self {
        Self::with_owned_inputs(f, taken, |_| false, int_facts(f, &[]))
    }

    /// The context of a function whose inputs `owned(w)` may be updated in place, with
    /// what is known of its integers.
    fn with_owned_inputs(
        f: &'a Function,
        taken: &mut Taken,
        owned: impl Fn(u32) -> bool,
        ints: Vec<Option<IntFact>>,
    ) -> Self {
        Ctx {
            f,
            names: local_names_with(f, taken),
            carried: HashMap::new(),
            tapes: HashMap::new(),
            shared_word: HashMap::new(),
            shared_array: HashMap::new(),
            element_array: HashMap::new(),
            row_lanes: 1,
            shared_uniform: false,
            precision: Precision::F32,
            inplace: in_place(f, owned),
            after: HashMap::new(),
            skip: HashSet::new(),
            hoisted: HashSet::new(),
            streams: Streams::default(),
            outer: HashMap::new(),
            run_left: 0,
            static_runs: None,
            sincos: sincos_pairs(f),
            sincos_vecs: HashMap::new(),
            trip_slot: None,
            quad_reads: HashMap::new(),
            elements: 1,
            element: 0,
            element_names: Vec::new(),
            uniform: vec![false; f.nodes.len()],
            ints,
        }
    }

    /// Makes each thread compute `elements` batch elements side by side: every node not
    /// the same for all of them (`uniform_inputs` says which inputs are) gets a name per
    /// element, and its statement is written once per element. Shared words, constants and
    /// loop indices are read and computed once for all of them.
    pub(super) fn set_elements(
        &mut self,
        elements: usize,
        uniform_inputs: &[bool],
        taken: &mut Taken,
    ) {
        debug_assert!(
            elements <= crate::names::MAX_ELEMENTS,
            "the plan caps the elements"
        );
        self.elements = elements;
        self.uniform = uniform_nodes(self.f, uniform_inputs);
        self.element_names = (1..elements)
            .map(|e| {
                self.names
                    .iter()
                    .zip(&self.uniform)
                    .map(|(name, &u)| {
                        if u || name.is_empty() {
                            String::new()
                        } else {
                            fresh(taken, &element_name(name, e))
                        }
                    })
                    .collect()
            })
            .collect();
    }

    /// Node `i`'s name in the element being written.
    pub(super) fn name(&self, i: usize) -> &String {
        if self.element == 0 || self.uniform[i] {
            &self.names[i]
        } else {
            &self.element_names[self.element - 1][i]
        }
    }

    /// Names node `i` in the element being written.
    pub(super) fn set_name(&mut self, i: usize, name: String) {
        if self.element == 0 || self.uniform[i] {
            self.names[i] = name;
        } else {
            self.element_names[self.element - 1][i] = name;
        }
    }

    pub(super) fn operand(&self, v: ValueId) -> String {
        match self.f.node(v).op {
            Op::Const(c) => float_literal(c, self.precision),
            Op::Int(k) => format!("{k}i"),
            _ => self.name(v.index()).clone(),
        }
    }

    /// Runs `write` once per element, naming nodes as that element does, then goes back to
    /// the first element.
    pub(super) fn for_each_element(&mut self, mut write: impl FnMut(&mut Self, usize)) {
        for e in 0..self.elements {
            self.element = e;
            write(self, e);
        }
        self.element = 0;
    }

    /// `v` summed over the elements, in element order (what one element adds to a shared
    /// gradient word, for all of them at once).
    pub(super) fn element_sum(&mut self, v: ValueId) -> String {
        let at = self.element;
        let terms: Vec<String> = (0..self.elements)
            .map(|e| {
                self.element = e;
                self.operand(v)
            })
            .collect();
        self.element = at;
        if terms.len() == 1 {
            terms[0].clone()
        } else {
            format!("({})", terms.join(" + "))
        }
    }

    /// `let` statements (and loops) for every node of the function but its inputs, which
    /// the caller binds to their names.
    pub(super) fn emit_nodes(
        &mut self,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        let f = self.f;
        for (i, node) in f.nodes.iter().enumerate() {
            match &node.op {
                _ if self.skip.contains(&i) || self.streams.skip.contains(&i) => {}
                _ if self.streams.adds.contains_key(&i) => {
                    let add = self.streams.adds[&i].clone();
                    let word = self.word_at(add.base, add.index, add.len as usize);
                    let (value, label) =
                        (self.element_sum(add.value), format!("{}[..]", add.label));
                    self.emit_stage((i, 0), &word, &value, &label, indent, out);
                }
                Op::Input(_) | Op::Const(_) | Op::Int(_) => {}
                Op::Loop(l) => {
                    debug_assert_eq!(self.run_left, 0, "a run of stages ends before a loop");
                    self.emit_loop(i, l, taken, indent, out, helpers);
                    if let Some(outer) = self.outer.remove(&i) {
                        self.emit_outer_sums(&outer, taken, indent, out);
                    }
                }
                _ => {
                    for e in self.elements_of(i) {
                        self.element = e;
                        self.emit_node(i, taken, indent, out, helpers);
                    }
                    self.element = 0;
                }
            }
            // What follows a node (its sums) is written once per element, even for a node
            // the same in all: each element adds it.
            if let Some(after) = self.after.remove(&i) {
                self.for_each_element(|ctx, _| {
                    out.push_str(&after.replace(THIS_VALUE, ctx.name(i)));
                });
            }
            self.emit_records(i, indent, out);
            let staged = self.streams.words.get(&i).cloned().unwrap_or_default();
            for (done, (word, label)) in staged.iter().enumerate() {
                let value = self.element_sum(ValueId(i as u32));
                let word = format!("{word}u");
                self.emit_stage((i, done as u32), &word, &value, label, indent, out);
            }
        }
    }

    /// The sums after a loop whose rows are summed as outer products (see `outer_sums`).
    fn emit_outer_sums(
        &mut self,
        outer: &OuterLoop,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
    ) {
        let sources = outer.sources();
        let mut names: HashMap<(ValueId, usize), String> = HashMap::new();
        self.for_each_element(|ctx, e| {
            for v in &sources {
                names.insert((*v, e), ctx.operand(*v));
            }
        });
        let operand = |v: ValueId, e: usize| names.get(&(v, e)).cloned().unwrap_or_default();
        out.push_str(&outer.render(operand, (self.elements, self.precision), taken, indent));
    }

    /// The statements recording node `i`'s value in this trip's word of its record
    /// (`streams.records`), once per element.
    fn emit_records(&mut self, i: usize, indent: &str, out: &mut String) {
        let Some(rec) = self.streams.records.get(&i).cloned() else {
            return;
        };
        let index = self
            .f
            .nodes
            .iter()
            .position(|n| matches!(n.op, Op::Input(0)))
            .map(|n| self.name(n).clone())
            .unwrap_or_default();
        let at = if rec.start == 0 {
            index
        } else {
            format!("{index} - {}i", rec.start)
        };
        self.for_each_element(|ctx, e| {
            let _ = writeln!(
                out,
                "{indent}{}[{at}] = {};",
                element_name(&rec.name, e),
                ctx.operand(ValueId(i as u32))
            );
        });
    }

    /// The elements whose statements node `i` writes: all, or only the first when it is
    /// the same for all.
    fn elements_of(&self, i: usize) -> std::ops::Range<usize> {
        if self.uniform[i] {
            0..1
        } else {
            0..self.elements
        }
    }

    /// The statement of node `i` (not a loop) for the first element alone.
    pub(super) fn emit_single(
        &mut self,
        i: usize,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        self.element = 0;
        self.emit_node(i, taken, indent, out, helpers);
    }

    /// The statement of node `i` (not a loop) in the element being written.
    fn emit_node(
        &mut self,
        i: usize,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        let node = &self.f.nodes[i];
        match &node.op {
            Op::Result(l, k) => {
                let var = self.carried[&l.index()][self.element][*k as usize].clone();
                if let Ty::Array(_) = node.ty {
                    // The loop is over: its variable is this value's own.
                    self.set_name(i, var);
                } else {
                    let _ = writeln!(out, "{indent}let {} = {var};", self.name(i));
                }
            }
            _ if matches!(node.ty, Ty::Array(_)) => {
                self.emit_array_node(i, taken, indent, out);
            }
            op => {
                let e = match self.sincos_lane(i, taken, helpers) {
                    Some((both, lane)) => {
                        if let Some(both) = both {
                            let _ = writeln!(out, "{indent}{both}");
                        }
                        lane
                    }
                    None => self.expr(op, helpers),
                };
                let _ = writeln!(out, "{indent}let {} = {e};", self.name(i));
            }
        }
    }

    /// Node `i`'s value where it is `sin(x)` or `cos(x)` and the function computes the
    /// other of the same `x` too (a derivative of either does): its lane of one
    /// `gf_sincos(x)`, which reduces `x` once for both, and for the first of the two the
    /// statement (a `let`) that calls it.
    fn sincos_lane(
        &mut self,
        i: usize,
        taken: &mut Taken,
        helpers: &mut BTreeSet<&'static str>,
    ) -> Option<(Option<String>, String)> {
        let other = *self.sincos.get(&i)?;
        let Op::Call(func, args) = &self.f.nodes[i].op else {
            return None;
        };
        // f64 kernels keep their own helpers: f64's `gf_sin` is its `gf_sincos`'s lane
        // but at -0.
        if self.precision != Precision::F32 {
            return None;
        }
        let lane = if *func == Func::Sin { "x" } else { "y" };
        if let Some(both) = self.sincos_vecs.remove(&(i, self.element)) {
            return Some((None, format!("{both}.{lane}")));
        }
        let both = fresh(taken, &format!("{}_sincos", self.name(i)));
        let call = format!("let {both} = {SINCOS_FN}({});", self.operand(args[0]));
        helpers.insert(SINCOS_FN);
        self.sincos_vecs.insert((other, self.element), both.clone());
        Some((Some(call), format!("{both}.{lane}")))
    }

    /// One stage of node `at.0`'s run (after `at.1` of the node's own), after making room
    /// for the run if it starts here.
    fn emit_stage(
        &mut self,
        at: (usize, u32),
        word: &str,
        value: &str,
        label: &str,
        indent: &str,
        out: &mut String,
    ) {
        if let Some((first, done)) = &mut self.trip_slot {
            let slot = format!("{first} + {done}u");
            *done += 1;
            let sums_in = self.streams.sums_in;
            out.push_str(&stage_at(&slot, (word, value, label), sums_in, indent));
            return;
        }
        if self.run_left == 0 {
            self.run_left = self.streams.segment(self.f, at.0, at.1);
            match &mut self.static_runs {
                Some(runs) => {
                    if let Some(run) = runs.next_check() {
                        out.push_str(&sum_past(0, &run.call(), indent));
                    }
                }
                None => out.push_str(&make_room(
                    self.run_left,
                    self.streams.lanes,
                    self.streams.sums_in,
                    indent,
                )),
            }
        }
        self.run_left -= 1;
        let sums_in = self.streams.sums_in;
        out.push_str(&match self.static_runs {
            Some(_) => stage_slot((value, label), sums_in, indent),
            None => stage((word, value, label), sums_in, indent),
        });
    }

    pub(super) fn expr(&self, op: &Op, helpers: &mut BTreeSet<&'static str>) -> String {
        match op {
            Op::Input(_) | Op::Const(_) | Op::Int(_) | Op::Loop(_) | Op::Result(..) => {
                unreachable!("inputs, constants and loops are not lets")
            }
            Op::IntBin(o, a, b) => {
                format!("{} {} {}", self.operand(*a), o.symbol(), self.operand(*b))
            }
            Op::IntToF32(a) => format!("{}({})", self.precision.name(), self.operand(*a)),
            // The value; its derivative was given by the user (used by the AD passes).
            Op::CustomGrad { value, .. } => self.operand(*value),
            Op::ArrayGet { array, index } => self.array_get(*array, *index),
            Op::ArrayNew(_) | Op::ArraySet { .. } | Op::ArrayAdd(..) => {
                unreachable!("array values are written by emit_array_node")
            }
            Op::Cmp(c, a, b) => {
                let (a, b) = (*a, *b);
                // An operand whose NaN implies the other's needs no test of its own: the
                // other's test already makes the comparison false (or `!=` true).
                let operands = if a == b || nan_implies(self.f, a, b, NAN_IMPLIES_DEPTH) {
                    vec![b]
                } else if nan_implies(self.f, b, a, NAN_IMPLIES_DEPTH) {
                    vec![a]
                } else {
                    vec![a, b]
                };
                let may_be_nan: Vec<String> = operands
                    .into_iter()
                    .filter(|v| {
                        let node = self.f.node(*v);
                        node.ty.is_real()
                            && match node.op {
                                Op::Const(k) => k.is_nan(),
                                Op::IntToF32(_) => false,
                                _ => true,
                            }
                    })
                    .map(|v| self.operand(v))
                    .collect();
                if !may_be_nan.is_empty() {
                    helpers.insert("gf_is_nan");
                }
                comparison(*c, (&self.operand(a), &self.operand(b)), &may_be_nan)
            }
            Op::Not(a) => format!("!{}", self.operand(*a)),
            Op::And(a, b) => format!("{} && {}", self.operand(*a), self.operand(*b)),
            Op::Or(a, b) => format!("{} || {}", self.operand(*a), self.operand(*b)),
            Op::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                self.operand(*otherwise),
                self.operand(*then),
                self.operand(*cond)
            ),
            Op::Call(func, args) => {
                let a: Vec<String> = args.iter().map(|v| self.operand(*v)).collect();
                if let Func::Powi(n) = func {
                    return powi(&a[0], *n, self.precision, helpers);
                }
                match func.wgsl_in(self.precision) {
                    WgslForm::Infix(op) => format!("{} {op} {}", a[0], a[1]),
                    WgslForm::Prefix(op) => format!("{op}{}", a[0]),
                    WgslForm::Builtin(name) => format!("{name}({})", a.join(", ")),
                    WgslForm::Helper(name) => {
                        helpers.insert(name);
                        helpers.extend(wgsl_helper_deps(name, self.precision));
                        format!("{name}({})", a.join(", "))
                    }
                    WgslForm::Template(t) => {
                        let mut s = t.to_string();
                        for (i, x) in a.iter().enumerate() {
                            s = s.replace(&format!("{{{i}}}"), x);
                        }
                        s
                    }
                }
            }
        }
    }
}

/// For each node, whether it is the same for every element a thread computes: constants,
/// integers, inputs `inputs` says are, and what is computed from those alone (a loop's
/// results are per element: its carried values are).
pub(super) fn uniform_nodes(f: &Function, inputs: &[bool]) -> Vec<bool> {
    let mut u = vec![false; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        u[i] = match &node.op {
            Op::Const(_) | Op::Int(_) => true,
            Op::Input(w) => inputs.get(*w as usize) == Some(&true),
            Op::Loop(_) | Op::Result(..) => false,
            op => op.operands().iter().all(|v| u[v.index()]),
        };
    }
    u
}

/// `i * k` for the first vector of element `i`, or just `i`.
pub(super) fn scaled_index(k: u32) -> String {
    if k == 1 {
        "i".to_string()
    } else {
        format!("i * {k}u")
    }
}

/// `x.powi(n)`: small exponents as products (exact, like Rust's), others by the helper.
pub(super) fn powi(
    x: &str,
    n: i32,
    precision: Precision,
    helpers: &mut BTreeSet<&'static str>,
) -> String {
    match n {
        0 => float_literal(1.0, precision),
        1 => x.into(),
        2 => format!("{x} * {x}"),
        3 => format!("{x} * {x} * {x}"),
        -1 => format!("{} / {x}", float_literal(1.0, precision)),
        _ => {
            helpers.insert("gf_powi");
            format!("gf_powi({x}, {n})")
        }
    }
}

/// The f32 helper that computes a `sin` and a `cos` of one argument together.
const SINCOS_FN: &str = "gf_sincos";

/// The `sin(x)` and `cos(x)` nodes of `f` with one `x`, each mapped to the other (at most
/// one of each per `x`: the builder shares equal operations).
fn sincos_pairs(f: &Function) -> HashMap<usize, usize> {
    let mut sines = HashMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Call(Func::Sin, args) = &node.op {
            sines.insert(args[0], i);
        }
    }
    let mut pairs = HashMap::new();
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Call(Func::Cos, args) = &node.op
            && let Some(&s) = sines.get(&args[0])
        {
            pairs.insert(s, i);
            pairs.insert(i, s);
        }
    }
    pairs
}

/// How many `min`/`max`/sign calls [`nan_implies`] looks through: a running maximum's
/// tie test compares each step with the one before, so one is what it needs; a few more
/// cost nothing, and the bound keeps a DAG of such calls from being walked exponentially.
const NAN_IMPLIES_DEPTH: u32 = 4;

/// Whether `v` being NaN implies `other` is NaN, by what `v` is computed from: Rust's
/// `min` and `max` are NaN only where both arguments are, `-x`, `x.abs()` (and the
/// kernels' fresh copy of `x`) only where `x` is. A comparison with `other` then tests
/// only `other` for NaN: in shared_softmax_64's adjoint, the running maximum's 126 tie
/// tests `m_k == m_(k-1)`, `m_k == logits_k` each test one operand, not two, and those
/// tests were a third of its time on the H100 (BENCHMARKS.md).
fn nan_implies(f: &Function, v: ValueId, other: ValueId, depth: u32) -> bool {
    if v == other {
        return true;
    }
    if depth == 0 {
        return false;
    }
    match &f.node(v).op {
        Op::Call(Func::Max | Func::Min, args) if args.len() == 2 => {
            args.iter().any(|&x| nan_implies(f, x, other, depth - 1))
        }
        Op::Call(Func::Neg | Func::Abs | Func::Fresh, args) if args.len() == 1 => {
            nan_implies(f, args[0], other, depth - 1)
        }
        _ => false,
    }
}

/// The WGSL of the comparison `a c b` with Rust's meaning at NaN, where the operands
/// `may_be_nan` (real ones: loop indices are integers) may be NaN: `!=` true, every other
/// comparison false. Neither WGSL nor Vulkan promises that: naga writes `!=` as SPIR-V's
/// ordered `OpFOrdNotEqual` (false at NaN), and without SPIR-V's float controls (which
/// naga does not declare) a driver may assume there are no NaNs: NVIDIA's took `v >= v`
/// as true for a NaN `v`, and `c < v` as `!(v <= c)` (`tests/grammar_gpu.rs` on the H100).
/// So each operand that may be NaN is tested by its bits, which no such assumption folds
/// away.
pub(super) fn comparison(c: CmpOp, (a, b): (&str, &str), may_be_nan: &[String]) -> String {
    let mut out = format!("{a} {} {b}", c.symbol());
    for x in may_be_nan {
        out += &match c {
            CmpOp::Ne => format!(" || gf_is_nan({x})"),
            _ => format!(" && !gf_is_nan({x})"),
        };
    }
    out
}
