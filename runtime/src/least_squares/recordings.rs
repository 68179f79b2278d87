//! What a solve records: the evaluation of residuals, Jacobians, gradient and block
//! diagonal at `x`; the preconditioner and the start of CG for a λ; CG iterations; the
//! trial step `x + δ` with its model and cost; the return to `x` after a rejected step.
//! The scalars CG and the step need stay in one small buffer, in the slots below.

use super::Loss;
use super::ops::BlockOp;
use super::problem::{Problem, TermEntry};
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::Error;
use crate::gather::Field;
use crate::products::JacobianColumns;
use crate::recording::Recording;
use crate::vectors::Coefficient;

/// Slots of the scalars buffer.
pub(crate) mod slot {
    /// `Σ ρ` at `x` (twice the cost).
    pub const COST: u32 = 0;
    /// `|Jᵀr|²` over the rows not held.
    pub const GRADIENT: u32 = 1;
    /// `rᵀz` of CG, alternating: iteration `i` reads `RZ + i % 2`, writes the other.
    pub const RZ: u32 = 2;
    /// `pᵀAp` of the current CG iteration.
    pub const PAP: u32 = 4;
    /// `rᵀz` at the start of CG.
    pub const RZ_START: u32 = 5;
    /// `Σ ρ` at `x + δ`.
    pub const COST_NEW: u32 = 6;
    /// `gᵀδ`.
    pub const GD: u32 = 7;
    /// `|Jδ|²`.
    pub const JD: u32 = 8;
    /// `|δ|²`.
    pub const STEP: u32 = 9;
    /// `|x|²`.
    pub const X: u32 = 10;
    /// Slots in all.
    pub const COUNT: usize = 11;
}

/// A block's vectors (`rows × words`) and blocks (`rows × words²`) on the device.
pub(crate) struct BlockState {
    pub(crate) rows: usize,
    pub(crate) words: u32,
    pub(crate) x: Buffer<f32>,
    pub(super) saved: Buffer<f32>,
    pub(super) gradient: Buffer<f32>,
    pub(super) r: Buffer<f32>,
    pub(super) z: Buffer<f32>,
    pub(super) p: Buffer<f32>,
    pub(super) ap: Buffer<f32>,
    pub(super) delta: Buffer<f32>,
    pub(super) damping: Buffer<f32>,
    pub(super) mask: Buffer<f32>,
    pub(super) gram: Buffer<f32>,
    pub(super) inverse: Buffer<f32>,
    /// Zeros: the direction of this block in products where only another moves.
    pub(super) zero: Buffer<f32>,
}

/// A term's residuals and Jacobian blocks at `x`, and its scratch.
pub(crate) struct TermState {
    pub(super) values: Buffer<f32>,
    pub(super) values_new: Buffer<f32>,
    pub(super) jacobians: Buffer<f32>,
    pub(super) products: Buffer<f32>,
    pub(super) cost: Buffer<f32>,
    pub(super) gram_rows: Buffer<f32>,
    /// The Schur complement's second product per residual.
    pub(super) corrections: Buffer<f32>,
}

/// Everything a solve keeps on the device.
pub(crate) struct State {
    pub(crate) blocks: Vec<BlockState>,
    pub(super) terms: Vec<TermState>,
    pub(crate) scalars: Buffer<f32>,
    /// The block whose rows the Schur complement eliminates, if one is.
    pub(crate) eliminated: Option<usize>,
}

impl State {
    /// Buffers for `problem` on its device; CG on the Schur complement of block
    /// `eliminated` if one is given.
    pub(crate) fn new(problem: &Problem<'_>, eliminated: Option<usize>) -> Result<State, Error> {
        let d = problem.device;
        let mut blocks = Vec::new();
        for b in &problem.blocks {
            let (rows, w) = (b.rows, b.words as usize);
            let vector = || d.zeros::<f32>(rows * w);
            let mask: Vec<f32> = b
                .held
                .iter()
                .flat_map(|&h| std::iter::repeat_n(if h { 0.0 } else { 1.0 }, w))
                .collect();
            blocks.push(BlockState {
                rows,
                words: b.words,
                x: Buffer::words_of(&b.raw),
                saved: vector()?,
                gradient: vector()?,
                r: vector()?,
                z: vector()?,
                p: vector()?,
                ap: vector()?,
                delta: vector()?,
                damping: vector()?,
                mask: d.buffer(&mask)?,
                gram: d.zeros::<f32>(rows * w * w)?,
                inverse: d.zeros::<f32>(rows * w * w)?,
                zero: vector()?,
            });
        }
        let mut terms = Vec::new();
        for t in &problem.terms {
            let gram_words: usize = t.arguments.iter().map(|a| (a.words as usize).pow(2)).sum();
            terms.push(TermState {
                values: d.zeros::<f32>(t.n * t.rows)?,
                values_new: d.zeros::<f32>(t.n * t.rows)?,
                jacobians: d.zeros::<f32>(t.n * t.rows * t.columns())?,
                products: d.zeros::<f32>(t.n * t.rows)?,
                cost: d.zeros::<f32>(t.n)?,
                gram_rows: d.zeros::<f32>(t.n * gram_words)?,
                corrections: d.zeros::<f32>(t.n * t.rows)?,
            });
        }
        Ok(State {
            blocks,
            terms,
            scalars: d.zeros::<f32>(slot::COUNT)?,
            eliminated,
        })
    }

