//! The optimizers' updates on the GPU: one thread per parameter word, chunked at offsets
//! past one binding, recorded into a recording's encoder.

use super::Gpu;
use super::bind_cache::StorageBinding;
use super::passes::PendingSum;
use super::pipelines::PrecisionModule;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::optim::{ScheduleAt, Update};
use crate::spec::Precision;
use std::num::NonZeroU64;
use std::sync::Arc;

/// Words each workgroup of the `*_summed` entry points sums and updates: the generated
/// second pass's (`ReductionSpec::words_per_workgroup`), whose order they repeat.
const SUMMED_WORDS_PER_WORKGROUP: u32 = 8;

/// The updates, one entry point each, over parameters of type `T` (f32; [`UPDATES`] makes
/// the f64 module). `h` holds the hyper-parameters, in the order of [`Update`]'s
/// arrays. Adam reads its bias corrections from its schedule: row `clock[parity] - base` of
/// `corrections`; the first chunk's thread 0 advances the clock into the other word, which
/// the next step reads.
const UPDATES_WGSL: &str = "// gradfuse optimizer updates: one thread per parameter word, or, summing a
// reduction's partials first, one workgroup per 8 words.

alias T = f32;

struct Params {
    n: u32,
    parity: u32,
    base: u32,
    first: u32,
    // The *_summed entry points: rows of partial sums, and whether to add them to `sums`.
    rows: u32,
    accumulate: u32,
    h: array<vec4<f32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> p: array<T>;
@group(0) @binding(2) var<storage, read> g: array<T>;
@group(0) @binding(3) var<storage, read_write> m0: array<T>;
@group(0) @binding(4) var<storage, read_write> m1: array<T>;
@group(0) @binding(5) var<storage, read_write> clock: array<u32>;
@group(0) @binding(6) var<storage, read> corrections: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read> partials: array<T>;
@group(0) @binding(8) var<storage, read_write> sums: array<T>;
var<workgroup> stage: array<T, 256>;

fn word(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

// Adam's update of word i by gradient gi; word 0 of the first chunk advances the clock.
fn adam_word(i: u32, gi: T) {
    let steps = clock[params.parity];
    if (i == 0u && params.first != 0u) {
        clock[1u - params.parity] = steps + 1u;
    }
    let lr = T(params.h[0].x);
    let b1 = T(params.h[0].y);
    let b2 = T(params.h[0].z);
    let eps = T(params.h[0].w);
    let c = corrections[min(steps - params.base, arrayLength(&corrections) - 1u)];
    let mi = b1 * m0[i] + (1.0 - b1) * gi;
    let vi = b2 * m1[i] + (1.0 - b2) * gi * gi;
    m0[i] = mi;
    m1[i] = vi;
    p[i] = p[i] - lr * (mi / T(c.x)) / (sqrt(vi / T(c.y)) + eps);
}

fn momentum_word(i: u32, gi: T) {
    let vi = T(params.h[0].y) * m0[i] + gi;
    m0[i] = vi;
    p[i] = p[i] - T(params.h[0].x) * vi;
}

// Word `i`'s sum over the rows of partials, in the order of the generated second pass
// (`emit_wgsl::emit_reduce_kernel`: a workgroup per 8 words, thread `lid` word `lid % 8` of
// rows `lid / 8`, `lid / 8 + 32`, .., then a tree over the 32 slices), so that the sums are
// the same bits; stored to `sums` (or added to them) by the thread of slice 0, the only
// one that returns it.
fn summed(i: u32, lid: u32) -> T {
    let slice = lid / 8u;
    let rows = params.rows;
    var acc = T(0.0);
    if (i < params.n) {
        var r = slice;
        for (; r + 96u < rows; r += 128u) {
            let a0 = partials[r * params.n + i];
            let a1 = partials[(r + 32u) * params.n + i];
            let a2 = partials[(r + 64u) * params.n + i];
            let a3 = partials[(r + 96u) * params.n + i];
            acc += a0;
            acc += a1;
            acc += a2;
            acc += a3;
        }
        for (; r < rows; r += 32u) {
            acc += partials[r * params.n + i];
        }
    }
    stage[lid] = acc;
    workgroupBarrier();
    for (var stride = 16u; stride > 0u; stride = stride / 2u) {
        if (slice < stride) {
            stage[lid] += stage[lid + 8u * stride];
        }
        workgroupBarrier();
    }
    var total = stage[lid];
    if (slice == 0u && i < params.n) {
        total = select(total, sums[i] + total, params.accumulate != 0u);
        sums[i] = total;
    }
    return total;
}

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    if (i >= params.n) {
        return;
    }
    adam_word(i, g[i]);
}

@compute @workgroup_size(256)
fn momentum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    if (i >= params.n) {
        return;
    }
    momentum_word(i, g[i]);
}

