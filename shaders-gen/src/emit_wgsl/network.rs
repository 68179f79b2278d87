//! The adjoint kernel of a network of dense hidden layers (each `tanh`, relu or the
//! sigmoid) as register-blocked matrix products of the workgroup, not one element a thread;
//! and its value kernel the same way ([`value`]), which the compiler takes where one element
//! a thread would keep a layer as a loop.
//!
//! One element a thread reads every weight once per element, which holds an 8-64-64-1
//! network's adjoint at about 6 TFMA/s on the H100; JAX's batched products ran 1.5x faster.
//! This kernel takes chunks of 64 elements and keeps in workgroup memory exactly three
//! `H x 64`-sized matrices (48 KiB at `H = 64`, the device's limit): the second layer's
//! weights `W2`, the chunk's first activations `h1` and its second pre-activations' adjoints
//! `d_s2`, each swizzled by 16-byte groups (an XOR of the column group with the row) so
//! that lanes reading different rows read different banks; at 32 rows, where they fit,
//! padded instead (a row one `vec4` longer: [`NetworkPlan::pads_rows`]), which does the
//! same with every address a base and a constant. The inputs, the output's partial
//! sums and `d_y` borrow the rows of whichever matrix is free.
//!
//! Workgroup memory also sets how many workgroups a multiprocessor runs at once: NVIDIA's
//! Vulkan driver holds 48 KiB a multiprocessor in all ([`MULTIPROCESSOR_WORKGROUP_BYTES`]),
//! so the 8-32-32-1 adjoint's 22 KiB run two workgroups of four warps each, and the same
//! kernel padded past 24 KiB ran 1.75x slower with one. Its warps wait on barriers and
//! shared loads, and the other workgroup's warps are what fills those waits; so a layout
//! that saves registers or barriers at the price of a workgroup loses
//! ([`workgroups_sharing`]; BENCHMARKS.md, "Workgroups a multiprocessor").
//!
//! - Forward products and `d_h1 = W2^T d_s2`: the threads form column groups of `H / 2`
//!   lanes, group `g` owning the chunk's elements `(64 / groups) g ..` and its lane `lr`
//!   the rows `lr` and `lr + H / 2`; a thread's tile is those two rows by those elements,
//!   the weights read by lane, the activations broadcast to the group as `vec4`s. Two rows
//!   a lane at `H = 32` too (half-warps as groups): a step loads one broadcast `vec4` for
//!   eight FMAs rather than four, and the 8-32-32-1 adjoint ran 1.13x faster on the H200.
//! - `d_W2 += d_s2 h1^T`: `vec4` dot products over the chunk's elements, a 4 x 4 tile of
//!   rows and columns a thread, summed in registers over the whole run. At `H = 32`, which
//!   has 8 words of it a thread, two halves of the workgroup each take half the elements,
//!   and the second's sums are added to the first's at the end of the run.
//! - `d_W1`, `d_b1`, `d_b2`, `d_w3`: each thread's sums over its elements, then summed over
//!   the column groups in turn. Every sum is in a fixed order: bit-identical over runs.
//! - The output rows `y_o = b3_o + w3_o . h2` (up to [`max_outputs`]: each lane's part of
//!   each row goes into rows of `d_s2`'s matrix before the products write it; two rows
//!   of outputs at a time where that keeps a multiprocessor's workgroups,
//!   [`NetworkPlan::pairs_outputs`]) and the loss after them run one thread an element.
//! - Each layer's activation derivative is read off its stored output, where the chunk's
//!   matrices have no room for the sums: `1 - h^2` for `tanh`, `h (1 - h)` for the
//!   sigmoid; for relu 1 above zero, 0
//!   below, and 0.5 at a sum of exactly zero (`max`'s tie, as `ad::partials` has it), which
//!   a mask of a bit per sum of the thread tells from a negative sum ([`activations::WGSL_RELU`]).
//!
//! - Deeper networks (up to four hidden layers at 32 rows, [`NetworkPlan::workgroup_bytes`]):
//!   each later layer's weights `W_l` and each layer's activations but the last's `h_l` get
//!   a matrix of their own; a layer between the first and the last is the second's forward
//!   product writing its activations as the first does, and the reverse runs each later
//!   layer's `d_h_(l-1) = W_l^T d_s_l` and `d_W_l += d_s_l h_(l-1)^T` in turn, the layer
//!   below's `d_s` through `d_s2`'s matrix. Names of layer `l` end in `l`, the output
//!   rows' in `L + 1`, so that two layers' kernels read as before.
//! - Three hidden layers of 64 rows, whose five matrices would take 80 KiB, run in three
//!   ([`reload`], [`NetworkPlan::reloads_weights`]): the weight matrices lend their memory
//!   to the chunk's activations and adjoints, the first layer is computed again in the
//!   reverse pass, and the weights are copied in again each chunk. The 8-64-64-64-1
//!   adjoint ran 2.9x faster so than one element a thread on the H200 (96.5 -> 32.5 ms at
//!   2^24), level with JAX "default" at 2^20 (BENCHMARKS.md).
//! - Two hidden layers of 128 rows, whose `W2` alone would take 64 KiB, run in chunks of 32
//!   elements with `W2` streamed through workgroup memory in blocks ([`blocked`],
//!   [`NetworkPlan::blocks_weights`]): the 8-128-128-1 adjoint ran 4.0-4.4x faster so than
//!   one element a thread on the H200, at 43% of the FMA ceiling (BENCHMARKS.md). Past
//!   [`FIRST_LAYER_ROW_INPUTS`] inputs (up to 32) `d_W1` is a tile of the workgroup's
//!   product as `d_W2` is ([`NetworkPlan::tiles_first_layer`]): `d_s1` and the inputs go
//!   into the chunk's matrices once `d_h1` has read them. The 32-128-128-1 adjoint ran
//!   4.4x faster so than one element a thread on the H200 (21.8 -> 4.96 ms at 2^20), 4%
//!   slower than JAX at f32 ("highest"), 1.8x slower than its TF32 default. Past
//!   [`FIRST_LAYER_REGISTER_INPUTS`] inputs (up to 128) each lane's rows of `W1` do not fit
//!   its registers beside the tiles, and `W1` comes through `wblk` too, in blocks of 32 of
//!   its columns ahead of `W2`'s ([`NetworkPlan::streams_first_layer`]).
//! - Layers of fewer rows than the kernel's 32, 64 or 128 (17 to 128, two widths or one) are
//!   computed at its width, the rows past theirs padding: their weights, biases and output
//!   weights loaded as zero (at an index clamped into the written rows), so their sums are
//!   zero, no padded activation reaches a written row and no padded adjoint is other than
//!   zero; their gradients are not stored. Their activations are set to zero as well: a sum
//!   of `0 * inf` is NaN, which the next layer's zero weights would carry into the written
//!   rows, where unpadded the network gives a finite value. Padded, an 8-48-48-1
//!   network's adjoint ran 2.6x faster than one element a thread on the H200.
//!
//! The runtime compiles this kernel without wgpu's bounds checks
//! ([`crate::launch::KernelForm::bounds_checks`]), which clamp every index and kept the
//! driver from folding constant offsets into loads: the 8-64-64-1 adjoint ran 21.9 ms
//! checked and 17.0 unchecked at 2^24 on the H200 (BENCHMARKS.md). Every index is in range
//! by construction:
//! - workgroup and function arrays are indexed by the thread's place, loop counters over
//!   constant ranges and constants, each below its array's length for every width and
//!   input count [`NetworkPlan::supported`] admits;
//! - `args`, which holds the launch's `n` rows, is read only at rows below `n`: every row
//!   clamped to `n - 1`, and read only where `n >= 1` (the first chunk's inputs where the
//!   workgroup has elements, the rest inside the chunk loop, which runs while `first < n`);
//! - `values` is written only below `n`; `shared_partials` only in the workgroup's own row,
//!   which the runtime allocates for every workgroup it dispatches; `shared_args` is read
//!   at the plan's shared words;
//! - the loss is straight-line code without arrays.
//!
//! Hand-written first (`benches/networks/variants/coop_net.py`, whose kernels this writes
//! again); on the H100 it ran the 8-64-64-1 adjoint 1.8x faster than the per-element kernel
//! and faster than JAX at 2^20 and 2^24 (BENCHMARKS.md, "Layers as register-blocked
//! products of the workgroup").

