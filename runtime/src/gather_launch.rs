//! Recording a launch with gathered arguments: check every binding, assemble the kernel's
//! argument rows, launch, scatter the gradients (see [`crate::gather`]).

use crate::buffer::{RawBuffer, ScratchRole};
use crate::device::Device;
use crate::error::Error;
use crate::error::mismatch;
use crate::gather::{Field, GatherField, ScatterPass, assemble_cpu, scatter_cpu, scatter_passes};
use crate::recording::{Bindings, Recording};
use crate::spec::{GatheredSpec, KernelSpec};
use std::sync::Arc;

/// The buffers of a launch with gathered arguments, besides its fields. Not a stable API.
#[doc(hidden)]
#[derive(Debug)]
pub struct GatherOutputs<'b> {
    /// The `#[shared]` arguments, for a kernel that has them.
    pub shared: Option<&'b Arc<RawBuffer>>,
    /// One value per element.
    pub values: &'b Arc<RawBuffer>,
    /// The gradient of the batch sum in the shared arguments (adjoint kernels with them).
    pub shared_grad: Option<&'b Arc<RawBuffer>>,
    /// Each element's Jacobian block (Jacobian kernels): the kernel's second output, bound
    /// as it is (nothing is scattered).
    pub jacobians: Option<&'b Arc<RawBuffer>>,
}

