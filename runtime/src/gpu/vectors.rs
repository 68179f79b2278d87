//! Dot products and combinations on the GPU (see `vectors.rs`): the same sums, in the
//! same order, as the CPU device's.

use super::Gpu;
use super::pipelines::EntryPoint;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::vectors::{Coefficient, DOT_GROUP, dot_groups};
use std::sync::Arc;

/// `dot`: each workgroup's partial sum of one pair (thread t sums words t, t + threads, ..
/// in order, then the workgroup's tree); `total`: one workgroup sums every partial into a
/// slot; `combine`: `y = a x + b y`, each coefficient a constant or a ratio of slots.
const VECTORS_WGSL: &str = "// gradfuse vector operations with scalars kept on the device.

struct Params {
    len: u32,
    threads: u32,
    offset: u32,
    slot: u32,
    a: vec4<u32>,
    b: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;

var<workgroup> lanes: array<f32, 256>;

fn tree(lid: u32) -> f32 {
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            lanes[lid] += lanes[lid + s];
        }
        workgroupBarrier();
    }
    return lanes[0];
}

@compute @workgroup_size(256)
fn dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var acc = 0.0f;
    for (var i = wid.x * 256u + lid; i < params.len; i += params.threads) {
        acc += x[i] * w[i];
    }
    lanes[lid] = acc;
    let sum = tree(lid);
    if (lid == 0u) {
        out[params.offset + wid.x] = sum;
    }
}

@compute @workgroup_size(256)
fn total(@builtin(local_invocation_index) lid: u32) {
    var acc = 0.0f;
    for (var i = lid; i < params.len; i += 256u) {
        acc += x[i];
    }
    lanes[lid] = acc;
    let sum = tree(lid);
    if (lid == 0u) {
        out[params.slot] = sum;
    }
}

// A ratio over a zero denominator is zero: CG that has converged exactly (rz = 0) stays
// where it is instead of turning to NaN.
fn coefficient(c: vec4<u32>) -> f32 {
    if (c.x == 0u) {
        return bitcast<f32>(c.y);
    }
    let den = scalars[c.w];
    return select(bitcast<f32>(c.y) * (scalars[c.z] / den), 0.0, den == 0.0);
}

@compute @workgroup_size(256)
fn combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.len) {
        return;
    }
    let ax = coefficient(params.a) * x[i];
    // b = 0 overwrites y without reading it (a copy into memory that may hold NaN).
    if (params.b.x == 0u && bitcast<f32>(params.b.y) == 0.0) {
        out[i] = ax;
    } else {
        out[i] = ax + coefficient(params.b) * out[i];
    }
}
";

impl Gpu {
    /// Records `scalars[slot] = Σ a·b` over the pairs: each pair's workgroup partials (into
    /// `partials`, one word per workgroup of every pair), then their sum.
    pub(crate) fn record_dot(
        &self,
        work: &mut super::GpuWork,
        pairs: &[(Arc<RawBuffer>, Arc<RawBuffer>)],
        partials: &Arc<RawBuffer>,
        scalars: &Arc<RawBuffer>,
        slot: u32,
    ) -> Result<(), Error> {
        let count = partials.words;
        let mut offset = 0;
        for (a, b) in pairs {
            let groups = dot_groups(a.words);
            let params = [a.words, groups * DOT_GROUP, offset, 0];
            let bindings = [(1, a.gpu()), (2, b.gpu()), (3, partials.gpu())];
            self.record_vector_pass(work, "dot", params, [0; 8], &bindings, (groups as u32, 1))?;
            offset += groups;
        }
        let params = [count, 0, 0, slot as usize];
        let bindings = [(1, partials.gpu()), (3, scalars.gpu())];
        self.record_vector_pass(work, "total", params, [0; 8], &bindings, (1, 1))
    }

    /// Records `y = a x + b y` for every pair.
    pub(crate) fn record_combine(
        &self,
        work: &mut super::GpuWork,
        pairs: &[(Arc<RawBuffer>, Arc<RawBuffer>)],
        a: Coefficient,
        b: Coefficient,
        scalars: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        let mut coefficients = [0u32; 8];
        coefficients[..4].copy_from_slice(&a.words());
        coefficients[4..].copy_from_slice(&b.words());
        for (x, y) in pairs {
            if x.words == 0 {
                continue;
            }
            let shape = self.workgroups(x.words.div_ceil(256) as u64);
            let bindings = [(1, x.gpu()), (3, y.gpu()), (4, scalars.gpu())];
            let params = [x.words, 0, 0, 0];
            self.record_vector_pass(work, "combine", params, coefficients, &bindings, shape)?;
        }
        Ok(())
    }

    /// One dispatch of a vector entry point (binding 3 written).
    fn record_vector_pass(
        &self,
        work: &mut super::GpuWork,
        entry: &'static str,
        params: [usize; 4],
        coefficients: [u32; 8],
        bindings: &[(u32, &wgpu::Buffer)],
        shape: (u32, u32),
    ) -> Result<(), Error> {
        let mut uniform: Vec<u32> = params.iter().map(|&p| p as u32).collect();
        uniform.extend(coefficients);
        let storage: Vec<_> = bindings.iter().map(|&(b, buf)| (b, buf, b != 3)).collect();
        let at = EntryPoint {
            module: "gradfuse vectors",
            wgsl: VECTORS_WGSL,
            entry,
            pass: entry,
        };
        self.record_entry(work, &at, &uniform, &storage, shape)
    }
}