mod activations;
mod blocked;
mod header;
mod outputs;
mod partials;
mod phases;
mod prologue;
mod reload;
mod shape;
mod tiles;
mod value;

use crate::ir::{Activation, Function, Op};
use crate::ops::Func;
use activations::{activate, derivative, keeps_ties, record_ties};
use header::header;
use outputs::output_and_loss;
use partials::partial_sums;
use phases::{backward, forward};
use prologue::entry_prologue;
use shape::Shape;
use tiles::GradTile;

/// A shared word's index as a function of a row `j` and a column `k`:
/// `offset + row_stride * j + column_stride * k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordIndex {
    /// The word of row 0, column 0.
    pub offset: u32,
    /// Words from one row to the next.
    pub row_stride: u32,
    /// Words from one column to the next.
    pub column_stride: u32,
}

/// A dense hidden layer: its weights and biases among the shared words, its rows as
/// written and its activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HiddenLayer {
    /// `W[j][k]`.
    pub weights: WordIndex,
    /// `b[j]` is shared word `bias + j`.
    pub bias: u32,
    /// Rows as written, at most the plan's `hidden`: the kernel's rows past them are
    /// padding, their weights read as zero and their gradients not stored, so a layer of 48
    /// rows runs as one of 64 ([`padded_width`]).
    pub rows: u32,
    /// What it applies to its sums: `tanh`, relu or the sigmoid ([`NetworkPlan::supported`]).
    pub activation: Activation,
}

