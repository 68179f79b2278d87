//! The solver's own device operations, on the blocks of the normal equations: each
//! residual's Gram blocks `J_fᵀJ_f` (summed per block row by the scatter passes into the
//! block diagonal of `JᵀJ`), the robust loss's reweighting of residuals and Jacobians, the
//! damped block diagonal's inverse (the preconditioner), block-diagonal and element-wise
//! products. One description ([`BlockOp`]) per operation, run by the GPU (gpu/least_squares.rs)
//! or here on the CPU device, in the same order of f32 operations.

use super::Loss;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::recording::Recording;
use std::sync::Arc;

/// Most words in a row of a parameter block (a block-diagonal inverse holds `words²` per
/// thread).
pub const MAX_ROW_WORDS: usize = 16;

/// Floor and ceiling of the diagonal that scales the damping, as Ceres clamps it: a
/// column with no derivative still gets a positive damping.
pub(crate) const MIN_DIAGONAL: f32 = 1e-6;
pub(crate) const MAX_DIAGONAL: f32 = 1e32;

/// One operation of the solver's, with the buffers it reads and writes.
#[derive(Clone)]
pub(crate) enum BlockOp {
    /// `out[k][offset + a·w + b] = Σ_r J_k[r][first + a] J_k[r][first + b]` for the `w`
    /// columns from `first`: the Gram block of one argument, per residual (`stride` words a
    /// residual in `out`).
    Gram {
        jacobians: Arc<RawBuffer>,
        n: usize,
        rows: usize,
        columns: usize,
        first: u32,
        words: u32,
        stride: u32,
        offset: u32,
        out: Arc<RawBuffer>,
    },
    /// Per residual `k` with `s = |r_k|²`: `cost[k] = sqrt(ρ(s))`, then `r_k` and `J_k`
    /// scaled by `sqrt(ρ'(s))` (the Gauss-Newton model of a robust cost).
    RobustScale {
        loss: Loss,
        n: usize,
        rows: usize,
        columns: usize,
        values: Arc<RawBuffer>,
        jacobians: Arc<RawBuffer>,
        cost: Arc<RawBuffer>,
    },
    /// `cost[k] = sqrt(ρ(|r_k|²))` alone.
    RobustCost {
        loss: Loss,
        n: usize,
        rows: usize,
        values: Arc<RawBuffer>,
        cost: Arc<RawBuffer>,
    },
    /// Per block row: `A = H_r + diag(d)`, `d = λ clamp(diag H_r)` written to `damping`,
    /// and `inverse_r = A⁻¹` (Cholesky; where it fails, the inverse of A's diagonal), zero
    /// for a held row (`mask` word 0).
    Precondition {
        rows: usize,
        words: u32,
        lambda: f32,
        gram: Arc<RawBuffer>,
        mask: Arc<RawBuffer>,
        inverse: Arc<RawBuffer>,
        damping: Arc<RawBuffer>,
    },
    /// `out_r = B_r x_r` per block row (`B_r` of `words²`).
    BlockTimes {
        rows: usize,
        words: u32,
        blocks: Arc<RawBuffer>,
        x: Arc<RawBuffer>,
        out: Arc<RawBuffer>,
    },
    /// `out = scale · a ∘ x`, or added to `out`.
    Multiply {
        scale: f32,
        accumulate: bool,
        a: Arc<RawBuffer>,
        x: Arc<RawBuffer>,
        out: Arc<RawBuffer>,
    },
}

impl Recording<'_> {
    /// Records a solver operation.
    pub(crate) fn block_op(&mut self, op: BlockOp) -> Result<(), Error> {
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_block_op(work, &op);
        }
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || run_cpu(&op)));
        }
        Ok(())
    }
}

