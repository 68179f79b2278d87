//! The passes of a batched Levenberg–Marquardt iteration that are the solver's own
//! (see [`crate::BatchedLm`]): what they bind, how a recording records them, and their CPU
//! version: per element, the same operations in the same order as the GPU's
//! (`gpu/batched_lm.rs`), which is the reference for them.

// Index loops, as in the WGSL they mirror line by line.
#![allow(clippy::needless_range_loop)]

use crate::buffer::Buffer;
use crate::error::Error;
use crate::recording::Recording;
use status::{COST, GRADIENT, NO_PROGRESS, NOT_FINITE, RUNNING, STEP};

/// Most unknowns per element (a thread's normal equations: 16 × 16 words).
pub(crate) const MAX_UNKNOWNS: usize = 16;

/// An element's status word: running, or why it stopped (`Termination`).
pub(crate) mod status {
    pub(crate) const RUNNING: u32 = 0;
    pub(crate) const GRADIENT: u32 = 1;
    pub(crate) const STEP: u32 = 2;
    pub(crate) const COST: u32 = 3;
    pub(crate) const NOT_FINITE: u32 = 4;
    pub(crate) const NO_PROGRESS: u32 = 5;
}

/// The per-element state of a solve, on the device.
pub(crate) struct LmBuffers {
    pub(crate) x_try: Buffer<f32>,
    pub(crate) residuals: Buffer<f32>,
    pub(crate) jacobians: Buffer<f32>,
    /// λ, ν, the cost at `x`, the predicted reduction of the proposal.
    pub(crate) state: Buffer<[f32; 4]>,
    pub(crate) status: Buffer<u32>,
}

/// The sizes and tolerances a step reads (the uniform of the GPU's passes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LmShape {
    pub(crate) elements: usize,
    pub(crate) unknowns: usize,
    pub(crate) residuals: usize,
    pub(crate) gradient_tolerance: f32,
    pub(crate) step_tolerance: f32,
    pub(crate) cost_tolerance: f32,
}

/// The two passes of an iteration that are the solver's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LmPass {
    /// `JᵀJ`, `Jᵀr`, the damped solve and `x + δ`.
    Propose,
    /// The cost at `x + δ`, the step taken or not, λ updated.
    Accept,
}

impl Recording<'_> {
    /// Records one of the solver's passes over every element.
    pub(crate) fn lm_step(
        &mut self,
        pass: LmPass,
        shape: LmShape,
        x: &Buffer<f32>,
        b: &LmBuffers,
    ) -> Result<(), Error> {
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_lm(work, pass, shape, x, b);
        }
        let raws = [
            x.raw().clone(),
            b.x_try.raw().clone(),
            b.residuals.raw().clone(),
            b.jacobians.raw().clone(),
            b.state.raw().clone(),
            b.status.raw().clone(),
        ];
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let [x, x_try, r, j, state, status] = &raws;
                let (mut x, mut x_try) = (x.cpu_write(), x_try.cpu_write());
                let (r, j) = (r.cpu_read(), j.cpu_read());
                let (mut state, mut status) = (state.cpu_write(), status.cpu_write());
                let words = Words {
                    x: bytemuck::cast_slice_mut(&mut x[..]),
                    x_try: bytemuck::cast_slice_mut(&mut x_try[..]),
                    r: bytemuck::cast_slice(&r[..]),
                    j: bytemuck::cast_slice(&j[..]),
                    state: bytemuck::cast_slice_mut(&mut state[..]),
                    status: &mut status[..],
                };
                run(pass, shape, words);
            }));
        }
        Ok(())
    }
}

/// Largest damping before an element gives up.
pub(crate) const MAX_LAMBDA: f32 = 1e16;

/// The words of a solve: per element `N` unknowns (`x`, `x_try`), `M` residual words,
/// `M × N` Jacobian words (row-major), 4 state words (λ, ν, cost, predicted reduction) and
/// a status.
struct Words<'a> {
    x: &'a mut [f32],
    pub(crate) x_try: &'a mut [f32],
    pub(crate) r: &'a [f32],
    pub(crate) j: &'a [f32],
    pub(crate) state: &'a mut [f32],
    pub(crate) status: &'a mut [u32],
}

/// Runs `pass` over every element.
fn run(pass: LmPass, shape: LmShape, w: Words<'_>) {
    let (nu, m) = (shape.unknowns, shape.residuals);
    for e in 0..shape.elements {
        if w.status[e] != RUNNING {
            continue;
        }
        let r = &w.r[e * m..(e + 1) * m];
        let state = &mut w.state[4 * e..4 * e + 4];
        let x = &mut w.x[e * nu..(e + 1) * nu];
        let x_try = &mut w.x_try[e * nu..(e + 1) * nu];
        w.status[e] = match pass {
            LmPass::Propose => {
                let j = &w.j[e * m * nu..(e + 1) * m * nu];
                propose(shape, r, j, x, x_try, state)
            }
            LmPass::Accept => accept(shape, r, x, x_try, state),
        };
    }
}

