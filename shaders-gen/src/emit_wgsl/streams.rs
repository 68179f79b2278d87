//! Shared gradients streamed into the workgroup's sums as they are computed, instead of
//! summed per thread.
//!
//! A large `#[shared]` array's gradient, summed per thread, costs every thread an array of
//! all its words: past a few thousand words that no longer fits a thread's memory, and well
//! before that it spills. But the reverse pass computes that gradient as a chain of adds
//! into an array of zeros (`d = d with [k] = d[k] + v`, through loops as a carried value),
//! and where every `k` is the same on all threads (built from constants and loop indices
//! only) the workgroup can sum each add over its threads at once: each thread writes `v`
//! into one slot of `reduce_stage`, and every 8 adds (4 in f64: the stage's slots) the
//! workgroup sums the slots in a fixed order and the thread owning each word adds the sum
//! into the workgroup's row of partials. No per-thread array, the same bits on every run,
//! no atomics. Where every word's sum fits in workgroup memory ([`SumsIn::Workgroup`]), the
//! stage has 32 slots (16 in f64) and each slot's thread adds its sum there instead, so
//! that no thread looks through the slots for its words.
//!
//! A gradient word computed as a value of its own (an unrolled loop's) is staged the same
//! way right after it. [`accumulator`] recognizes a chain; the statements' emitter writes
//! its adds and the staged words in runs of up to a stage's slots ([`Streams::segment`]):
//! before each run one check that the stage has room, so the workgroup sum is called once
//! per run, not once per add.
//!
//! A kept loop whose trips stage a few words each ([`TripSlots`]) runs by groups of trips:
//! trip `t` of a group writes its slots at `stage_count + t * per_trip`, the room made
//! once a group, the count moved once after it; where every trip adds one word of its own
//! (`distinct`), the group is summed as soon as it ends, without looking for repeats.

use crate::abi;
use crate::ir::{Function, LoopKind, Op, ValueId, stride_in_index};
use crate::names::{REDUCE_DISTINCT_FN, REDUCE_STAGE_FN};
use crate::ops::Func;
use std::collections::{HashMap, HashSet};

/// One add of an accumulator chain, written as a stage statement.
#[derive(Clone, Debug)]
pub(super) struct StreamAdd {
    /// The shared word of the array's word 0.
    pub base: u32,
    /// The array's length (indices are clamped into it, like any array index).
    pub len: u32,
    /// The index added at, the same on every thread.
    pub index: ValueId,
    /// What is added.
    pub value: ValueId,
    /// The array's name in comments.
    pub label: String,
}

/// A factor a loop body records in every trip, in place of the staged adds it multiplies
/// (see `outer_sums`).
#[derive(Clone, Debug)]
pub(super) struct Record {
    /// Element 0's per-thread array.
    pub name: String,
    /// The loop's first index (trip `j` writes word `j - start`).
    pub start: i64,
}

/// The accumulators of one function (a kernel's, or a loop body's).
#[derive(Clone, Debug, Default)]
pub(super) struct Streams {
    /// Array updates written as stage statements, by node.
    pub adds: HashMap<usize, StreamAdd>,
    /// Nodes whose own value is staged right after them: `(word, label)`, `word` the
    /// shared word it adds into.
    pub words: HashMap<usize, Vec<(u32, String)>>,
    /// Nodes of the chains that are not written at all: the arrays, their reads.
    pub skip: HashSet<usize>,
    /// For each loop node: its carried values that are accumulators (they get no `var`).
    pub carried: HashMap<usize, HashSet<usize>>,
    /// The accumulators of each loop's body, by loop node.
    pub bodies: HashMap<usize, Streams>,
    /// Factors recorded right after their node, by node (a loop body's).
    pub records: HashMap<usize, Record>,
    /// Where the workgroup's sums of the staged slots go.
    pub sums_in: SumsIn,
    /// Slots of the stage ([`abi::reduce_lanes`] of the kernel's precision, or
    /// [`abi::wide_stage_slots`] for [`SumsIn::Workgroup`]).
    pub lanes: u32,
}

/// Where a kernel adds the workgroup's sums of its staged slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SumsIn {
    /// Each word's owner (thread `w % 256`) adds it into the workgroup's row of partials.
    #[default]
    Row,
    /// Each word's owner keeps its sum in a function-scope array (`owned_sums`, see
    /// [`abi::MAX_OWNED_SUMS`]), stored into the row at the end.
    Owned,
    /// The workgroup keeps every word's sum in workgroup memory (`word_sums`, see
    /// [`abi::MAX_WORKGROUP_SUMS_BYTES`]); the stage is wide and each slot's sum is added
    /// by a thread of its own.
    Workgroup,
}