@compute @workgroup_size(256)
fn adam_summed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = 8u * (wid.x + wid.y * groups.x) + lid % 8u;
    let gi = summed(i, lid);
    if (lid < 8u && i < params.n) {
        adam_word(i, gi);
    }
}

@compute @workgroup_size(256)
fn momentum_summed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = 8u * (wid.x + wid.y * groups.x) + lid % 8u;
    let gi = summed(i, lid);
    if (lid < 8u && i < params.n) {
        momentum_word(i, gi);
    }
}
";

/// [`UPDATES_WGSL`] in either precision. Hyper-parameters stay f32 in the uniform; an f64
/// module computes in f64 from them.
static UPDATES: PrecisionModule = PrecisionModule::new(
    ["gradfuse optimizer", "gradfuse optimizer f64"],
    UPDATES_WGSL,
);

/// Words of one chunk: a multiple of 64 (256-byte offsets), within one binding.
const CHUNK_ALIGN: u64 = 64;

impl Gpu {
    /// Records `update` of `params` (floats of `precision`) by `grads` with its moments
    /// (and for Adam, its schedule of bias corrections). Every step of one parameter buffer
    /// binds the same, so its bind groups are made once.
    pub(crate) fn record_update(
        &self,
        work: &mut super::GpuWork,
        (update, precision): (Update, Precision),
        params: &Arc<RawBuffer>,
        grads: &Arc<RawBuffer>,
        moments: &[Arc<RawBuffer>],
        schedule: Option<ScheduleAt<'_>>,
    ) -> Result<(), Error> {
        self.check_lost()?;
        if precision == Precision::F64 && !self.has_f64() {
            return Err(Error::Unsupported(
                "an optimizer step of f64 parameters needs 64-bit floats in shaders \
                 (SHADER_F64), which this GPU lacks; Device::cpu() runs it"
                    .into(),
            ));
        }
        let (entry, h): (&'static str, Vec<f32>) = match update {
            // The bias corrections come from the schedule.
            Update::Adam(h, _) => ("adam", h.to_vec()),
            Update::Momentum(h) => ("momentum", h.to_vec()),
        };
        let (parity, base, extra) = match schedule {
            Some(s) => (
                s.parity,
                s.schedule.base,
                vec![&s.schedule.clock, &s.schedule.table],
            ),
            None => (0, 0, Vec::new()),
        };
        if entry == "adam" && extra.is_empty() {
            return Err(Error::Unsupported(
                "an Adam step on a GPU needs its schedule of bias corrections".into(),
            ));
        }
        // Chunks are of 4-byte words, a multiple of 64: an f64 is never split.
        let wps = precision.words_per_scalar() as u64;
        let words = params.words as u64;
        let chunk = (self.binding_bytes() / 4 / CHUNK_ALIGN * CHUNK_ALIGN).max(CHUNK_ALIGN);
        if words <= chunk
            && let Some(sum) =
                work.take_pending_sum(grads.gpu(), precision, SUMMED_WORDS_PER_WORKGROUP)
        {
            let n = (words / wps) as u32;
            let step = Step {
                entry,
                precision,
                uniform: update_uniform(n, [parity, base, 1], &h, (sum.rows, sum.accumulate)),
                params,
                moments,
                schedule: extra,
            };
            return self.record_summed_update(work, step, &sum);
        }
        let (module, wgsl) = UPDATES.get(precision);
        let key = super::module_key(wgsl, entry);
        let layout = update_layout(moments.len(), extra.len(), false);
        let pipeline = self.compile(key, module, wgsl, entry, &layout)?;
        let pass = work.pass(entry);
        let mut start = 0u64;
        while start < words {
            let m = chunk.min(words - start);
            let uniform = update_uniform(
                (m / wps) as u32,
                [parity, base, u32::from(start == 0)],
                &h,
                (0, false),
            );
            let chunked = [params, grads].into_iter().chain(moments);
            let mut buffers: Vec<StorageBinding<'_>> = (1..)
                .zip(chunked)
                .map(|(binding, b)| (binding, b.gpu(), start * 4, NonZeroU64::new(m * 4)))
                .collect();
            let whole = (1 + buffers.len() as u32..).zip(&extra);
            buffers.extend(whole.map(|(binding, b)| (binding, b.gpu(), 0, None)));
            let group =
                self.cached_bind_group(key, &pipeline.layout, module, (0, &uniform), &buffers);
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &group, &[]);
            let (x, y) = self.workgroups((m / wps).div_ceil(256));
            pass.dispatch_workgroups(x, y, 1);
            start += m;
        }
        Ok(())
    }
}

