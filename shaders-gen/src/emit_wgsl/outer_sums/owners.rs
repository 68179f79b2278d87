//! The products' side of the outer-product sums: each chunk's products added into blocks
//! of 4 x 4 gradient words per thread and, after the thread's last element, those blocks
//! added into the workgroup's row.
//!
//! The stage holds a chunk word-major (word `w` of the chunk's element `e` at `w * pitch +
//! e`), so a thread reads four elements of one word in one `vec4` load. A thread's block is
//! 4 consecutive trips by 4 columns `blocks_c` apart (a warp's threads read neighbouring
//! columns, in different banks: `pitch / 4` is odd), and each `dot` of two loads adds four
//! elements' products: 8 loads per 64 products. Summed word by word by the word's owner (a
//! load per product), these sums took a third of an 8-64-64-1 network's `value_and_grad`
//! on the H100.

use super::{OUTER_STAGE, Rows, Span};
use crate::abi;
use crate::names::{Taken, fresh};
use std::fmt::Write;

/// How one rows' gradient words are cut into blocks of 4 trips by 4 columns.
#[derive(Clone, Copy, Debug)]
pub(super) struct Blocks {
    /// Blocks along the trips and along the columns.
    pub t: u32,
    pub c: u32,
    /// Blocks per thread.
    pub tasks: u32,
}

impl Blocks {
    pub(super) fn of(trips: u32, columns: u32) -> Self {
        let (t, c) = (trips.div_ceil(4), columns.div_ceil(4));
        Blocks {
            t,
            c,
            tasks: (t * c).div_ceil(abi::WORKGROUP_SIZE),
        }
    }
}

/// The chunk's products of one rows, added into the thread's blocks.
pub(super) struct BlockSums<'a> {
    pub rows: &'a Rows,
    /// Where the rows' record sits among an element's words.
    pub rec0: u32,
    /// The WGSL of the stage's row length in `vec4`s, and of the chunk's quads of elements.
    pub pitch4: &'a str,
    pub quads: &'a str,
    pub vec4: &'a str,
}

impl BlockSums<'_> {
    /// The statements (at `indent`).
    pub fn write(&self, indent: &str, taken: &mut Taken, s: &mut String) {
        let (rows, span, wg) = (self.rows, &self.rows.span, abi::WORKGROUP_SIZE);
        let b = span.blocks;
        let (q, e4, task, tb, cb) = (
            fresh(taken, "q"),
            fresh(taken, "e4"),
            fresh(taken, "task"),
            fresh(taken, "tb"),
            fresh(taken, "cb"),
        );
        let (pitch4, quads, vec4) = (self.pitch4, self.quads, self.vec4);
        let _ = writeln!(
            s,
            "{indent}// d/d {}: the chunk's products.\n\
             {indent}for (var {q} = 0u; {q} < {}u; {q}++) {{\n\
             {indent}    let {task} = lid + {wg}u * {q};\n\
             {indent}    if ({task} >= {}u) {{\n\
             {indent}        break;\n\
             {indent}    }}\n\
             {indent}    let {tb} = {task} / {}u;\n\
             {indent}    let {cb} = {task} % {}u;",
            span.label,
            b.tasks,
            b.t * b.c,
            b.c,
            b.c
        );
        let inner = format!("{indent}    ");
        let names: Vec<[String; 4]> = ["d", "h", "x", "y"]
            .iter()
            .map(|p| std::array::from_fn(|i| fresh(taken, &format!("{p}{i}"))))
            .collect();
        let [d, h, x, y] = [&names[0], &names[1], &names[2], &names[3]];
        for i in 0..4 {
            let _ = writeln!(
                s,
                "{inner}let {} = ({}u + min(4u * {tb} + {i}u, {}u)) * {pitch4};",
                d[i],
                self.rec0,
                span.trips - 1
            );
        }
        if let Some(col0) = rows.column_at {
            for j in 0..4 {
                let _ = writeln!(
                    s,
                    "{inner}let {} = ({col0}u + min({cb} + {}u, {}u)) * {pitch4};",
                    h[j],
                    j as u32 * b.c,
                    span.columns - 1
                );
            }
        }
        let _ = writeln!(s, "{inner}for (var {e4} = 0u; {e4} < {quads}; {e4}++) {{");
        for i in 0..4 {
            let _ = writeln!(s, "{inner}    let {} = {OUTER_STAGE}[{} + {e4}];", x[i], d[i]);
        }
        let tile = &span.tile;
        if rows.column_at.is_none() {
            // The factor alone: one column, the factors' sum.
            for i in 0..4 {
                let _ = writeln!(
                    s,
                    "{inner}    {tile}[4u * {q} + {i}u].x += dot({}, {vec4}(1.0));",
                    x[i]
                );
            }
        } else {
            for j in 0..4 {
                let _ = writeln!(s, "{inner}    let {} = {OUTER_STAGE}[{} + {e4}];", y[j], h[j]);
            }
            for i in 0..4 {
                let dots: Vec<String> = (0..4).map(|j| format!("dot({}, {})", x[i], y[j])).collect();
                let _ = writeln!(
                    s,
                    "{inner}    {tile}[4u * {q} + {i}u] += {vec4}({});",
                    dots.join(", ")
                );
            }
        }
        let _ = writeln!(s, "{inner}}}\n{indent}}}");
    }
}

/// After the thread's last element and the workgroup's row is written: each thread adds
/// its blocks of `spans` into the row (after a barrier: its words are other threads').
pub(in crate::emit_wgsl) fn flush(spans: &[Span], shared_words: u32, taken: &mut Taken) -> String {
    if spans.is_empty() {
        return String::new();
    }
    let wg = abi::WORKGROUP_SIZE;
    let mut s = String::from(
        "    // The row's other words are stored: the blocks of outer-product sums go in.\n    \
         storageBarrier();\n",
    );
    for span in spans {
        let b = span.blocks;
        let (q, i, j) = (fresh(taken, "q"), fresh(taken, "i"), fresh(taken, "j"));
        let _ = writeln!(
            s,
            "    // d/d {}: the outer products' sums.\n    \
             for (var {q} = 0u; {q} < {}u; {q}++) {{\n        \
             let task = lid + {wg}u * {q};\n        \
             for (var {i} = 0u; {i} < 4u; {i}++) {{\n            \
             for (var {j} = 0u; {j} < 4u; {j}++) {{\n                \
             let t = 4u * (task / {}u) + {i};\n                \
             let c = task % {}u + {}u * {j};\n                \
             if (task < {}u && t < {}u && c < {}u) {{\n                    \
             shared_partials[group * {shared_words}u + {}u + {}u * t + c] += {}[4u * {q} + {i}][{j}];\n                \
             }}\n            \
             }}\n        \
             }}\n    \
             }}",
            span.label,
            b.tasks,
            b.c,
            b.c,
            b.c,
            b.t * b.c,
            span.trips,
            span.columns,
            span.first,
            span.stride,
            span.tile,
        );
    }
    s
}
