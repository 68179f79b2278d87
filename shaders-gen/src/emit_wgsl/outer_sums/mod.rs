//! A kept loop's rows of a streamed shared gradient, summed as outer products.
//!
//! A dense layer written as a loop over its rows (`for j { s = b[j] + Σ_k w[j * n + k] *
//! h[k]; .. }`) has a reverse pass whose trip `j` adds `h[k] * d_s` into word `j * n + k` of
//! the weights' gradient for every `k`: one factor per trip (`d_s`) times one column per
//! word (`h[k]`, the same in every trip). Streamed word by word (`streams`), every
//! element's every word crosses the workgroup through a tree sum with barriers: on the
//! H100 that sum was 74% of an 8-32-32-1 network's `value_and_grad`. Summed as what it
//! is, `dW += D^T H` over the workgroup's elements, each element moves `T + n` words
//! through workgroup memory instead of `T * n`:
//!
//! - In the loop, each trip records its factor into a per-thread array (`rec[j - start]`)
//!   in place of its staged adds.
//! - After the loop, the workgroup's elements, a chunk at a time, copy their records and
//!   columns into `outer_stage`, word-major; then each thread adds the chunk's products
//!   into its block of gradient words, held in registers (`blocks.rs`).
//! - After the thread's last element and the owners' stores of the workgroup's row, each
//!   thread adds its blocks into the row.
//!
//! The order of every sum is fixed (chunks, then quads of elements in a chunk), so the
//! result is the same bits on every run; no atomics.

use super::streams::{Record, Streams, reader_counts};
use crate::abi;
use crate::ir::{Function, Loop, LoopInput, LoopKind, Op, ValueId, affine_in_index};
use crate::names::{Taken, element_name, fresh};
use crate::ops::Func;
use crate::signature::Precision;
use std::fmt::Write;

mod blocks;
pub(super) use blocks::flush;
use blocks::{BlockSums, Blocks};

/// The workgroup array the chunks are staged in.
pub(super) const OUTER_STAGE: &str = "outer_stage";

/// Bytes of [`OUTER_STAGE`]: with the reduction's stage, the 16 KiB WebGPU guarantees.
const OUTER_STAGE_BYTES: u32 = 8192;

/// Scalars of `precision` in [`OUTER_STAGE`] on a device of 16 KiB of workgroup memory:
/// the chunks the planner chooses by.
pub(super) fn outer_stage_words(precision: Precision) -> u32 {
    OUTER_STAGE_BYTES / (4 * precision.words_per_scalar())
}

/// The WGSL constant of [`OUTER_STAGE`]'s length, in scalars.
const OUTER_STAGE_LEN: &str = "outer_stage_words";

/// [`OUTER_STAGE`]'s declaration in a kernel whose other workgroup arrays take `other`
/// bytes and whose chunks of 256 threads' elements take at most `most` scalars: as many
/// scalars as the device's workgroup memory holds past the others, up to `most`
/// ([`crate::names::WORKGROUP_BYTES_OVERRIDE`], set by the runtime). Larger chunks, fewer
/// barriers: on the H100 (48 KiB) 11% faster 8-32-32-1 and 8-64-64-1 `value_and_grad`
/// than in 16 KiB.
pub(super) fn outer_stage_declaration(precision: Precision, other: u32, most: u32) -> String {
    let bytes = 4 * precision.words_per_scalar();
    let limit = crate::names::WORKGROUP_BYTES_OVERRIDE;
    format!(
        "// Workgroup memory this kernel may use (the runtime sets the device's).\n\
         override {limit}: u32 = {}u;\n\
         override {OUTER_STAGE_LEN}: u32 = min(({limit} - {other}u) / {bytes}u, {most}u);\n\
         var<workgroup> {OUTER_STAGE}: array<vec4<{}>, {OUTER_STAGE_LEN} / 4u>;",
        other + OUTER_STAGE_BYTES,
        precision.name()
    )
}

