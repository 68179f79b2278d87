//! The cooperative kernels' shapes ([`Shape`]): the workgroup's threads, lanes and column
//! groups, the chunk's matrices in workgroup memory and where a cell of each sits
//! (swizzled by 16-byte groups or padded), derived once from the [`NetworkPlan`].

use super::{NetworkPlan, W1_TILE_INPUT_LANES, blocked, chunk_elements, row_lengths};

/// The kernel's shapes, derived once from the plan.
pub(super) struct Shape {
    pub(super) threads: u32,
    pub(super) hidden: u32,
    pub(super) inputs: u32,
    /// Lanes that share a set of the chunk's elements, each owning rows `lr + row_lanes r`
    /// of it (`lr` the lane's place among them): a column group.
    pub(super) row_lanes: u32,
    /// Rows a lane owns.
    pub(super) lane_rows: u32,
    /// Column groups of the workgroup: `threads / row_lanes`.
    pub(super) column_groups: u32,
    /// `vec4` groups of a `W2` row.
    pub(super) groups: u32,
    /// `vec4` columns of a column group's elements.
    pub(super) columns: u32,
    /// Sets of threads that each sum `d_W2` over a part of the chunk's elements (added
    /// together at the end of the run).
    pub(super) parts: u32,
    /// `d_W2` column blocks and row blocks, and a thread's rows and columns of it.
    pub(super) nk: u32,
    pub(super) nj: u32,
    pub(super) ja: u32,
    pub(super) kb: u32,
    /// Output rows.
    pub(super) outputs: u32,
    /// Rows of the `d_s2` matrix: `H`, or more for the lanes' parts of the outputs
    /// (`row_lanes` rows each) and `d_y` (rows `32 ..`).
    pub(super) ds2_rows: u32,
    /// Registers of the next chunk's inputs a thread loads.
    pub(super) prefetch: u32,
    /// Elements of a chunk ([`chunk_elements`]), and `vec4`s of a row of the chunk's
    /// matrices.
    pub(super) chunk: u32,
    pub(super) rv: u32,
    /// Whether `W2` is streamed through workgroup memory in blocks
    /// ([`NetworkPlan::blocks_weights`]).
    pub(super) blocked: bool,
    /// Whether `d_W1` is a tile of the workgroup's product ([`NetworkPlan::tiles_first_layer`]),
    /// and the thread's rows (`j1 + nj1 a`, `a < ja1`) and inputs (`k1 + 8 b`, `b < kb1`) of it.
    pub(super) w1_tile: bool,
    /// `W1`'s column blocks where the kernel streams them
    /// ([`NetworkPlan::streams_first_layer`]); 0 where each lane holds its rows of `W1`.
    pub(super) w1_blocks: u32,
    pub(super) nj1: u32,
    pub(super) ja1: u32,
    pub(super) kb1: u32,
    /// Hidden layers, `L`: layer `l`'s names end in `l` (`w2s`, `b2_0`, `gw2_0`, `h2s`),
    /// the output rows' in `L + 1` (`w3_0`, `gb3` of two layers), as the samples name them.
    pub(super) depth: u32,
    /// Whether this is the value kernel's shape ([`super::emit_network_value`]).
    pub(super) value: bool,
    /// Whether the adjoint lends its weight matrices ([`NetworkPlan::reloads_weights`]):
    /// its three matrices are then all `vec4` arrays, `w3s`, `w2s` and `acts`.
    pub(super) reloads: bool,
    /// Whether the matrices are padded rather than swizzled ([`NetworkPlan::pads_rows`]):
    /// then the chunk's matrices' rows are `stride = rv + 1` `vec4`s and the later layers'
    /// weights' rows `weight_row = H + 4` words (`rv` and `H` swizzled).
    pub(super) padded: bool,
    pub(super) stride: u32,
    pub(super) weight_row: u32,
    /// Whether the adjoint sums its outputs a pair at a time
    /// ([`NetworkPlan::pairs_outputs`]; never the value kernel, which has the rows to sum
    /// them at once).
    pub(super) pairs_outputs: bool,
}

impl Shape {
    /// The value kernel's shape: the adjoint's, but for its one activation matrix.
    pub(super) fn of_value(plan: &NetworkPlan) -> Shape {
        let sh = Shape::of(plan);
        Shape {
            value: true,
            reloads: false,
            pairs_outputs: false,
            padded: false,
            stride: sh.rv,
            weight_row: sh.hidden,
            ..sh
        }
    }