impl Loss {
    /// `(ρ(s), ρ'(s))`.
    pub(crate) fn rho(self, s: f32) -> (f32, f32) {
        match self {
            Loss::Squared => (s, 1.0),
            Loss::Huber(c) => {
                if s <= c * c {
                    (s, 1.0)
                } else {
                    let r = s.sqrt();
                    (2.0 * c * r - c * c, c / r)
                }
            }
            Loss::Cauchy(c) => {
                let q = s / (c * c);
                (c * c * (1.0 + q).ln(), 1.0 / (1.0 + q))
            }
        }
    }

    /// Its words in a uniform: kind (0 squared, 1 Huber, 2 Cauchy) and scale.
    #[cfg(feature = "gpu")]
    pub(crate) fn words(self) -> (u32, f32) {
        match self {
            Loss::Squared => (0, 1.0),
            Loss::Huber(c) => (1, c),
            Loss::Cauchy(c) => (2, c),
        }
    }
}

fn words(b: &RawBuffer) -> Vec<f32> {
    bytemuck::cast_slice(&b.cpu_read()[..]).to_vec()
}

fn write(b: &RawBuffer, values: &[f32]) {
    let mut w = b.cpu_write();
    bytemuck::cast_slice_mut::<u32, f32>(&mut w[..]).copy_from_slice(values);
}

/// Runs an operation on the CPU device.
fn run_cpu(op: &BlockOp) {
    match op {
        BlockOp::Gram { .. } => gram_cpu(op),
        BlockOp::RobustScale { .. } => robust_scale_cpu(op),
        BlockOp::RobustCost { .. } => robust_cost_cpu(op),
        BlockOp::Precondition { .. } => precondition_cpu(op),
        BlockOp::BlockTimes { .. } => block_times_cpu(op),
        BlockOp::Multiply { .. } => multiply_cpu(op),
    }
}

/// Each residual's Gram block of one argument.
fn gram_cpu(op: &BlockOp) {
    let BlockOp::Gram {
        jacobians,
        n,
        rows,
        columns,
        first,
        words: w,
        stride,
        offset,
        out,
    } = op
    else {
        return;
    };
    let j = words(jacobians);
    let mut o = words(out);
    let (w, first) = (*w as usize, *first as usize);
    for k in 0..*n {
        for ab in 0..w * w {
            let (a, b) = (ab / w, ab % w);
            let mut s = 0.0f32;
            for r in 0..*rows {
                let at = (k * rows + r) * columns + first;
                s += j[at + a] * j[at + b];
            }
            o[k * *stride as usize + *offset as usize + ab] = s;
        }
    }
    write(out, &o);
}

/// A robust loss's costs and reweighted residuals and Jacobian blocks.
fn robust_scale_cpu(op: &BlockOp) {
    let BlockOp::RobustScale {
        loss,
        n,
        rows,
        columns,
        values,
        jacobians,
        cost,
    } = op
    else {
        return;
    };
    let (mut v, mut j, mut c) = (words(values), words(jacobians), words(cost));
    for k in 0..*n {
        let r = &mut v[k * rows..(k + 1) * rows];
        let (rho, d) = loss.rho(r.iter().map(|x| x * x).sum());
        c[k] = rho.sqrt();
        let scale = d.sqrt();
        r.iter_mut().for_each(|x| *x *= scale);
        let block = &mut j[k * rows * columns..(k + 1) * rows * columns];
        block.iter_mut().for_each(|x| *x *= scale);
    }
    write(values, &v);
    write(jacobians, &j);
    write(cost, &c);
}

/// A robust loss's costs.
fn robust_cost_cpu(op: &BlockOp) {
    let BlockOp::RobustCost {
        loss,
        n,
        rows,
        values,
        cost,
    } = op
    else {
        return;
    };
    let (v, mut c) = (words(values), words(cost));
    for (k, ck) in c.iter_mut().enumerate().take(*n) {
        let s = v[k * rows..(k + 1) * rows].iter().map(|x| x * x).sum();
        *ck = loss.rho(s).0.sqrt();
    }
    write(cost, &c);
}