/// Elements a chunk of a stage of `stage` scalars holds of elements of `words` words each:
/// a word's row of the chunk is an odd number of `vec4`s (so the rows of neighbouring
/// columns start in different banks), the most that fit.
fn chunk_elements(stage: u32, words: u32) -> u32 {
    match stage / words.max(1) / 4 {
        0 => 0,
        quads => 4 * ((quads - 1) / 2 * 2 + 1),
    }
}

/// Fewest elements a chunk stages: below that, a loop's rows are streamed word by word (a
/// chunk's two barriers would be paid for too few products). An 8-128-128-1 network's rows
/// (256 words an element) take 4 elements a chunk in 16 KiB; measured on the H100 down to
/// 14 (8-64-64-1, before the blocks).
const MIN_CHUNK_ELEMENTS: u32 = 4;

/// What multiplies a trip's recorded factor into one gradient word.
#[derive(Clone, Debug, PartialEq)]
enum Column {
    /// A constant (a bias's gradient is the factor itself: 1).
    Const(f64),
    /// An outer value.
    Scalar(ValueId),
    /// Word `k` of an outer array.
    Word(ValueId, i64),
}

/// Where a loop's rows of one shared array lie: trip `j`'s column `c` is shared word
/// `first + stride × (j - start) + c`; and the per-thread sums of the words a thread owns.
#[derive(Clone, Debug)]
pub(super) struct Span {
    first: u32,
    stride: u32,
    trips: u32,
    columns: u32,
    /// The per-thread array of the sums of the thread's blocks of words, `blocks.bt`
    /// `vec4`s each (a trip's columns in a `vec4`).
    tile: String,
    blocks: Blocks,
    label: String,
}

/// One shared array's words that every trip adds as `factor × columns[c]`.
#[derive(Debug)]
struct Rows {
    /// Which of the loop's records is the factor.
    record: usize,
    columns: Vec<Column>,
    span: Span,
    /// Where the columns sit in an element's words of the stage (all the constant 1, the
    /// factor alone: none).
    column_at: Option<u32>,
}

/// A kept loop whose rows are summed as outer products.
#[derive(Debug)]
pub(super) struct OuterLoop {
    /// The per-thread arrays of each trip's factor (element 0's names).
    records: Vec<String>,
    trips: u32,
    rows: Vec<Rows>,
    /// Threads whose elements one chunk stages.
    threads: u32,
    /// Words of the stage each element takes: its records' trips, then its columns.
    words: u32,
}

/// What [`plan`] found in a kernel's loops.
#[derive(Default)]
pub(super) struct Planned {
    /// The records' and the tile sums' declarations.
    pub declarations: String,
    /// The loops whose rows are summed as outer products, by loop node.
    pub loops: Vec<(usize, OuterLoop)>,
    /// Where their rows lie, for [`flush`] after the thread's last element.
    pub spans: Vec<Span>,
}

/// Finds, in each top-level kept loop of `f` whose body streams adds (`streams`), the
/// rows worth summing as outer products, for a thread of `elements` elements; takes
/// their adds out of the stream and records their factors instead. `column_ok` says which
/// outer values can be staged as columns (shared words are never built as values).
pub(super) fn plan(
    f: &Function,
    streams: &mut Streams,
    (elements, precision): (usize, Precision),
    column_ok: impl Fn(ValueId) -> bool,
    taken: &mut Taken,
) -> Planned {
    let mut planned = Planned::default();
    let t = precision.name();
    for (i, node) in f.nodes.iter().enumerate() {
        let Op::Loop(l) = &node.op else { continue };
        let Some(body) = streams.bodies.get_mut(&i) else {
            continue;
        };
        let Some(selected) = Found::in_body(l, body, &column_ok)
            .and_then(|found| found.select(l, elements as u32, precision))
        else {
            continue;
        };
        let outer = selected.apply(body, taken);
        let declarations = &mut planned.declarations;
        for name in &outer.records {
            for e in 0..elements {
                let _ = writeln!(
                    declarations,
                    "    var {}: array<{t}, {}>;",
                    element_name(name, e),
                    outer.trips
                );
            }
        }
        for rows in &outer.rows {
            let span = &rows.span;
            let _ = writeln!(
                declarations,
                "    // Sums of this thread's blocks of words of {}, as outer products.\n    \
                 var {}: array<vec4<{t}>, {}>;",
                span.label,
                span.tile,
                span.blocks.bt * span.blocks.tasks
            );
            planned.spans.push(span.clone());
        }
        planned.loops.push((i, outer));
    }
    planned
}

