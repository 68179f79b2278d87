//! The cooperative adjoint of two hidden layers of 128 rows
//! ([`NetworkPlan::blocks_weights`]): `W2` streamed through workgroup memory in blocks.
//!
//! At 128 rows `W2` alone takes 64 KiB, past the 48 KiB of workgroup memory. The chunk is
//! 32 elements ([`super::chunk_elements`]), so that `h1` and `d_s2` take 16 KiB each as at
//! 64 rows, and the third 16 KiB, `wblk`, holds a block of [`BLOCK`] of `W2`'s columns for
//! the forward product (`s2 = W2 h1`, summed over the block's columns) or of its rows for
//! `d_h1 = W2^T d_s2` (summed over the block's rows): each thread's tile of the product
//! stays in registers over the blocks, as the whole matrix's product does at 64 rows.
//!
//! `W2` is the same for every chunk, so the blocks come in the same cycle each chunk: the
//! forward's column blocks, then the reverse's row blocks. Past 32 inputs
//! ([`NetworkPlan::streams_first_layer`]) the cycle starts with `W1`'s column blocks, the
//! same shape as `W2`'s (`H` rows, [`BLOCK`] columns), for the first layer's sums; their
//! columns past the inputs are zero, and so are the rows of the inputs' matrix they
//! multiply (`phases::zero_padded_inputs`). While a thread computes with one
//! block it holds the next one's words in registers (`pw`), loaded from the shared words as
//! that block's product starts, and stores them into `wblk` once every thread has done
//! with it: the loads' latency hides behind a block's work. A chunk reads `W2` twice from
//! the shared words (in L2): 4 KiB an element, against its 49,000 FMAs of the layer.
//!
//! Layouts of `wblk`, `vec4`s: a column block's row `j` at `8 j`, its `vec4` column `k4` at
//! `k4 ^ (j % 8)`, so that lanes reading their own rows read different banks; a row block's
//! row `j` at `32 j` (at 128 rows), unswizzled, since lanes read consecutive words of one
//! row.
//!
//! Between the forward product's last block and the reverse's first, `wblk` holds the
//! third and fourth outputs' parts (`outputs.rs`), after a barrier. On the H200 the
//! 8-128-128-1 adjoint ran 4.0-4.4x faster than one element a thread, at 43% of the FMA
//! ceiling, and the 16-128-128-4's 4.4x (BENCHMARKS.md, "Two hidden layers of 128 rows").

use super::phases::{indented, rank_one_step};
use super::{NetworkPlan, Shape, line};
use std::fmt::Write;

/// Columns of `W2` in a column block, rows in a row block.
pub(super) const BLOCK: u32 = 32;

/// Blocks of each kind.
fn blocks(sh: &Shape) -> u32 {
    sh.hidden / BLOCK
}

/// The `vec4`s of a block each thread copies.
fn steps(sh: &Shape) -> u32 {
    let vec4s = sh.hidden * BLOCK / 4;
    debug_assert!(vec4s.is_multiple_of(sh.threads));
    vec4s / sh.threads
}

/// `wblk`'s declaration. A column block has the chunk matrices' shape and layout
/// ([`Shape::cell`]: `H` rows of `BLOCK / 4` swizzled `vec4`s), which the third and fourth
/// outputs' parts take too (`outputs.rs`).
pub(super) fn declare(sh: &Shape, s: &mut String) {
    debug_assert_eq!(sh.rv, BLOCK / 4);
    let _ = writeln!(
        s,
        "// W2 in blocks of {BLOCK} columns (the forward product), W2[j][{BLOCK} b + 4 k4 ..] at\n\
         // j * 8 + (k4 ^ (j % 8)), or of {BLOCK} rows (d_h1), W2[{BLOCK} b + j][4 k4 ..] at j * {} + k4.\n\
         var<workgroup> wblk: array<vec4<f32>, {}>;",
        sh.hidden / 4,
        sh.hidden * BLOCK / 4
    );
}

