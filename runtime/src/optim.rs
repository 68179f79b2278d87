//! Optimizers on the device: gradient descent with momentum and Adam, stepping parameter
//! buffers (parameter blocks, `#[shared]` arguments) by their gradient buffers inside a
//! [`Recording`], with their state (moments) resident too. A loop of steps submits without
//! waiting; nothing is read back unless asked.
//!
//! Parameters of f64 (a function written over f64) are stepped in f64, from the same f32
//! hyper-parameters. The CPU device runs the same formulas in the same order of operations;
//! a GPU's `sqrt` and division may round differently in the last bit.

use crate::buffer::{Buffer, RawBuffer};
use crate::error::Error;
use crate::fast_hash::FastMap;
use crate::recording::Recording;
use crate::spec::{Floats, Precision};
use std::sync::Arc;

/// Adam (Kingma & Ba), as PyTorch's `torch.optim.Adam` without weight decay: per word,
/// `m = β1 m + (1 - β1) g`, `v = β2 v + (1 - β2) g²`,
/// `p -= lr (m / (1 - β1^t)) / (sqrt(v / (1 - β2^t)) + eps)`.
#[derive(Debug)]
pub struct Adam {
    /// The learning rate.
    pub lr: f32,
    /// Decay of the first moment (0.9 by default).
    pub beta1: f32,
    /// Decay of the second moment (0.999 by default).
    pub beta2: f32,
    /// Added to the root of the second moment (1e-8 by default).
    pub eps: f32,
    states: FastMap<u64, State>,
}

/// Gradient descent with momentum, as PyTorch's `torch.optim.SGD` with `momentum`: per
/// word, `v = μ v + g`, `p -= lr v`.
#[derive(Debug)]
pub struct Momentum {
    /// The learning rate.
    pub lr: f32,
    /// The momentum μ (0.9 by default; 0 is plain gradient descent).
    pub momentum: f32,
    states: FastMap<u64, State>,
}

/// An optimizer's state for one parameter buffer: its moments, the steps taken, and on a
/// GPU, Adam's schedule of bias corrections.
struct State {
    moments: Vec<Arc<RawBuffer>>,
    steps: u32,
    schedule: Option<Schedule>,
}

/// Rows of bias corrections in one [`Schedule`] table.
pub(crate) const SCHEDULE_STEPS: u32 = 1024;

/// Adam's bias corrections on a GPU, read from device memory rather than from the step's
/// uniform, so that every step binds the same (one cached bind group, no uniform made per
/// step): a clock of the steps taken (two words, each step reading one and writing the
/// other, alternately) and a table of the corrections `1 - β^t` of [`SCHEDULE_STEPS`] steps
/// from step `base + 1`, computed on the host in f64 as for the CPU device.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) struct Schedule {
    pub(crate) clock: Arc<RawBuffer>,
    pub(crate) table: Arc<RawBuffer>,
    pub(crate) base: u32,
}

/// What a GPU step reads its bias corrections from: the schedule and the clock word of
/// this step (`(t - 1) % 2`).
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) struct ScheduleAt<'a> {
    pub(crate) schedule: &'a Schedule,
    pub(crate) parity: u32,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("steps", &self.steps).finish()
    }
}

/// Which update a step applies, with its hyper-parameters for this step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Update {
    /// Adam: `lr, beta1, beta2, eps`, and the step `t` (from 1) whose bias corrections
    /// ([`adam_corrections`]) it applies: computed where they are read (the CPU's step, a
    /// GPU schedule's table), not for every recorded GPU step.
    Adam([f32; 4], u32),
    /// Momentum: `lr, momentum`.
    Momentum([f32; 2]),
}

impl Update {
    /// How many moment buffers it keeps per parameter buffer.
    fn moments(self) -> usize {
        match self {
            Update::Adam(..) => 2,
            Update::Momentum(_) => 1,
        }
    }

    /// The update of the floats of `precision` in words `p` (in place) from `g`, on the
    /// CPU.
    pub(crate) fn apply_cpu(
        self,
        precision: Precision,
        p: &mut [u32],
        g: &[u32],
        moments: &mut [&mut [u32]],
    ) {
        match precision {
            Precision::F32 => {
                let mut views: Vec<&mut [f32]> = moments
                    .iter_mut()
                    .map(|m| bytemuck::cast_slice_mut(&mut m[..]))
                    .collect();
                let p: &mut [f32] = bytemuck::cast_slice_mut(p);
                self.apply(p, bytemuck::cast_slice(g), &mut views);
            }
            Precision::F64 => {
                // The CPU device's words are 4-byte aligned: f64 copies, written back.
                let mut ms: Vec<Vec<f64>> = moments
                    .iter()
                    .map(|m| bytemuck::pod_collect_to_vec(&m[..]))
                    .collect();
                let mut views: Vec<&mut [f64]> = ms.iter_mut().map(|m| &mut m[..]).collect();
                let mut pf: Vec<f64> = bytemuck::pod_collect_to_vec(p);
                let gf: Vec<f64> = bytemuck::pod_collect_to_vec(g);
                self.apply(&mut pf, &gf, &mut views);
                p.copy_from_slice(bytemuck::cast_slice(&pf));
                for (m, f) in moments.iter_mut().zip(&ms) {
                    m.copy_from_slice(bytemuck::cast_slice(f));
                }
            }
        }
    }