/// How many loops [`plan`] would sum rows of as outer products with one element per
/// thread: the element rule's question (`shared_sums::elements_per_thread`), and whether
/// keeping a loop in the adjoint kernel pays (`crate::compile_with`).
pub(super) fn summed_loops(
    f: &Function,
    streams: &Streams,
    precision: Precision,
    column_ok: impl Fn(ValueId) -> bool,
) -> usize {
    f.nodes
        .iter()
        .enumerate()
        .filter(|(i, node)| {
            let (Op::Loop(l), Some(body)) = (&node.op, streams.bodies.get(i)) else {
                return false;
            };
            Found::in_body(l, body, &column_ok)
                .and_then(|found| found.select(l, 1, precision))
                .is_some()
        })
        .count()
}

/// Whether outer value `v` of `f` can be staged as a column: not a `#[shared]` word
/// (inputs `shared` of `f`) nor an array of any, which kernels read from `shared_args`
/// rather than build as values.
pub(super) fn not_shared(f: &Function, shared: std::ops::Range<u32>, v: ValueId) -> bool {
    let is_shared = |v: &ValueId| matches!(f.node(*v).op, Op::Input(w) if shared.contains(&w));
    match &f.node(v).op {
        Op::ArrayNew(words) => !words.iter().any(is_shared),
        _ => !is_shared(&v),
    }
}

/// An add of a loop body, split into its row and column.
struct Term {
    /// The add's node.
    add: usize,
    /// `index = stride × j + offset`.
    offset: i64,
    column: Column,
    /// The body's product node, if nothing else reads it.
    product: Option<ValueId>,
    /// The array's first shared word, its length, and its name.
    base: u32,
    len: u32,
    label: String,
}

/// Terms of one loop body grouped by factor, array and stride.
struct Found {
    groups: Vec<((ValueId, u32, i64), Vec<Term>)>,
}

impl Found {
    /// The adds of `body` (loop `l`'s streams) that are a factor times a column at an
    /// index affine in the loop index, grouped by factor, array and stride.
    fn in_body(l: &Loop, body: &Streams, column_ok: &impl Fn(ValueId) -> bool) -> Option<Self> {
        if l.kind == LoopKind::Recording {
            return None;
        }
        let readers = reader_counts(&l.body);
        let mut groups: Vec<((ValueId, u32, i64), Vec<Term>)> = Vec::new();
        let mut adds: Vec<_> = body.adds.iter().collect();
        adds.sort_by_key(|(i, _)| **i);
        for (&i, add) in adds {
            let Some((stride, offset)) = affine_in_index(&l.body, add.index) else {
                continue;
            };
            let (factor, column, product) = split_product(l, add.value, &readers, column_ok);
            let key = (factor, add.base, stride);
            let term = Term {
                add: i,
                offset,
                column,
                product,
                base: add.base,
                len: add.len,
                label: add.label.clone(),
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, terms)) => terms.push(term),
                None => groups.push((key, vec![term])),
            }
        }
        (!groups.is_empty()).then_some(Found { groups })
    }

    /// The rows that pass the checks (columns contiguous, rows apart, every index in
    /// range, a chunk of the stage big enough for `elements` per thread), if any.
    fn select(self, l: &Loop, elements: u32, precision: Precision) -> Option<Selected> {
        let (start, end) = (l.start, l.end);
        let trips = u32::try_from(end - start).ok().filter(|t| *t > 0)?;
        let mut kept: Vec<(ValueId, i64, Vec<Term>)> = Vec::new();
        for ((factor, _, stride), mut terms) in self.groups {
            terms.sort_by_key(|t| t.offset);
            let n = terms.len() as i64;
            let offset0 = terms[0].offset;
            let contiguous = terms
                .iter()
                .enumerate()
                .all(|(c, t)| t.offset == offset0 + c as i64);
            // Rows apart (no word added twice; so the stride is positive), and every index
            // in the array (the stream would clamp it).
            let (lowest, highest) = (
                offset0 + stride * start,
                offset0 + stride * (end - 1) + n - 1,
            );
            if contiguous && stride >= n && lowest >= 0 && highest < terms[0].len as i64 {
                kept.push((factor, stride, terms));
            }
        }
        // A row of one word is worth a record only where a wider row records its factor.
        let wide: Vec<ValueId> = kept
            .iter()
            .filter(|(_, _, t)| t.len() >= 2)
            .map(|(f, _, _)| *f)
            .collect();
        kept.retain(|(f, _, _)| wide.contains(f));
        let mut factors: Vec<ValueId> = Vec::new();
        for (f, _, _) in &kept {
            if !factors.contains(f) {
                factors.push(*f);
            }
        }
        // An element's words of the stage: each record's trips, then each row's columns.
        let staged_columns: u32 = kept
            .iter()
            .filter(|(_, _, t)| !is_factor(t))
            .map(|(_, _, t)| t.len() as u32)
            .sum();
        let words = factors.len() as u32 * trips + staged_columns;
        let threads = (chunk_elements(outer_stage_words(precision), words) / elements)
            .min(abi::WORKGROUP_SIZE);
        if kept.is_empty() || threads * elements < MIN_CHUNK_ELEMENTS {
            return None;
        }
        Some(Selected {
            kept,
            factors,
            trips,
            start,
            threads,
            words,
        })
    }
}