    /// The matrix the chunk's inputs are stored into: `ds2s`'s rows in the adjoint, the
    /// activation matrix in the value kernel.
    pub(super) fn x_matrix(&self) -> String {
        self.h_matrix(0)
    }

    /// The matrix of layer `l`'s activations as the forward pass writes them (`l` from 1; 0:
    /// the chunk's inputs): its own in the adjoint (the inputs in `ds2s`), the one
    /// activation matrix in the value kernel and the adjoint that reloads its weights.
    pub(super) fn h_matrix(&self, l: u32) -> String {
        match (self.value || self.reloads, l) {
            (true, _) => "acts".into(),
            (false, 0) => "ds2s".into(),
            (false, l) => format!("h{l}s"),
        }
    }

    /// The matrix the reverse pass reads layer `l`'s activations from: where the forward
    /// wrote them, but for the first layer's of an adjoint that reloads its weights, which
    /// it computes again into `W3`'s matrix ([`super::reload`]).
    pub(super) fn h_below_matrix(&self, l: u32) -> String {
        match (self.reloads, l) {
            (true, 1) => "w3s".into(),
            _ => self.h_matrix(l),
        }
    }

    /// The matrix of `d_s_l`, layer `l`'s sums' adjoints (the last layer's holding the
    /// lanes' parts of the outputs and `d_y` before them): `ds2s`, or in an adjoint that
    /// reloads its weights `W2`'s matrix for the last layer's and the activation matrix
    /// for the second's, each overwriting what the reverse no longer reads.
    pub(super) fn ds_matrix(&self, l: u32) -> String {
        match (self.reloads, l == self.depth) {
            (false, _) => "ds2s".into(),
            (true, true) => "w2s".into(),
            (true, false) => "acts".into(),
        }
    }

    /// The matrix the partial sums pass their words through once the last chunk is done:
    /// `h1s`, or `W3`'s in an adjoint that reloads its weights.
    pub(super) fn sums_matrix(&self) -> String {
        if self.reloads { "w3s" } else { "h1s" }.into()
    }

    /// The `vec4` of `W_l[j][4 k4 ..]` in the `vec4` matrix of a kernel that
    /// [`NetworkPlan::reloads_weights`] (WGSL expressions of `u32`).
    pub(super) fn weight_vec4(&self, l: u32, j: &str, k4: &str) -> String {
        let (h4, g) = (self.hidden / 4, self.groups);
        format!("w{l}s[{j} * {h4}u + ({k4} ^ ({j} % {g}u))]")
    }

    pub(super) fn of(plan: &NetworkPlan) -> Shape {
        let hidden = plan.hidden;
        let threads = 32 * plan.warps();
        // Two rows a lane at both widths: a step of a product then loads a broadcast
        // `vec4` for eight FMAs, where one row a lane at H = 32 loaded one for four.
        let row_lanes = hidden / 2;
        let column_groups = threads / row_lanes;
        // `d_W2` has 16 words a thread at H = 64 (a 4 x 4 tile: eight `vec4` loads for 16
        // dot products) but 8 at H = 32; there, two sets of threads each take half the
        // elements with 4 x 4 tiles rather than 2 x 4 tiles (six loads for eight).
        let parts = (16 * threads / (hidden * hidden)).max(1);
        let part_threads = threads / parts;
        let nk = (1 << part_threads.ilog2().div_ceil(2)).min(hidden);
        let nj = part_threads / nk;
        let groups = hidden / 4;
        let chunk = chunk_elements(hidden);
        let rv = chunk / 4;
        let (padded, paired) = plan.layout();
        let (weight_row, stride) = row_lengths(hidden, rv, padded);
        // The lane's rows share its swizzle (`W2`'s by `groups` or by 8 in blocks, the
        // matrices' by 8).
        debug_assert!(
            (row_lanes.is_multiple_of(groups) || plan.blocks_weights())
                && row_lanes.is_multiple_of(8)
                && column_groups <= rv
        );
        // A part is whole warps, its elements whole `vec4`s; `d_W2`'s rows `jb + nj a`
        // share `jb`'s swizzle.
        debug_assert!(
            part_threads.is_multiple_of(32) && rv.is_multiple_of(parts) && nj.is_multiple_of(8)
        );
        Shape {
            threads,
            hidden,
            inputs: plan.inputs,
            row_lanes,
            lane_rows: hidden / row_lanes,
            column_groups,
            groups,
            columns: rv / column_groups,
            parts,
            nk,
            nj,
            ja: hidden / nj,
            kb: hidden / nk,
            outputs: plan.outputs.len() as u32,
            ds2_rows: plan.ds_rows(paired),
            pairs_outputs: paired,
            depth: plan.depth(),
            prefetch: (chunk * plan.inputs).div_ceil(threads),
            chunk,
            rv,
            blocked: plan.blocks_weights(),
            w1_tile: plan.tiles_first_layer(),
            w1_blocks: if plan.streams_first_layer() {
                plan.inputs.div_ceil(blocked::BLOCK)
            } else {
                0
            },
            nj1: threads / W1_TILE_INPUT_LANES,
            ja1: hidden / (threads / W1_TILE_INPUT_LANES),
            kb1: plan.inputs.div_ceil(W1_TILE_INPUT_LANES),
            value: false,
            reloads: plan.reloads_weights(),
            padded,
            stride,
            weight_row,
        }
    }

