//! The Levenberg–Marquardt loop on the host: one submission evaluates `x` and starts CG,
//! further ones run CG in chunks until its residual has fallen far enough, one tries the
//! step; the host reads a few scalars after each and decides (Ceres' trust-region rule for
//! λ, its stopping tests).

use super::problem::{BlockId, Problem};
use super::recordings::{State, slot};
use crate::batched_lm::Termination;
use crate::error::Error;
use std::time::{Duration, Instant};

/// Options of a sparse Levenberg–Marquardt solve ([`LevenbergMarquardt::solve`]).
#[derive(Clone, Copy, Debug)]
pub struct LevenbergMarquardt {
    /// Iterations at most (accepted and rejected steps both count, as in Ceres).
    pub max_iterations: u32,
    /// Stop when `|Jᵀr| <= gradient_tolerance` (2-norm over the rows not held).
    pub gradient_tolerance: f32,
    /// Stop when `|δ| < step_tolerance (|x| + step_tolerance)` (never where it is 0).
    pub step_tolerance: f32,
    /// Stop when an accepted step lowers the cost by at most `cost_tolerance × cost`.
    pub cost_tolerance: f32,
    /// The damping λ of the first iteration, relative to the diagonal of `JᵀJ`.
    pub initial_lambda: f32,
    /// CG stops when `rᵀz` has fallen to `cg_tolerance²` of its start.
    pub cg_tolerance: f32,
    /// CG iterations at most per step.
    pub max_cg_iterations: u32,
    /// CG iterations recorded into one submission between reads of its residual.
    pub cg_iterations_per_check: u32,
    /// A block whose rows CG eliminates (Ceres' `ITERATIVE_SCHUR`): CG then runs on the
    /// Schur complement of the other blocks, and this block's step follows from theirs
    /// row by row. For a bundle adjustment, the points: CG solves for the cameras only,
    /// and needs far fewer iterations. Every residual must read at most one row of it.
    pub eliminate: Option<BlockId>,
}

impl Default for LevenbergMarquardt {
    fn default() -> Self {
        LevenbergMarquardt {
            max_iterations: 50,
            gradient_tolerance: 1e-10,
            // f32 resolves a word to about 6e-8 of itself: a step far below 1e-6 of `x`
            // is rounding, not progress.
            step_tolerance: 1e-6,
            cost_tolerance: 1e-6,
            initial_lambda: 1e-4,
            cg_tolerance: 0.1,
            max_cg_iterations: 200,
            cg_iterations_per_check: 10,
            eliminate: None,
        }
    }
}

/// What one iteration did.
#[derive(Clone, Copy, Debug)]
pub struct IterationReport {
    /// Its number, from 1.
    pub iteration: u32,
    /// The cost `½ Σ ρ` at the start of the iteration.
    pub cost: f64,
    /// The cost after it (the start's where the step was rejected).
    pub new_cost: f64,
    /// `|Jᵀr|` at the start.
    pub gradient_norm: f64,
    /// `|δ|` of the step tried.
    pub step_norm: f64,
    /// The damping λ the step was solved with.
    pub lambda: f32,
    /// Actual over predicted decrease of the cost.
    pub ratio: f64,
    /// CG iterations of the step.
    pub cg_iterations: u32,
    /// Whether the step was taken.
    pub accepted: bool,
    /// Wall time of the iteration.
    pub time: Duration,
}

/// How a solve went, in the spirit of Ceres' summary.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The cost at the start.
    pub initial_cost: f64,
    /// The cost at the end.
    pub final_cost: f64,
    /// Every iteration's report.
    pub iterations: Vec<IterationReport>,
    /// Why it stopped.
    pub termination: Termination,
    /// Unknowns (words of rows not held) and residual words.
    pub unknowns: usize,
    /// Residual words.
    pub residuals: usize,
    /// Wall time of the solve.
    pub time: Duration,
    /// The block CG eliminated ([`LevenbergMarquardt::eliminate`]), if one.
    pub eliminated: Option<BlockId>,
}