/// Whether every term of a row is the factor alone (times 1).
fn is_factor(terms: &[Term]) -> bool {
    terms.iter().all(|t| t.column == Column::Const(1.0))
}

/// Rows that passed [`Found::select`], not yet taken out of the stream.
struct Selected {
    /// By factor and stride: the terms, in column order.
    kept: Vec<(ValueId, i64, Vec<Term>)>,
    /// The distinct factors, each recorded once.
    factors: Vec<ValueId>,
    trips: u32,
    start: i64,
    threads: u32,
    words: u32,
}

impl Selected {
    /// Takes the rows' adds out of `body`'s stream and records their factors instead.
    fn apply(self, body: &mut Streams, taken: &mut Taken) -> OuterLoop {
        let Selected {
            kept,
            factors,
            trips,
            start,
            threads,
            words,
        } = self;
        let records: Vec<String> = factors.iter().map(|_| fresh(taken, "rec")).collect();
        let mut rows = Vec::new();
        let mut column_at = factors.len() as u32 * trips;
        for (factor, stride, terms) in kept {
            let record = factors.iter().position(|f| *f == factor).unwrap_or(0);
            let t0 = &terms[0];
            // The lowest word of the rows: `stride` is positive (at least the columns).
            let first = (t0.base as i64 + stride * start + t0.offset) as u32;
            let columns = terms.len() as u32;
            let at = (!is_factor(&terms)).then_some(column_at);
            if at.is_some() {
                column_at += columns;
            }
            for term in &terms {
                body.adds.remove(&term.add);
                body.skip.insert(term.add);
                if let Some(p) = term.product {
                    body.skip.insert(p.index());
                }
            }
            body.records.insert(
                factor.index(),
                Record {
                    name: records[record].clone(),
                    start,
                },
            );
            let label = t0.label.clone();
            rows.push(Rows {
                record,
                columns: terms.into_iter().map(|t| t.column).collect(),
                span: Span {
                    first,
                    stride: stride as u32,
                    trips,
                    columns,
                    tile: fresh(taken, &format!("tile_{}", crate::names::sanitize(&label))),
                    blocks: Blocks::of(trips, columns),
                    label,
                },
                column_at: at,
            });
        }
        OuterLoop {
            records,
            trips,
            rows,
            threads,
            words,
        }
    }
}