/// An output row `y = bias + w . h2` among the shared words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputRow {
    /// `w[k]` is shared word `offset + row_stride * k` (the column stride unused).
    pub weights: WordIndex,
    /// The shared word of the bias.
    pub bias: u32,
}

/// What [`emit_network_adjoint`] writes a kernel for: the network of dense hidden layers
/// `h_1 = act_1(W_1 x + b_1)`, `h_l = act_l(W_l h_(l-1) + b_l)` up to `h_L`, output rows
/// `y_o = b_o + w_o . h_L`, then `loss(y, element words)`.
pub struct NetworkPlan {
    /// Argument words per element.
    pub element_words: u32,
    /// The element's word of `x[0]`; `x[k]` is the next `k`th.
    pub first_input: u32,
    /// Length of `x`: the first layer's columns.
    pub inputs: u32,
    /// Rows of every hidden layer in the kernel: 32, 64 or 128.
    pub hidden: u32,
    /// The hidden layers: the first (`hidden x inputs` in the kernel), then each later one
    /// (`hidden x hidden`), which reads the one before.
    pub layers: Vec<HiddenLayer>,
    /// The output rows, `y_0 ..`, which read the last hidden layer.
    pub outputs: Vec<OutputRow>,
    /// The loss: inputs `[y_0 .., the element's words..]`, outputs `[value, d value / d y_0, ..]`
    /// (straight-line: no loops, no arrays).
    pub loss: Function,
    /// All the shared words (read from a storage buffer: [`SHARED_UNIFORM`]).
    pub shared_words: u32,
}

/// The kernel's width for layers of at most `rows` rows: 32, 64 or 128, the next of them, from
/// 17 rows on; others as they are (which [`NetworkPlan::supported`] refuses). Padded, an
/// 8-48-48-1 network's adjoint costs about what the 8-64-64-1's does, and ran 2.6x faster
/// than one element a thread, which had been 1.8x slower than JAX's (H200, BENCHMARKS.md,
/// "Networks of other shapes"). At 16 rows and fewer one element a thread is as fast as
/// the padded 32 rows would be (0.33 ms at 2^20 for 8-16-16-1, 0.34 for 8-32-32-1).
pub const fn padded_width(rows: u32) -> u32 {
    match rows {
        17..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        r => r,
    }
}

/// Whether a kernel of width `hidden` streams `W2` through workgroup memory in blocks
/// (`network/blocked.rs`): at 128 rows, whose `W2` alone would take 64 KiB.
const fn blocks_at(hidden: u32) -> bool {
    hidden == 128
}

/// Elements of a chunk at width `hidden`: 64, or 32 where `W2` is streamed in blocks
/// ([`blocked`]), where a chunk's matrices of 64 elements would take 32 KiB each.
pub const fn chunk_elements(hidden: u32) -> u32 {
    if blocks_at(hidden) { 32 } else { 64 }
}

/// The most inputs whose `d_W1` each thread sums for its own rows in registers (beside its
/// rows of `W1`): past them, at 128 rows, `d_W1 += d_s1 x^T` is a product of the workgroup
/// ([`NetworkPlan::tiles_first_layer`]), each thread a tile of it like its tile of `d_W2`.
/// Past 16 inputs the row sums do not fit beside `d_W2`'s 64 words (one element a thread
/// instead: the 32-128-128-1 adjoint ran 21.8 ms at 2^20 on the H200, tiled 4.96); from 16
/// the tile is faster too (16-128-128-1 4.39 -> 4.28 ms, with two outputs 4.48 -> 4.35, four
/// 4.74 -> 4.62), at 14 and 12 the two tie within 0.2%, and at 10, 8 and 3 the row sums win
/// by 1.2-3.4% (BENCHMARKS.md, "Networks of many inputs").
pub const FIRST_LAYER_ROW_INPUTS: u32 = 15;