impl Summary {
    /// Accepted steps.
    pub fn successful_steps(&self) -> usize {
        self.iterations.iter().filter(|r| r.accepted).count()
    }

    /// CG iterations over every step.
    pub fn cg_iterations(&self) -> u64 {
        self.iterations
            .iter()
            .map(|r| u64::from(r.cg_iterations))
            .sum()
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.eliminated {
            None => writeln!(
                f,
                "Levenberg-Marquardt, conjugate gradients with a block-Jacobi preconditioner"
            )?,
            Some(BlockId(b)) => writeln!(
                f,
                "Levenberg-Marquardt, conjugate gradients on the Schur complement of block {b}, \
                 block-Jacobi preconditioner"
            )?,
        }
        writeln!(
            f,
            "  unknowns {:>12}   residuals {:>12}",
            self.unknowns, self.residuals
        )?;
        writeln!(f, "  initial cost {:>16.6e}", self.initial_cost)?;
        writeln!(f, "  final cost   {:>16.6e}", self.final_cost)?;
        writeln!(
            f,
            "  iterations {} ({} successful, {} unsuccessful), {} CG iterations",
            self.iterations.len(),
            self.successful_steps(),
            self.iterations.len() - self.successful_steps(),
            self.cg_iterations()
        )?;
        writeln!(f, "  time {:.3} s", self.time.as_secs_f64())?;
        write!(f, "  termination: {:?}", self.termination)
    }
}

impl std::fmt::Display for IterationReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>4} cost {:.6e} -> {:.6e} |g| {:.3e} |step| {:.3e} lambda {:.1e} ratio {:+.2} cg {:>3} {} {:.1} ms",
            self.iteration,
            self.cost,
            self.new_cost,
            self.gradient_norm,
            self.step_norm,
            self.lambda,
            self.ratio,
            self.cg_iterations,
            if self.accepted {
                "accepted"
            } else {
                "rejected"
            },
            self.time.as_secs_f64() * 1e3
        )
    }
}

/// The damping of the next step.
struct Trust {
    lambda: f32,
    nu: f32,
}

/// What a trial step did.
struct Trial {
    new_cost: f64,
    ratio: f64,
    accepted: bool,
    /// `|δ|` and `|x|`.
    step: f64,
    x: f64,
}

/// The largest damping tried before giving up (Ceres' smallest trust region, 1e-32).
const MAX_LAMBDA: f32 = 1e32;
/// The least ratio of actual to predicted decrease that takes a step.
const MIN_RATIO: f64 = 1e-3;

impl LevenbergMarquardt {
    /// Solves `problem`, updating its parameter blocks in place.
    pub fn solve(&self, problem: &Problem<'_>) -> Result<Summary, Error> {
        self.solve_with(problem, |_| {})
    }

