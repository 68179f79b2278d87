//! The optimizers' updates on the GPU: one thread per parameter word, chunked at offsets
//! past one binding, recorded into a recording's encoder.

use super::Gpu;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::optim::Update;
use std::num::NonZeroU64;
use std::sync::Arc;

/// The updates, one entry point each. `h` holds the hyper-parameters of this step, in the
/// order of [`Update`]'s arrays.
const UPDATES_WGSL: &str = "// gradfuse optimizer updates: one thread per parameter word.

struct Params {
    n: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    h: array<vec4<f32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> p: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> m0: array<f32>;
@group(0) @binding(4) var<storage, read_write> m1: array<f32>;

fn word(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    if (i >= params.n) {
        return;
    }
    let lr = params.h[0].x;
    let b1 = params.h[0].y;
    let b2 = params.h[0].z;
    let eps = params.h[0].w;
    let c1 = params.h[1].x;
    let c2 = params.h[1].y;
    let gi = g[i];
    let mi = b1 * m0[i] + (1.0 - b1) * gi;
    let vi = b2 * m1[i] + (1.0 - b2) * gi * gi;
    m0[i] = mi;
    m1[i] = vi;
    p[i] = p[i] - lr * (mi / c1) / (sqrt(vi / c2) + eps);
}

@compute @workgroup_size(256)
fn momentum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = word(gid, groups);
    if (i >= params.n) {
        return;
    }
    let vi = params.h[0].y * m0[i] + g[i];
    m0[i] = vi;
    p[i] = p[i] - params.h[0].x * vi;
}
";

/// Words of one chunk: a multiple of 64 (256-byte offsets), within one binding.
const CHUNK_ALIGN: u64 = 64;

impl Gpu {
    /// Records `update` of `params` by `grads` with its moments.
    pub(crate) fn record_update(
        &self,
        work: &mut super::GpuWork,
        update: Update,
        params: &Arc<RawBuffer>,
        grads: &Arc<RawBuffer>,
        moments: &[Arc<RawBuffer>],
    ) -> Result<(), Error> {
        use wgpu::BufferBindingType as B;
        self.check_lost()?;
        let (entry, h): (&'static str, Vec<f32>) = match update {
            Update::Adam(h) => ("adam", h.to_vec()),
            Update::Momentum(h) => ("momentum", h.to_vec()),
        };
        let rw = B::Storage { read_only: false };
        // One binding per moment: momentum's entry point does not read `m1`.
        let layout = [
            (0, B::Uniform),
            (1, rw),
            (2, B::Storage { read_only: true }),
            (3, rw),
            (4, rw),
        ];
        let layout = &layout[..3 + moments.len()];
        let key = (UPDATES_WGSL.as_ptr() as usize, UPDATES_WGSL.len(), entry);
        let pipeline = self.compile(key, "gradfuse optimizer", UPDATES_WGSL, entry, layout)?;
        let words = params.words as u64;
        let chunk = (self.binding_bytes() / 4 / CHUNK_ALIGN * CHUNK_ALIGN).max(CHUNK_ALIGN);
        let mut pass = work.pass(entry);
        let mut start = 0u64;
        while start < words {
            let m = chunk.min(words - start);
            let mut uniform = vec![m as u32, 0, 0, 0];
            uniform.extend(h.iter().map(|x| x.to_bits()));
            uniform.resize(12, 0);
            let uniform = self.uniform("gradfuse optimizer", &uniform);
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            }];
            let buffers = [params, grads].into_iter().chain(moments);
            for (binding, b) in (1..).zip(buffers) {
                entries.push(wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: b.gpu(),
                        offset: start * 4,
                        size: NonZeroU64::new(m * 4),
                    }),
                });
            }
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("gradfuse optimizer"),
                layout: &pipeline.layout,
                entries: &entries,
            });
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &group, &[]);
            let groups = m.div_ceil(256);
            let y = groups.div_ceil(self.limits.max_compute_workgroups_per_dimension as u64);
            pass.dispatch_workgroups(groups.div_ceil(y) as u32, y as u32, 1);
            start += m;
        }
        Ok(())
    }
}
