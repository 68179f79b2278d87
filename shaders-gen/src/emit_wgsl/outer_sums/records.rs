//! A kept loop's outer products summed by an entry point of their own, from records in
//! memory.
//!
//! Summed in the adjoint kernel itself (the stage and the owners, `owners.rs`), the outer
//! products of an 8-64-64-1 network took 73% of its `value_and_grad` on the H100, at one
//! workgroup per multiprocessor: the records, the stage and the owners' sums all live at
//! once, and a chunk's products wait on two barriers. Here the adjoint entry only writes
//! each element's factors and columns to `outer_records`, word-major (word `w` of element
//! `e` at `w * records_stride + e`: a warp's stores are coalesced), and a second entry,
//! dispatched after it over the same workgroups, sums `dW += D^T H` over the workgroup's
//! elements as a tiled matrix product: chunks of elements staged in workgroup memory, each
//! thread a 4 x 4 block of the gradient in registers, four elements a `dot`.
//!
//! A launch's records would not fit memory at large batches, so a launch is cut into
//! slices of every workgroup's runs: the runtime dispatches, per slice, the adjoint entry,
//! the outer entry and the one-thread [`next_slice_entry`]; word 0 of `outer_records` is
//! the slice both read. The first slice writes the workgroup's row of `shared_partials`,
//! the later ones add to it, each in a fixed order: the result is the same bits on every
//! run, with no atomics.

use super::{OuterLoop, stage_columns};
use crate::abi;
use crate::ir::ValueId;
use crate::names::{Taken, fresh};
use crate::signature::Precision;
use std::fmt::Write;

/// The storage array of the records (`array<u32>`, floats as their bits; word 0 the slice).
pub(in crate::emit_wgsl) const RECORDS: &str = "outer_records";

/// Words of `outer_records` before the first element's: the slice, then padding.
pub(in crate::emit_wgsl) const RECORDS_HEAD: u32 = 4;

/// The workgroup array the outer entry stages chunks in, and its length's override.
const STAGE: &str = "records_stage";
const STAGE_LEN: &str = "records_stage_len";

/// Most words one loop's record takes per element: a chunk of 8 elements plus the 4 words
/// of padding per word must fit the 16 KiB of workgroup memory WebGPU guarantees.
pub(super) const MAX_LOOP_WORDS: u32 = 16384 / 4 / 12;

/// The loops a kernel writes records of, and the words each element's record takes.
#[derive(Clone, Debug, Default)]
pub(in crate::emit_wgsl) struct RecordsPlan {
    /// The loops, in the order of their regions.
    pub loops: Vec<RecordedLoop>,
    /// Words of one element's record, all loops together.
    pub words: u32,
}

/// What the outer entry needs of one loop: where its words are, and its rows.
#[derive(Clone, Debug)]
pub(in crate::emit_wgsl) struct RecordedLoop {
    /// Its first word in an element's record, and how many.
    region: u32,
    words: u32,
    trips: u32,
    rows: Vec<RecordedRows>,
}

/// One shared array's rows of a loop: trip `t`'s column `c` is word `first + stride * t +
/// c` of the gradient, the product of the record at `factor + t` and column `c`.
#[derive(Clone, Debug)]
struct RecordedRows {
    factor: u32,
    /// Where the columns are in the loop's words; none: the factor alone (times 1).
    column_at: Option<u32>,
    columns: u32,
    first: u32,
    stride: u32,
    label: String,
}

impl RecordsPlan {
    /// Adds `l`, whose region starts at [`RecordsPlan::words`].
    pub(super) fn push(&mut self, l: &OuterLoop) {
        let rows = l
            .rows
            .iter()
            .map(|r| RecordedRows {
                factor: r.record as u32 * l.trips,
                column_at: r.column_at,
                columns: r.span.columns,
                first: r.span.first,
                stride: r.span.stride,
                label: r.span.label.clone(),
            })
            .collect();
        self.loops.push(RecordedLoop {
            region: self.words,
            words: l.words,
            trips: l.trips,
            rows,
        });
        self.words += l.words;
    }

