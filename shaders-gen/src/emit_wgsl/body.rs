//! The statements of a kernel: one `let` per IR node, loops, and the WGSL expression of
//! every operation.

use super::float_literal;
use super::streams::{Streams, make_room, stage};
use super::tape::{tape_index, tape_load, tape_store};
use crate::ir::{Function, InPlace, Loop, LoopInput, LoopKind, Op, Ty, ValueId, in_place};
use crate::names::Taken;
use crate::names::{fresh, local_names_with};
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
    /// For each loop node: the `var`s holding its carried values.
    pub(super) carried: HashMap<usize, Vec<String>>,
    /// For each recording loop node: its tape.
    pub(super) tapes: HashMap<usize, String>,
    /// Values that are a `#[shared]` word (by node): an index into consecutive ones reads
    /// `shared_args` directly instead of building an array.
    pub(super) shared_word: HashMap<usize, u32>,
    /// Arrays of consecutive `#[shared]` words only read word by word (by node): their
    /// reads index `shared_args` from this word on, and they are never built.
    pub(super) shared_array: HashMap<usize, u32>,
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
    /// Shared gradients added straight into the workgroup's sums (see `streams`).
    pub(super) streams: Streams,
    /// Stages left in the run the stage last made room for.
    run_left: u32,
}

impl<'a> Ctx<'a> {
    /// The context of a kernel's function (its inputs are words, never arrays).
    pub(super) fn new(f: &'a Function, taken: &mut Taken) -> Self {
        Self::with_owned_inputs(f, taken, |_| false)
    }

    /// The context of a function whose inputs `owned(w)` may be updated in place.
    fn with_owned_inputs(f: &'a Function, taken: &mut Taken, owned: impl Fn(u32) -> bool) -> Self {
        Ctx {
            f,
            names: local_names_with(f, taken),
            carried: HashMap::new(),
            tapes: HashMap::new(),
            shared_word: HashMap::new(),
            shared_array: HashMap::new(),
            shared_uniform: false,
            precision: Precision::F32,
            inplace: in_place(f, owned),
            after: HashMap::new(),
            skip: HashSet::new(),
            streams: Streams::default(),
            run_left: 0,
        }
    }

