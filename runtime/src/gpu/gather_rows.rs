//! A gathered adjoint launched by rows ([`crate::spec::RowsEntry`]): one thread per row
//! of a block, summing the gradients of the elements that read the row in registers, in
//! place of the plain kernel and that block's scatter pass.

use super::Gpu;
use super::pipelines::EntryPoint;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::gather::{Field, ScatterPass, gathered_mask};
use crate::spec::{GatheredSpec, KernelSpec, RowsEntry};
use std::sync::Arc;

/// Storage buffers the by-rows entry binds besides the kernel's: two indices' `order` and
/// `starts`, and the sink.
const ROWS_BUFFERS: usize = 5;

impl Gpu {
    /// Whether the by-rows entry of `g` binds on this device: its storage buffers within
    /// the limit, and each buffer, bound whole, within the largest binding (and launches
    /// by rows not turned off).
    pub(crate) fn fits_by_rows(
        &self,
        g: &GatheredSpec,
        fields: &[Field],
        outputs: &[&Arc<RawBuffer>],
    ) -> bool {
        let storage = 2 * g.fields.len() + g.kernel.outputs.len() + ROWS_BUFFERS;
        let fits = |b: &RawBuffer| b.words as u64 * 4 <= self.binding_bytes();
        self.by_rows.load(std::sync::atomic::Ordering::Relaxed)
            && storage <= self.limits.max_storage_buffers_per_shader_stage as usize
            && fields.iter().all(|f| {
                fits(&f.source)
                    && f.index
                        .as_ref()
                        .is_none_or(|i| fits(&i.entries) && fits(&i.order))
            })
            && outputs.iter().all(|o| fits(o))
    }

    /// Records the by-rows entry `rows` of `g` over the block rows of `pass` (every field
    /// of it read through an index without chunks, [`crate::gather::rows_pass`]), for `n`
    /// elements: each element's value (and, with `write_grads`, its gradient row, for the
    /// launch's other scatter passes) into `outputs`, the block's gradient into the pass's
    /// sink.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_by_rows(
        &self,
        work: &mut super::GpuWork,
        (g, rows): (&'static GatheredSpec, &'static RowsEntry),
        n: usize,
        fields: &[Field],
        pass: &ScatterPass,
        write_grads: bool,
        outputs: &[&Arc<RawBuffer>],
    ) -> Result<(), Error> {
        self.check_lost()?;
        let spec = &g.kernel;
        let (first, last) = (&pass.fields[0], &pass.fields[pass.fields.len() - 1]);
        let (Some(i0), Some(i1)) = (&first.index, &last.index) else {
            return Err(Error::Unsupported(format!(
                "{}: a by-rows launch of an argument without an index",
                spec.label
            )));
        };
        let position = |f: &Field| {
            fields
                .iter()
                .position(|other| other.args_offset == f.args_offset)
                .unwrap_or(0) as u32
        };
        if pass.accumulate {
            return Err(Error::Unsupported(format!(
                "{}: a by-rows launch into a sink an earlier pass wrote",
                spec.label
            )));
        }
        let mut storage: Vec<(u32, &wgpu::Buffer, bool)> = Vec::new();
        for (fs, f) in g.fields.iter().zip(fields) {
            let index = f.index.as_ref().map_or(&f.source, |i| &i.entries);
            storage.push((fs.rows_binding, f.source.gpu(), true));
            storage.push((fs.index_binding, index.gpu(), true));
        }
        for (o, buffer) in spec.outputs.iter().zip(outputs) {
            storage.push((o.binding, buffer.gpu(), false));
        }
        let b = rows.order_binding;
        storage.extend([
            (b, i0.order.gpu(), true),
            (b + 1, i0.starts.gpu(), true),
            (b + 2, i1.order.gpu(), true),
            (b + 3, i1.starts.gpu(), true),
            (b + 4, pass.sink().gpu(), false),
        ]);
        let at = EntryPoint {
            module: spec.label,
            wgsl: spec.wgsl,
            entry: rows.entry_point,
            pass: rows.label,
        };
        let block_rows = i0.rows;
        let (chunk, work_per_row) = rows_per_dispatch(spec, n * pass.fields.len(), block_rows);
        let (sides, mask) = (pass.fields.len() as u32, gathered_mask(fields));
        let mut start = 0;
        while start < block_rows {
            let m = chunk.min(block_rows - start);
            let uniform = [
                m as u32,
                0,
                mask,
                start as u32,
                position(first),
                position(last),
                sides,
                u32::from(write_grads),
            ];
            let workgroups = self.workgroups((m as u64).div_ceil(spec.workgroup_size as u64));
            self.record_entry(work, &at, &uniform, &storage, workgroups)?;
            start += m;
            self.flush_long_work(work, work_per_row.saturating_mul(m as u64))?;
        }
        Ok(())
    }
}

/// Rows one dispatch takes, so that it runs at most [`KernelSpec::WORK_PER_SUBMISSION`]
/// operations at the rows' mean count of elements (`evaluations` over `rows`; at least a
/// workgroup's worth), and the operations of a row.
fn rows_per_dispatch(spec: &KernelSpec, evaluations: usize, rows: usize) -> (usize, u64) {
    let per_row = spec
        .work_per_element
        .max(1)
        .saturating_mul(evaluations as u64)
        .div_ceil(rows.max(1) as u64);
    let chunk = (KernelSpec::WORK_PER_SUBMISSION / per_row.max(1))
        .max(spec.workgroup_size as u64)
        .min(usize::MAX as u64) as usize;
    (chunk, per_row)
}