    /// The records' binding, the outer entry's stage, and its length from the device's
    /// workgroup memory ([`crate::names::WORKGROUP_BYTES_OVERRIDE`], set by the runtime).
    pub(in crate::emit_wgsl) fn declarations(&self) -> String {
        let limit = crate::names::WORKGROUP_BYTES_OVERRIDE;
        format!(
            "@group(0) @binding({}) var<storage, read_write> {RECORDS}: array<u32>;\n\
             // Workgroup memory the outer entry may use (the runtime sets the device's).\n\
             override {limit}: u32 = 16384u;\n\
             override {STAGE_LEN}: u32 = {limit} / 16u;\n\
             var<workgroup> {STAGE}: array<vec4<f32>, {STAGE_LEN}>;",
            abi::RECORDS_BINDING
        )
    }
}

/// The statements that start the adjoint and outer entries: which slice, its runs, and
/// the records' row length.
pub(in crate::emit_wgsl) fn slice_head(words: u32) -> String {
    let wg = abi::WORKGROUP_SIZE;
    format!(
        "    let group = wid.x + wid.y * groups.x;\n    \
         let group_count = groups.x * groups.y;\n    \
         // The slice of every workgroup's runs this dispatch takes (word 0 of {RECORDS}, set\n    \
         // by the one-thread entry between slices): the first slice writes the workgroup's\n    \
         // row of partial sums, the later ones add to it.\n    \
         let slice = {RECORDS}[0];\n    \
         let per_thread = params.per_thread;\n    \
         let first_run = min(per_thread, slice * params.slice_runs);\n    \
         let end_run = min(per_thread, first_run + params.slice_runs);\n    \
         // The workgroup's records: a block of {words} rows (words) of the slice's elements.\n    \
         let records_stride = params.slice_runs * {wg}u;\n    \
         let records_block = {RECORDS_HEAD}u + group * {words}u * records_stride;\n"
    )
}

/// The element's word `w` (a WGSL `u32`) of a record at word `region` on.
fn record_word(region: u32, w: &str) -> String {
    format!("{RECORDS}[({region}u + {w}) * records_stride + record_elem]")
}

/// The statement that writes value `v` (a float) as word `region + w` of the element's
/// record.
pub(in crate::emit_wgsl) fn write_record(region: u32, w: &str, v: &str) -> String {
    format!("{} = bitcast<u32>({v});", record_word(region, w))
}

impl OuterLoop {
    /// After the loop: the element's columns, written to its record for the outer entry.
    pub(super) fn render_records(
        &self,
        region: u32,
        operand: impl Fn(ValueId, usize) -> String,
        precision: Precision,
        taken: &mut Taken,
        indent: &str,
    ) -> String {
        let mut s = String::new();
        let mut labels: Vec<&str> = self.rows.iter().map(|r| r.span.label.as_str()).collect();
        labels.dedup();
        let _ = writeln!(
            s,
            "{indent}// The loop's columns of d/d {}, for the outer entry's products.",
            labels.join(", d/d ")
        );
        let operand = |v: ValueId| operand(v, 0);
        for rows in &self.rows {
            if let Some(col0) = rows.column_at {
                let dest = |w: &str, v: &str| write_record(region, w, v);
                let cols = (rows.columns.as_slice(), col0);
                let mut written = String::new();
                stage_columns(
                    &operand,
                    precision,
                    cols,
                    &dest,
                    indent,
                    taken,
                    &mut written,
                );
                s.push_str(&written);
            }
        }
        s
    }
}

/// The outer entry ([`abi::OUTER_ENTRY_POINT`]): the products of every loop of `plan`, summed
/// over the workgroup's elements of the slice and added to its row of `shared_partials`
/// (`shared_words` words), which the adjoint entry's dispatch of the slice wrote.
pub(in crate::emit_wgsl) fn outer_entry(
    plan: &RecordsPlan,
    shared_words: u32,
    taken: &mut Taken,
) -> String {
    let wg = abi::WORKGROUP_SIZE;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n// The kept loops' outer products over this workgroup's elements of the slice.\n\
         @compute @workgroup_size({wg})\n\
         fn {}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n{}    \
         let first_elem = (group * per_thread + first_run) * {wg}u;\n    \
         // The slice's elements of this workgroup that are in the batch.\n    \
         let count = min((end_run - first_run) * {wg}u, params.n - min(params.n, first_elem));\n    \
         let base = records_block;",
        abi::OUTER_ENTRY_POINT,
        slice_head(plan.words),
    );
    for l in &plan.loops {
        loop_products(l, shared_words, taken, &mut s);
    }
    s.push_str("}\n");
    s
}