/// `JᵀJ`, `Jᵀr`, the damped solve and `x + δ` of one element; its new status.
fn propose(
    shape: LmShape,
    r: &[f32],
    j: &[f32],
    x: &[f32],
    x_try: &mut [f32],
    state: &mut [f32],
) -> u32 {
    let (n, m, o) = (shape.unknowns, shape.residuals, shape);
    let mut cost = 0.0f32;
    for k in 0..m {
        cost += r[k] * r[k];
    }
    cost *= 0.5;
    state[2] = cost;
    let mut g = [0.0f32; MAX_UNKNOWNS];
    let mut a = [[0.0f32; MAX_UNKNOWNS]; MAX_UNKNOWNS];
    let mut finite = cost.is_finite();
    let mut gmax = 0.0f32;
    for c in 0..n {
        for k in 0..m {
            g[c] += j[k * n + c] * r[k];
        }
        for d in c..n {
            for k in 0..m {
                a[c][d] += j[k * n + c] * j[k * n + d];
            }
        }
        finite &= g[c].is_finite();
        gmax = gmax.max(g[c].abs());
    }
    if !finite {
        return NOT_FINITE;
    }
    if gmax <= o.gradient_tolerance {
        return GRADIENT;
    }
    let Some(delta) = damped_solve(&mut a, &g, n, state[0]) else {
        // Not positive definite: propose nothing; the acceptance raises λ.
        state[3] = 0.0;
        x_try[..n].copy_from_slice(&x[..n]);
        return RUNNING;
    };
    // The reduction the linear model predicts: -gᵀδ - ½|Jδ|².
    let mut gd = 0.0f32;
    let (mut step, mut size) = (0.0f32, 0.0f32);
    for c in 0..n {
        gd += g[c] * delta[c];
        step += delta[c] * delta[c];
        size += x[c] * x[c];
    }
    let mut jd2 = 0.0f32;
    for k in 0..m {
        let mut t = 0.0f32;
        for c in 0..n {
            t += j[k * n + c] * delta[c];
        }
        jd2 += t * t;
    }
    state[3] = -gd - 0.5 * jd2;
    if step.sqrt() <= o.step_tolerance * (size.sqrt() + o.step_tolerance) {
        return STEP;
    }
    for c in 0..n {
        x_try[c] = x[c] + delta[c];
    }
    RUNNING
}

/// The solution `δ` of `(A + λ diag(A)) δ = −g` (`A`'s upper triangle given), by a
/// Cholesky factorization `UᵀU` in place; None where it is not positive definite.
fn damped_solve(
    a: &mut [[f32; MAX_UNKNOWNS]; MAX_UNKNOWNS],
    g: &[f32; MAX_UNKNOWNS],
    n: usize,
    lambda: f32,
) -> Option<[f32; MAX_UNKNOWNS]> {
    for c in 0..n {
        a[c][c] += lambda * a[c][c].max(1e-12);
    }
    for c in 0..n {
        let mut s = a[c][c];
        for k in 0..c {
            s -= a[k][c] * a[k][c];
        }
        if s.is_nan() || s <= 0.0 {
            return None;
        }
        let u = s.sqrt();
        a[c][c] = u;
        for d in c + 1..n {
            let mut t = a[c][d];
            for k in 0..c {
                t -= a[k][c] * a[k][d];
            }
            a[c][d] = t / u;
        }
    }
    let mut delta = [0.0f32; MAX_UNKNOWNS];
    for c in 0..n {
        let mut t = -g[c];
        for k in 0..c {
            t -= a[k][c] * delta[k];
        }
        delta[c] = t / a[c][c];
    }
    for c in (0..n).rev() {
        let mut t = delta[c];
        for k in c + 1..n {
            t -= a[c][k] * delta[k];
        }
        delta[c] = t / a[c][c];
    }
    Some(delta)
}

/// The cost at `x + δ`, the step taken where it fell, λ and ν updated (Nielsen).
fn accept(shape: LmShape, r: &[f32], x: &mut [f32], x_try: &[f32], state: &mut [f32]) -> u32 {
    let (n, m, o) = (shape.unknowns, shape.residuals, shape);
    let mut cost_try = 0.0f32;
    for k in 0..m {
        cost_try += r[k] * r[k];
    }
    cost_try *= 0.5;
    let (lambda, nu, cost, predicted) = (state[0], state[1], state[2], state[3]);
    let reduction = cost - cost_try;
    if predicted > 0.0 && cost_try.is_finite() && reduction > 0.0 {
        let rho = reduction / predicted;
        let t = 2.0 * rho - 1.0;
        x[..n].copy_from_slice(&x_try[..n]);
        state[0] = lambda * (1.0 - t * t * t).max(1.0 / 3.0);
        state[1] = 2.0;
        state[2] = cost_try;
        if reduction <= o.cost_tolerance * cost {
            return COST;
        }
        RUNNING
    } else {
        state[0] = lambda * nu;
        state[1] = nu * 2.0;
        if state[0] <= MAX_LAMBDA {
            RUNNING
        } else {
            NO_PROGRESS
        }
    }
}
