//! A loop of the IR as a WGSL `for`: its carried variables and tapes, its body's
//! context (the inputs it binds, the trips it groups for the streamed sums, the quads of
//! shared reads), and the assignments that close a trip. A child of `body.rs`: it extends
//! [`Ctx`] and reads its fields.

use super::Ctx;
use crate::emit_wgsl::quads::{loop_header, quad_reads};
use crate::emit_wgsl::streams::{GroupedLoop, TripSlots};
use crate::emit_wgsl::tape::{tape_index, tape_load, tape_store};
use crate::ir::{Function, IntFact, Loop, LoopInput, LoopKind, Op, ValueId, int_facts};
use crate::names::{Taken, element_name, fresh};
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;

impl Ctx<'_> {
    /// A loop: `var`s for its carried values, the loop, its body (inputs bound to the
    /// index, the carried values, the captures and the tape), the carried values updated;
    /// each element's carried values and tape its own.
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
        let (index, vars, streamed) = self.declare_loop(i, l, taken, indent, out);
        let (start, end) = (l.start, l.end);
        let owned = |w: u32| {
            matches!(
                l.input(w as usize),
                LoopInput::Carried(_) | LoopInput::Taped(_)
            )
        };
        let int_inputs: Vec<Option<IntFact>> = (0..body.num_inputs as usize)
            .map(|w| match l.input(w) {
                LoopInput::Index => Some(IntFact::between(start, end - 1)),
                LoopInput::Capture(j) => self.ints[l.captures[j].index()],
                LoopInput::Carried(_) | LoopInput::Taped(_) => None,
            })
            .collect();
        let mut bctx = Ctx::with_owned_inputs(body, taken, owned, int_facts(body, &int_inputs));
        bctx.precision = self.precision;
        bctx.shared_uniform = self.shared_uniform;
        bctx.row_lanes = self.row_lanes;
        bctx.streams = self.streams.bodies.remove(&i).unwrap_or_default();
        bctx.streams.sums_in = self.streams.sums_in;
        bctx.streams.lanes = self.streams.lanes;
        // A body that stages a few words a trip stages them by groups of trips.
        let slots = trip_slots(&bctx, l, self.streams.lanes);
        let group = slots.map(|_| fresh(taken, &format!("{index}_group")));
        let grouped = slots.zip(group.as_deref()).map(|(s, group)| {
            let reverse = matches!(l.kind, LoopKind::Reverse { .. });
            let index = index.as_str();
            (
                s,
                GroupedLoop {
                    index,
                    group,
                    start,
                    end,
                    reverse,
                },
            )
        });
        if slots.is_some_and(|s| s.distinct) {
            helpers.insert(crate::names::REDUCE_DISTINCT_FN);
        }
        // A loop reading shared words at consecutive indices runs by quads of trips.
        let quads = (grouped.is_none() && self.shared_uniform)
            .then(|| {
                let first = |j: usize| self.shared_array.get(&l.captures[j].index()).copied();
                quad_reads(l, &first, crate::abi::uniform_lanes(self.precision))
            })
            .flatten();
        let inner = match (&grouped, &quads) {
            (Some((s, g)), _) => {
                let (open, inner) = g.open(*s, self.streams.sums_in, self.streams.lanes, indent);
                out.push_str(&open);
                inner
            }
            (None, Some(q)) => {
                let (open, inner) = q.open(l, (&index, taken), &mut bctx.quad_reads, indent);
                out.push_str(&open);
                inner
            }
            (None, None) => {
                out.push_str(&loop_header(&index, (start, end), l.kind, indent));
                format!("{indent}    ")
            }
        };
        bctx.trip_slot = grouped.as_ref().map(|(s, g)| (g.slot(*s), 0));
        if self.elements > 1 {
            let uniform_inputs: Vec<bool> = (0..body.num_inputs as usize)
                .map(|w| match l.input(w) {
                    LoopInput::Index => true,
                    LoopInput::Capture(j) => self.uniform[l.captures[j].index()],
                    LoopInput::Carried(_) | LoopInput::Taped(_) => false,
                })
                .collect();
            bctx.set_elements(self.elements, &uniform_inputs, taken);
        }
        self.store_carried_on_tape(i, l, (&index, &vars), taken, &inner, out);
        for (e, vars) in vars.iter().enumerate() {
            bctx.element = e;
            self.element = e;
            self.bind_body_inputs(l, &mut bctx, (&index, vars), taken, &inner, out);
        }
        self.element = 0;
        bctx.element = 0;
        bctx.plan_shared_arrays();
        bctx.emit_nodes(taken, &inner, out, helpers);
        for (e, vars) in vars.iter().enumerate() {
            bctx.element = e;
            assign_outputs(&bctx, body, (vars, &streamed), taken, &inner, out);
        }
        let _ = writeln!(out, "{}}}", &inner[4..]);
        if let Some((s, g)) = &grouped {
            out.push_str(&g.close(*s, indent));
        }
        if quads.is_some() {
            let _ = writeln!(out, "{indent}}}");
        }
        self.carried.insert(i, vars);
    }

    /// Declares loop `i`'s carried variables for every element (but the streamed
    /// accumulators of the shared gradient, which have none) and, for a recording loop,
    /// its tapes; returns its index's name, each element's variables and the streamed
    /// carried values.
    fn declare_loop(
        &mut self,
        i: usize,
        l: &Loop,
        taken: &mut Taken,
        indent: &str,
        out: &mut String,
    ) -> (String, Vec<Vec<String>>, HashSet<usize>) {
        let body = &l.body;
        let c = l.init.len();
        let input_name = |w: usize, fallback: &str| {
            body.input_name(w as u32)
                .map_or_else(|| fallback.to_string(), crate::names::sanitize)
        };
        let index = fresh(taken, &input_name(0, "i"));
        let vars: Vec<Vec<String>> = (0..self.elements)
            .map(|e| {
                (0..c)
                    .map(|k| {
                        let base = format!("{}_next", input_name(1 + k, "carried"));
                        fresh(taken, &element_name(&base, e))
                    })
                    .collect()
            })
            .collect();
        let trip = l.trip_count();
        let what = self.loop_comment(i, l);
        let _ = writeln!(out, "{indent}// {trip} iterations{what}.");
        // Carried accumulators of the shared gradient are added into the workgroup's sums
        // instead: they have no variable.
        let streamed = self.streams.carried.remove(&i).unwrap_or_default();
        self.for_each_element(|ctx, e| {
            for (k, (var, init)) in vars[e].iter().zip(&l.init).enumerate() {
                if !streamed.contains(&k) {
                    let _ = writeln!(out, "{indent}var {var} = {};", ctx.operand(*init));
                }
            }
        });
        // An iteration's words of the tape.
        let (_, words) = self.f.tape_layout(ValueId(i as u32));
        if l.kind == LoopKind::Recording {
            let tapes: Vec<String> = (0..self.elements)
                .map(|e| fresh(taken, &element_name("tape", e)))
                .collect();
            for tape in &tapes {
                let _ = writeln!(
                    out,
                    "{indent}var {tape}: array<{}, {}>;",
                    self.precision.name(),
                    (trip as usize * words).max(1)
                );
            }
            self.tapes.insert(i, tapes);
        }
        (index, vars, streamed)
    }

    /// Stores each element's carried values that loop `i` records on its tape, at the
    /// trip's place (`index`), at the start of the body.
    fn store_carried_on_tape(
        &self,
        i: usize,
        l: &Loop,
        (index, vars): (&str, &[Vec<String>]),
        taken: &mut Taken,
        inner: &str,
        out: &mut String,
    ) {
        // Where each recorded carried value sits in an iteration's words of the tape.
        let (offsets, words) = self.f.tape_layout(ValueId(i as u32));
        let start = l.start;
        if let Some(tapes) = self.tapes.get(&i) {
            for (tape, vars) in tapes.iter().zip(vars) {
                for (var, k, offset) in vars
                    .iter()
                    .enumerate()
                    .filter_map(|(k, var)| offsets[k].map(|offset| (var, k, offset)))
                {
                    let at = tape_index(index, start, words, offset);
                    let store =
                        tape_store(tape, &at, var, (l.carried_ty(k), self.precision), taken);
                    let _ = writeln!(out, "{inner}{store}");
                }
            }
        }
    }

    /// Binds loop `l`'s body inputs in `bctx` for the element being written: `names` are
    /// the loop's index and the element's carried `var`s; taped values are loaded into
    /// `let`s.
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
            LoopKind::Reverse { tape, .. } => self
                .tapes
                .get(&tape.index())
                .map(|t| (t[self.element].clone(), tape)),
            _ => None,
        };
        // Inputs read the index, the carried `var`s and the captures by their own names
        // (the body computes everything before the carried values change); taped values
        // are read into `let`s.
        let used = l.body.used_inputs();
        for (n, node) in l.body.nodes.iter().enumerate() {
            let Op::Input(w) = node.op else { continue };
            let w = w as usize;
            // A uniform input is the same name for every element: bound once.
            if !used[w] || (self.element > 0 && bctx.uniform[n]) {
                continue;
            }
            match l.input(w) {
                LoopInput::Index => bctx.set_name(n, index.to_string()),
                LoopInput::Carried(k) => bctx.set_name(n, vars[k].clone()),
                LoopInput::Capture(j) => {
                    let outer = l.captures[j];
                    bctx.set_name(n, self.operand(outer));
                    if let Some(k) = self.shared_word.get(&outer.index()) {
                        bctx.shared_word.insert(n, *k);
                    }
                    if let Some(k) = self.shared_array.get(&outer.index()) {
                        bctx.shared_array.insert(n, *k);
                    }
                    if let Some(k) = self.element_array.get(&outer.index()) {
                        bctx.element_array.insert(n, *k);
                    }
                }
                LoopInput::Taped(k) => {
                    let (tape, tape_loop) = taped_from.clone().expect("a reverse loop");
                    let Op::Loop(tl) = &self.f.node(tape_loop).op else {
                        unreachable!("a tape belongs to a loop")
                    };
                    let (toffsets, twords) = self.f.tape_layout(tape_loop);
                    let offset = toffsets[k].expect("a taped value read is recorded");
                    let at = tape_index(index, l.start, twords, offset);
                    let ty = tl.carried_ty(k);
                    out.push_str(&tape_load(
                        &tape,
                        &at,
                        bctx.name(n),
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
    fn loop_comment(&self, i: usize, l: &Loop) -> String {
        let (c, trip) = (l.init.len(), l.trip_count());
        let (offsets, words) = self.f.tape_layout(ValueId(i as u32));
        let recorded = offsets.iter().flatten().count();
        match l.kind {
            LoopKind::Forward => "".to_string(),
            LoopKind::Recording => format!(
                "; it records {recorded} of its {c} carried values at every iteration for the \
                 reverse pass (a tape of {trip} x {words} words: recording costs memory, \
                 recomputing would cost a pass per iteration)"
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

/// Assigns the element's body outputs to its carried variables at the end of a trip (but
/// the `streamed` ones, added into the workgroup's sums instead).
fn assign_outputs(
    bctx: &Ctx,
    body: &Function,
    (vars, streamed): (&[String], &HashSet<usize>),
    taken: &mut Taken,
    inner: &str,
    out: &mut String,
) {
    let (outs, kept): (Vec<String>, Vec<String>) = body
        .outputs
        .iter()
        .zip(vars)
        .enumerate()
        .filter(|(k, _)| !streamed.contains(k))
        .map(|(_, (o, var))| (bctx.operand(*o), var.clone()))
        .unzip();
    assign_carried(&outs, &kept, taken, inner, out);
}

/// The groups of trips by which loop `l`'s body stages the few words a trip it streams, if
/// it does ([`crate::emit_wgsl::streams`]), whose words are told distinct where they can be.
fn trip_slots(bctx: &Ctx, l: &Loop, lanes: u32) -> Option<TripSlots> {
    let body = &l.body;
    bctx.streams
        .trip_slots(body, l.trip_count(), lanes)
        .map(|s| {
            let in_range =
                |v: ValueId, n: u32| bctx.ints[v.index()].is_some_and(|x| x.within(n as usize));
            let invariant = |w: u32| matches!(l.input(w as usize), LoopInput::Capture(_));
            let distinct = bctx.streams.distinct_words(body, &in_range, &invariant);
            TripSlots { distinct, ..s }
        })
}
