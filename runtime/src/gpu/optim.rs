//! The optimizers' updates on the GPU: one thread per parameter word, chunked at offsets
//! past one binding, recorded into a recording's encoder.

use super::Gpu;
use super::bind_cache::StorageBinding;
use super::pipelines::PrecisionModule;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::optim::{ScheduleAt, Update};
use crate::spec::Precision;
use std::num::NonZeroU64;
use std::sync::Arc;

/// The updates, one entry point each, over parameters of type `T` (f32; [`UPDATES`] makes
/// the f64 module). `h` holds the hyper-parameters, in the order of [`Update`]'s
/// arrays. Adam reads its bias corrections from its schedule: row `clock[parity] - base` of
/// `corrections`; the first chunk's thread 0 advances the clock into the other word, which
/// the next step reads.
const UPDATES_WGSL: &str = "// gradfuse optimizer updates: one thread per parameter word.

alias T = f32;

struct Params {
    n: u32,
    parity: u32,
    base: u32,
    first: u32,
    h: array<vec4<f32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> p: array<T>;
@group(0) @binding(2) var<storage, read> g: array<T>;
@group(0) @binding(3) var<storage, read_write> m0: array<T>;
@group(0) @binding(4) var<storage, read_write> m1: array<T>;
@group(0) @binding(5) var<storage, read_write> clock: array<u32>;
@group(0) @binding(6) var<storage, read> corrections: array<vec2<f32>>;

fn word(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    let steps = clock[params.parity];
    if (i == 0u && params.first != 0u) {
        clock[1u - params.parity] = steps + 1u;
    }
    if (i >= params.n) {
        return;
    }
    let lr = T(params.h[0].x);
    let b1 = T(params.h[0].y);
    let b2 = T(params.h[0].z);
    let eps = T(params.h[0].w);
    let c = corrections[min(steps - params.base, arrayLength(&corrections) - 1u)];
    let gi = g[i];
    let mi = b1 * m0[i] + (1.0 - b1) * gi;
    let vi = b2 * m1[i] + (1.0 - b2) * gi * gi;
    m0[i] = mi;
    m1[i] = vi;
    p[i] = p[i] - lr * (mi / T(c.x)) / (sqrt(vi / T(c.y)) + eps);
}

@compute @workgroup_size(256)
fn momentum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    if (i >= params.n) {
        return;
    }
    let vi = T(params.h[0].y) * m0[i] + g[i];
    m0[i] = vi;
    p[i] = p[i] - T(params.h[0].x) * vi;
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
        use wgpu::BufferBindingType as B;
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
        let (rw, ro) = (
            B::Storage { read_only: false },
            B::Storage { read_only: true },
        );
        // One binding per moment: momentum's entry point reads neither `m1` nor the
        // schedule.
        let layout = [
            (0, B::Uniform),
            (1, rw),
            (2, ro),
            (3, rw),
            (4, rw),
            (5, rw),
            (6, ro),
        ];
        let layout = &layout[..3 + moments.len() + extra.len()];
        let (module, wgsl) = UPDATES.get(precision);
        let key = (wgsl.as_ptr() as usize, wgsl.len(), entry);
        let pipeline = self.compile(key, module, wgsl, entry, layout)?;
        // Chunks are of 4-byte words, a multiple of 64: an f64 is never split.
        let wps = precision.words_per_scalar() as u64;
        let words = params.words as u64;
        let chunk = (self.binding_bytes() / 4 / CHUNK_ALIGN * CHUNK_ALIGN).max(CHUNK_ALIGN);
        let pass = work.pass(entry);
        let mut start = 0u64;
        while start < words {
            let m = chunk.min(words - start);
            let mut uniform = vec![(m / wps) as u32, parity, base, u32::from(start == 0)];
            uniform.extend(h.iter().map(|x| x.to_bits()));
            uniform.resize(12, 0);
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
