//! How a kept loop's trips run: one after another, or, where it reads `#[shared]` words
//! at consecutive indices, by quads of trips.
//!
//! The shared words of a kernel sit in a uniform buffer of 16-byte elements
//! ([`crate::abi::uniform_lanes`] words each). A loop that reads `table[i + c]` in trip `i` reads
//! one word of such an element a trip, its lane chosen at run time
//! (`shared_args[k / 4u][k % 4u]`); run by quads of trips (an outer loop over quads, an
//! inner one over a quad's trips), it loads each element once a quad and takes the trip's
//! lane from that value. On the H100, `shared_table_1024`'s tangent (two such reads a
//! trip) took 12.4 ms at 2^24 and 6.9 ms by quads.

use crate::ir::{Loop, LoopInput, LoopKind, Op, affine_in_index};
use crate::names::{Taken, fresh};
use std::collections::HashMap;

/// A loop's reads of shared words at consecutive indices, where it runs by quads.
#[derive(Debug, Default)]
pub(super) struct QuadReads {
    /// Trips a quad (the uniform buffer's lanes).
    pub lanes: u32,
    /// For each read, by `(array, index)` body nodes: which of `elements` it takes its
    /// word from.
    pub reads: HashMap<(usize, usize), usize>,
    /// The uniform elements a quad loads, as the element of the loop's first quad.
    pub elements: Vec<u32>,
}

/// Most operations a trip of a loop run by quads may execute.
///
/// Quads pay where reading the shared words is much of a trip. In a layer loop (a row's dot
/// product, its bias read a word a trip) they cost more than the lane chosen at run time:
/// 8-10% of 8-32-32-1's `value_and_grad` and of 8-64-64-1's value on the H100 (2^20 and
/// 2^24), where a table's trip of 10 to 20 operations gains 1.8x. A trip that reads other
/// shared words too (a row's, at a stride) is not run by quads either.
const QUAD_MAX_TRIP_OPS: usize = 64;

/// How loop `l` reads shared words by quads, if it can: a forward loop of at most
/// [`QUAD_MAX_TRIP_OPS`] operations a trip, whose trips and first index are multiples of
/// the lanes, whose every read of a shared array (`shared_first(j)`: the first shared word
/// of capture `j`, where it is one) is `array[i + c]`, every index in the array, its
/// words from `first + start + c` on starting a uniform element.
pub(super) fn quad_reads(
    l: &Loop,
    shared_first: &dyn Fn(usize) -> Option<u32>,
    lanes: u32,
) -> Option<QuadReads> {
    let lanes_i = i64::from(lanes);
    if !matches!(l.kind, LoopKind::Forward | LoopKind::Recording)
        || l.start % lanes_i != 0
        || l.trip_count() % lanes_i != 0
        || l.trip_count() == 0
        || l.body.dynamic_op_count() > QUAD_MAX_TRIP_OPS
    {
        return None;
    }
    let body = &l.body;
    let mut q = QuadReads {
        lanes,
        ..QuadReads::default()
    };
    for node in &body.nodes {
        let Op::ArrayGet { array, index } = node.op else {
            continue;
        };
        let Op::Input(w) = body.node(array).op else {
            continue;
        };
        let LoopInput::Capture(j) = l.input(w as usize) else {
            continue;
        };
        let Some(first) = shared_first(j) else {
            continue;
        };
        // Every shared read of the trip is one of the quad's words, or none is taken so.
        let Some((1, c)) = affine_in_index(body, index) else {
            return None;
        };
        let words = body.node(array).ty.words() as i64;
        let word = i64::from(first) + l.start + c;
        if l.start + c < 0 || l.end - 1 + c >= words || word % lanes_i != 0 {
            return None;
        }
        let element = u32::try_from(word / lanes_i).ok()?;
        let at = match q.elements.iter().position(|e| *e == element) {
            Some(at) => at,
            None => {
                q.elements.push(element);
                q.elements.len() - 1
            }
        };
        q.reads.insert((array.index(), index.index()), at);
    }
    (!q.reads.is_empty()).then_some(q)
}

impl QuadReads {
    /// The lines that open loop `l` of index `index`: the loop over quads, the elements a
    /// quad loads, the loop over a quad's trips and the trip's index; and the indent of the
    /// body. Adds each read's expression to `reads` (by `(array, index)` body nodes).
    pub fn open(
        &self,
        l: &Loop,
        (index, taken): (&str, &mut Taken),
        reads: &mut HashMap<(usize, usize), String>,
        indent: &str,
    ) -> (String, String) {
        let quad = fresh(taken, &format!("{index}_quad"));
        let lane = fresh(taken, &format!("{index}_lane"));
        let loaded: Vec<String> = (0..self.elements.len())
            .map(|_| fresh(taken, &format!("{index}_words")))
            .collect();
        for (key, k) in &self.reads {
            reads.insert(*key, format!("{}[{lane}]", loaded[*k]));
        }
        let u = i64::from(self.lanes);
        let (first, end) = (l.start / u, l.end / u);
        let mut out =
            format!("{indent}for (var {quad}: i32 = {first}i; {quad} < {end}i; {quad}++) {{\n");
        for (name, element) in loaded.iter().zip(&self.elements) {
            let at = match i64::from(*element) - first {
                0 => quad.clone(),
                at if at > 0 => format!("{quad} + {at}i"),
                at => format!("{quad} - {}i", -at),
            };
            out.push_str(&format!(
                "{indent}    let {name} = shared_args[u32({at})];\n"
            ));
        }
        out.push_str(&format!(
            "{indent}    for (var {lane}: i32 = 0i; {lane} < {u}i; {lane}++) {{\n"
        ));
        let body = format!("{indent}        ");
        out.push_str(&format!(
            "{body}let {index}: i32 = {u}i * {quad} + {lane};\n"
        ));
        (out, body)
    }
}

/// The header of loop `index` from `start` to `end` (exclusive), down for a reverse loop.
pub(super) fn loop_header(
    index: &str,
    (start, end): (i64, i64),
    kind: LoopKind,
    indent: &str,
) -> String {
    match kind {
        LoopKind::Reverse { .. } => format!(
            "{indent}for (var {index}: i32 = {}i; {index} >= {start}i; {index}--) {{\n",
            end - 1
        ),
        _ => format!("{indent}for (var {index}: i32 = {start}i; {index} < {end}i; {index}++) {{\n"),
    }
}