impl SumsIn {
    /// Slots of the stage: words the workgroup sums at once.
    pub fn slots(self, precision: crate::signature::Precision) -> u32 {
        match self {
            SumsIn::Workgroup => abi::wide_stage_slots(precision),
            _ => abi::reduce_lanes(precision),
        }
    }

    /// Lanes between two slots of the stage.
    pub fn stride(self) -> u32 {
        match self {
            SumsIn::Workgroup => abi::WIDE_STAGE_STRIDE,
            _ => abi::WORKGROUP_SIZE,
        }
    }
}

impl Streams {
    /// Adds another function's accumulators to these.
    pub fn merge(&mut self, other: Streams) {
        self.adds.extend(other.adds);
        for (i, w) in other.words {
            self.words.entry(i).or_default().extend(w);
        }
        self.skip.extend(other.skip);
        for (l, ks) in other.carried {
            self.carried.entry(l).or_default().extend(ks);
        }
        self.records.extend(other.records);
        for (l, body) in other.bodies {
            self.bodies.entry(l).or_default().merge(body);
        }
    }

    /// How many stages node `i` writes.
    pub(super) fn stages_at(&self, i: usize) -> u32 {
        self.adds.contains_key(&i) as u32 + self.words.get(&i).map_or(0, |w| w.len() as u32)
    }

    /// The stages of a run that starts at node `i` of `f` after its first `done`: up to
    /// [`Streams::lanes`], up to the next loop (which stages its own).
    pub fn segment(&self, f: &Function, i: usize, done: u32) -> u32 {
        let mut n = 0;
        for (j, node) in f.nodes.iter().enumerate().skip(i) {
            if matches!(node.op, Op::Loop(_)) || n >= self.lanes + done {
                break;
            }
            n += self.stages_at(j);
        }
        (n - done).min(self.lanes)
    }
}

/// Where a chain begins.
enum Start {
    /// An array of zeros.
    Zeros,
    /// The function's input `w` (a loop body's carried value).
    Input(u32),
}

/// The accumulator chain that computes `d`, the whole gradient of the shared array
/// `label` of `len` words from shared word `base` on, if `d` is one: a chain of adds at
/// indices the same on every thread, starting from zeros, through loops, read by nothing
/// but the chain and the kernel's outputs `outputs` (its words in order).
pub(super) fn accumulator(
    f: &Function,
    d: ValueId,
    outputs: &[ValueId],
    base: u32,
    label: &str,
) -> Option<Streams> {
    let readers = reader_counts(f);
    // Each output word is `d[k]`, read by the outputs only.
    if readers[d.index()] as usize != outputs.len()
        || outputs.iter().any(|o| readers[o.index()] != 1)
    {
        return None;
    }
    let uniform = uniform_ints(f, &vec![false; f.num_inputs as usize]);
    let len = outputs.len() as u32;
    let mut s = Streams::default();
    let chain = Chain { base, len, label };
    match chain.walk(f, d, &uniform, &readers, &mut s)? {
        Start::Zeros => Some(s),
        Start::Input(_) => None,
    }
}

/// Whether `v` is an array of zeros, where a chain of adds may start.
fn is_zeros(f: &Function, v: ValueId) -> bool {
    let zero = |w: &ValueId| matches!(f.node(*w).op, Op::Const(c) if c == 0.0);
    matches!(&f.node(v).op, Op::ArrayNew(words) if words.iter().all(zero))
}

/// What every add of one chain shares.
struct Chain<'a> {
    base: u32,
    len: u32,
    label: &'a str,
}