/// The damped block diagonal's inverse and the damping.
fn precondition_cpu(op: &BlockOp) {
    let BlockOp::Precondition {
        rows,
        words: w,
        lambda,
        gram,
        mask,
        inverse,
        damping,
    } = op
    else {
        return;
    };
    let (h, m) = (words(gram), words(mask));
    let w = *w as usize;
    let (mut p, mut d) = (vec![0.0f32; rows * w * w], vec![0.0f32; rows * w]);
    for r in 0..*rows {
        let mut a = h[r * w * w..(r + 1) * w * w].to_vec();
        for i in 0..w {
            let di = lambda * a[i * w + i].clamp(MIN_DIAGONAL, MAX_DIAGONAL);
            d[r * w + i] = di;
            a[i * w + i] += di;
        }
        if m[r * w] != 0.0 {
            invert(&mut a, w, &mut p[r * w * w..(r + 1) * w * w]);
        }
    }
    write(inverse, &p);
    write(damping, &d);
}

/// A block-diagonal product.
fn block_times_cpu(op: &BlockOp) {
    let BlockOp::BlockTimes {
        rows,
        words: w,
        blocks,
        x,
        out,
    } = op
    else {
        return;
    };
    let (b, x) = (words(blocks), words(x));
    let w = *w as usize;
    let mut o = vec![0.0f32; rows * w];
    for (t, ot) in o.iter_mut().enumerate() {
        let (r, i) = (t / w, t % w);
        let mut s = 0.0f32;
        for c in 0..w {
            s += b[r * w * w + i * w + c] * x[r * w + c];
        }
        *ot = s;
    }
    write(out, &o);
}

/// An element-wise product.
fn multiply_cpu(op: &BlockOp) {
    let BlockOp::Multiply {
        scale,
        accumulate,
        a,
        x,
        out,
    } = op
    else {
        return;
    };
    let (a, x, mut o) = (words(a), words(x), words(out));
    for (t, ot) in o.iter_mut().enumerate() {
        let v = scale * a[t] * x[t];
        *ot = if *accumulate { *ot + v } else { v };
    }
    write(out, &o);
}

/// `out = a⁻¹` for the symmetric `w × w` matrix `a` (overwritten by its Cholesky factor):
/// each column of the identity solved through `L Lᵀ`, or where a pivot is not positive,
/// the inverse of the diagonal (zero where the diagonal is not positive). The GPU's
/// kernel runs the same steps.
pub(crate) fn invert(a: &mut [f32], w: usize, out: &mut [f32]) {
    let diagonal: Vec<f32> = (0..w).map(|i| a[i * w + i]).collect();
    if !cholesky(a, w) {
        out.fill(0.0);
        for (i, d) in diagonal.iter().enumerate() {
            out[i * w + i] = if *d > 0.0 { 1.0 / d } else { 0.0 };
        }
        return;
    }
    let mut y = [0.0f32; MAX_ROW_WORDS];
    for c in 0..w {
        for i in 0..w {
            let mut s = if i == c { 1.0 } else { 0.0 };
            for k in 0..i {
                s -= a[i * w + k] * y[k];
            }
            y[i] = s / a[i * w + i];
        }
        for i in (0..w).rev() {
            let mut s = y[i];
            for k in i + 1..w {
                s -= a[k * w + i] * y[k];
            }
            y[i] = s / a[i * w + i];
        }
        for i in 0..w {
            out[i * w + c] = y[i];
        }
    }
}

/// The lower Cholesky factor of `a` in place (its lower triangle), or false where a pivot
/// is not positive and finite.
fn cholesky(a: &mut [f32], w: usize) -> bool {
    for j in 0..w {
        let mut s = a[j * w + j];
        for k in 0..j {
            s -= a[j * w + k] * a[j * w + k];
        }
        if !(s > 0.0 && s.is_finite()) {
            return false;
        }
        let l = s.sqrt();
        a[j * w + j] = l;
        for i in j + 1..w {
            let mut t = a[i * w + j];
            for k in 0..j {
                t -= a[i * w + k] * a[j * w + k];
            }
            a[i * w + j] = t / l;
        }
    }
    true
}