/// What a block of `wblk` holds, in the order a chunk reads them: `W1`'s columns where
/// the kernel streams the first layer ([`NetworkPlan::streams_first_layer`]), then `W2`'s
/// columns (the forward product), then `W2`'s rows (`d_h1`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    FirstColumns,
    Columns,
    Rows,
}

impl Block {
    /// The kind a chunk reads first.
    fn first(sh: &Shape) -> Block {
        if sh.w1_blocks > 0 {
            Block::FirstColumns
        } else {
            Block::Columns
        }
    }

    /// The kind read after this one's last block (the next chunk's first after `Rows`).
    fn next(self, sh: &Shape) -> Block {
        match self {
            Block::FirstColumns => Block::Columns,
            Block::Columns => Block::Rows,
            Block::Rows => Block::first(sh),
        }
    }

    /// Blocks of this kind: `W1`'s columns padded to whole blocks.
    fn count(self, sh: &Shape) -> u32 {
        match self {
            Block::FirstColumns => sh.w1_blocks,
            Block::Columns | Block::Rows => blocks(sh),
        }
    }

    /// Whether it holds columns, in the column blocks' layout.
    fn columns(self) -> bool {
        self != Block::Rows
    }
}

/// The statements, indented by `pad`, that load into `pw` the thread's `vec4`s of block
/// `wb` (a WGSL `u32` expression) of kind `kind`.
fn load_block(plan: &NetworkPlan, sh: &Shape, kind: Block, wb: &str, pad: &str) -> String {
    // The weights, and their rows and columns as written: `W1`'s columns past the inputs
    // load as zero.
    let (layer, written) = match kind {
        Block::FirstColumns => (plan.layer(1), [Some(plan.layer(1).rows), Some(sh.inputs)]),
        _ => (
            plan.layer(2),
            [Some(plan.layer(2).rows), Some(plan.layer(1).rows)],
        ),
    };
    // The block's first column or row, as a term of the index (none for the first).
    let start = match wb {
        "0u" => String::new(),
        wb => format!("{BLOCK}u * {wb} + "),
    };
    let mut s = String::new();
    for i in 0..steps(sh) {
        let (j, k) = if kind.columns() {
            let k4 = BLOCK / 4;
            (format!("q / {k4}u"), format!("{start}4u * (q % {k4}u)"))
        } else {
            let k4 = sh.hidden / 4;
            (format!("{start}q / {k4}u"), format!("4u * (q % {k4}u)"))
        };
        let words: Vec<String> = (0..4)
            .map(|c| {
                let k = if c == 0 {
                    "k".to_string()
                } else {
                    format!("k + {c}u")
                };
                plan.load(layer.weights, ("j", &k), written)
            })
            .collect();
        let _ = writeln!(
            s,
            "{pad}{{\n{pad}    let q = lid + {}u;\n{pad}    let j = {j};\n{pad}    let k = {k};\n{pad}    \
             pw[{i}] = vec4<f32>({});\n{pad}}}",
            sh.threads * i,
            words.join(", ")
        );
    }
    s
}

/// The prologue's part: `pw` declared and loaded with the chunk's first block.
pub(super) fn prologue(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let _ = writeln!(s, "    var pw: array<vec4<f32>, {}>;", steps(sh));
    s.push_str(&load_block(plan, sh, Block::first(sh), "0u", "    "));
}

/// The opening of the loop over one kind's blocks (`wb`): `pw` into `wblk` once every
/// thread has done with the block before, then the next block's words into `pw` (the
/// next kind's first after this kind's last).
fn block_loop(plan: &NetworkPlan, sh: &Shape, kind: Block, s: &mut String) {
    let n = kind.count(sh);
    let _ = writeln!(
        s,
        "        for (var wb = 0u; wb < {n}u; wb++) {{\n            workgroupBarrier();"
    );
    for i in 0..steps(sh) {
        let q = format!("(lid + {}u)", sh.threads * i);
        let at = if kind.columns() {
            let (row, k4) = (format!("({q} / {}u)", BLOCK / 4), BLOCK / 4);
            sh.cell(&row, &format!("({row} % 8u)"), &format!("{q} % {k4}u"))
        } else {
            q
        };
        let _ = writeln!(s, "            wblk[{at}] = pw[{i}];");
    }
    let pad = "                ";
    let _ = writeln!(
        s,
        "            workgroupBarrier();\n            if (wb + 1u < {n}u) {{\n{}            }} else {{\n{}            }}",
        load_block(plan, sh, kind, "(wb + 1u)", pad),
        load_block(plan, sh, kind.next(sh), "0u", pad),
    );
}