impl Chain<'_> {
    /// Walks the chain back from `v` (whose readers the caller checked) to its start,
    /// recording its adds and arrays in `s`.
    fn walk(
        &self,
        f: &Function,
        mut v: ValueId,
        uniform: &[bool],
        readers: &[u32],
        s: &mut Streams,
    ) -> Option<Start> {
        // How many of `v`'s readers are this chain's (the caller checked the first `v`'s).
        let mut own = readers[v.index()];
        loop {
            match &f.node(v).op {
                Op::ArrayNew(_) => {
                    if !is_zeros(f, v) {
                        return None;
                    }
                    // Other chains, or other values, may start from the same zeros (value
                    // numbering merges equal arrays: a deep network's layers of one size):
                    // those keep it.
                    if readers[v.index()] == own {
                        s.skip.insert(v.index());
                    }
                    return Some(Start::Zeros);
                }
                Op::Input(w) => return Some(Start::Input(*w)),
                Op::ArraySet {
                    array,
                    index,
                    value,
                } => {
                    let (a, k) = (*array, *index);
                    // `a` is read by this add's read and by the update, nothing else (or is
                    // zeros, which other chains may start from too).
                    let alone = readers[a.index()] == 2 || is_zeros(f, a);
                    if !uniform[k.index()] || !alone || readers[value.index()] != 1 {
                        return None;
                    }
                    let Op::Call(Func::Add, terms) = &f.node(*value).op else {
                        return None;
                    };
                    let is_read = |x: ValueId| {
                        readers[x.index()] == 1
                            && matches!(f.node(x).op, Op::ArrayGet { array, index }
                                if array == a && same_index(f, index, k))
                    };
                    let (read, added) = match (terms[0], terms[1]) {
                        (r, x) if is_read(r) => (r, x),
                        (x, r) if is_read(r) => (r, x),
                        _ => return None,
                    };
                    s.adds.insert(
                        v.index(),
                        StreamAdd {
                            base: self.base,
                            len: self.len,
                            index: k,
                            value: added,
                            label: self.label.to_string(),
                        },
                    );
                    s.skip.extend([read.index(), value.index()]);
                    // The add's read and the update.
                    (v, own) = (a, 2);
                }
                Op::Result(l, k) => {
                    s.skip.insert(v.index());
                    v = self.through_loop(f, *l, *k as usize, uniform, s)?;
                    if readers[v.index()] != 1 && !is_zeros(f, v) {
                        return None;
                    }
                    // The loop's initial value.
                    own = 1;
                }
                _ => return None,
            }
        }
    }

    /// The chain through loop `l`'s carried value `k`: its body's chain from the carried
    /// input to the body's output; returns the loop's initial value, where the chain goes on.
    fn through_loop(
        &self,
        f: &Function,
        l: ValueId,
        k: usize,
        uniform: &[bool],
        s: &mut Streams,
    ) -> Option<ValueId> {
        let Op::Loop(lp) = &f.node(l).op else {
            return None;
        };
        // A recording loop would tape the array; reverse passes never carry one there.
        if lp.kind == LoopKind::Recording {
            return None;
        }
        let body = &lp.body;
        let c = lp.init.len();
        let mut inputs = vec![false; body.num_inputs as usize];
        inputs[0] = true;
        for (j, cap) in lp.captures.iter().enumerate() {
            inputs[1 + c + j] = uniform[cap.index()];
        }
        let body_uniform = uniform_ints(body, &inputs);
        let body_readers = reader_counts(body);
        let out = body.outputs[k];
        if body_readers[out.index()] != 1 {
            return None;
        }
        let mut bs = s.bodies.remove(&l.index()).unwrap_or_default();
        let start = self.walk(body, out, &body_uniform, &body_readers, &mut bs);
        s.bodies.insert(l.index(), bs);
        match start? {
            Start::Input(w) if w as usize == 1 + k => {}
            _ => return None,
        }
        s.carried.entry(l.index()).or_default().insert(k);
        Some(lp.init[k])
    }
}

/// How many times each node is read, by nodes and by the outputs.
pub(super) fn reader_counts(f: &Function) -> Vec<u32> {
    let mut n = vec![0u32; f.nodes.len()];
    for node in &f.nodes {
        for v in node.op.operands() {
            n[v.index()] += 1;
        }
    }
    for o in &f.outputs {
        n[o.index()] += 1;
    }
    n
}

/// For each node, whether it is an integer the same on every thread: constants, loop
/// indices and arithmetic on them (`inputs`: which inputs are).
fn uniform_ints(f: &Function, inputs: &[bool]) -> Vec<bool> {
    let mut u = vec![false; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        u[i] = match node.op {
            Op::Int(_) => true,
            Op::IntBin(_, a, b) => u[a.index()] && u[b.index()],
            Op::Input(w) => inputs.get(w as usize) == Some(&true),
            _ => false,
        };
    }
    u
}

/// Whether two integers are the same value.
fn same_index(f: &Function, a: ValueId, b: ValueId) -> bool {
    a == b || matches!((&f.node(a).op, &f.node(b).op), (Op::Int(x), Op::Int(y)) if x == y)
}

/// The check before a run of `run` stages: if the stage lacks room, the workgroup sums
/// what it holds.
pub(super) fn make_room(run: u32, lanes: u32, sums_in: SumsIn, indent: &str) -> String {
    sum_past(lanes - run, &sum_stage(sums_in), indent)
}