    /// The first of the four bits of a tie mask (`WGSL_RELU`) for the thread's `vec4` of
    /// sums at lane row `r`, column `c`.
    pub(super) fn tie_bit(&self, r: u32, c: u32) -> u32 {
        debug_assert!(self.lane_rows * self.columns * 4 <= 32);
        4 * (r * self.columns + c)
    }

    /// The part of a name that tells output `o`'s values: none where there is one output.
    pub(super) fn out(&self, o: u32) -> String {
        if self.outputs == 1 {
            String::new()
        } else {
            format!("o{o}_")
        }
    }

    /// Inputs whose `d_W1` columns each thread sums for its rows and the column groups then
    /// sum row by row (`partials.rs`): none where `d_W1` is a tile of the workgroup's product.
    pub(super) fn row_sum_inputs(&self) -> u32 {
        if self.w1_tile { 0 } else { self.inputs }
    }

    /// Lane row `r` (`lr + row_lanes r`).
    pub(super) fn row(&self, r: u32) -> String {
        if r == 0 {
            "lr".into()
        } else {
            format!("(lr + {}u)", self.row_lanes * r)
        }
    }
}

impl Shape {
    /// Index of `vec4` column `col` of row `row` of a matrix of the chunk, swizzled (`rm`:
    /// the row modulo 8) or padded ([`Shape::padded`]); `col` in parentheses unless it is
    /// a name.
    pub(super) fn cell(&self, row: &str, rm: &str, col: &str) -> String {
        let name = col.starts_with(|c: char| c.is_ascii_alphabetic())
            && col.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let col = if name {
            col.to_string()
        } else {
            format!("({col})")
        };
        if self.padded {
            format!("{row} * {}u + {col}", self.stride)
        } else {
            format!("{row} * {}u + ({col} ^ {rm})", self.rv)
        }
    }

    /// [`Shape::cell`] of the lane's `vec4` column `cw + c` of a row known here, `row`,
    /// counted from the row a WGSL index `base` (empty or ending in ` + `; a multiple of 8
    /// rows) names. The swizzled index stays `(cw + c) ^ m`: written `cw ^ (c ^ m)` (one set
    /// of eight XOR constants for both of a lane's columns instead of sixteen) it ran the
    /// 8-64-64-1 adjoint 0.8% slower on the H100 (BENCHMARKS.md, "The columns' indices
    /// folded, measured").
    pub(super) fn column_cell(&self, base: &str, row: u32, c: u32) -> String {
        debug_assert!(c < self.columns);
        if self.padded {
            debug_assert!(base.is_empty());
            format!("{}u + (cw + {c}u)", self.stride * row)
        } else {
            format!("{base}{}u + ((cw + {c}u) ^ {}u)", self.rv * row, row % 8)
        }
    }

    /// Index in `ds2s` of `vec4` column `col` of output `o`'s `d_y` row, row `32 + o`,
    /// swizzled as the output parts that row holds before (so that each element's thread
    /// writes the word of its own part, which it has read).
    pub(super) fn dy_cell(&self, o: u32, col: &str) -> String {
        let start = self.stride * (32 + o);
        match o % 8 {
            rm if rm > 0 && !self.padded => format!("{start}u + (({col}) ^ {rm}u)"),
            _ => format!("{start}u + {col}"),
        }
    }

    /// Index in `w{l}s` (an `f32` matrix) of `W_l[j][k]`, swizzled by 16-byte groups or
    /// padded ([`Shape::padded`]).
    pub(super) fn weight_word(&self, j: &str, k: &str) -> String {
        if self.padded {
            format!("{j} * {}u + {k}", self.weight_row)
        } else {
            format!(
                "{j} * {}u + 4u * (({k} / 4u) ^ ({j} % {}u)) + {k} % 4u",
                self.hidden, self.groups
            )
        }
    }
}
