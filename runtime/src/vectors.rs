//! Vector operations whose scalars stay on the device: dot products summed in a fixed
//! order into a slot of a scalars buffer, and combinations `y = a·x + b·y` whose
//! coefficients are ratios of such slots. Conjugate gradients needs both every iteration
//! (`α = rᵀz / pᵀAp`, `β = r'ᵀz' / rᵀz`) without a host round trip. A vector may be split
//! over several buffers (one per parameter block): a dot product sums the pairs in order.
//! Not a stable API yet.

use crate::buffer::{Buffer, RawBuffer};
use crate::error::Error;
use crate::error::mismatch;
use crate::recording::Recording;
use std::sync::Arc;

/// Threads of one dot-product workgroup, and words each sums per round.
pub(crate) const DOT_GROUP: usize = 256;
/// Most workgroups a dot product of one pair takes: a longer vector's threads take several
/// words each, so the partials stay few and the shape depends on the length alone.
pub(crate) const DOT_MAX_GROUPS: usize = 256;

/// A coefficient of [`Recording::combine`]: a constant, or `sign × scalars[num] /
/// scalars[den]` read on the device.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Coefficient {
    /// A constant (`b = Value(0.0)` overwrites `y` without reading it).
    Value(f32),
    /// `sign × scalars[num] / scalars[den]`, zero where the denominator is zero.
    Ratio {
        /// Slot of the numerator.
        num: u32,
        /// Slot of the denominator.
        den: u32,
        /// 1 or -1.
        sign: f32,
    },
}

impl Coefficient {
    /// Its words in a uniform: kind (0 constant, 1 ratio), value or sign, num, den.
    #[cfg(feature = "gpu")]
    pub(crate) fn words(self) -> [u32; 4] {
        match self {
            Coefficient::Value(v) => [0, v.to_bits(), 0, 0],
            Coefficient::Ratio { num, den, sign } => [1, sign.to_bits(), num, den],
        }
    }

    /// Its value given the scalars.
    pub(crate) fn value(self, scalars: &[f32]) -> f32 {
        match self {
            Coefficient::Value(v) => v,
            Coefficient::Ratio { num, den, sign } => {
                let den = scalars[den as usize];
                if den == 0.0 {
                    0.0
                } else {
                    sign * (scalars[num as usize] / den)
                }
            }
        }
    }
}

/// Workgroups of the dot product of a pair of `len` words.
pub(crate) fn dot_groups(len: usize) -> usize {
    len.div_ceil(DOT_GROUP).clamp(1, DOT_MAX_GROUPS)
}

/// Thread `t` of `threads` sums words `t, t + threads, ..` of `a·b` in order; the group's
/// 256 sums are added as a binary tree (lane `l` gets lane `l + s` for `s` = 128, 64, ..).
pub(crate) fn group_sums(a: &[f32], b: &[f32]) -> Vec<f32> {
    let groups = dot_groups(a.len());
    let threads = groups * DOT_GROUP;
    let mut lanes = vec![0.0f32; threads];
    for (t, lane) in lanes.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        let mut i = t;
        while i < a.len() {
            acc += a[i] * b[i];
            i += threads;
        }
        *lane = acc;
    }
    lanes.chunks_mut(DOT_GROUP).map(tree_sum).collect()
}

/// The binary-tree sum of 256 lanes, in place, as a workgroup adds them.
pub(crate) fn tree_sum(lanes: &mut [f32]) -> f32 {
    let mut stride = lanes.len() / 2;
    while stride > 0 {
        for l in 0..stride {
            lanes[l] += lanes[l + stride];
        }
        stride /= 2;
    }
    lanes[0]
}