/// The statement that calls `sum` (a workgroup sum of the stage) and empties the stage
/// where it holds more than `count` slots.
pub(super) fn sum_past(count: u32, sum: &str, indent: &str) -> String {
    format!("{indent}if (stage_count > {count}u) {{ {sum}; stage_count = 0u; }}\n")
}

/// The call that sums the stage's slots over the workgroup and adds them to their words.
pub(super) fn sum_stage(sums_in: SumsIn) -> String {
    match sums_in {
        SumsIn::Owned => format!("{REDUCE_STAGE_FN}(lid, stage_words, stage_count, &owned_sums)"),
        SumsIn::Row => format!("{REDUCE_STAGE_FN}(lid, group, stage_words, stage_count)"),
        SumsIn::Workgroup => format!("{REDUCE_STAGE_FN}(lid, stage_words, stage_count)"),
    }
}

/// The statement that stages `value` as an add into shared word `word` (a WGSL `u32`
/// expression), in a run [`make_room`] made room for.
pub(super) fn stage(
    (word, value, label): (&str, &str, &str),
    sums_in: SumsIn,
    indent: &str,
) -> String {
    let staged = slot_writes("stage_count", (word, value), sums_in);
    format!("{indent}{staged} stage_count++; // d/d {label}\n")
}

/// The statement that stages `value` as an add into the word the kernel knows the slot
/// holds (`static_runs`): no word written beside it.
pub(super) fn stage_slot((value, label): (&str, &str), sums_in: SumsIn, indent: &str) -> String {
    let stride = sums_in.stride();
    format!(
        "{indent}reduce_stage[stage_count * {stride}u + lid] = {value}; stage_count++; // d/d {label}\n"
    )
}

/// The writes of `value` into slot `slot` of the stage and of `word` into the slot's word.
fn slot_writes(slot: &str, (word, value): (&str, &str), sums_in: SumsIn) -> String {
    let stride = sums_in.stride();
    let at = if slot.contains(' ') {
        format!("({slot})")
    } else {
        slot.to_string()
    };
    format!("reduce_stage[{at} * {stride}u + lid] = {value}; stage_words[{slot}] = {word};")
}

/// The statement that stages `value` as an add into shared word `word` at slot `slot` (a
/// WGSL `u32` expression), in a loop whose trips stage at slots fixed by the trip
/// ([`TripSlots`]): no count to move.
pub(super) fn stage_at(
    slot: &str,
    (word, value, label): (&str, &str, &str),
    sums_in: SumsIn,
    indent: &str,
) -> String {
    let staged = slot_writes(slot, (word, value), sums_in);
    format!("{indent}{staged} // d/d {label}\n")
}

/// A kept loop whose every trip stages the same few words, none in a loop of its own: its
/// trips stage at slots fixed by the trip, `group` trips to one workgroup sum. The loop
/// runs by groups of trips (an outer loop over groups where it has more trips than a
/// group), the room made once a group: no check for room in every trip, no count moved in
/// it. On the H100 a 1,024-word table's gradient, checked and counted in every trip, took
/// 75.5 ms at 2^24, and 19.5 ms summed by groups of 32 trips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TripSlots {
    /// Stages each trip writes.
    pub per_trip: u32,
    /// Trips staged between two workgroup sums.
    pub group: u32,
    /// Whether a group's words are all different, so that the workgroup sums them, from
    /// an empty stage, without looking for repeats: one add a trip into the workgroup's
    /// sums, at an index in range that moves with the trip. On the H100,
    /// `shared_table_1024`'s adjoint at 2^24 took 23.9 ms looking, 20.3 ms not.
    pub distinct: bool,
}

impl Streams {
    /// How a loop of `trips` trips over `body` (whose accumulators these are) stages, where
    /// its trips can stage at fixed slots.
    /// `lanes`: the stage's slots.
    pub fn trip_slots(&self, body: &Function, trips: i64, lanes: u32) -> Option<TripSlots> {
        if body.nodes.iter().any(|n| matches!(n.op, Op::Loop(_))) {
            return None;
        }
        let per_trip: u32 = (0..body.nodes.len()).map(|j| self.stages_at(j)).sum();
        (per_trip > 0 && per_trip <= lanes && trips > 0).then(|| TripSlots {
            per_trip,
            group: (lanes / per_trip).min(u32::try_from(trips).unwrap_or(u32::MAX)),
            distinct: false,
        })
    }