/// The most inputs whose rows of `W1` each lane holds in registers for the forward
/// product (two rows a lane: 64 registers at 32 inputs). Past them, at 128 rows, the kernel
/// streams `W1` through workgroup memory in blocks of its columns as it streams `W2`
/// ([`NetworkPlan::streams_first_layer`]); at 32 and 64 rows the network runs one element
/// a thread.
pub const FIRST_LAYER_REGISTER_INPUTS: u32 = 32;

/// Threads along the inputs of a tile of `d_W1` ([`NetworkPlan::tiles_first_layer`]): the
/// `threads / 8` along its rows then read rows `j1 + nj1 a` of `d_s1`, which share `j1`'s
/// swizzle, and a warp's eight input lanes read eight rows of the inputs in distinct banks.
const W1_TILE_INPUT_LANES: u32 = 8;

/// Fewest rows of either layer that the kernel pads to its width. A network of two widths
/// runs at the wider's kernel width, the narrower padded; on the H200 every one measured
/// ran faster padded than one element a thread, down to 16 rows beside 64 (8-64-16-1: 1.12 ->
/// 0.90 ms at 2^20, 17.3 -> 13.6 at 2^24; 8-16-64-1 1.11 -> 0.85, 17.6 -> 12.7). Below, a
/// layer's few rows would pay for 64.
pub const MIN_PADDED_ROWS: u32 = 16;

/// The most output rows the kernel computes at width `hidden`: their lanes' parts take
/// `H / 2` rows of `d_s2`'s matrix each, which has `H` rows where the three matrices fill
/// 48 KiB (`H = 64`); at `H = 32` the third and fourth outputs' parts may take the first
/// two's rows once those are summed ([`NetworkPlan::pairs_outputs`]), and at `H = 128`
/// `wblk`'s rows (`network/blocked.rs`).
pub const fn max_outputs(hidden: u32) -> u32 {
    if hidden == 64 { 2 } else { 4 }
}

/// Bytes of workgroup memory the kernel may declare: the 48 KiB that the device's limit
/// is on NVIDIA's Vulkan driver, and that three matrices of 64 rows fill.
pub const WORKGROUP_BYTES: u32 = 48 * 1024;

/// Bytes of workgroup memory that a multiprocessor holds for all the workgroups it runs at
/// once, on NVIDIA's Vulkan driver (580.159, H100): not the 228 KiB the hardware can give
/// shared memory, but the 48 KiB one workgroup may declare. The generated 8-32-32-1
/// adjoint (22,288 bytes, 176 registers: two workgroups of 128 threads) ran 0.321 ms at
/// 2^20 with its workgroup memory padded to 24,064 bytes and 0.561 with 25,088: one
/// workgroup, four warps, with nothing to hide its barriers' and loads' waits
/// (BENCHMARKS.md, "Workgroups a multiprocessor").
pub const MULTIPROCESSOR_WORKGROUP_BYTES: u32 = 48 * 1024;

/// Workgroups of `bytes` of workgroup memory each that a multiprocessor holds at once, as
/// far as workgroup memory goes ([`MULTIPROCESSOR_WORKGROUP_BYTES`]; registers may allow
/// fewer).
pub const fn workgroups_sharing(bytes: u32) -> u32 {
    match MULTIPROCESSOR_WORKGROUP_BYTES.checked_div(bytes) {
        Some(workgroups) => workgroups,
        None => u32::MAX,
    }
}

/// Words a padded row of a later layer's weights has past the layer's `H`
/// ([`NetworkPlan::pads_rows`]): a row of 36 words puts `W[j][4m ..]` in bank group
/// `(j + m) % 8`, as the XOR swizzle put it in `(j ^ m) % 8`.
pub const PADDED_WEIGHT_WORDS: u32 = 4;

/// The rows of a kernel of width `hidden` whose chunk's matrices have rows of `rv` `vec4`s
/// (the chunk's elements over four): words of a row of a later layer's weights, and `vec4`s
/// of a row of the chunk's matrices, each one `vec4` longer where `padded`
/// ([`NetworkPlan::pads_rows`]). The one place the padded layout's sizes are written: the
/// plan's byte count and the emitted addresses both read it.
fn row_lengths(hidden: u32, rv: u32, padded: bool) -> (u32, u32) {
    if padded {
        (hidden + PADDED_WEIGHT_WORDS, rv + 1)
    } else {
        (hidden, rv)
    }
}

