//! Sparse nonlinear least squares on the device: a [`Problem`] of parameter blocks (buffers
//! of rows, some rows held constant) and residual terms (generated kernels whose arguments
//! are gathered from the blocks), minimizing `½ Σ ρ(|r_k|²)` with Levenberg–Marquardt
//! ([`LevenbergMarquardt`]).
//!
//! Each outer iteration evaluates every term's residuals and per-residual Jacobian blocks
//! once (the generated Jacobian kernels) and keeps them on the device; the damped normal
//! equations `(JᵀJ + λD) δ = −Jᵀr` are solved by preconditioned conjugate gradients that
//! never form `JᵀJ`: `J·p` and `Jᵀ·q` from the blocks (gathered and scattered in a fixed
//! order), the preconditioner the inverse of the block diagonal of `JᵀJ + λD` (per block
//! row, `Σ J_fᵀJ_f` over the residuals that read it). CG's scalars stay on the device; the
//! host reads a few numbers every few CG iterations and once per outer iteration, where it
//! accepts or rejects the step and sets λ (Ceres' trust-region rule).

pub(crate) mod ops;
mod problem;
mod recordings;
mod schur;
mod solve;

pub use ops::MAX_ROW_WORDS;
pub use problem::{BlockId, Problem};
pub use solve::{CgTiming, IterationReport, LevenbergMarquardt, Summary};

use crate::buffer::{Buffer, RawBuffer};
use crate::error::Error;
use crate::gather::Index;
use crate::recording::Recording;
use std::sync::Arc;

/// The loss `ρ` of a term's residuals: the cost of residual `k` is `½ ρ(|r_k|²)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// `ρ(s) = s`: plain least squares.
    Squared,
    /// Huber's loss with scale `c`: `s` up to `c²`, `2c√s − c²` past it (residuals past `c`
    /// count linearly).
    Huber(f32),
    /// Cauchy's loss with scale `c`: `c² ln(1 + s/c²)`.
    Cauchy(f32),
}

/// One argument with a derivative of a residual kernel, as [`Residuals::arguments`]
/// describes it. Not a stable API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ResidualArgument<'s> {
    /// The argument's name, for messages.
    pub name: &'static str,
    /// Its f32 words (the Jacobian's columns it owns).
    pub words: u32,
    /// Where it is read: a buffer, and the index its rows are read through.
    pub source: (&'s Arc<RawBuffer>, Option<&'s Index>),
}

/// A generated kernel whose residuals a [`Problem`] can evaluate: `#[differentiable]`
/// implements it on the `Kernel` of every function with per-element arguments, a
/// derivative in at least one of them, and no `#[shared]` argument.
pub trait Residuals {
    /// Where each per-element argument is read (the function's `Sources`).
    type Sources<'b>;
    /// f32 words of one residual (the function's result words).
    const RESULT_WORDS: usize;
    /// The per-element arguments with a derivative, in the order of the Jacobian's columns.
    #[doc(hidden)]
    fn arguments<'s>(sources: &'s Self::Sources<'_>) -> Vec<ResidualArgument<'s>>;
    /// Records the residuals of every element into `values`.
    #[doc(hidden)]
    fn record_values(
        &self,
        rec: &mut Recording<'_>,
        sources: &Self::Sources<'_>,
        values: &Buffer<f32>,
    ) -> Result<(), Error>;
    /// Records the residuals and each element's Jacobian block (a row per result word,
    /// the columns of [`Residuals::arguments`]).
    #[doc(hidden)]
    fn record_jacobians(
        &self,
        rec: &mut Recording<'_>,
        sources: &Self::Sources<'_>,
        values: &Buffer<f32>,
        jacobians: &Buffer<f32>,
    ) -> Result<(), Error>;
}
