//! CG on the Schur complement: the rows of one block (a bundle adjustment's points) are
//! eliminated, and CG solves for the others (the cameras) only.
//!
//! With `B = JᵀJ + λD` split into the eliminated block `E` and the kept blocks `K`, and
//! `B_EE` block diagonal (every residual reads at most one row of `E`, checked before a
//! solve), the step solves `S δ_K = −g_K + B_KE B_EE⁻¹ g_E` with
//! `S = B_KK − B_KE B_EE⁻¹ B_EK`, then `δ_E = B_EE⁻¹ (−g_E − B_EK δ_K)`. Nothing is formed:
//! `S p` is `J_Kᵀ (J_K p − J_E B_EE⁻¹ J_Eᵀ J_K p) + λ D_K p`, two products with the stored
//! Jacobian blocks each way, and `B_EE⁻¹` is the block-Jacobi preconditioner's inverse of
//! `E`'s rows (zero on held rows, whose step is zero). CG's preconditioner on `K` stays
//! the block diagonal of `B_KK`.

use super::problem::Problem;
use super::recordings::{State, TermState, block_times, multiply};
use crate::buffer::Buffer;
use crate::error::Error;
use crate::recording::Recording;
use crate::vectors::Coefficient;

impl State {
    /// Records `r_K += mask · J_Kᵀ J_E B_EE⁻¹ g_E`: the right side of the reduced system,
    /// `r` already holding `−g` on every row not held.
    pub(super) fn record_schur_right_side(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        e: usize,
    ) -> Result<(), Error> {
        let eb = &self.blocks[e];
        self.record_through_eliminated(rec, problem, e, &eb.gradient, |s| &s.products)?;
        self.record_transposed(rec, problem, |s| &s.products, |b| &b.ap)?;
        for b in self.kept() {
            rec.block_op(multiply(1.0, true, &b.mask, &b.ap, &b.r))?;
        }
        Ok(())
    }

    /// Records the Schur correction of `ap_K`, which holds `J_Kᵀ J p` (and `ap_E`
    /// `J_Eᵀ J p`) from the iteration's products: `ap_K = J_Kᵀ (J p − J_E B_EE⁻¹ J_Eᵀ J p)`.
    pub(super) fn record_schur_product(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        e: usize,
    ) -> Result<(), Error> {
        let eb = &self.blocks[e];
        self.record_through_eliminated(rec, problem, e, &eb.ap, |s| &s.corrections)?;
        let pairs: Vec<_> = self
            .terms
            .iter()
            .map(|s| (&s.products, &s.corrections))
            .collect();
        let (one, minus) = (Coefficient::Value(1.0), Coefficient::Value(-1.0));
        rec.combine(&pairs, one, minus, &self.scalars)?;
        self.record_transposed(rec, problem, |s| &s.corrections, |b| &b.ap)
    }

    /// Records `δ_E = B_EE⁻¹ (−g_E − J_Eᵀ J_K δ_K)` once CG has found `δ_K`.
    pub(super) fn record_back_substitution(
        &self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        e: usize,
    ) -> Result<(), Error> {
        let eb = &self.blocks[e];
        let direction = |b: usize| {
            if b == e {
                &eb.zero
            } else {
                &self.blocks[b].delta
            }
        };
        self.record_times(rec, problem, direction, |s| &s.products)?;
        self.record_transposed(rec, problem, |s| &s.products, |b| &b.ap)?;
        let minus = Coefficient::Value(-1.0);
        rec.combine(&[(&eb.gradient, &eb.ap)], minus, minus, &self.scalars)?;
        rec.block_op(block_times(eb, &eb.inverse, &eb.ap, &eb.delta))
    }

    /// Records `out(term) = J (0_K, B_EE⁻¹ x_E)` for every term: `E`'s rows of `x` through
    /// the eliminated block's inverse (into `z_E`), the kept blocks still.
    fn record_through_eliminated<'s>(
        &'s self,
        rec: &mut Recording<'_>,
        problem: &Problem<'_>,
        e: usize,
        x: &Buffer<f32>,
        out: impl Fn(&'s TermState) -> &'s Buffer<f32>,
    ) -> Result<(), Error> {
        let eb = &self.blocks[e];
        rec.block_op(block_times(eb, &eb.inverse, x, &eb.z))?;
        let direction = |b: usize| {
            if b == e { &eb.z } else { &self.blocks[b].zero }
        };
        self.record_times(rec, problem, direction, out)
    }
}