/// The added value `v` of a body as `factor × column`: a product with one side a column
/// (the same in every trip, stageable after the loop), or the value itself times 1; and
/// the product node if nothing else reads it.
fn split_product(
    l: &Loop,
    v: ValueId,
    readers: &[u32],
    column_ok: impl Fn(ValueId) -> bool,
) -> (ValueId, Column, Option<ValueId>) {
    if let Op::Call(Func::Mul, terms) = &l.body.node(v).op {
        let (p, q) = (terms[0], terms[1]);
        for (x, factor) in [(p, q), (q, p)] {
            if let Some(column) = as_column(l, x, &column_ok) {
                let product = (readers[v.index()] == 1).then_some(v);
                return (factor, column, product);
            }
        }
    }
    (v, Column::Const(1.0), None)
}

/// Body value `x` as a column: a constant, a capture, or a captured array's word at a
/// constant index.
fn as_column(l: &Loop, x: ValueId, column_ok: impl Fn(ValueId) -> bool) -> Option<Column> {
    let f = &l.body;
    let capture = |v: ValueId| match f.node(v).op {
        Op::Input(w) => match l.input(w as usize) {
            LoopInput::Capture(j) => Some(l.captures[j]).filter(|c| column_ok(*c)),
            _ => None,
        },
        _ => None,
    };
    match &f.node(x).op {
        Op::Const(c) => Some(Column::Const(*c)),
        Op::Input(_) => Some(Column::Scalar(capture(x)?)),
        Op::ArrayGet { array, index } => {
            let Op::Int(k) = f.node(*index).op else {
                return None;
            };
            Some(Column::Word(capture(*array)?, k))
        }
        _ => None,
    }
}

impl OuterLoop {
    /// The most scalars of the stage its chunks use: all 256 threads' elements at once,
    /// each word's row of them an odd number of `vec4`s (`chunk_elements`: one past
    /// `256 * elements / 4`).
    pub(super) fn most_words(&self, elements: usize) -> u32 {
        (abi::WORKGROUP_SIZE * elements as u32 + 4) * self.words
    }

    /// The outer values its columns read.
    pub(super) fn sources(&self) -> Vec<ValueId> {
        let mut v = Vec::new();
        for c in self.rows.iter().flat_map(|r| &r.columns) {
            if let Column::Scalar(x) | Column::Word(x, _) = c
                && !v.contains(x)
            {
                v.push(*x);
            }
        }
        v
    }