/// Rows of the `d_s` matrix of a kernel of width `hidden` with `outputs` output rows, the
/// parts of `in_ds` of them at once: `H`, or more for the lanes' parts of the outputs
/// (`H / 2` rows each) and each output's `d_y` (rows `32 ..`); the others' parts in `wblk`
/// at `H = 128`, or after the first two's in their rows
/// ([`NetworkPlan::pairs_outputs`]).
const fn ds_rows(hidden: u32, outputs: u32, in_ds: u32) -> u32 {
    let parts = in_ds * (hidden / 2);
    let rows = if hidden > 32 + outputs {
        hidden
    } else {
        32 + outputs
    };
    if rows > parts { rows } else { parts }
}

/// Whether the kernel reads its shared words from a uniform buffer: no. Its lanes read
/// different weights at once (copying `W2`, each lane's rows of `W1`), which the constant
/// cache behind a uniform buffer serves an address at a time; from storage, the 8-64-64-1
/// adjoint ran 4% faster at 2^20 on the H200 (1.107 -> 1.061 ms).
pub const SHARED_UNIFORM: bool = false;

impl NetworkPlan {
    /// Whether this kernel can be written for the plan: widths whose swizzles are XORs
    /// within a row (powers of two), two hidden layers or more whose matrices fit
    /// [`WORKGROUP_BYTES`] ([`NetworkPlan::workgroup_bytes`]: up to four at 32 rows, three
    /// at 64 with its weights reloaded, two at 128),
    /// layers of as many rows or fewer ([`padded_width`], [`MIN_PADDED_ROWS`]),
    /// outputs whose lanes' parts fit `d_s`'s matrix ([`max_outputs`]), activations whose
    /// derivative it reads off their stored outputs (`tanh`, relu, the sigmoid), inputs that
    /// fit the borrowed rows, and a loss of plain words.
    pub fn supported(&self) -> bool {
        self.shape_supported() && self.workgroup_bytes() <= WORKGROUP_BYTES
    }

    /// Whether the cooperative value kernel ([`emit_network_value`]) is written for the
    /// plan: as [`NetworkPlan::supported`] says, with the value kernel's matrices
    /// ([`NetworkPlan::value_workgroup_bytes`]) in place of the adjoint's, so three hidden
    /// layers of 64 rows fit; and at 64 rows only. At 32 it lost to one element a thread
    /// even where that keeps a layer as a loop: the 8-32x8-1's value ran 13.37 ms at 2^24
    /// against 9.62 on the H200 (BENCHMARKS.md), its products too small for the chunk's
    /// barriers and loads.
    pub fn value_supported(&self) -> bool {
        self.shape_supported()
            && self.hidden == 64
            && self.value_workgroup_bytes() <= WORKGROUP_BYTES
    }

    /// [`NetworkPlan::supported`] but for the workgroup memory.
    fn shape_supported(&self) -> bool {
        let outputs = self.outputs.len() as u32;
        let straight = self.loss.outputs.len() as u32 == 1 + outputs
            && self.loss.nodes.iter().all(|n| {
                !matches!(
                    n.op,
                    Op::Loop(_)
                        | Op::Result(..)
                        | Op::ArrayNew(_)
                        | Op::ArrayGet { .. }
                        | Op::ArraySet { .. }
                        | Op::ArrayAdd(..)
                )
            });
        let activations = (self.layers.iter()).all(|l| {
            matches!(
                l.activation,
                Activation::Call(Func::Tanh) | Activation::Relu(_) | Activation::Sigmoid
            )
        });
        let depth = self.layers.len();
        let widest = self.layers.iter().map(|l| l.rows).max().unwrap_or(0);
        // At 128 rows only two layers fit, `W2` in blocks ([`blocked`]).
        let blocked_fits = !self.blocks_weights() || depth == 2;
        matches!(self.hidden, 32 | 64 | 128)
            && blocked_fits
            && depth >= 2
            && padded_width(widest) == self.hidden
            && self.layers.iter().all(|l| l.rows >= MIN_PADDED_ROWS)
            && (1..=max_outputs(self.hidden)).contains(&outputs)
            && activations
            && (1..=self.max_inputs()).contains(&self.inputs)
            && self.first_input + self.inputs <= self.element_words
            && self.loss.num_inputs == outputs + self.element_words
            && straight
    }

    /// Bytes of the kernel's workgroup memory: the weights of each hidden layer after the
    /// first (`H x H`), the chunk's activations of each hidden layer but the last (`H x
    /// 64`), and the `d_s` matrix; or where those do not fit but the kernel
    /// [`NetworkPlan::reloads_weights`], its three matrices.
    pub fn workgroup_bytes(&self) -> u32 {
        if self.reloads_weights() {
            return 3 * 4 * self.hidden * 64;
        }
        if self.blocks_weights() {
            let chunk = chunk_elements(self.hidden);
            let ds = self.ds_rows(false);
            return 4 * (self.hidden * blocked::BLOCK + (self.hidden + ds) * chunk);
        }
        self.stored_workgroup_bytes()
    }