    /// Pairs of every block's vectors, for dot products and combinations.
    fn pairs<'s>(
        &'s self,
        f: impl Fn(&'s BlockState) -> (&'s Buffer<f32>, &'s Buffer<f32>),
    ) -> Vec<(&'s Buffer<f32>, &'s Buffer<f32>)> {
        self.blocks.iter().map(f).collect()
    }

    /// The blocks CG solves for: all, or all but the eliminated one.
    pub(crate) fn kept(&self) -> impl Iterator<Item = &BlockState> {
        let e = self.eliminated;
        (0..self.blocks.len())
            .filter(move |&b| Some(b) != e)
            .map(|b| &self.blocks[b])
    }

    /// Pairs of the kept blocks' vectors.
    fn kept_pairs<'s>(
        &'s self,
        f: impl Fn(&'s BlockState) -> (&'s Buffer<f32>, &'s Buffer<f32>),
    ) -> Vec<(&'s Buffer<f32>, &'s Buffer<f32>)> {
        self.kept().map(f).collect()
    }

    /// Records the residuals, Jacobian blocks (reweighted by robust losses), gradient
    /// `g = Jᵀr`, block diagonal of `JᵀJ` and cost at `x`.
    pub(crate) fn record_evaluation(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
    ) -> Result<(), Error> {
        for (t, s) in problem.terms.iter().zip(&self.terms) {
            t.launches.jacobians(rec, &s.values, &s.jacobians)?;
            if t.loss != Loss::Squared {
                rec.block_op(BlockOp::RobustScale {
                    loss: t.loss,
                    n: t.n,
                    rows: t.rows,
                    columns: t.columns(),
                    values: s.values.raw().clone(),
                    jacobians: s.jacobians.raw().clone(),
                    cost: s.cost.raw().clone(),
                })?;
            }
        }
        self.record_transposed(rec, problem, |s| &s.values, |b| &b.gradient)?;
        let mut written = Vec::new();
        for (t, s) in problem.terms.iter().zip(&self.terms) {
            self.record_gram(rec, t, s, &mut written)?;
        }
        let costs = self.cost_pairs(problem, |s| &s.values);
        rec.dot(&costs, &self.scalars, slot::COST)
    }

    /// Records each residual's Gram blocks of term `t`, summed into its blocks' diagonals.
    fn record_gram(
        &self,
        rec: &mut Recording<'_>,
        t: &TermEntry<'_>,
        s: &TermState,
        written: &mut Vec<u64>,
    ) -> Result<(), Error> {
        let stride: u32 = t.arguments.iter().map(|a| a.words * a.words).sum();
        let (mut first, mut offset) = (0u32, 0u32);
        let mut fields = Vec::new();
        for a in &t.arguments {
            rec.block_op(BlockOp::Gram {
                jacobians: s.jacobians.raw().clone(),
                n: t.n,
                rows: t.rows,
                columns: t.columns(),
                first,
                words: a.words,
                stride,
                offset,
                out: s.gram_rows.raw().clone(),
            })?;
            fields.push(Field {
                words: a.words * a.words,
                args_offset: 0,
                grad_offset: Some(offset),
                source: s.gram_rows.raw().clone(),
                index: a.index.clone(),
                sink: Some(self.blocks[a.block].gram.raw().clone()),
            });
            first += a.words;
            offset += a.words * a.words;
        }
        rec.scatter_adding(&fields, t.n, stride as usize, s.gram_rows.raw(), written)
    }

