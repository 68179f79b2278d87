//! The tiles of weight gradients that the workgroup sums as products over the chunk's
//! elements: which thread holds which words, for the product (`phases.rs`) and the stores
//! into the row of partial sums (`partials.rs`) alike.

use super::{Shape, W1_TILE_INPUT_LANES};

/// A thread's tile of a weight gradient summed as a product of the workgroup over the
/// chunk's elements, in `gw{l}_{a}[{b}]`: rows `j + nj a` (`a < ja`) of `d_s_l` and rows
/// `k + nk b` (`b < kb`) of the layer's inputs. `d_W2`'s always, `d_W1`'s where
/// [`NetworkPlan::tiles_first_layer`](super::NetworkPlan::tiles_first_layer).
#[derive(Clone, Copy)]
pub(super) struct GradTile {
    /// The layer, whose names end in it.
    pub(super) l: u32,
    pub(super) j: &'static str,
    pub(super) k: &'static str,
    pub(super) nj: u32,
    pub(super) nk: u32,
    pub(super) ja: u32,
    pub(super) kb: u32,
    /// The swizzle of rows `k + nk b` of the inputs' matrix, where it is the same for
    /// every `b`: the first layer's `k1 + 8 b` share `k1`'s (`k1 < 8`).
    pub(super) k_swizzle: Option<&'static str>,
}

impl GradTile {
    /// The tile's words, `(a, b)`, in the order their sums are written and stored.
    pub(super) fn cells(self) -> impl Iterator<Item = (u32, u32)> {
        (0..self.ja).flat_map(move |a| (0..self.kb).map(move |b| (a, b)))
    }

    /// Row `a` of the tile, `j + nj a`.
    pub(super) fn row(self, a: u32) -> String {
        plus(self.j, self.nj * a)
    }

    /// Column `b` of the tile, `k + nk b`.
    pub(super) fn col(self, b: u32) -> String {
        plus(self.k, self.nk * b)
    }
}

/// `base + n` in WGSL, `base` where `n` is zero.
fn plus(base: &str, n: u32) -> String {
    match n {
        0 => base.to_string(),
        n => format!("{base} + {n}u"),
    }
}

impl Shape {
    /// The thread's tile of `d_W_l` ([`GradTile`]): `d_W1`'s where it is one, `d_W_l`'s of
    /// each later layer.
    pub(super) fn weight_tile(&self, l: u32) -> GradTile {
        if l == 1 {
            debug_assert!(self.w1_tile);
            GradTile {
                l,
                j: "j1",
                k: "k1",
                nj: self.nj1,
                nk: W1_TILE_INPUT_LANES,
                ja: self.ja1,
                kb: self.kb1,
                k_swizzle: Some("k1"),
            }
        } else {
            GradTile {
                l,
                j: "jb",
                k: "kb",
                nj: self.nj,
                nk: self.nk,
                ja: self.ja,
                kb: self.kb,
                k_swizzle: None,
            }
        }
    }
}