    /// Solves `problem`, calling `report` after every iteration.
    pub fn solve_with(
        &self,
        problem: &Problem<'_>,
        mut report: impl FnMut(&IterationReport),
    ) -> Result<Summary, Error> {
        let start = Instant::now();
        let state = State::new(problem, self.eliminated(problem)?)?;
        let device = problem.device;
        let mut summary = Summary {
            initial_cost: f64::NAN,
            final_cost: f64::NAN,
            iterations: Vec::new(),
            termination: Termination::MaxIterations,
            unknowns: problem.unknowns(),
            residuals: problem.residuals(),
            time: Duration::ZERO,
            eliminated: self.eliminate,
        };
        let mut trust = Trust {
            lambda: self.initial_lambda,
            nu: 2.0,
        };
        // After an accepted step (and at the start) `x` is evaluated anew; after a rejected
        // one it is restored and its evaluation kept.
        let (mut evaluate, mut restore) = (true, false);
        let (mut cost, mut gradient) = (f64::NAN, f64::NAN);
        while summary.iterations.len() < self.max_iterations as usize {
            let began = Instant::now();
            let mut rec = device.record();
            if restore {
                state.record_restore(&mut rec)?;
            }
            if evaluate {
                state.record_evaluation(&mut rec, problem)?;
            }
            state.record_cg_start(&mut rec, problem, trust.lambda)?;
            rec.submit()?;
            let s = state.read_scalars(device)?;
            if evaluate {
                cost = 0.5 * f64::from(s[slot::COST as usize]);
                gradient = f64::from(s[slot::GRADIENT as usize]).sqrt();
                if summary.iterations.is_empty() {
                    summary.initial_cost = cost;
                }
                summary.final_cost = cost;
                if let Some(t) = self.stop_at(cost, gradient) {
                    summary.termination = t;
                    break;
                }
            }
            let rz_start = f64::from(s[slot::RZ_START as usize]);
            let cg_iterations = self.run_cg(&state, problem, rz_start)?;
            let trial = self.try_step(&state, problem, cost)?;
            let r = IterationReport {
                iteration: summary.iterations.len() as u32 + 1,
                cost,
                new_cost: if trial.accepted { trial.new_cost } else { cost },
                gradient_norm: gradient,
                step_norm: trial.step,
                lambda: trust.lambda,
                ratio: trial.ratio,
                cg_iterations,
                accepted: trial.accepted,
                time: began.elapsed(),
            };
            report(&r);
            summary.iterations.push(r);
            (evaluate, restore) = (trial.accepted, !trial.accepted);
            if trial.accepted {
                summary.final_cost = trial.new_cost;
            }
            if let Some(t) = self.after_step(&trial, cost, &mut trust) {
                summary.termination = t;
                break;
            }
        }
        if restore {
            let mut rec = device.record();
            state.record_restore(&mut rec)?;
            rec.submit()?;
        }
        summary.time = start.elapsed();
        Ok(summary)
    }

    /// Why a solve stops at a freshly evaluated `x`, if it does.
    fn stop_at(&self, cost: f64, gradient: f64) -> Option<Termination> {
        if !(cost.is_finite() && gradient.is_finite()) {
            Some(Termination::NotFinite)
        } else if gradient <= f64::from(self.gradient_tolerance) {
            Some(Termination::Gradient)
        } else {
            None
        }
    }

    /// Records and runs the trial step, and reads what it did.
    fn try_step(&self, state: &State, problem: &Problem<'_>, cost: f64) -> Result<Trial, Error> {
        let mut rec = problem.device.record();
        state.record_step(&mut rec, problem)?;
        rec.submit()?;
        let s: Vec<f64> = state
            .read_scalars(problem.device)?
            .into_iter()
            .map(f64::from)
            .collect();
        let new_cost = 0.5 * s[slot::COST_NEW as usize];
        // The decrease the model `½|r + Jδ|²` predicts.
        let model = -(s[slot::GD as usize] + 0.5 * s[slot::JD as usize]);
        let ratio = if model > 0.0 {
            (cost - new_cost) / model
        } else {
            f64::NAN
        };
        Ok(Trial {
            new_cost,
            ratio,
            accepted: new_cost.is_finite() && ratio > MIN_RATIO,
            step: s[slot::STEP as usize].sqrt(),
            x: s[slot::X as usize].sqrt(),
        })
    }

    /// Updates the damping after a trial step (Ceres' rule: on success λ shrinks by up to
    /// 3 as the model proves good; on failure it grows by ν, ν doubling), and says why the
    /// solve stops, if it does.
    fn after_step(&self, trial: &Trial, cost: f64, trust: &mut Trust) -> Option<Termination> {
        let tol = f64::from(self.step_tolerance);
        let small_step = trial.step < tol * (trial.x + tol);
        if trial.accepted {
            let shrink = (1.0f64 / 3.0).max(1.0 - (2.0 * trial.ratio - 1.0).powi(3));
            trust.lambda = (f64::from(trust.lambda) * shrink).max(1e-32) as f32;
            trust.nu = 2.0;
            if small_step {
                return Some(Termination::Step);
            }
            if cost - trial.new_cost <= f64::from(self.cost_tolerance) * cost {
                return Some(Termination::Cost);
            }
            return None;
        }
        trust.lambda *= trust.nu;
        trust.nu *= 2.0;
        if small_step && trial.new_cost.is_finite() {
            return Some(Termination::Step);
        }
        if trust.lambda.partial_cmp(&MAX_LAMBDA) != Some(std::cmp::Ordering::Less) {
            return Some(Termination::NoProgress);
        }
        None
    }

