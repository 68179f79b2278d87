//! Many small independent least-squares problems at once, one per element: a batched
//! Levenberg–Marquardt where each element (up to 16 unknowns, up to 64 residual words)
//! solves its own damped normal equations from its own Jacobian block, on the device.
//!
//! An iteration is four recorded launches: the user's Jacobian launch at `x`, the
//! proposal (per element: `JᵀJ`, `Jᵀr`, a Cholesky solve of `(JᵀJ + λ diag(JᵀJ)) δ = −Jᵀr`,
//! `x + δ`), the user's value launch at `x + δ`, and the acceptance (the step is taken where
//! the cost fell; λ follows Nielsen's rule). Nothing is read back between iterations but
//! each element's status, every few iterations, to stop once every element has.
//! The CPU device runs the same steps in the same order of f32 operations.

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::Error;
use crate::lm_passes::{LmBuffers, LmPass, LmShape, status};
use crate::recording::Recording;

/// Most unknowns per element.
pub const MAX_UNKNOWNS: usize = crate::lm_passes::MAX_UNKNOWNS;
/// Most residual words per element.
pub const MAX_RESIDUALS: usize = 64;

/// Why an element's solve ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Termination {
    /// Still running when the iterations ran out.
    MaxIterations,
    /// The gradient `Jᵀr` fell below the gradient tolerance (max norm).
    Gradient,
    /// The step fell below the step tolerance, relative to `x`.
    Step,
    /// An accepted step lowered the cost by less than the cost tolerance, relative.
    Cost,
    /// The residual or its Jacobian was not finite at the current `x`.
    NotFinite,
    /// No step lowered the cost, however damped (λ past 1e16).
    NoProgress,
}

impl Termination {
    fn from_code(code: u32) -> Termination {
        match code {
            status::GRADIENT => Termination::Gradient,
            status::STEP => Termination::Step,
            status::COST => Termination::Cost,
            status::NOT_FINITE => Termination::NotFinite,
            status::NO_PROGRESS => Termination::NoProgress,
            _ => Termination::MaxIterations,
        }
    }

    /// Whether it is a convergence (gradient, step or cost), not a failure or a timeout.
    pub fn converged(self) -> bool {
        matches!(
            self,
            Termination::Gradient | Termination::Step | Termination::Cost
        )
    }
}

/// The options of a batched Levenberg–Marquardt solve.
#[derive(Clone, Copy, Debug)]
pub struct BatchedLm {
    /// Iterations at most.
    pub max_iterations: u32,
    /// Stop an element when `max |Jᵀr| <= gradient_tolerance`.
    pub gradient_tolerance: f32,
    /// Stop an element when `|δ| <= step_tolerance (|x| + step_tolerance)`.
    pub step_tolerance: f32,
    /// Stop an element when an accepted step lowers the cost by at most
    /// `cost_tolerance × cost`.
    pub cost_tolerance: f32,
    /// The damping λ every element starts with (relative to the diagonal of `JᵀJ`).
    pub initial_lambda: f32,
    /// Iterations recorded into one submission between reads of the statuses.
    pub iterations_per_check: u32,
}

impl Default for BatchedLm {
    fn default() -> Self {
        BatchedLm {
            max_iterations: 100,
            gradient_tolerance: 1e-8,
            step_tolerance: 1e-7,
            cost_tolerance: 1e-10,
            initial_lambda: 1e-3,
            iterations_per_check: 8,
        }
    }
}

/// How a batched solve ended.
#[derive(Clone, Debug)]
pub struct BatchedSummary {
    /// Iterations run (the last check's).
    pub iterations: u32,
    /// Per element: why it stopped.
    pub terminations: Vec<Termination>,
    /// Per element: the cost `½ |r|²` at its final `x` (where its last proposal measured
    /// it).
    pub costs: Vec<f32>,
}

impl BatchedSummary {
    /// Elements that converged.
    pub fn converged(&self) -> usize {
        self.terminations.iter().filter(|t| t.converged()).count()
    }
}