    /// The update over floats `T`, the hyper-parameters converted to `T` as the GPU does.
    fn apply<T: CpuFloat>(self, p: &mut [T], g: &[T], moments: &mut [&mut [T]]) {
        let one = T::from(1.0);
        match (self, moments) {
            (Update::Adam(h, t), [m, v]) => {
                let [c1, c2] = adam_corrections(h[1], h[2], t).map(T::from);
                let [lr, b1, b2, eps] = h.map(T::from);
                for i in 0..p.len() {
                    let gi = g[i];
                    let mi = b1 * m[i] + (one - b1) * gi;
                    let vi = b2 * v[i] + (one - b2) * gi * gi;
                    m[i] = mi;
                    v[i] = vi;
                    p[i] = p[i] - lr * (mi / c1) / ((vi / c2).sqrt() + eps);
                }
            }
            (Update::Momentum(h), [v]) => {
                let [lr, mu] = h.map(T::from);
                for i in 0..p.len() {
                    let vi = mu * v[i] + g[i];
                    v[i] = vi;
                    p[i] = p[i] - lr * vi;
                }
            }
            _ => unreachable!("a state has the moments of its update"),
        }
    }
}

/// Adam's bias corrections `1 - β1^t, 1 - β2^t` of step `t`, computed in f64.
fn adam_corrections(b1: f32, b2: f32, t: u32) -> [f32; 2] {
    let t = i32::try_from(t).unwrap_or(i32::MAX);
    [b1, b2].map(|b| (1.0 - f64::from(b).powi(t)) as f32)
}

/// The float types the CPU device steps.
trait CpuFloat:
    Copy
    + From<f32>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn sqrt(self) -> Self;
}

impl CpuFloat for f32 {
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl CpuFloat for f64 {
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

impl Adam {
    /// Adam with learning rate `lr` and the usual β1 = 0.9, β2 = 0.999, eps = 1e-8.
    pub fn new(lr: f32) -> Adam {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            states: FastMap::default(),
        }
    }

    /// Records one step of `params` by `grads` (the same number of words: `grads` may be
    /// another type of the same layout, e.g. a function's `SharedGrad` for its `Shared`).
    /// Each parameter buffer has its own moments and step count, made on its first step.
    pub fn step<P: Floats, G: Floats>(
        &mut self,
        rec: &mut Recording<'_>,
        params: &Buffer<P>,
        grads: &Buffer<G>,
    ) -> Result<(), Error> {
        let ok = |b: f32| (0.0..1.0).contains(&b);
        let valid = self.lr.is_finite()
            && self.lr >= 0.0
            && ok(self.beta1)
            && ok(self.beta2)
            && self.eps.is_finite()
            && self.eps > 0.0;
        if !valid {
            return Err(Error::Unsupported(format!(
                "Adam needs lr >= 0, 0 <= beta1, beta2 < 1 and eps > 0; got lr {}, beta1 {}, \
                 beta2 {}, eps {}",
                self.lr, self.beta1, self.beta2, self.eps
            )));
        }
        let (lr, b1, b2, eps) = (self.lr, self.beta1, self.beta2, self.eps);
        step(&mut self.states, rec, params, grads, |t| {
            Update::Adam([lr, b1, b2, eps], t)
        })
    }
}

impl Momentum {
    /// Gradient descent with learning rate `lr` and momentum 0.9.
    pub fn new(lr: f32) -> Momentum {
        Momentum {
            lr,
            momentum: 0.9,
            states: FastMap::default(),
        }
    }