    /// Runs CG from its start until `rᵀz` has fallen to `cg_tolerance²` of `rz_start`, or
    /// the iterations run out: chunks recorded into one submission, a read after each.
    fn run_cg(&self, state: &State, problem: &Problem<'_>, rz_start: f64) -> Result<u32, Error> {
        let device = problem.device;
        let goal = rz_start * f64::from(self.cg_tolerance).powi(2);
        let mut done = 0u32;
        while done < self.max_cg_iterations && rz_start > 0.0 {
            let chunk = self
                .cg_iterations_per_check
                .clamp(1, self.max_cg_iterations - done);
            submit_cg(state, problem, done..done + chunk)?;
            done += chunk;
            let s = state.read_scalars(device)?;
            let rz = f64::from(s[(slot::RZ + done % 2) as usize]);
            if rz.partial_cmp(&goal) != Some(std::cmp::Ordering::Greater) {
                break;
            }
        }
        Ok(done)
    }
}

/// Records and submits CG iterations `range`, each in a submission of its own: the GPU runs
/// one while the host records the next (in one submission, the GPU would wait for the host
/// to record them all).
fn submit_cg(
    state: &State,
    problem: &Problem<'_>,
    range: std::ops::Range<u32>,
) -> Result<(), Error> {
    for i in range {
        let mut rec = problem.device.record();
        state.record_cg_iteration(&mut rec, problem, i)?;
        rec.submit()?;
    }
    Ok(())
}

/// Where a CG iteration's time goes, as the benches measure it. Not a stable API.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct CgTiming {
    /// Wall time per iteration as a solve runs them: a submission each, then a read.
    pub wall: Duration,
    /// Wall time per iteration with every iteration in one submission, then a read.
    pub wall_one_submission: Duration,
    /// GPU time per iteration of each kind of pass (timestamps around every pass).
    pub passes: Vec<(&'static str, Duration)>,
    /// Wall time of an outer iteration's evaluation (residuals, Jacobians, gradient, block
    /// diagonal, cost) and CG's start (preconditioner), with a read.
    pub evaluation: Duration,
    /// GPU time of its passes, by kind.
    pub evaluation_passes: Vec<(&'static str, Duration)>,
}

impl LevenbergMarquardt {
    /// Times `iterations` CG iterations of the first step of `problem` (after as many
    /// untimed ones), leaving its blocks where they are. Not a stable API.
    #[doc(hidden)]
    pub fn time_cg(&self, problem: &Problem<'_>, iterations: u32) -> Result<CgTiming, Error> {
        let state = State::new(problem, self.eliminated(problem)?)?;
        let device = problem.device;
        let start = |rec: &mut crate::recording::Recording<'_>| -> Result<(), Error> {
            state.record_evaluation(rec, problem)?;
            state.record_cg_start(rec, problem, self.initial_lambda)
        };
        // Once to compile and cache, once for the wall time, once for the passes' times.
        let mut rec = device.record();
        start(&mut rec)?;
        rec.submit()?;
        state.read_scalars(device)?;
        let began = Instant::now();
        let mut rec = device.record();
        start(&mut rec)?;
        rec.submit()?;
        state.read_scalars(device)?;
        let evaluation = began.elapsed();
        let mut rec = device.record_timed();
        start(&mut rec)?;
        let evaluation_passes = sum_by_label(rec.submit_timed()?, 1);
        let mut done = 0;
        let mut one_submission = |rec: &mut crate::recording::Recording<'_>| -> Result<(), Error> {
            for i in done..done + iterations {
                state.record_cg_iteration(rec, problem, i)?;
            }
            done += iterations;
            Ok(())
        };
        let mut warm_up = device.record();
        one_submission(&mut warm_up)?;
        warm_up.submit()?;
        state.read_scalars(device)?;
        let began = Instant::now();
        let mut rec = device.record();
        one_submission(&mut rec)?;
        rec.submit()?;
        state.read_scalars(device)?;
        let wall_one_submission = began.elapsed() / iterations.max(1);
        let mut rec = device.record_timed();
        one_submission(&mut rec)?;
        let timed = rec.submit_timed()?;
        let began = Instant::now();
        submit_cg(&state, problem, done..done + iterations)?;
        state.read_scalars(device)?;
        let wall = began.elapsed() / iterations.max(1);
        let passes = sum_by_label(timed, iterations);
        Ok(CgTiming {
            wall,
            wall_one_submission,
            passes,
            evaluation,
            evaluation_passes,
        })
    }
}