    /// Whether the kernel streams `W2` through workgroup memory in blocks
    /// (`network/blocked.rs`): two hidden layers of 128 rows, whose `W2` alone would take
    /// 64 KiB.
    pub fn blocks_weights(&self) -> bool {
        blocks_at(self.hidden)
    }

    /// [`NetworkPlan::workgroup_bytes`] of a kernel that keeps every matrix the reverse
    /// reads.
    fn stored_workgroup_bytes(&self) -> u32 {
        let (padded, paired) = self.layout();
        self.stored_bytes(padded, paired)
    }

    /// [`NetworkPlan::stored_workgroup_bytes`] with rows padded ([`NetworkPlan::pads_rows`])
    /// or swizzled, the outputs' parts a pair at a time ([`NetworkPlan::pairs_outputs`]) or
    /// all at once.
    fn stored_bytes(&self, padded: bool, paired: bool) -> u32 {
        let (h, later) = (self.hidden, self.layers.len().saturating_sub(1) as u32);
        let ds = self.ds_rows(paired);
        let rv = chunk_elements(h) / 4;
        let (weight_row, matrix_row) = row_lengths(h, rv, padded);
        4 * (later * h * weight_row + (later * h + ds) * 4 * matrix_row)
    }

    /// Rows of the kernel's `d_s` matrix ([`ds_rows`]), its outputs' parts a pair at a time
    /// or all at once: two outputs' at most where the kernel streams `W2` in blocks (the
    /// others' in `wblk`) or pairs them.
    fn ds_rows(&self, paired: bool) -> u32 {
        let outputs = self.outputs.len() as u32;
        let in_ds = if (paired || self.blocks_weights()) && outputs > 2 {
            2
        } else {
            outputs
        };
        ds_rows(self.hidden, outputs, in_ds)
    }

    /// How the kernel lays out its stored matrices, `(padded, paired)`: of the layouts that
    /// fit [`WORKGROUP_BYTES`], the one a multiprocessor holds the most workgroups of
    /// ([`workgroups_sharing`]), then padded rows ([`NetworkPlan::pads_rows`]), then the
    /// outputs' parts all at once. On the H100 a layout that cost the 8-32-32-3 and -4
    /// adjoints their second workgroup ran 1.7x slower; with the workgroups equal, padding
    /// saves registers, and the outputs in pairs cost their two barriers (0.7-1.4% for
    /// networks of three and four layers, which hold one workgroup either way;
    /// BENCHMARKS.md, "Workgroups a multiprocessor").
    fn layout(&self) -> (bool, bool) {
        let pads = self.hidden == 32 && !self.blocks_weights();
        let pairs = self.outputs.len() > 2 && !self.blocks_weights();
        let mut best = ((false, false), None);
        for padded in [false, true].into_iter().filter(|&p| pads || !p) {
            for paired in [false, true].into_iter().filter(|&p| pairs || !p) {
                let bytes = self.stored_bytes(padded, paired);
                let rank = (workgroups_sharing(bytes), padded, !paired);
                if bytes <= WORKGROUP_BYTES && best.1.is_none_or(|b| rank > b) {
                    best = ((padded, paired), Some(rank));
                }
            }
        }
        best.0
    }

    /// Whether the kernel's matrices are padded rather than swizzled: each row of the
    /// chunk's matrices one `vec4` longer and each row of a later layer's weights four
    /// words longer, so that lanes reading different rows read
    /// different banks as the XOR swizzle has them do, while each address a lane computes
    /// is one base and a constant. With the swizzle, the XOR of a lane's column with each
    /// row's residue is a register or an instruction a row: the H200 driver kept 178
    /// registers for the 8-32-32-1 adjoint, and with the rows padded 166 (its SASS, read
    /// off the driver's shader cache; BENCHMARKS.md, "Padded rows"). At 32 rows, where the
    /// padded matrices fit and leave a multiprocessor as many workgroups
    /// (the plan's `layout`); at 64 rows the three matrices fill [`WORKGROUP_BYTES`]
    /// already.
    pub fn pads_rows(&self) -> bool {
        self.layout().0
    }