    /// Records the preconditioner for `lambda` and the start of CG on
    /// `(JᵀJ + λD) δ = −g` (or on its Schur complement): `r = −g` (zero on held rows; with
    /// the Schur correction on the kept blocks), `z = P r`, `p = z`, `δ = 0`, `rᵀz` and
    /// `|g|²` over the rows not held.
    pub(crate) fn record_cg_start(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        lambda: f32,
    ) -> Result<(), Error> {
        for b in &self.blocks {
            rec.block_op(BlockOp::Precondition {
                rows: b.rows,
                words: b.words,
                lambda,
                gram: b.gram.raw().clone(),
                mask: b.mask.raw().clone(),
                inverse: b.inverse.raw().clone(),
                damping: b.damping.raw().clone(),
            })?;
            rec.block_op(multiply(-1.0, false, &b.mask, &b.gradient, &b.r))?;
        }
        rec.dot(&self.pairs(|b| (&b.r, &b.r)), &self.scalars, slot::GRADIENT)?;
        if let Some(e) = self.eliminated {
            self.record_schur_right_side(rec, problem, e)?;
        }
        for b in self.kept() {
            rec.block_op(block_times(b, &b.inverse, &b.r, &b.z))?;
        }
        let (one, zero) = (Coefficient::Value(1.0), Coefficient::Value(0.0));
        rec.combine(&self.kept_pairs(|b| (&b.z, &b.p)), one, zero, &self.scalars)?;
        rec.combine(
            &self.kept_pairs(|b| (&b.z, &b.delta)),
            zero,
            zero,
            &self.scalars,
        )?;
        let rz = self.kept_pairs(|b| (&b.r, &b.z));
        rec.dot(&rz, &self.scalars, slot::RZ)?;
        rec.dot(&rz, &self.scalars, slot::RZ_START)
    }

    /// Records CG iteration `i` (counting from 0 at the start).
    pub(crate) fn record_cg_iteration(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        i: u32,
    ) -> Result<(), Error> {
        let (rz, rz_next) = (slot::RZ + i % 2, slot::RZ + (i + 1) % 2);
        self.record_times(rec, problem, |b| &self.blocks[b].p, |s| &s.products)?;
        self.record_transposed(rec, problem, |s| &s.products, |b| &b.ap)?;
        if let Some(e) = self.eliminated {
            self.record_schur_product(rec, problem, e)?;
        }
        for b in self.kept() {
            rec.block_op(multiply(1.0, true, &b.damping, &b.p, &b.ap))?;
        }
        rec.dot(
            &self.kept_pairs(|b| (&b.p, &b.ap)),
            &self.scalars,
            slot::PAP,
        )?;
        let alpha = |sign| Coefficient::Ratio {
            num: rz,
            den: slot::PAP,
            sign,
        };
        let one = Coefficient::Value(1.0);
        rec.combine(
            &self.kept_pairs(|b| (&b.p, &b.delta)),
            alpha(1.0),
            one,
            &self.scalars,
        )?;
        rec.combine(
            &self.kept_pairs(|b| (&b.ap, &b.r)),
            alpha(-1.0),
            one,
            &self.scalars,
        )?;
        for b in self.kept() {
            rec.block_op(block_times(b, &b.inverse, &b.r, &b.z))?;
        }
        rec.dot(&self.kept_pairs(|b| (&b.r, &b.z)), &self.scalars, rz_next)?;
        let beta = Coefficient::Ratio {
            num: rz_next,
            den: rz,
            sign: 1.0,
        };
        rec.combine(&self.kept_pairs(|b| (&b.z, &b.p)), one, beta, &self.scalars)
    }

    /// Records the trial step: the model's `gᵀδ` and `|Jδ|²`, `|δ|²`, `|x|²`, `x` saved,
    /// `x += δ`, and the cost there.
    pub(crate) fn record_step(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
    ) -> Result<(), Error> {
        if let Some(e) = self.eliminated {
            self.record_back_substitution(rec, problem, e)?;
        }
        self.record_times(rec, problem, |b| &self.blocks[b].delta, |s| &s.products)?;
        let products: Vec<_> = self
            .terms
            .iter()
            .map(|s| (&s.products, &s.products))
            .collect();
        rec.dot(&products, &self.scalars, slot::JD)?;
        rec.dot(
            &self.pairs(|b| (&b.gradient, &b.delta)),
            &self.scalars,
            slot::GD,
        )?;
        rec.dot(
            &self.pairs(|b| (&b.delta, &b.delta)),
            &self.scalars,
            slot::STEP,
        )?;
        rec.dot(&self.pairs(|b| (&b.x, &b.x)), &self.scalars, slot::X)?;
        let (one, zero) = (Coefficient::Value(1.0), Coefficient::Value(0.0));
        rec.combine(&self.pairs(|b| (&b.x, &b.saved)), one, zero, &self.scalars)?;
        rec.combine(&self.pairs(|b| (&b.delta, &b.x)), one, one, &self.scalars)?;
        for (t, s) in problem.terms.iter().zip(&self.terms) {
            t.launches.values(rec, &s.values_new)?;
            if t.loss != Loss::Squared {
                rec.block_op(BlockOp::RobustCost {
                    loss: t.loss,
                    n: t.n,
                    rows: t.rows,
                    values: s.values_new.raw().clone(),
                    cost: s.cost.raw().clone(),
                })?;
            }
        }
        let costs = self.cost_pairs(problem, |s| &s.values_new);
        rec.dot(&costs, &self.scalars, slot::COST_NEW)
    }