/// Pass times summed by label, divided by `per`.
fn sum_by_label(times: Vec<(&'static str, Duration)>, per: u32) -> Vec<(&'static str, Duration)> {
    let mut passes: Vec<(&'static str, Duration)> = Vec::new();
    for (label, t) in times {
        match passes.iter_mut().find(|(l, _)| *l == label) {
            Some((_, sum)) => *sum += t,
            None => passes.push((label, t)),
        }
    }
    for (_, t) in &mut passes {
        *t /= per.max(1);
    }
    passes
}

impl Problem<'_> {
    /// The cost `½ Σ ρ(|r_k|²)` where its parameter blocks are now.
    pub fn cost(&self) -> Result<f64, Error> {
        check(self)?;
        let d = self.device;
        let mut buffers = Vec::new();
        for t in &self.terms {
            let cost = match t.loss {
                crate::least_squares::Loss::Squared => None,
                _ => Some(d.zeros::<f32>(t.n)?),
            };
            buffers.push((d.zeros::<f32>(t.n * t.rows)?, cost));
        }
        let scalars = d.zeros::<f32>(1)?;
        let mut rec = d.record();
        for (t, (values, cost)) in self.terms.iter().zip(&buffers) {
            t.launches.values(&mut rec, values)?;
            if let Some(cost) = cost {
                rec.block_op(crate::least_squares::ops::BlockOp::RobustCost {
                    loss: t.loss,
                    n: t.n,
                    rows: t.rows,
                    values: values.raw().clone(),
                    cost: cost.raw().clone(),
                })?;
            }
        }
        let pairs: Vec<_> = buffers
            .iter()
            .map(|(v, c)| c.as_ref().map_or((v, v), |c| (c, c)))
            .collect();
        rec.dot(&pairs, &scalars, 0)?;
        rec.submit()?;
        Ok(0.5 * f64::from(d.read(&scalars)?[0]))
    }
}

impl LevenbergMarquardt {
    /// The block to eliminate, checked against `problem` (which is checked too).
    fn eliminated(&self, problem: &Problem<'_>) -> Result<Option<usize>, Error> {
        check(problem)?;
        let Some(BlockId(e)) = self.eliminate else {
            return Ok(None);
        };
        if e >= problem.blocks.len() {
            return Err(Error::Unsupported(format!(
                "the block to eliminate ({e}) is not a block of this problem ({} blocks)",
                problem.blocks.len()
            )));
        }
        for (i, t) in problem.terms.iter().enumerate() {
            if t.arguments.iter().filter(|a| a.block == e).count() > 1 {
                return Err(Error::Unsupported(format!(
                    "residual term {i} reads two rows of parameter block {e}, so that block's \
                     rows are coupled and cannot be eliminated one by one (the Schur \
                     complement needs every residual to read at most one of its rows)"
                )));
            }
        }
        Ok(Some(e))
    }
}

/// Why a problem cannot be solved, if it cannot.
fn check(problem: &Problem<'_>) -> Result<(), Error> {
    if problem.terms.is_empty() {
        return Err(Error::Unsupported(
            "a least-squares problem needs a residual term".into(),
        ));
    }
    for b in 0..problem.blocks.len() {
        if !problem
            .terms
            .iter()
            .any(|t| t.arguments.iter().any(|a| a.block == b))
        {
            return Err(Error::Unsupported(format!(
                "parameter block {b} is read by no residual term (hold it out of the problem)"
            )));
        }
    }
    Ok(())
}