impl Recording<'_> {
    /// Records a launch of `spec` whose per-element arguments come from `fields` (in the
    /// order of the kernel's argument row). Generated launchers call this; every length,
    /// index and binding is checked first, and on an error nothing is recorded.
    ///
    /// On a GPU, the gathered variant of the kernel (`gathered`, where the function has
    /// one and the device can bind its arguments) reads each argument where it is;
    /// otherwise the argument rows are assembled first, into scratch rows.
    #[doc(hidden)]
    pub fn launch_gathered(
        &mut self,
        kernel_device: &Device,
        spec: &'static KernelSpec,
        gathered: Option<&'static GatheredSpec>,
        fields: &[GatherField<'_>],
        out: GatherOutputs<'_>,
    ) -> Result<(), Error> {
        let n = self.check_gathered(spec, fields, &out)?;
        self.check_kernel_device(kernel_device, spec)?;
        let device = self.device();
        let grad_words = match out.jacobians {
            Some(_) => 0,
            None => spec.outputs.get(1).map_or(0, |o| o.words as usize),
        };
        let grads = device.scratch(ScratchRole::Grads, n * grad_words)?;
        let fields: Vec<Field> = fields.iter().map(Field::from).collect();
        let grads_binding = [out.values, out.jacobians.unwrap_or(&grads)];
        let outputs = &grads_binding[..spec.outputs.len()];
        let passes = scatter_passes(&fields, spec.precision);
        let by_rows = self.record_by_rows(gathered, n, &fields, &passes, outputs)?;
        if by_rows.is_none() && !self.record_in_place(gathered, n, &fields, &out, outputs)? {
            let in_words = spec.input_words as usize;
            let args = device.scratch(ScratchRole::Args, n * in_words)?;
            for f in &fields {
                self.assemble(f, n, in_words, &args)?;
            }
            let bindings = Bindings {
                input: &args,
                shared: out.shared,
                outputs,
                shared_grad: out.shared_grad,
            };
            self.launch(kernel_device, spec, bindings)?;
        }
        // Gradients that land in one buffer add up, in the order of the arguments.
        for (k, pass) in passes.into_iter().enumerate() {
            if by_rows != Some(k) {
                self.scatter(pass, n, grad_words, &grads)?;
            }
        }
        Ok(())
    }

    /// Records the gathered kernel's by-rows entry point in place of the plain kernel and
    /// one of `passes`, where it has one that fits this launch on this device: returns
    /// which pass it does (`None`: nothing recorded).
    fn record_by_rows(
        &mut self,
        gathered: Option<&'static GatheredSpec>,
        n: usize,
        fields: &[Field],
        passes: &[ScatterPass],
        outputs: &[&Arc<RawBuffer>],
    ) -> Result<Option<usize>, Error> {
        #[cfg(feature = "gpu")]
        if let (Some(g_spec), Some((g, work))) = (gathered, self.gpu_work())
            && let Some(rows) = &g_spec.rows
            && n > 0
            && g.fits_gathered(g_spec, fields)
            && g.fits_by_rows(g_spec, fields, outputs)
            && let Some(k) = crate::gather::rows_pass(&g_spec.kernel, fields, passes)
        {
            let write_grads = passes.len() > 1;
            let (spec_rows, pass) = ((g_spec, rows), &passes[k]);
            g.record_by_rows(work, spec_rows, n, fields, pass, write_grads, outputs)?;
            return Ok(Some(k));
        }
        let _ = (gathered, n, fields, passes, outputs);
        Ok(None)
    }

    /// Records the gathered kernel reading every argument where it is, if there is one that
    /// fits this launch on this device (false: nothing recorded).
    fn record_in_place(
        &mut self,
        gathered: Option<&'static GatheredSpec>,
        n: usize,
        fields: &[Field],
        out: &GatherOutputs<'_>,
        outputs: &[&Arc<RawBuffer>],
    ) -> Result<bool, Error> {
        #[cfg(feature = "gpu")]
        if let (Some(g_spec), Some((g, work))) = (gathered, self.gpu_work())
            && n > 0
            && g.fits_gathered(g_spec, fields)
        {
            g.record_gathered(work, g_spec, n, fields, out, outputs)?;
            return Ok(true);
        }
        let _ = (gathered, n, fields, out, outputs);
        Ok(false)
    }

    /// The element count of a gathered launch, or why its bindings do not fit.
    fn check_gathered(
        &self,
        spec: &KernelSpec,
        fields: &[GatherField<'_>],
        out: &GatherOutputs<'_>,
    ) -> Result<usize, Error> {
        let label = spec.label;
        let device = self.device();
        let n = fields.first().map_or(0, GatherField::elements);
        let mut read: Vec<u64> = Vec::new();
        for (k, f) in fields.iter().enumerate() {
            let w = f.words as usize;
            let what = ArgumentName(label, k);
            device.check_owns(f.source.0, what)?;
            read.push(f.source.0.id);
            let rows = match f.source.1 {
                Some(index) => {
                    device.check_owns(&index.entries, format_args!("{what}'s index"))?;
                    read.extend([index.entries.id, index.order.id, index.starts.id]);
                    mismatch(
                        format_args!("{what}: block words ({} rows × {w})", index.rows),
                        index.rows * w,
                        f.source.0.words,
                    )?;
                    index.rows
                }
                None => {
                    mismatch(
                        format_args!("{what}: words ({n} elements × {w})"),
                        n * w,
                        f.source.0.words,
                    )?;
                    n
                }
            };
            mismatch(format_args!("{what}: elements"), n, f.elements())?;
            if let (Some(sink), Some(_)) = (f.sink, f.grad_offset) {
                device.check_owns(sink, format_args!("{what}'s gradient"))?;
                let rows_what = if f.source.1.is_some() {
                    "block rows"
                } else {
                    "elements"
                };
                mismatch(
                    format_args!("{what}: gradient words ({rows} {rows_what} × {w})"),
                    rows * w,
                    sink.words,
                )?;
            }
        }
        read.extend(out.shared.map(|s| s.id));
        let writes = fields
            .iter()
            .filter_map(|f| f.sink)
            .chain([out.values])
            .chain(out.shared_grad)
            .chain(out.jacobians);
        for w in writes {
            device.check_owns(w, label)?;
            if read.contains(&w.id) {
                return Err(Error::Aliased(format!(
                    "{label}: a gradient or output buffer is also read by the launch"
                )));
            }
        }
        let other = out.shared_grad.or(out.jacobians);
        if out.values.id == other.map_or(0, |s| s.id) {
            return Err(Error::Aliased(format!(
                "{label}: values and another output are one buffer"
            )));
        }
        mismatch(
            format_args!("{label}: arguments"),
            spec.input_words as usize,
            fields.iter().map(|f| f.words as usize).sum(),
        )?;
        // The gathered kernel binds these directly: they are checked here, not by a launch.
        let value_words = spec.outputs.first().map_or(1, |o| o.words as usize);
        mismatch(
            format_args!("{label}: values ({n} elements × {value_words})"),
            n * value_words,
            out.values.words,
        )?;
        let words = |s: Option<&Arc<RawBuffer>>| s.map_or(0, |s| s.words);
        if let (Some(j), Some(o)) = (out.jacobians, spec.outputs.get(1)) {
            let w = o.words as usize;
            mismatch(
                format_args!("{label}: Jacobians ({n} elements × {w})"),
                n * w,
                j.words,
            )?;
        }
        let what = format_args!("{label}: shared argument words");
        mismatch(what, spec.shared_words(), words(out.shared))?;
        let what = format_args!("{label}: shared gradient words");
        mismatch(what, spec.shared_grad_words(), words(out.shared_grad))?;
        Ok(n)
    }

    /// Records the copy of a field's words into the argument rows.
    fn assemble(
        &mut self,
        f: &Field,
        n: usize,
        in_words: usize,
        args: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        #[cfg(feature = "gpu")]
        if let Some((g, work)) = self.gpu_work() {
            return g.record_assemble(work, f, n, in_words, args);
        }
        let (f, args) = (f.clone(), args.clone());
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                assemble_cpu(&f, n, in_words, &mut args.cpu_write())
            }));
        }
        Ok(())
    }

    /// Records a scatter pass of gradient words into its sink.
    fn scatter(
        &mut self,
        pass: ScatterPass,
        n: usize,
        grad_words: usize,
        grads: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        #[cfg(feature = "gpu")]
        {
            let partials = self.device().scatter_partials(&pass)?;
            if let Some((g, work)) = self.gpu_work() {
                return g.record_scatter(work, &pass, n, grad_words, grads, partials.as_ref());
            }
        }
        // The CPU scatter takes its extent from the sink.
        let _ = n;
        let grads = grads.clone();
        if let Some(steps) = self.cpu_steps() {
            steps.push(Box::new(move || {
                let grads = grads.cpu_read();
                scatter_cpu(&pass, bytemuck::cast_slice(&grads[..]), grad_words);
            }));
        }
        Ok(())
    }
}

/// "`label`: argument `k`", written out only for an error message.
#[derive(Clone, Copy)]
struct ArgumentName<'a>(&'a str, usize);

impl std::fmt::Display for ArgumentName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: argument {}", self.0, self.1)
    }
}
