//! The owners' side of the outer-product sums: each chunk's products added into the sums
//! of the words a thread owns and, after the thread's last element, those sums added to
//! its other sums.

use super::{OUTER_STAGE, Rows, Span};
use crate::abi;
use crate::names::{Taken, fresh};
use std::fmt::Write;

/// The owners' adds of one chunk's products of `rows`.
pub(super) struct OwnerSums<'a> {
    pub rows: &'a Rows,
    /// Where the rows' record sits in an element's words.
    pub rec0: u32,
    pub pitch: u32,
    /// The WGSL count of the chunk's elements.
    pub count: &'a str,
    pub zero: &'a str,
}

impl OwnerSums<'_> {
    /// The chunk's products, added to the sums of the words the thread owns (at `indent`).
    pub fn write(&self, indent: &str, taken: &mut Taken, s: &mut String) {
        let wg = abi::WORKGROUP_SIZE;
        let (rows, span, pitch, rec0) = (self.rows, &self.rows.span, self.pitch, self.rec0);
        let (k, w, r, t, c, e) = (
            fresh(taken, "k"),
            fresh(taken, "w"),
            fresh(taken, "r"),
            fresh(taken, "t"),
            fresh(taken, "c"),
            fresh(taken, "e"),
        );
        let (stride, (k0, m), count) = (span.stride, span.slots, self.count);
        let owns = span.owns(&w, &t, &c);
        let factor = format!(
            "{OUTER_STAGE}[{e} * {pitch}u + {rec0}u + min({t}, {}u)]",
            span.trips - 1
        );
        let column = rows.column_at.map(|col0| {
            format!(
                "{OUTER_STAGE}[{e} * {pitch}u + {col0}u + min({c}, {}u)]",
                span.columns - 1
            )
        });
        let _ = writeln!(s, "{indent}// d/d {}: the chunk's products.", span.label);
        // Word w's trip and column. Where rows are a divisor of 256 words apart, a thread's
        // words share their column: it is read once per element for all of them.
        let shared_column = wg.is_multiple_of(stride);
        let c_of = |w: &str| {
            if shared_column {
                format!("(lid + {stride}u - {}u) % {stride}u", span.first % stride)
            } else {
                format!("({w} - {}u) % {stride}u", span.first)
            }
        };
        // The statements of word `w`'s trip, at `at` (indent).
        let head = |at: &str| {
            format!(
                "let {w} = lid + {wg}u * ({k} + {k0}u);\n{at}let {r} = {w} - {}u;\n{at}let {t} = {r} / {stride}u;",
                span.first
            )
        };
        match (&column, shared_column) {
            (Some(_), true) => {
                let names = WordNames {
                    k: &k,
                    w: &w,
                    t: &t,
                    c: &c,
                    e: &e,
                };
                self.write_shared_column(
                    names,
                    &c_of(&w),
                    &head(&format!("{indent}    ")),
                    indent,
                    taken,
                    s,
                );
            }
            _ => {
                let product = match &column {
                    Some(column) => format!("{factor} * {column}"),
                    None => factor.clone(),
                };
                let acc = fresh(taken, "acc");
                let _ = writeln!(
                    s,
                    "{indent}for (var {k} = 0u; {k} < {m}u; {k}++) {{\n\
                     {indent}    {}\n\
                     {indent}    let {c} = {};\n\
                     {indent}    if ({owns}) {{\n\
                     {indent}        var {acc} = {}[{k}];\n\
                     {indent}        for (var {e} = 0u; {e} < {count}; {e}++) {{ {acc} += {product}; }}\n\
                     {indent}        {}[{k}] = {acc};\n\
                     {indent}    }}\n\
                     {indent}}}",
                    head(&format!("{indent}    ")),
                    c_of(&w),
                    span.tile,
                    span.tile,
                );
            }
        }
    }
}

/// The WGSL names of [`OwnerSums::write`]'s loop over a thread's words: slot, word, trip,
/// column and element.
struct WordNames<'a> {
    k: &'a str,
    w: &'a str,
    t: &'a str,
    c: &'a str,
    e: &'a str,
}

/// Elements an owner's loop reads at a time where its words share a column: their loads
/// in flight together. One at a time, each element's products waited for its loads (a
/// workgroup of 256 threads that fill the registers is alone on its multiprocessor, with
/// little else to hide them): on the H100 those sums were 80% of an 8-32-32-1 network's
/// `value_and_grad`.
const ELEMENTS_IN_FLIGHT: u32 = 4;