/// `f{r}_{c} = b2 + W2 h1` for the thread's tile, summed over the column blocks: the
/// lane's rows' words of the block by lane, `h1`'s rows broadcast.
pub(super) fn layer_product(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    debug_assert!(sh.blocked && sh.depth == 2);
    column_product(plan, sh, Block::Columns, ("h1s", "f", "b2", "h"), s);
}

/// `s{r}_{c} = b1 + W1 x` for the thread's tile, summed over `W1`'s column blocks
/// ([`NetworkPlan::streams_first_layer`]): the inputs' rows of `matrix` broadcast, its
/// rows past the inputs zero ([`super::phases::zero_padded_inputs`]).
pub(super) fn first_layer_product(plan: &NetworkPlan, sh: &Shape, matrix: &str, s: &mut String) {
    debug_assert!(sh.blocked && sh.w1_blocks > 0);
    column_product(plan, sh, Block::FirstColumns, (matrix, "s", "b1", "x"), s);
}

/// The thread's tile `{acc}{r}_{c} = {bias}_{r} + W m`, summed over the column blocks of
/// `kind`: the lane's rows' words of each block by lane, the block's rows of matrix `m`
/// broadcast as `{name}{i}_{c}`.
fn column_product(
    plan: &NetworkPlan,
    sh: &Shape,
    kind: Block,
    (matrix, acc, bias, name): (&str, &str, &str, &str),
    s: &mut String,
) {
    for r in 0..sh.lane_rows {
        for c in 0..sh.columns {
            let _ = writeln!(s, "        var {acc}{r}_{c} = vec4<f32>({bias}_{r});");
        }
    }
    block_loop(plan, sh, kind, s);
    let k4 = BLOCK / 4;
    let base = format!("wb * {}u + ", BLOCK * sh.rv);
    for m in 0..k4 {
        let _ = writeln!(
            s,
            "            {{\n                let wbase = {};",
            sh.cell("lr", "l8", &format!("{m}u"))
        );
        for r in 0..sh.lane_rows {
            let _ = writeln!(
                s,
                "                let wq{r} = wblk[wbase + {}u];",
                sh.row_lanes * r * k4
            );
        }
        let mut step = String::new();
        for i in 0..4 {
            let weight = |r: u32| format!("wq{r}[{i}]");
            rank_one_step(
                sh,
                (matrix, &base, 4 * m + i, &format!("{name}{i}_")),
                weight,
                acc,
                &mut step,
            );
        }
        s.push_str(&indented(&step));
        line(s, "            }");
    }
    line(s, "        }");
}

/// `d{r}_{c} += W2^T d_s2` for the thread's tile, summed over the row blocks: the lane's
/// columns' words of each of the block's rows, that row of `d_s2` broadcast.
pub(super) fn transposed_product(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    debug_assert!(sh.blocked && sh.depth == 2);
    block_loop(plan, sh, Block::Rows, s);
    let (h4, ds) = (sh.hidden / 4, sh.ds_matrix(2));
    let base = format!("wb * {}u + ", BLOCK * sh.rv);
    for j in 0..BLOCK {
        line(s, "            {");
        for r in 0..sh.lane_rows {
            let _ = writeln!(
                s,
                "                let v{r} = wblk[{}u + lr / 4u][lr % 4u];",
                j * h4 + sh.row_lanes * r / 4
            );
        }
        let mut step = String::new();
        rank_one_step(
            sh,
            (&ds, &base, j, "g"),
            |r| format!("v{r}"),
            "d",
            &mut step,
        );
        s.push_str(&indented(&step));
        line(s, "            }");
    }
    line(s, "        }");
}
