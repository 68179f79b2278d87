//! The products' side of the outer-product sums: each chunk's products added into blocks
//! of up to 4 x 4 gradient words per thread and, after the thread's last element, those
//! blocks added into the workgroup's row.
//!
//! The stage holds a chunk word-major (word `w` of the chunk's element `e` at `w * pitch +
//! e`), so a thread reads four elements of one word in one `vec4` load. A thread's block is
//! up to 4 consecutive trips by 4 columns `blocks.c` apart (a warp's threads read
//! neighbouring columns, in different banks: `pitch / 4` is odd), and each `dot` of two
//! loads adds four elements' products: 8 loads per 64 products in a 4 x 4 block. Summed
//! word by word by the word's owner (a load per product), these sums took a third of an
//! 8-64-64-1 network's `value_and_grad` on the H100.

use super::{OUTER_STAGE, Rows, Span};
use crate::abi;
use crate::names::{Taken, fresh};
use std::fmt::Write;

/// How one rows' gradient words are cut into blocks of `bt` trips by `bc` columns.
#[derive(Clone, Copy, Debug)]
pub(super) struct Blocks {
    /// A block's trips and columns (each 1, 2 or 4).
    pub bt: u32,
    pub bc: u32,
    /// Blocks along the trips and along the columns.
    pub t: u32,
    pub c: u32,
    /// Blocks per thread.
    pub tasks: u32,
}

impl Blocks {
    /// The largest blocks that still give every thread of the workgroup one (fewer loads per
    /// product), else blocks of one word (as many threads busy as there are words). On the
    /// H100, 4 x 4 blocks made an 8-64-64-1 network's `value_and_grad` 10% faster than a word
    /// per owner, and an 8-32-32-1's (64 blocks: a quarter of the threads) 7% slower.
    pub(super) fn of(trips: u32, columns: u32) -> Self {
        let shape = |(bt, bc): (u32, u32)| {
            let (t, c) = (trips.div_ceil(bt), columns.div_ceil(bc));
            Blocks {
                bt,
                bc,
                t,
                c,
                tasks: (t * c).div_ceil(abi::WORKGROUP_SIZE),
            }
        };
        [(4, 4), (4, 2), (2, 2), (2, 1), (1, 1)]
            .into_iter()
            .map(shape)
            .find(|b| b.t * b.c >= abi::WORKGROUP_SIZE)
            .unwrap_or_else(|| shape((1, 1)))
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
        let (bt, bc) = (b.bt as usize, b.bc as usize);
        for (i, d) in d.iter().take(bt).enumerate() {
            let _ = writeln!(
                s,
                "{inner}let {d} = ({}u + min({bt}u * {tb} + {i}u, {}u)) * {pitch4};",
                self.rec0,
                span.trips - 1
            );
        }
        if let Some(col0) = rows.column_at {
            for (j, h) in h.iter().take(bc).enumerate() {
                let _ = writeln!(
                    s,
                    "{inner}let {h} = ({col0}u + min({cb} + {}u, {}u)) * {pitch4};",
                    j as u32 * b.c,
                    span.columns - 1
                );
            }
        }
        let _ = writeln!(s, "{inner}for (var {e4} = 0u; {e4} < {quads}; {e4}++) {{");
        for (x, d) in x.iter().zip(d).take(bt) {
            let _ = writeln!(s, "{inner}    let {x} = {OUTER_STAGE}[{d} + {e4}];");
        }
        let tile = &span.tile;
        if rows.column_at.is_none() {
            // The factor alone: one column, the factors' sum.
            for (i, x) in x.iter().take(bt).enumerate() {
                let _ = writeln!(
                    s,
                    "{inner}    {tile}[{bt}u * {q} + {i}u].x += dot({x}, {vec4}(1.0));"
                );
            }
        } else {
            for (y, h) in y.iter().zip(h).take(bc) {
                let _ = writeln!(s, "{inner}    let {y} = {OUTER_STAGE}[{h} + {e4}];");
            }
            for (i, x) in x.iter().take(bt).enumerate() {
                for (lane, y) in ["x", "y", "z", "w"].iter().zip(y).take(bc) {
                    let _ = writeln!(
                        s,
                        "{inner}    {tile}[{bt}u * {q} + {i}u].{lane} += dot({x}, {y});"
                    );
                }
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
             for (var {i} = 0u; {i} < {}u; {i}++) {{\n            \
             for (var {j} = 0u; {j} < {}u; {j}++) {{\n                \
             let t = {}u * (task / {}u) + {i};\n                \
             let c = task % {}u + {}u * {j};\n                \
             if (task < {}u && t < {}u && c < {}u) {{\n                    \
             shared_partials[group * {shared_words}u + {}u + {}u * t + c] += {}[{}u * {q} + {i}][{j}];\n                \
             }}\n            \
             }}\n        \
             }}\n    \
             }}",
            span.label,
            b.tasks,
            b.bt,
            b.bc,
            b.bt,
            b.c,
            b.c,
            b.c,
            b.t * b.c,
            span.trips,
            span.columns,
            span.first,
            span.stride,
            span.tile,
            b.bt,
        );
    }
    s
}
