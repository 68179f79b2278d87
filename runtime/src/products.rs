//! Products with the Jacobian of a residual term kept as per-residual blocks (what
//! `value_and_jacobian_gathered` writes), without forming `JᵀJ`: `J·v`, each residual's
//! block times the rows of `v` its arguments read, and `Jᵀ·u`, each residual's block
//! transposed times its `u`, summed per row of each argument's block in a fixed order (the
//! scatter passes of gathered gradients). The building blocks of the least-squares solver's
//! conjugate gradients; not a stable API yet.

use crate::buffer::{Buffer, RawBuffer};
use crate::error::Error;
use crate::error::mismatch;
use crate::gather::{Field, Index, ScatterPass, scatter_cpu, scatter_passes};
#[cfg(feature = "gpu")]
use crate::raw::ScratchRole;
use crate::recording::Recording;
use std::sync::Arc;

/// Most arguments with columns in one Jacobian block.
pub const MAX_COLUMN_BLOCKS: usize = 8;

/// The columns of one argument in a Jacobian block, in argument order: how many, and where
/// the argument's rows are (`None`: one row per residual; else rows of a block read
/// through the index). Not a stable API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct JacobianColumns<'b> {
    /// Columns (the argument's words).
    pub words: u32,
    /// The index its rows are read through, if gathered.
    pub index: Option<&'b Index>,
}

/// The shape of a product: residual elements, rows per block, columns per block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProductShape {
    pub(crate) n: usize,
    pub(crate) rows: usize,
    pub(crate) columns: usize,
}

impl JacobianColumns<'_> {
    /// Rows of the argument's vectors: the index's block rows, or one per residual.
    fn vector_rows(&self, n: usize) -> usize {
        self.index.map_or(n, |i| i.rows())
    }
}