    pub(super) fn operand(&self, v: ValueId) -> String {
        match self.f.node(v).op {
            Op::Const(c) => float_literal(c, self.precision),
            Op::Int(k) => format!("{k}i"),
            _ => self.names[v.index()].clone(),
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
                    let add = &self.streams.adds[&i];
                    let word = self.shared_word_at(add.base, add.index, add.len as usize);
                    let (value, label) = (self.operand(add.value), format!("{}[..]", add.label));
                    self.emit_stage((i, 0), &word, &value, &label, indent, out);
                }
                Op::Input(_) | Op::Const(_) | Op::Int(_) => {}
                Op::Loop(l) => {
                    debug_assert_eq!(self.run_left, 0, "a run of stages ends before a loop");
                    self.emit_loop(i, l, taken, indent, out, helpers)
                }
                Op::Result(l, k) => {
                    let var = self.carried[&l.index()][*k as usize].clone();
                    if let Ty::Array(_) = node.ty {
                        // The loop is over: its variable is this value's own.
                        self.names[i] = var;
                    } else {
                        let _ = writeln!(out, "{indent}let {} = {var};", self.names[i]);
                    }
                }
                _ if matches!(node.ty, Ty::Array(_)) => {
                    self.emit_array_node(i, taken, indent, out);
                }
                op => {
                    let e = self.expr(op, helpers);
                    let _ = writeln!(out, "{indent}let {} = {e};", self.names[i]);
                }
            }
            if let Some(after) = self.after.remove(&i) {
                out.push_str(&after.replace(THIS_VALUE, &self.names[i]));
            }
            let staged = self.streams.words.get(&i).cloned().unwrap_or_default();
            for (done, (word, label)) in staged.iter().enumerate() {
                let value = self.operand(ValueId(i as u32));
                self.emit_stage((i, done as u32), word, &value, label, indent, out);
            }
        }
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
        if self.run_left == 0 {
            self.run_left = self.streams.segment(self.f, at.0, at.1);
            out.push_str(&make_room(
                self.run_left,
                self.streams.lanes,
                self.streams.owned,
                indent,
            ));
        }
        self.run_left -= 1;
        out.push_str(&stage(word, value, label, indent));
    }

    /// A loop: `var`s for its carried values, the loop, its body (inputs bound to the
    /// index, the carried values, the captures and the tape), the carried values updated.
    pub(super) fn emit_loop(
        &mut self,
        i: usize,
        l: &Loop,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        let body = &l.body;
        let c = l.init.len();
        let input_name = |w: usize, fallback: &str| {
            body.input_name(w as u32)
                .map_or_else(|| fallback.to_string(), crate::names::sanitize)
        };
        let index = fresh(taken, &input_name(0, "i"));
        let vars: Vec<String> = (0..c)
            .map(|k| fresh(taken, &format!("{}_next", input_name(1 + k, "carried"))))
            .collect();
        let trip = l.trip_count();
        let what = self.loop_comment(l);
        let _ = writeln!(out, "{indent}// {trip} iterations{what}.");
        // Carried accumulators of the shared gradient are added into the workgroup's sums
        // instead: they have no variable.
        let streamed = self.streams.carried.remove(&i).unwrap_or_default();
        for (k, (var, init)) in vars.iter().zip(&l.init).enumerate() {
            if !streamed.contains(&k) {
                let _ = writeln!(out, "{indent}var {var} = {};", self.operand(*init));
            }
        }
        // Where each carried value sits in an iteration's words of the tape.
        let (offsets, words) = l.tape_layout();
        if l.kind == LoopKind::Recording {
            let tape = fresh(taken, "tape");
            let _ = writeln!(
                out,
                "{indent}var {tape}: array<{}, {}>;",
                self.precision.name(),
                (trip as usize * words).max(1)
            );
            self.tapes.insert(i, tape);
        }
        let (start, end) = (l.start, l.end);
        match l.kind {
            LoopKind::Reverse { .. } => {
                let _ = writeln!(
                    out,
                    "{indent}for (var {index}: i32 = {}i; {index} >= {start}i; {index}--) {{",
                    end - 1
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{indent}for (var {index}: i32 = {start}i; {index} < {end}i; {index}++) {{"
                );
            }
        }
        let inner = format!("{indent}    ");
        let owned = |w: u32| {
            matches!(
                l.input(w as usize),
                LoopInput::Carried(_) | LoopInput::Taped(_)
            )
        };
        let mut bctx = Ctx::with_owned_inputs(body, taken, owned);
        bctx.precision = self.precision;
        bctx.shared_uniform = self.shared_uniform;
        bctx.streams = self.streams.bodies.remove(&i).unwrap_or_default();
        bctx.streams.owned = self.streams.owned;
        bctx.streams.lanes = self.streams.lanes;
        if let Some(tape) = self.tapes.get(&i) {
            for (k, var) in vars.iter().enumerate() {
                let at = tape_index(&index, start, words, offsets[k]);
                let store = tape_store(tape, &at, var, (l.carried_ty(k), self.precision), taken);
                let _ = writeln!(out, "{inner}{store}");
            }
        }
        self.bind_body_inputs(l, &mut bctx, (&index, &vars), taken, &inner, out);
        bctx.plan_shared_arrays();
        bctx.emit_nodes(taken, &inner, out, helpers);
        let (outs, kept): (Vec<String>, Vec<String>) = body
            .outputs
            .iter()
            .zip(&vars)
            .enumerate()
            .filter(|(k, _)| !streamed.contains(k))
            .map(|(_, (o, var))| (bctx.operand(*o), var.clone()))
            .unzip();
        assign_carried(&outs, &kept, taken, &inner, out);
        let _ = writeln!(out, "{indent}}}");
        self.carried.insert(i, vars);
    }

    /// Binds loop `l`'s body inputs in `bctx`: `names` are the loop's index and carried
    /// `var`s; taped values are loaded into `let`s.
    fn bind_body_inputs(
        &self,
        l: &Loop,
        bctx: &mut Ctx,
        names: (&str, &[String]),
        taken: &mut Taken,
        inner: &str,
        out: &mut String,
    ) {
        let (index, vars) = names;
        // The body's inputs: [i, carried..., captures..., taped...].
        let taped_from = match l.kind {
            // No tape when the body reads no taped value (the forward loop did not record).
            LoopKind::Reverse { tape, .. } => {
                self.tapes.get(&tape.index()).map(|t| (t.clone(), tape))
            }
            _ => None,
        };
        // Inputs read the index, the carried `var`s and the captures by their own names
        // (the body computes everything before the carried values change); taped values
        // are read into `let`s.
        let used = l.body.used_inputs();
        for (n, node) in l.body.nodes.iter().enumerate() {
            let Op::Input(w) = node.op else { continue };
            let w = w as usize;
            if !used[w] {
                continue;
            }
            match l.input(w) {
                LoopInput::Index => bctx.names[n] = index.to_string(),
                LoopInput::Carried(k) => bctx.names[n] = vars[k].clone(),
                LoopInput::Capture(j) => {
                    let outer = l.captures[j];
                    bctx.names[n] = self.operand(outer);
                    if let Some(k) = self.shared_word.get(&outer.index()) {
                        bctx.shared_word.insert(n, *k);
                    }
                    if let Some(k) = self.shared_array.get(&outer.index()) {
                        bctx.shared_array.insert(n, *k);
                    }
                }
                LoopInput::Taped(k) => {
                    let (tape, tape_loop) = taped_from.clone().expect("a reverse loop");
                    let Op::Loop(tl) = &self.f.node(tape_loop).op else {
                        unreachable!("a tape belongs to a loop")
                    };
                    let (toffsets, twords) = tl.tape_layout();
                    let at = tape_index(index, l.start, twords, toffsets[k]);
                    let ty = tl.carried_ty(k);
                    out.push_str(&tape_load(
                        &tape,
                        &at,
                        &bctx.names[n],
                        (ty, self.precision),
                        taken,
                        inner,
                    ));
                }
            }
        }
    }

    /// What the loop's header comment says after its trip count: what it records, or
    /// what its reverse reads.
    fn loop_comment(&self, l: &Loop) -> String {
        let (c, trip, words) = (l.init.len(), l.trip_count(), l.tape_layout().1);
        match l.kind {
            LoopKind::Forward => "".to_string(),
            LoopKind::Recording => format!(
                "; it records its {c} carried values at every iteration for the reverse pass \
                 (a tape of {trip} x {words} words: recording costs memory, recomputing would \
                 cost a pass per iteration)"
            ),
            LoopKind::Reverse { tape, .. } if self.tapes.contains_key(&tape.index()) => {
                "; the adjoint of a loop: iterations in reverse, each iteration's carried \
                 values read from the forward loop's tape"
                    .to_string()
            }
            LoopKind::Reverse { .. } => "; the adjoint of a loop: iterations in reverse \
                 (its body needs none of the forward loop's carried values: nothing recorded)"
                .to_string(),
        }
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
            Op::Cmp(c, a, b) => format!("{} {} {}", self.operand(*a), c.symbol(), self.operand(*b)),
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

/// The carried `var`s take the body's outputs at the end of an iteration.
fn assign_carried(
    outs: &[String],
    vars: &[String],
    taken: &mut Taken,
    inner: &str,
    out: &mut String,
) {
    // An output that is a carried value itself must be read before any is assigned.
    if outs
        .iter()
        .zip(vars)
        .any(|(o, v)| o != v && vars.contains(o))
    {
        let temps: Vec<String> = vars
            .iter()
            .map(|v| fresh(taken, &format!("{v}_new")))
            .collect();
        for (t, o) in temps.iter().zip(outs) {
            let _ = writeln!(out, "{inner}let {t} = {o};");
        }
        for (var, t) in vars.iter().zip(&temps) {
            let _ = writeln!(out, "{inner}{var} = {t};");
        }
    } else {
        for (var, o) in vars.iter().zip(outs) {
            if var != o {
                let _ = writeln!(out, "{inner}{var} = {o};");
            }
        }
    }
}