    /// Records one step of `params` by `grads` (the same number of words), as
    /// [`Adam::step`].
    pub fn step<P: Floats, G: Floats>(
        &mut self,
        rec: &mut Recording<'_>,
        params: &Buffer<P>,
        grads: &Buffer<G>,
    ) -> Result<(), Error> {
        if !(self.lr.is_finite() && self.lr >= 0.0 && (0.0..1.0).contains(&self.momentum)) {
            return Err(Error::Unsupported(format!(
                "Momentum needs lr >= 0 and 0 <= momentum < 1; got lr {}, momentum {}",
                self.lr, self.momentum
            )));
        }
        let (lr, mu) = (self.lr, self.momentum);
        step(&mut self.states, rec, params, grads, |_| {
            Update::Momentum([lr, mu])
        })
    }
}

/// Records one step of `update` (given the step number, from 1) of `params` by `grads`.
fn step<P: Floats, G: Floats>(
    states: &mut FastMap<u64, State>,
    rec: &mut Recording<'_>,
    params: &Buffer<P>,
    grads: &Buffer<G>,
    update: impl Fn(u32) -> Update,
) -> Result<(), Error> {
    let device = rec.device();
    let (p, g) = (params.raw(), grads.raw());
    device.check_owns(p, "the parameters of an optimizer step")?;
    device.check_owns(g, "the gradients of an optimizer step")?;
    if p.words != g.words {
        return Err(Error::ShapeMismatch {
            what: "gradient words of an optimizer step (one per parameter word)".into(),
            expected: p.words,
            got: g.words,
        });
    }
    if P::PRECISION != G::PRECISION {
        return Err(Error::Unsupported(format!(
            "an optimizer step's parameters are {:?} and its gradients {:?}: one precision",
            P::PRECISION,
            G::PRECISION
        )));
    }
    if p.id == g.id {
        return Err(Error::Aliased(
            "an optimizer step's gradients are its parameters' own buffer".into(),
        ));
    }
    let t = states.get(&p.id).map_or(1, |s| s.steps + 1);
    let this = update(t);
    let state = match states.entry(p.id) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let moments = (0..this.moments())
                .map(|_| device.zeros::<f32>(p.words).map(|b| b.raw().clone()))
                .collect::<Result<Vec<_>, Error>>()?;
            e.insert(State {
                moments,
                steps: 0,
                schedule: None,
            })
        }
    };
    let schedule = match this {
        Update::Adam(..) if device.is_gpu() => Some(ScheduleAt {
            schedule: schedule_for(&mut state.schedule, device, t, &update)?,
            parity: (t - 1) % 2,
        }),
        _ => None,
    };
    rec.optimizer_step(this, P::PRECISION, p, g, &state.moments, schedule)?;
    state.steps = t;
    Ok(())
}

/// The schedule that covers step `t`: the one kept, or a new table from step `t` on (the
/// clock, which counts every step, is kept).
fn schedule_for<'s>(
    kept: &'s mut Option<Schedule>,
    device: &crate::device::Device,
    t: u32,
    update: &impl Fn(u32) -> Update,
) -> Result<&'s Schedule, Error> {
    let covered = kept
        .as_ref()
        .is_some_and(|s| (s.base..s.base + SCHEDULE_STEPS).contains(&(t - 1)));
    if !covered {
        let base = t - 1;
        let rows: Vec<[f32; 2]> = (base + 1..=base + SCHEDULE_STEPS)
            .map(|step| match update(step) {
                Update::Adam(h, t) => adam_corrections(h[1], h[2], t),
                Update::Momentum(_) => [1.0, 1.0],
            })
            .collect();
        let table = device.buffer(&rows)?.raw().clone();
        let clock = match kept.take() {
            Some(s) => s.clock,
            None => device.zeros::<u32>(2)?.raw().clone(),
        };
        *kept = Some(Schedule { clock, table, base });
    }
    Ok(kept.as_ref().expect("made above"))
}

impl Recording<'_> {
    /// Records an optimizer's update of `params` by `grads` (same words, checked by the
    /// caller) with its moment buffers.
    pub(crate) fn optimizer_step(
        &mut self,
        update: Update,
        precision: Precision,
        params: &Arc<RawBuffer>,
        grads: &Arc<RawBuffer>,
        moments: &[Arc<RawBuffer>],
        schedule: Option<ScheduleAt<'_>>,
    ) -> Result<(), Error> {
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_update(work, (update, precision), params, grads, moments, schedule);
        }
        let _ = schedule;
        let (p, g, ms) = (params.clone(), grads.clone(), moments.to_vec());
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let mut p = p.cpu_write();
                let g = g.cpu_read();
                let mut guards: Vec<_> = ms.iter().map(|m| m.cpu_write()).collect();
                let mut views: Vec<&mut [u32]> = guards.iter_mut().map(|m| &mut m[..]).collect();
                update.apply_cpu(precision, &mut p[..], &g[..], &mut views);
            }));
        }
        Ok(())
    }
}