impl Recording<'_> {
    /// Records `out = J·v`: for each residual element `k` and row `r` of its block,
    /// `out[k][r] = Σ_f Σ_j J_k[r][first_f + j] · v_f[row_f(k)][j]`, `row_f(k)` the row
    /// argument `f` reads. `jacobians` holds `n × rows × Σ words` words; `directions[f]` one
    /// row of `words_f` per row of argument `f`.
    #[doc(hidden)]
    pub fn jacobian_times(
        &mut self,
        jacobians: &Buffer<f32>,
        rows: usize,
        columns: &[JacobianColumns<'_>],
        directions: &[&Buffer<f32>],
        out: &Buffer<f32>,
    ) -> Result<(), Error> {
        let shape = self.check_product(jacobians, rows, columns, directions.len())?;
        for (f, (c, v)) in columns.iter().zip(directions).enumerate() {
            let w = c.words as usize;
            let what = format!("J·v: direction {f} ({} rows × {w})", c.vector_rows(shape.n));
            mismatch(what, c.vector_rows(shape.n) * w, v.len())?;
        }
        mismatch("J·v: output words", shape.n * rows, out.len())?;
        for b in directions.iter().copied().chain([out]) {
            self.device().check_owns(b.raw(), "J·v")?;
        }
        let reads: Vec<&RawBuffer> = std::iter::once(&**jacobians.raw())
            .chain(directions.iter().map(|d| &**d.raw()))
            .collect();
        if reads.iter().any(|r| r.id == out.raw().id) {
            return Err(Error::Aliased("J·v: the output is also read".into()));
        }
        let fields = product_fields(columns, directions.iter().map(|d| d.raw()));
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_jacobian_times(work, shape, jacobians.raw(), &fields, out.raw());
        }
        let (j, out) = (jacobians.raw().clone(), out.raw().clone());
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                jacobian_times_cpu(shape, &j, &fields, &out)
            }));
        }
        Ok(())
    }

    /// Records `outs[f] = Σ_k J_k[:, columns of f]ᵀ u_k`, summed per row of argument `f` in
    /// a fixed order (per residual for an argument with one row per residual). Arguments
    /// bound to one output add up, in argument order.
    #[doc(hidden)]
    pub fn jacobian_transpose_times(
        &mut self,
        jacobians: &Buffer<f32>,
        rows: usize,
        columns: &[JacobianColumns<'_>],
        u: &Buffer<f32>,
        outs: &[&Buffer<f32>],
    ) -> Result<(), Error> {
        self.jacobian_transpose_adding(jacobians, rows, columns, u, outs, &mut Vec::new())
    }

    /// [`Recording::jacobian_transpose_times`], adding into the outputs in `written` (ids of
    /// buffers earlier products wrote: a sum over several terms) and writing the others,
    /// which join `written`.
    pub(crate) fn jacobian_transpose_adding(
        &mut self,
        jacobians: &Buffer<f32>,
        rows: usize,
        columns: &[JacobianColumns<'_>],
        u: &Buffer<f32>,
        outs: &[&Buffer<f32>],
        written: &mut Vec<u64>,
    ) -> Result<(), Error> {
        let shape = self.check_product(jacobians, rows, columns, outs.len())?;
        mismatch("Jᵀ·u: u words", shape.n * rows, u.len())?;
        for (f, (c, o)) in columns.iter().zip(outs).enumerate() {
            let w = c.words as usize;
            let what = format!("Jᵀ·u: output {f} ({} rows × {w})", c.vector_rows(shape.n));
            mismatch(what, c.vector_rows(shape.n) * w, o.len())?;
            if [jacobians.raw().id, u.raw().id].contains(&o.raw().id) {
                return Err(Error::Aliased("Jᵀ·u: an output is also read".into()));
            }
        }
        for b in outs.iter().copied().chain([u]) {
            self.device().check_owns(b.raw(), "Jᵀ·u")?;
        }
        let fields = product_fields(columns, outs.iter().map(|o| o.raw()));
        #[cfg(feature = "gpu")]
        let device = self.device();
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            let grads = device.scratch(ScratchRole::Grads, shape.n * shape.columns)?;
            g.record_transpose_rows(work, shape, jacobians.raw(), u.raw(), &grads)?;
            return self.scatter_adding(&fields, shape.n, shape.columns, &grads, written);
        }
        let (j, u) = (jacobians.raw().clone(), u.raw().clone());
        let passes = passes_adding(&fields, written);
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let rows = transpose_rows_cpu(shape, &j, &u);
                for pass in &passes {
                    scatter_cpu(pass, &rows, shape.columns);
                }
            }));
        }
        Ok(())
    }

    /// Records the scatter passes of `fields` from `rows` (`stride` words per element, `n`
    /// elements), adding into the sinks in `written` (those earlier passes wrote) and
    /// writing the others, which join `written`.
    pub(crate) fn scatter_adding(
        &mut self,
        fields: &[Field],
        n: usize,
        stride: usize,
        rows: &Arc<RawBuffer>,
        written: &mut Vec<u64>,
    ) -> Result<(), Error> {
        let passes = passes_adding(fields, written);
        #[cfg(feature = "gpu")]
        if self.gpu_work().is_some() {
            let device = self.device();
            for pass in &passes {
                let partials = device.scatter_partials(pass)?;
                if let Some((g, work)) = self.gpu_work() {
                    g.record_scatter(work, pass, n, stride, rows, partials.as_ref())?;
                }
            }
            return Ok(());
        }
        let rows = rows.clone();
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let r = rows.cpu_read();
                let r: &[f32] = bytemuck::cast_slice(&r[..]);
                for pass in &passes {
                    scatter_cpu(pass, &r[..n * stride], stride);
                }
            }));
        }
        Ok(())
    }

    /// The shape of a product, or why its Jacobian blocks do not fit.
    fn check_product(
        &self,
        jacobians: &Buffer<f32>,
        rows: usize,
        columns: &[JacobianColumns<'_>],
        vectors: usize,
    ) -> Result<ProductShape, Error> {
        let width: usize = columns.iter().map(|c| c.words as usize).sum();
        if rows == 0 || width == 0 || columns.len() > MAX_COLUMN_BLOCKS {
            return Err(Error::Unsupported(format!(
                "a Jacobian product takes blocks of at least one row and column, and 1 to \
                 {MAX_COLUMN_BLOCKS} arguments; got {rows} rows, {width} columns, {} arguments",
                columns.len()
            )));
        }
        mismatch("Jacobian product: vectors", columns.len(), vectors)?;
        if !jacobians.len().is_multiple_of(rows * width) {
            return Err(Error::ShapeMismatch {
                what: format!("Jacobian product: block words (a multiple of {rows} × {width})"),
                expected: jacobians.len().next_multiple_of(rows * width),
                got: jacobians.len(),
            });
        }
        let n = jacobians.len() / (rows * width);
        for c in columns {
            if let Some(i) = c.index {
                self.device()
                    .check_owns(&i.entries, "Jacobian product: an index")?;
                mismatch("Jacobian product: index entries", n, i.len())?;
            }
        }
        self.device()
            .check_owns(jacobians.raw(), "Jacobian product")?;
        Ok(ProductShape {
            n,
            rows,
            columns: width,
        })
    }
}