    /// Records each term's `J·v` into `out(term)`, `v` the rows of `direction(block)` its
    /// arguments read.
    pub(super) fn record_times<'s>(
        &'s self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        direction: impl Fn(usize) -> &'s Buffer<f32>,
        out: impl Fn(&'s TermState) -> &'s Buffer<f32>,
    ) -> Result<(), Error> {
        for (t, s) in problem.terms.iter().zip(&self.terms) {
            let directions: Vec<&Buffer<f32>> =
                t.arguments.iter().map(|a| direction(a.block)).collect();
            rec.jacobian_times(&s.jacobians, t.rows, &columns(t), &directions, out(s))?;
        }
        Ok(())
    }

    /// Records `out(block) = Jᵀ u` for every block, `u` each term's `u(term)`, the terms'
    /// sums added into one buffer per block.
    pub(super) fn record_transposed<'s>(
        &'s self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        u: impl Fn(&'s TermState) -> &'s Buffer<f32>,
        out: impl Fn(&'s BlockState) -> &'s Buffer<f32>,
    ) -> Result<(), Error> {
        let mut written = Vec::new();
        for (t, s) in problem.terms.iter().zip(&self.terms) {
            let outs: Vec<&Buffer<f32>> = t
                .arguments
                .iter()
                .map(|a| out(&self.blocks[a.block]))
                .collect();
            rec.jacobian_transpose_adding(
                &s.jacobians,
                t.rows,
                &columns(t),
                u(s),
                &outs,
                &mut written,
            )?;
        }
        Ok(())
    }

    /// The pairs whose dot product is `Σ ρ`: a term's residuals (`values` of its state)
    /// with themselves, or for a robust loss its per-residual `sqrt(ρ)`.
    fn cost_pairs<'s>(
        &'s self,
        problem: &Problem<'_>,
        values: impl Fn(&'s TermState) -> &'s Buffer<f32>,
    ) -> Vec<(&'s Buffer<f32>, &'s Buffer<f32>)> {
        problem
            .terms
            .iter()
            .zip(&self.terms)
            .map(|(t, s)| match t.loss {
                Loss::Squared => (values(s), values(s)),
                _ => (&s.cost, &s.cost),
            })
            .collect()
    }

    /// Records the return to the saved `x` after a rejected step.
    pub(crate) fn record_restore(&self, rec: &mut Recording<'_>) -> Result<(), Error> {
        let (one, zero) = (Coefficient::Value(1.0), Coefficient::Value(0.0));
        rec.combine(&self.pairs(|b| (&b.saved, &b.x)), one, zero, &self.scalars)
    }

    /// The scalars, read back.
    pub(crate) fn read_scalars(&self, device: &Device) -> Result<Vec<f32>, Error> {
        device.read(&self.scalars)
    }
}

/// The Jacobian columns of a term's arguments.
pub(super) fn columns<'t>(t: &'t TermEntry<'_>) -> Vec<JacobianColumns<'t>> {
    t.arguments
        .iter()
        .map(|a| JacobianColumns {
            words: a.words,
            index: a.index.as_ref(),
        })
        .collect()
}

pub(super) fn multiply(
    scale: f32,
    accumulate: bool,
    a: &Buffer<f32>,
    x: &Buffer<f32>,
    out: &Buffer<f32>,
) -> BlockOp {
    BlockOp::Multiply {
        scale,
        accumulate,
        a: a.raw().clone(),
        x: x.raw().clone(),
        out: out.raw().clone(),
    }
}

pub(super) fn block_times(
    b: &BlockState,
    blocks: &Buffer<f32>,
    x: &Buffer<f32>,
    out: &Buffer<f32>,
) -> BlockOp {
    BlockOp::BlockTimes {
        rows: b.rows,
        words: b.words,
        blocks: blocks.raw().clone(),
        x: x.raw().clone(),
        out: out.raw().clone(),
    }
}