/// An update that sums its gradient from a reduction's partials first (see
/// [`Gpu::record_summed_update`]).
struct Step<'a> {
    /// Its plain entry point (`adam`, `momentum`).
    entry: &'static str,
    precision: Precision,
    uniform: Vec<u32>,
    params: &'a Arc<RawBuffer>,
    moments: &'a [Arc<RawBuffer>],
    /// Adam's clock and table of corrections (none for momentum).
    schedule: Vec<&'a Arc<RawBuffer>>,
}

/// The uniform `Params` of [`UPDATES_WGSL`]: `n` words, `[parity, base, first]`, the rows
/// and accumulate flag of a summed update, the hyper-parameters (from word 8, the
/// `vec4` alignment).
fn update_uniform(
    n: u32,
    [parity, base, first]: [u32; 3],
    h: &[f32],
    (rows, accumulate): (u32, bool),
) -> Vec<u32> {
    let mut uniform = vec![n, parity, base, first, rows, u32::from(accumulate), 0, 0];
    uniform.extend(h.iter().map(|x| x.to_bits()));
    uniform.resize(16, 0);
    uniform
}

/// The bindings of an update's entry point: the uniform, the parameters, the gradient (or,
/// `summed`, the partials and the sums), the moments, the schedule.
fn update_layout(
    moments: usize,
    extra: usize,
    summed: bool,
) -> Vec<(u32, wgpu::BufferBindingType)> {
    use wgpu::BufferBindingType as B;
    let (rw, ro) = (
        B::Storage { read_only: false },
        B::Storage { read_only: true },
    );
    let mut layout = vec![(0, B::Uniform), (1, rw)];
    if !summed {
        layout.push((2, ro));
    }
    layout.extend((3..).take(moments).map(|b| (b, rw)));
    // Adam's clock is written, its table read.
    layout.extend([(5, rw), (6, ro)].into_iter().take(extra));
    if summed {
        layout.extend([(7, ro), (8, rw)]);
    }
    layout
}

impl Gpu {
    /// Records `step` in one dispatch that also does the second pass of the reduction
    /// `sum` it takes over: a workgroup per [`SUMMED_WORDS_PER_WORKGROUP`] words sums their
    /// partials (the same bits as the second pass), stores the sums where the pass would
    /// have, and updates the words.
    fn record_summed_update(
        &self,
        work: &mut super::GpuWork,
        step: Step<'_>,
        sum: &PendingSum,
    ) -> Result<(), Error> {
        let entry = match step.entry {
            "adam" => "adam_summed",
            _ => "momentum_summed",
        };
        let (module, wgsl) = UPDATES.get(step.precision);
        let key = super::module_key(wgsl, entry);
        let layout = update_layout(step.moments.len(), step.schedule.len(), true);
        let pipeline = self.compile(key, module, wgsl, entry, &layout)?;
        fn whole((binding, b): (u32, &Arc<RawBuffer>)) -> StorageBinding<'_> {
            (binding, b.gpu(), 0, None)
        }
        let mut buffers = vec![whole((1, step.params))];
        buffers.extend((3..).zip(step.moments).map(whole));
        buffers.extend((5..).zip(step.schedule.iter().copied()).map(whole));
        buffers.extend([(7, &sum.partials, 0, None), (8, &sum.sums, 0, None)]);
        let group =
            self.cached_bind_group(key, &pipeline.layout, module, (0, &step.uniform), &buffers);
        let words = step.uniform[0];
        let (x, y) = self.workgroups(u64::from(words.div_ceil(SUMMED_WORDS_PER_WORKGROUP)));
        work.dispatch(entry, &pipeline.pipeline, &group, (x, y));
        Ok(())
    }
}