    /// Whether the adjoint sums its output rows two at a time, the third and fourth
    /// outputs' lanes' parts written into the first two's rows of `d_s`'s matrix once those
    /// are summed, two barriers more a chunk for 32 rows less (the plan's `layout`):
    /// where that buys a multiprocessor a workgroup (the 8-32-32-3 and -4 adjoints: 0.599
    /// and 0.619 ms at 2^20 on the H100 with one, 0.346 and 0.355 with two) or fits a
    /// network the 48 KiB would not hold otherwise (four layers of 32 rows and four
    /// outputs: 2.76 ms one element a thread, 0.98 the matrices' way).
    pub fn pairs_outputs(&self) -> bool {
        self.layout().1
    }

    /// Whether `d_W1 += d_s1 x^T` is a product of the workgroup, each thread summing a tile
    /// of `d_W1`'s rows and inputs over the chunk's elements (`d_s1` and the inputs stored
    /// into two matrices for it), rather than each thread its own rows' words over its
    /// elements: at 128 rows past [`FIRST_LAYER_ROW_INPUTS`] inputs. At 64 rows the tile
    /// was slower on the H200 (32-64-64-1 5.08 -> 5.25 ms at 2^22, 16-64-64-1 8.38 -> 8.85
    /// at 2^23; BENCHMARKS.md, "Networks past 32 inputs"), where the row sums fit.
    pub fn tiles_first_layer(&self) -> bool {
        self.blocks_weights() && self.inputs > FIRST_LAYER_ROW_INPUTS
    }

    /// The most inputs the kernel takes: as many as each lane holds its rows of `W1` for
    /// ([`FIRST_LAYER_REGISTER_INPUTS`]), or at 128 rows, whose kernel streams `W1` in
    /// blocks past them ([`NetworkPlan::streams_first_layer`]), as many as the chunk's
    /// matrices have rows for the inputs.
    fn max_inputs(&self) -> u32 {
        if self.blocks_weights() {
            self.hidden
        } else {
            FIRST_LAYER_REGISTER_INPUTS
        }
    }

    /// Whether the forward product's `W1 x` reads `W1` in blocks of its columns through
    /// workgroup memory, as `W2` is read (`network/blocked.rs`), rather than each lane its
    /// rows of `W1` from registers: at 128 rows past [`FIRST_LAYER_REGISTER_INPUTS`]
    /// inputs.
    pub fn streams_first_layer(&self) -> bool {
        self.blocks_weights() && self.inputs > FIRST_LAYER_REGISTER_INPUTS
    }

    /// Whether the kernel lends its weight matrices to the chunk's activations and adjoints
    /// and copies the weights in again (`network/reload.rs`): three hidden layers of 64
    /// rows, whose five matrices would take 80 KiB, in three of 16 KiB.
    pub fn reloads_weights(&self) -> bool {
        self.hidden == 64
            && self.depth() == 3
            && self.stored_workgroup_bytes() > WORKGROUP_BYTES
            && self.ds_rows(false) <= self.hidden
    }

    /// Bytes of the value kernel's workgroup memory: the weights of each hidden layer after
    /// the first (`H x H`) and one matrix of the chunk's activations, which each layer
    /// overwrites (its sums wait in registers until every thread has read its input).
    pub fn value_workgroup_bytes(&self) -> u32 {
        let (h, later) = (self.hidden, self.depth().saturating_sub(1));
        4 * (later * h * h + self.value_rows() * 64)
    }

    /// Rows of the value kernel's activation matrix: the kernel's rows, or more for the
    /// lanes' parts of the outputs (`H / 2` rows each).
    fn value_rows(&self) -> u32 {
        self.hidden
            .max(self.outputs.len() as u32 * (self.hidden / 2))
    }

    /// Hidden layer `l` (from 1).
    fn layer(&self, l: u32) -> &HiddenLayer {
        &self.layers[l as usize - 1]
    }

    /// Whether any hidden layer's activation is one that `is` says.
    fn uses(&self, is: impl Fn(Activation) -> bool) -> bool {
        self.layers.iter().any(|l| is(l.activation))
    }

    /// Hidden layers.
    fn depth(&self) -> u32 {
        self.layers.len() as u32
    }

    /// `W_l[j][k]` (WGSL `u32` expressions) from the shared words: zero in the padding,
    /// its rows `l`'s and its columns the layer below's (the inputs, for the first).
    fn weight(&self, l: u32, (j, k): (&str, &str)) -> String {
        let columns = (l > 1).then(|| self.layer(l - 1).rows);
        let written = [Some(self.layer(l).rows), columns];
        self.load(self.layer(l).weights, (j, k), written)
    }