/// One loop's products: its chunks staged, each rows' blocks summed, then added to the row.
fn loop_products(l: &RecordedLoop, shared_words: u32, taken: &mut Taken, s: &mut String) {
    let wg = abi::WORKGROUP_SIZE;
    let words = l.words;
    let (chunk, pitch, c0, k) = (
        fresh(taken, "chunk"),
        fresh(taken, "pitch"),
        fresh(taken, "c0"),
        fresh(taken, "k"),
    );
    let blocks: Vec<Blocks> = l
        .rows
        .iter()
        .map(|r| Blocks::of(r, l.trips, taken))
        .collect();
    let _ = writeln!(
        s,
        "    {{\n        \
         // Elements per chunk: a multiple of 8, each word's row padded by 4 (its length in\n        \
         // quads odd: the quads of a warp's columns fall in different banks).\n        \
         let {chunk} = ({STAGE_LEN} * 4u / {words}u - 4u) / 8u * 8u;\n        \
         let {pitch} = ({chunk} + 4u) / 4u;"
    );
    for b in &blocks {
        let _ = writeln!(
            s,
            "        // Sums of {} blocks of 4 x 4 words of d/d {}.\n        \
             var {}: array<vec4<f32>, {}>;",
            b.tasks,
            b.rows.label,
            b.acc,
            4 * b.tasks
        );
    }
    let _ = writeln!(
        s,
        "        for (var {c0} = 0u; {c0} < count; {c0} += {chunk}) {{\n            \
         // The last chunk's reads are done.\n            \
         workgroupBarrier();\n            \
         // Four loads in flight per thread (elements past the batch read as zeros).\n            \
         for (var {k} = lid; {k} < {words}u * {chunk}; {k} += {}u) {{\n                \
         var at: array<u32, 4>;\n                \
         var v: array<f32, 4>;\n                \
         for (var u = 0u; u < 4u; u++) {{\n                    \
         let w = min(({k} + u * {wg}u) / {chunk}, {}u);\n                    \
         let e = ({k} + u * {wg}u) % {chunk};\n                    \
         at[u] = w * {pitch} * 4u + e;\n                    \
         let load = bitcast<f32>({RECORDS}[base + ({}u + w) * records_stride + {c0} + e]);\n                    \
         v[u] = select(0.0f, load, {c0} + e < count);\n                \
         }}\n                \
         for (var u = 0u; u < 4u; u++) {{\n                    \
         if ({k} + u * {wg}u < {words}u * {chunk}) {{\n                        \
         {STAGE}[at[u] / 4u][at[u] % 4u] = v[u];\n                    \
         }}\n                \
         }}\n            \
         }}\n            \
         workgroupBarrier();\n            \
         let quads = (min({chunk}, count - {c0}) + 3u) / 4u;",
        4 * wg,
        words - 1,
        l.region
    );
    for b in &blocks {
        b.products(&pitch, taken, s);
    }
    s.push_str("        }\n");
    for b in &blocks {
        b.stores(shared_words, taken, s);
    }
    s.push_str("    }\n");
}

/// One rows' gradient cut into blocks of 4 trips by 4 columns (the columns of a block
/// `blocks_c` apart, so that a warp's threads read neighbouring columns).
struct Blocks<'a> {
    rows: &'a RecordedRows,
    trips: u32,
    /// Blocks in trips and in columns, and blocks per thread.
    blocks_t: u32,
    blocks_c: u32,
    tasks: u32,
    acc: String,
}

impl<'a> Blocks<'a> {
    fn of(rows: &'a RecordedRows, trips: u32, taken: &mut Taken) -> Self {
        let (blocks_t, blocks_c) = (trips.div_ceil(4), rows.columns.div_ceil(4));
        Blocks {
            rows,
            trips,
            blocks_t,
            blocks_c,
            tasks: (blocks_t * blocks_c).div_ceil(abi::WORKGROUP_SIZE),
            acc: fresh(
                taken,
                &format!("sums_{}", crate::names::sanitize(&rows.label)),
            ),
        }
    }