impl BatchedLm {
    /// Solves every element's problem, updating `x` (one row of `N` unknowns per element)
    /// in place. `jacobian(rec, x, values, jacobians)` records the residuals (`M` words) and
    /// their Jacobian blocks (row `k`: the derivative of residual word `k` in each unknown)
    /// at `x`; `value(rec, x, values)` records the residuals alone. Both are the user's
    /// generated launches (for example `value_and_jacobian_gathered` with `x` as the
    /// source of the unknowns and the data bound as `#[constant]` arguments).
    pub fn solve<const N: usize, const M: usize>(
        &self,
        device: &Device,
        x: &Buffer<[f32; N]>,
        mut jacobian: impl FnMut(
            &mut Recording<'_>,
            &Buffer<[f32; N]>,
            &Buffer<[f32; M]>,
            &Buffer<[[f32; N]; M]>,
        ) -> Result<(), Error>,
        mut value: impl FnMut(
            &mut Recording<'_>,
            &Buffer<[f32; N]>,
            &Buffer<[f32; M]>,
        ) -> Result<(), Error>,
    ) -> Result<BatchedSummary, Error>
    where
        [f32; N]: bytemuck::Pod,
        [f32; M]: bytemuck::Pod,
        [[f32; N]; M]: bytemuck::Pod,
    {
        self.check::<N, M>()?;
        device.check_owns(x.raw(), "the unknowns of a batched solve")?;
        let n = x.len();
        let shape = LmShape {
            elements: n,
            unknowns: N,
            residuals: M,
            gradient_tolerance: self.gradient_tolerance,
            step_tolerance: self.step_tolerance,
            cost_tolerance: self.cost_tolerance,
        };
        let b = LmBuffers {
            x_try: device.zeros::<f32>(n * N)?,
            residuals: device.zeros::<f32>(n * M)?,
            jacobians: device.zeros::<f32>(n * N * M)?,
            state: device.buffer(&vec![[self.initial_lambda, 2.0, 0.0, 0.0]; n])?,
            status: device.zeros::<u32>(n)?,
        };
        let (x_try, values) = (b.x_try.cast::<[f32; N]>()?, b.residuals.cast::<[f32; M]>()?);
        let jacobians = b.jacobians.cast::<[[f32; N]; M]>()?;
        let x_words = x.cast::<f32>()?;
        let mut iterations = 0;
        let mut statuses = vec![status::RUNNING; n];
        while iterations < self.max_iterations && statuses.contains(&status::RUNNING) {
            let k = self
                .iterations_per_check
                .max(1)
                .min(self.max_iterations - iterations);
            let mut rec = device.record();
            for _ in 0..k {
                jacobian(&mut rec, x, &values, &jacobians)?;
                rec.lm_step(LmPass::Propose, shape, &x_words, &b)?;
                value(&mut rec, &x_try, &values)?;
                rec.lm_step(LmPass::Accept, shape, &x_words, &b)?;
            }
            rec.submit()?;
            iterations += k;
            statuses = device.read(&b.status)?;
        }
        let state = device.read(&b.state)?;
        Ok(BatchedSummary {
            iterations,
            terminations: statuses
                .iter()
                .map(|&s| Termination::from_code(s))
                .collect(),
            costs: state.iter().map(|s| s[2]).collect(),
        })
    }

    fn check<const N: usize, const M: usize>(&self) -> Result<(), Error> {
        if N == 0 || N > MAX_UNKNOWNS || M == 0 || M > MAX_RESIDUALS {
            return Err(Error::Unsupported(format!(
                "a batched Levenberg–Marquardt solve takes 1 to {MAX_UNKNOWNS} unknowns and 1 \
                 to {MAX_RESIDUALS} residual words per element; got {N} and {M}"
            )));
        }
        let tolerances = [
            self.gradient_tolerance,
            self.step_tolerance,
            self.cost_tolerance,
        ];
        let ok = tolerances.iter().all(|t| t.is_finite() && *t >= 0.0)
            && self.initial_lambda.is_finite()
            && self.initial_lambda > 0.0;
        if !ok {
            return Err(Error::Unsupported(format!(
                "batched Levenberg–Marquardt needs finite tolerances >= 0 and an initial λ > 0; \
                 got {self:?}"
            )));
        }
        Ok(())
    }
}