impl Recording<'_> {
    /// Records `scalars[slot] = Σ_p a_p · b_p` over the pairs, summed in a fixed order (the
    /// same bits on every run).
    #[doc(hidden)]
    pub fn dot(
        &mut self,
        pairs: &[(&Buffer<f32>, &Buffer<f32>)],
        scalars: &Buffer<f32>,
        slot: u32,
    ) -> Result<(), Error> {
        let device = self.device();
        for (k, (a, b)) in pairs.iter().enumerate() {
            mismatch(format!("dot: pair {k}'s lengths"), a.len(), b.len())?;
            device.check_owns(a.raw(), "dot")?;
            device.check_owns(b.raw(), "dot")?;
            if [a.raw().id, b.raw().id].contains(&scalars.raw().id) {
                return Err(Error::Aliased("dot: the scalars are also a vector".into()));
            }
        }
        self.check_slot(scalars, slot, "dot")?;
        let raws: Vec<(Arc<RawBuffer>, Arc<RawBuffer>)> = pairs
            .iter()
            .map(|(a, b)| (a.raw().clone(), b.raw().clone()))
            .collect();
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            let count = raws.iter().map(|(a, _)| dot_groups(a.words)).sum();
            let partials = device.scratch(crate::raw::ScratchRole::Partials, count)?;
            return g.record_dot(work, &raws, &partials, scalars.raw(), slot);
        }
        let scalars = scalars.raw().clone();
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let mut partials = Vec::new();
                for (a, b) in &raws {
                    let (a, b) = (a.cpu_read(), b.cpu_read());
                    partials.extend(group_sums(
                        bytemuck::cast_slice(&a[..]),
                        bytemuck::cast_slice(&b[..]),
                    ));
                }
                let total = partials_sum(&partials);
                let mut s = scalars.cpu_write();
                s[slot as usize] = total.to_bits();
            }));
        }
        Ok(())
    }

    /// Records `y_p = a·x_p + b·y_p` for every pair, the coefficients read when it runs.
    #[doc(hidden)]
    pub fn combine(
        &mut self,
        pairs: &[(&Buffer<f32>, &Buffer<f32>)],
        a: Coefficient,
        b: Coefficient,
        scalars: &Buffer<f32>,
    ) -> Result<(), Error> {
        let device = self.device();
        for c in [a, b] {
            if let Coefficient::Ratio { num, den, .. } = c {
                self.check_slot(scalars, num.max(den), "combine")?;
            }
        }
        for (k, (x, y)) in pairs.iter().enumerate() {
            mismatch(format!("combine: pair {k}'s lengths"), x.len(), y.len())?;
            device.check_owns(x.raw(), "combine")?;
            device.check_owns(y.raw(), "combine")?;
            if y.raw().id == scalars.raw().id || x.raw().id == y.raw().id {
                return Err(Error::Aliased(format!(
                    "combine: pair {k}'s output is also read as another operand"
                )));
            }
        }
        let raws: Vec<(Arc<RawBuffer>, Arc<RawBuffer>)> = pairs
            .iter()
            .map(|(x, y)| (x.raw().clone(), y.raw().clone()))
            .collect();
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_combine(work, &raws, a, b, scalars.raw());
        }
        let scalars = scalars.raw().clone();
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let s = scalars.cpu_read();
                let s: &[f32] = bytemuck::cast_slice(&s[..]);
                let overwrite = b == Coefficient::Value(0.0);
                let (a, b) = (a.value(s), b.value(s));
                for (x, y) in &raws {
                    let x = x.cpu_read();
                    let x: &[f32] = bytemuck::cast_slice(&x[..]);
                    let mut y = y.cpu_write();
                    let y: &mut [f32] = bytemuck::cast_slice_mut(&mut y[..]);
                    for (yi, xi) in y.iter_mut().zip(x) {
                        *yi = if overwrite { a * xi } else { a * xi + b * *yi };
                    }
                }
            }));
        }
        Ok(())
    }

    fn check_slot(&self, scalars: &Buffer<f32>, slot: u32, what: &str) -> Result<(), Error> {
        self.device().check_owns(scalars.raw(), what)?;
        if slot as usize >= scalars.len() {
            return Err(Error::ShapeMismatch {
                what: format!("{what}: scalar slots (slot {slot})"),
                expected: slot as usize + 1,
                got: scalars.len(),
            });
        }
        Ok(())
    }
}

/// The sum of every pair's partial sums, in order: 256 lanes each adding a strided run of
/// them, then the tree (the second pass of the GPU's dot product).
pub(crate) fn partials_sum(partials: &[f32]) -> f32 {
    let mut lanes = [0.0f32; DOT_GROUP];
    for (l, lane) in lanes.iter_mut().enumerate() {
        let mut i = l;
        while i < partials.len() {
            *lane += partials[i];
            i += DOT_GROUP;
        }
    }
    tree_sum(&mut lanes)
}