    /// The chunk's products added into the thread's blocks (a factor alone: one column,
    /// the sum of the factors).
    fn products(&self, pitch: &str, taken: &mut Taken, s: &mut String) {
        let (q, e4) = (fresh(taken, "q"), fresh(taken, "e4"));
        let (r, wg) = (self.rows, abi::WORKGROUP_SIZE);
        let (last_t, last_c) = (self.trips - 1, r.columns - 1);
        let _ = writeln!(
            s,
            "            // d/d {}: the chunk's products.\n            \
             for (var {q} = 0u; {q} < {}u; {q}++) {{\n                \
             let task = lid + {wg}u * {q};\n                \
             if (task >= {}u) {{\n                    \
             break;\n                \
             }}\n                \
             let tb = task / {}u;\n                \
             let cb = task % {}u;",
            r.label,
            self.tasks,
            self.blocks_t * self.blocks_c,
            self.blocks_c,
            self.blocks_c
        );
        for i in 0..4 {
            let _ = writeln!(
                s,
                "                let d{i} = ({}u + min(4u * tb + {i}u, {last_t}u)) * {pitch};",
                r.factor
            );
        }
        let columns = if let Some(col0) = r.column_at {
            for j in 0..4 {
                let _ = writeln!(
                    s,
                    "                let h{j} = ({col0}u + min(cb + {}u, {last_c}u)) * {pitch};",
                    j * self.blocks_c
                );
            }
            4
        } else {
            1
        };
        let _ = writeln!(
            s,
            "                for (var {e4} = 0u; {e4} < quads; {e4}++) {{"
        );
        for i in 0..4 {
            let _ = writeln!(s, "                    let x{i} = {STAGE}[d{i} + {e4}];");
        }
        if columns == 1 {
            for i in 0..4 {
                let _ = writeln!(
                    s,
                    "                    {}[4u * {q} + {i}u].x += dot(x{i}, vec4<f32>(1.0f));",
                    self.acc
                );
            }
        } else {
            for j in 0..4 {
                let _ = writeln!(s, "                    let y{j} = {STAGE}[h{j} + {e4}];");
            }
            for i in 0..4 {
                let _ = writeln!(
                    s,
                    "                    {}[4u * {q} + {i}u] += vec4<f32>(dot(x{i}, y0), dot(x{i}, y1), dot(x{i}, y2), dot(x{i}, y3));",
                    self.acc
                );
            }
        }
        s.push_str("                }\n            }\n");
    }

    /// After the last chunk: each block's words in range added to the workgroup's row.
    fn stores(&self, shared_words: u32, taken: &mut Taken, s: &mut String) {
        let (q, i, j) = (fresh(taken, "q"), fresh(taken, "i"), fresh(taken, "j"));
        let (r, wg) = (self.rows, abi::WORKGROUP_SIZE);
        let _ = writeln!(
            s,
            "        // d/d {}: the blocks' sums into the row.\n        \
             for (var {q} = 0u; {q} < {}u; {q}++) {{\n            \
             let task = lid + {wg}u * {q};\n            \
             let tb = task / {}u;\n            \
             let cb = task % {}u;\n            \
             for (var {i} = 0u; {i} < 4u; {i}++) {{\n                \
             for (var {j} = 0u; {j} < 4u; {j}++) {{\n                    \
             let t = 4u * tb + {i};\n                    \
             let c = cb + {}u * {j};\n                    \
             if (task < {}u && t < {}u && c < {}u) {{\n                        \
             shared_partials[group * {shared_words}u + {}u + {}u * t + c] += {}[4u * {q} + {i}][{j}];\n                    \
             }}\n                \
             }}\n            \
             }}\n        \
             }}",
            r.label,
            self.tasks,
            self.blocks_c,
            self.blocks_c,
            self.blocks_c,
            self.blocks_t * self.blocks_c,
            self.trips,
            r.columns,
            r.first,
            r.stride,
            self.acc,
        );
    }
}

/// The one-thread entry the runtime dispatches after each slice's outer entry: the next
/// slice, or after the launch's last, slice 0 for the next launch.
pub(in crate::emit_wgsl) fn next_slice_entry() -> String {
    format!(
        "\n// Moves the next dispatches on to the next slice; after the last, back to the first.\n\
         @compute @workgroup_size(1)\n\
         fn {}() {{\n    \
         let slices = (params.per_thread + params.slice_runs - 1u) / params.slice_runs;\n    \
         let next = {RECORDS}[0] + 1u;\n    \
         {RECORDS}[0] = select(next, 0u, next >= slices);\n\
         }}\n",
        abi::NEXT_SLICE_ENTRY_POINT
    )
}