/// The scatter passes of `fields`, each adding where its sink is in `written` (then
/// marked written).
fn passes_adding(fields: &[Field], written: &mut Vec<u64>) -> Vec<ScatterPass> {
    // Least squares is f32 (its Jacobian blocks come from f32 kernels).
    let mut passes = scatter_passes(fields, crate::spec::Precision::F32);
    for pass in &mut passes {
        let id = pass.sink().id;
        if written.contains(&id) {
            pass.accumulate = true;
        } else {
            written.push(id);
        }
    }
    passes
}

/// The arguments of a product as gathered fields: their columns are the gradient words
/// at `grad_offset`, `vectors` their directions or outputs (as sources and sinks).
pub(crate) fn product_fields<'a>(
    columns: &[JacobianColumns<'_>],
    vectors: impl Iterator<Item = &'a Arc<RawBuffer>>,
) -> Vec<Field> {
    let mut first = 0;
    columns
        .iter()
        .zip(vectors)
        .map(|(c, v)| {
            let field = Field {
                words: c.words,
                args_offset: first,
                grad_offset: Some(first),
                source: v.clone(),
                index: c.index.cloned(),
                sink: Some(v.clone()),
            };
            first += c.words;
            field
        })
        .collect()
}

/// `J·v` on the CPU device.
fn jacobian_times_cpu(s: ProductShape, j: &RawBuffer, fields: &[Field], out: &RawBuffer) {
    let j = j.cpu_read();
    let j: &[f32] = bytemuck::cast_slice(&j[..]);
    let vectors: Vec<_> = fields.iter().map(|f| f.source.cpu_read()).collect();
    let entries: Vec<_> = fields
        .iter()
        .map(|f| f.index.as_ref().map(|i| i.entries.cpu_read()))
        .collect();
    let mut out = out.cpu_write();
    let out: &mut [f32] = bytemuck::cast_slice_mut(&mut out[..]);
    for (t, o) in out.iter_mut().enumerate() {
        let k = t / s.rows;
        let mut acc = 0.0f32;
        for (f, field) in fields.iter().enumerate() {
            let w = field.words as usize;
            let row = entries[f].as_ref().map_or(k, |e| e[k] as usize);
            let v: &[f32] = bytemuck::cast_slice(&vectors[f][..]);
            let first = t * s.columns + field.args_offset as usize;
            for q in 0..w {
                acc += j[first + q] * v[row * w + q];
            }
        }
        *o = acc;
    }
}

/// Each residual's `J_kᵀ u_k` (one row of `columns` words per residual) on the CPU device.
fn transpose_rows_cpu(s: ProductShape, j: &RawBuffer, u: &RawBuffer) -> Vec<f32> {
    let (j, u) = (j.cpu_read(), u.cpu_read());
    let (j, u): (&[f32], &[f32]) = (bytemuck::cast_slice(&j[..]), bytemuck::cast_slice(&u[..]));
    let mut g = vec![0.0f32; s.n * s.columns];
    for (t, gt) in g.iter_mut().enumerate() {
        let (k, c) = (t / s.columns, t % s.columns);
        let mut acc = 0.0f32;
        for r in 0..s.rows {
            acc += j[(k * s.rows + r) * s.columns + c] * u[k * s.rows + r];
        }
        *gt = acc;
    }
    g
}