impl OwnerSums<'_> {
    /// The chunk's products where the thread's words share a column (`column`, its WGSL):
    /// each word's trip and ownership once, then the elements [`ELEMENTS_IN_FLIGHT`] at a
    /// time, their products added in element order (the same sums as one at a time).
    fn write_shared_column(
        &self,
        n: WordNames,
        column: &str,
        head: &str,
        indent: &str,
        taken: &mut Taken,
        s: &mut String,
    ) {
        let (span, pitch, count, zero) = (&self.rows.span, self.pitch, self.count, self.zero);
        let (m, col0) = (span.slots.1, self.rows.column_at.unwrap_or(0));
        let (trip, own, x) = (fresh(taken, "trip"), fresh(taken, "own"), fresh(taken, "x"));
        let WordNames { k, w, t, c, e } = n;
        let factor = |el: &str| {
            format!(
                "{OUTER_STAGE}[({el}) * {pitch}u + {}u + {trip}[{k}]]",
                self.rec0
            )
        };
        let col = |el: &str| {
            format!(
                "{OUTER_STAGE}[({el}) * {pitch}u + {col0}u + min({c}, {}u)]",
                span.columns - 1
            )
        };
        let _ = writeln!(
            s,
            "{indent}let {c} = {column};\n\
             {indent}var {trip}: array<u32, {m}>;\n\
             {indent}var {own}: array<bool, {m}>;\n\
             {indent}for (var {k} = 0u; {k} < {m}u; {k}++) {{\n\
             {indent}    {head}\n\
             {indent}    {trip}[{k}] = min({t}, {}u);\n\
             {indent}    {own}[{k}] = {};\n\
             {indent}}}\n\
             {indent}var {e} = 0u;",
            span.trips - 1,
            span.owns(w, t, c),
        );
        let n = ELEMENTS_IN_FLIGHT;
        let at = |i: u32| format!("{e} + {i}u");
        let columns: String = (0..n)
            .map(|i| format!("{indent}    let {x}_{i} = {};\n", col(&at(i))))
            .collect();
        let adds: String = (0..n)
            .map(|i| {
                format!(
                    "{indent}        {}[{k}] += select({zero}, {} * {x}_{i}, {own}[{k}]);\n",
                    span.tile,
                    factor(&at(i))
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "{indent}for (; {e} + {n}u <= {count}; {e} += {n}u) {{\n\
             {columns}\
             {indent}    for (var {k} = 0u; {k} < {m}u; {k}++) {{\n\
             {adds}\
             {indent}    }}\n\
             {indent}}}\n\
             {indent}for (; {e} < {count}; {e}++) {{\n\
             {indent}    let {x} = {};\n\
             {indent}    for (var {k} = 0u; {k} < {m}u; {k}++) {{\n\
             {indent}        {}[{k}] += select({zero}, {} * {x}, {own}[{k}]);\n\
             {indent}    }}\n\
             {indent}}}",
            col(e),
            span.tile,
            factor(e),
        );
    }
}

/// After the thread's last element: each owner adds its tile sums of `spans` to its own
/// sums (`owned`), or into the workgroup's row.
pub(in crate::emit_wgsl) fn flush(
    spans: &[Span],
    owned: bool,
    shared_words: u32,
    taken: &mut Taken,
) -> String {
    let wg = abi::WORKGROUP_SIZE;
    let mut s = String::new();
    for span in spans {
        let (k, w, t, c) = (
            fresh(taken, "k"),
            fresh(taken, "w"),
            fresh(taken, "t"),
            fresh(taken, "c"),
        );
        let (tile, (k0, m), first, stride) = (&span.tile, span.slots, span.first, span.stride);
        let add = if owned {
            format!("owned_sums[{k} + {k0}u] += {tile}[{k}];")
        } else {
            format!("shared_partials[group * {shared_words}u + {w}] += {tile}[{k}];")
        };
        let _ = writeln!(
            s,
            "    // d/d {}: the outer products' sums.\n    \
             for (var {k} = 0u; {k} < {m}u; {k}++) {{\n        \
             let {w} = lid + {wg}u * ({k} + {k0}u);\n        \
             let {t} = ({w} - {first}u) / {stride}u;\n        \
             let {c} = ({w} - {first}u) % {stride}u;\n        \
             if ({}) {{\n            \
             {add}\n        \
             }}\n    \
             }}",
            span.label,
            span.owns(&w, &t, &c),
        );
    }
    s
}