    /// The load of shared word `w` at row `j` and column `k` (WGSL `u32` expressions), where
    /// `written[0]` and `written[1]` are the rows and columns as written, `None` where the
    /// index does not range over the kernel's rows: zero past them (the padding), read at
    /// an index clamped into them, since the kernel runs without bounds checks.
    fn load(&self, w: WordIndex, (j, k): (&str, &str), written: [Option<u32>; 2]) -> String {
        let limit = |n: Option<u32>| n.filter(|n| *n < self.hidden);
        let (lj, lk) = (limit(written[0]), limit(written[1]));
        if lj.is_none() && lk.is_none() {
            return format!("sw({})", word(w, j, k));
        }
        let at = |x: &str, n: Option<u32>| match n {
            Some(n) => format!("min({x}, {}u)", n - 1),
            None => x.to_string(),
        };
        let inside: Vec<String> = [(j, lj), (k, lk)]
            .into_iter()
            .filter_map(|(x, n)| Some(format!("{x} < {}u", n?)))
            .collect();
        format!(
            "select(0.0f, sw({}), {})",
            word(w, &at(j, lj), &at(k, lk)),
            inside.join(" && ")
        )
    }

    /// `store`, a WGSL statement of a gradient word whose indices `at` (each an expression
    /// and the rows written along it) may reach the padding: under a test that none does.
    fn store_written(&self, at: &[(&str, u32)], store: &str) -> String {
        let inside: Vec<String> = (at.iter())
            .filter(|(_, n)| *n < self.hidden)
            .map(|(x, n)| format!("{x} < {n}u"))
            .collect();
        if inside.is_empty() {
            return store.to_string();
        }
        format!("if ({}) {{ {store} }}", inside.join(" && "))
    }

    /// Warps of the workgroup: eight at `H = 64`; four at `H = 32` with two hidden layers
    /// (with one row a lane, 0.58 against 0.67 ms for the 8-32-32-1 on the H100), eight
    /// with more, whose later layers' tiles of `d_W` four warps held in 255 registers and
    /// spilled: the 8-32-32-32-1 adjoint ran 0.978 ms with four warps and 0.715 with eight
    /// at 2^20 on the H200, 14.72 and 10.27 ms at 2^24 (BENCHMARKS.md).
    fn warps(&self) -> u32 {
        if self.hidden >= 64 || self.depth() > 2 {
            8
        } else {
            4
        }
    }
}

/// The WGSL of `word` at row `j` and column `k` (WGSL expressions of `u32`), without the
/// terms that are zero or factors that are one.
fn word(w: WordIndex, j: &str, k: &str) -> String {
    let term = |stride: u32, x: &str| match stride {
        0 => None,
        1 => Some(x.to_string()),
        s => Some(format!("{s}u * ({x})")),
    };
    let terms: Vec<String> = [
        (w.offset > 0).then(|| format!("{}u", w.offset)),
        term(w.row_stride, j),
        term(w.column_stride, k),
    ]
    .into_iter()
    .flatten()
    .collect();
    if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    }
}

/// The cooperative adjoint kernel of `plan` (see the module doc); entry point `adjoint`,
/// the generated adjoint's bindings and outputs (`values`, a row of `shared_partials` per
/// workgroup), workgroup size [`network_workgroup_size`].
pub fn emit_network_adjoint(signature: &str, plan: &NetworkPlan) -> String {
    let sh = Shape::of(plan);
    let mut s = String::new();
    header(signature, plan, &sh, &mut s);
    entry_prologue(plan, &sh, &mut s);
    forward(plan, &sh, &mut s);
    output_and_loss(plan, &sh, &mut s);
    if sh.reloads {
        reload::backward(plan, &sh, &mut s);
    } else {
        backward(plan, &sh, &mut s);
    }
    partial_sums(plan, &sh, &mut s);
    s
}

/// The cooperative value kernel of `plan` (`network/value.rs`); entry point `forward`, the
/// generated value kernel's bindings and output, workgroup size [`network_workgroup_size`].
pub fn emit_network_value(signature: &str, plan: &NetworkPlan) -> String {
    let sh = Shape::of_value(plan);
    let mut s = String::new();
    header(signature, plan, &sh, &mut s);
    entry_prologue(plan, &sh, &mut s);
    value::layers(plan, &sh, &mut s);
    value::outputs_and_loss(plan, &sh, &mut s);
    s
}

/// The workgroup size of [`emit_network_adjoint`]'s and [`emit_network_value`]'s kernels
/// for `plan`.
pub fn network_workgroup_size(plan: &NetworkPlan) -> u32 {
    32 * plan.warps()
}

/// Lines of WGSL, each pushed with its newline.
fn line(s: &mut String, text: &str) {
    s.push_str(text);
    s.push('\n');
}

#[cfg(test)]
mod tests;