    /// The sums after the loop, for every element of the workgroup's run: chunk by chunk,
    /// the chunk's threads stage their records and columns, word-major, then each thread
    /// adds the chunk's products into its blocks.
    /// `operand(v, e)` is outer value `v`'s name in element `e`.
    pub(super) fn render(
        &self,
        operand: impl Fn(ValueId, usize) -> String,
        (elements, precision): (usize, Precision),
        taken: &mut Taken,
        indent: &str,
    ) -> String {
        let wg = abi::WORKGROUP_SIZE;
        let (threads, words, trips) = (self.threads, self.words, self.trips);
        let elements = elements as u32;
        let (chunk, slot, count, held, pitch, quads) = (
            fresh(taken, "chunk"),
            fresh(taken, "slot"),
            fresh(taken, "count"),
            fresh(taken, "held"),
            fresh(taken, "pitch"),
            fresh(taken, "quads"),
        );
        let mut s = String::new();
        let mut labels: Vec<&str> = self.rows.iter().map(|r| r.span.label.as_str()).collect();
        labels.dedup();
        // `pitch` is `chunk_elements / 4` of the stage the device gives, computed in the
        // kernel (the planner took the 16 KiB WebGPU guarantees).
        let _ = writeln!(
            s,
            "{indent}// The loop's rows of d/d {}, summed as outer products: the elements of as many\n\
             {indent}// threads as the stage holds ({threads} in 16 KiB) stage their factors and columns\n\
             {indent}// word by word, then each thread adds their products into its blocks of words.\n\
             {indent}// A word's row of a chunk: an odd number of vec4s.\n\
             {indent}let {pitch} = ({OUTER_STAGE_LEN} / {words}u / 4u - 1u) / 2u * 2u + 1u;\n\
             {indent}let {held} = min({wg}u, {pitch} * 4u / {elements}u);\n\
             {indent}for (var {chunk} = 0u; {chunk} < {wg}u; {chunk} += {held}) {{\n\
             {indent}    // The last chunk's reads are done.\n\
             {indent}    workgroupBarrier();\n\
             {indent}    let {slot} = lid - {chunk};\n\
             {indent}    if ({slot} < {held}) {{",
            labels.join(", d/d "),
        );
        let inner = format!("{indent}        ");
        for e in 0..elements as usize {
            let at = fresh(taken, "at");
            let _ = writeln!(s, "{inner}let {at} = {slot} * {elements}u + {e}u;");
            // Word `w`'s scalar of the element: `w * pitch + at`, in the stage's vec4s.
            let put = |w: &str, v: &str| {
                format!(
                    "{{ let i = ({w}) * {pitch} * 4u + {at}; {OUTER_STAGE}[i / 4u][i % 4u] = {v}; }}"
                )
            };
            for (r, rec) in self.records.iter().enumerate() {
                let t = fresh(taken, "t");
                let _ = writeln!(
                    s,
                    "{inner}for (var {t} = 0u; {t} < {trips}u; {t}++) {}",
                    put(
                        &format!("{}u + {t}", r as u32 * trips),
                        &format!("{}[{t}]", element_name(rec, e))
                    )
                );
            }
            let operand = |v: ValueId| operand(v, e);
            for rows in &self.rows {
                if let Some(col0) = rows.column_at {
                    let cols = (rows.columns.as_slice(), col0);
                    stage_columns(&operand, precision, cols, &put, &inner, taken, &mut s);
                }
            }
        }
        let _ = writeln!(
            s,
            "{indent}    }}\n\
             {indent}    workgroupBarrier();\n\
             {indent}    let {count} = min({held}, {wg}u - {chunk}) * {elements}u;\n\
             {indent}    let {quads} = ({count} + 3u) / 4u;"
        );
        let vec4 = format!("vec4<{}>", precision.name());
        for rows in &self.rows {
            let sums = BlockSums {
                rows,
                rec0: rows.record as u32 * trips,
                pitch4: &pitch,
                quads: &quads,
                vec4: &vec4,
            };
            sums.write(&format!("{indent}    "), taken, &mut s);
        }
        let _ = writeln!(s, "{indent}}}");
        s
    }
}

/// A chunk thread's `columns` for the element being written, from word `cols.1` of its
/// words (`put(w, v)`: the statement that stages value `v` as word `w`, a WGSL `u32`):
/// runs of one array's consecutive words as a loop.
fn stage_columns(
    operand: &impl Fn(ValueId) -> String,
    precision: Precision,
    (cols, col0): (&[Column], u32),
    put: &dyn Fn(&str, &str) -> String,
    indent: &str,
    taken: &mut Taken,
    s: &mut String,
) {
    let mut c = 0;
    while c < cols.len() {
        if let Column::Word(a, k0) = cols[c] {
            let mut n = 1;
            while c + n < cols.len() && cols[c + n] == Column::Word(a, k0 + n as i64) {
                n += 1;
            }
            if n > 1 {
                let m = fresh(taken, "m");
                let _ = writeln!(
                    s,
                    "{indent}for (var {m} = 0u; {m} < {n}u; {m}++) {}",
                    put(
                        &format!("{}u + {m}", col0 + c as u32),
                        &format!("{}[{k0}u + {m}]", operand(a))
                    )
                );
                c += n;
                continue;
            }
        }
        let value = match &cols[c] {
            Column::Const(x) => super::float_literal(*x, precision),
            Column::Scalar(v) => operand(*v),
            Column::Word(a, k) => format!("{}[{k}]", operand(*a)),
        };
        let _ = writeln!(
            s,
            "{indent}{}",
            put(&format!("{}u", col0 + c as u32), &value)
        );
        c += 1;
    }
}