    /// Whether each trip of a loop over `body` stages one add only, into workgroup sums,
    /// at an index that `in_range` (proven in the array, never clamped) and that moves with
    /// the loop's index (`invariant` inputs are the same in every trip): different words
    /// in different trips.
    pub fn distinct_words(
        &self,
        body: &Function,
        in_range: &dyn Fn(ValueId, u32) -> bool,
        invariant: &dyn Fn(u32) -> bool,
    ) -> bool {
        let mut adds = self.adds.values();
        let (Some(add), None) = (adds.next(), adds.next()) else {
            return false;
        };
        self.sums_in == SumsIn::Workgroup
            && self.words.is_empty()
            && in_range(add.index, add.len)
            && stride_in_index(body, add.index, invariant).is_some_and(|k| k != 0)
    }
}

/// Where a loop's trips and its groups run: `index` from `start` to `end` (exclusive),
/// down where `reverse`, `group` the variable of the group's first trip.
pub(super) struct GroupedLoop<'a> {
    pub index: &'a str,
    pub group: &'a str,
    pub start: i64,
    pub end: i64,
    pub reverse: bool,
}

impl GroupedLoop<'_> {
    /// Whether the loop needs an outer loop over its groups.
    fn grouped(&self, slots: TripSlots) -> bool {
        (self.end - self.start) > i64::from(slots.group)
    }

    /// The lines that open the loop at `indent`: the loop over the groups (where there
    /// are several), the room for a group, and the loop over a group's trips; and the
    /// indent of that loop's statements.
    pub fn open(
        &self,
        slots: TripSlots,
        sums_in: SumsIn,
        lanes: u32,
        indent: &str,
    ) -> (String, String) {
        let (index, g, start, end, n) = (self.index, self.group, self.start, self.end, slots.group);
        let mut out = String::new();
        let mut inner = indent.to_string();
        let (first, last) = if self.reverse {
            (end - 1, start)
        } else {
            (start, end - 1)
        };
        if self.grouped(slots) {
            let (cmp, step) = if self.reverse {
                (">=", "-=")
            } else {
                ("<", "+=")
            };
            let bound = if self.reverse { start } else { end };
            out.push_str(&format!(
                "{indent}for (var {g}: i32 = {first}i; {g} {cmp} {bound}i; {g} {step} {n}i) {{\n"
            ));
            inner.push_str("    ");
        } else {
            out.push_str(&format!("{indent}let {g}: i32 = {first}i;\n"));
        }
        // Distinct words are summed from an empty stage.
        let room = if slots.distinct {
            lanes
        } else {
            n * slots.per_trip
        };
        out.push_str(&make_room(room, lanes, sums_in, &inner));
        let header = match (self.reverse, self.grouped(slots)) {
            (false, true) => format!("{index} < min({g} + {n}i, {}i); {index}++", last + 1),
            (true, true) => format!("{index} >= max({g} - {}i, {last}i); {index}--", n - 1),
            (false, false) => format!("{index} <= {last}i; {index}++"),
            (true, false) => format!("{index} >= {last}i; {index}--"),
        };
        out.push_str(&format!(
            "{inner}for (var {index}: i32 = {g}; {header}) {{\n"
        ));
        let body = format!("{inner}    ");
        (out, body)
    }

    /// A trip's first slot, in the loop's statements.
    pub fn slot(&self, slots: TripSlots) -> String {
        let (index, g) = (self.index, self.group);
        let trip = if self.reverse {
            format!("{g} - {index}")
        } else {
            format!("{index} - {g}")
        };
        format!("stage_count + u32({trip}) * {}u", slots.per_trip)
    }

    /// The lines after the loop over a group's trips has closed: the group's stages
    /// counted, and the loop over the groups closed.
    pub fn close(&self, slots: TripSlots, indent: &str) -> String {
        let (g, start, end, n) = (self.group, self.start, self.end, slots.group);
        let per = slots.per_trip;
        // What the group staged: summed at once where its words are distinct.
        let staged = |count: String| match slots.distinct {
            true => format!("{REDUCE_DISTINCT_FN}(lid, stage_words, {count}); stage_count = 0u;"),
            false => format!("stage_count += {count};"),
        };
        if !self.grouped(slots) {
            let count = format!("{}u", (end - start) as u32 * per);
            return format!("{indent}{}\n", staged(count));
        }
        let trips = if self.reverse {
            // The trips from the group's first down to `start`.
            match 1 - start {
                0 => format!("min({n}i, {g})"),
                c if c > 0 => format!("min({n}i, {g} + {c}i)"),
                c => format!("min({n}i, {g} - {}i)", -c),
            }
        } else {
            format!("min({n}i, {end}i - {g})")
        };
        let count = format!("u32({trips}) * {per}u");
        format!("{indent}    {}\n{indent}}}\n", staged(count))
    }
}
