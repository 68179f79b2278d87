//! The batched Levenberg–Marquardt passes on the GPU: one thread per element, the same
//! operations in the same order as the CPU device's (`lm_passes.rs`).

use super::Gpu;
use crate::buffer::Buffer;
use crate::error::Error;
use crate::lm_passes::{LmBuffers, LmPass, LmShape, MAX_LAMBDA};

/// `propose` and `accept`, one thread per element; `a` holds `JᵀJ` then its Cholesky factor
/// `U` (upper, `A = UᵀU`), 16 columns to a row whatever the element's unknowns.
const LM_WGSL: &str = "// gradfuse batched Levenberg-Marquardt: one thread per element.

struct Params {
    n: u32,
    unknowns: u32,
    residuals: u32,
    pad: u32,
    gradient_tolerance: f32,
    step_tolerance: f32,
    cost_tolerance: f32,
    max_lambda: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> x_try: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read> jac: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> status: array<u32>;

fn element(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 64u;
}

fn is_finite(v: f32) -> bool {
    return v == v && abs(v) <= 3.40282347e38;
}

fn half_squared_norm(e: u32) -> f32 {
    let m = params.residuals;
    var cost = 0.0f;
    for (var k = 0u; k < m; k++) {
        let rk = r[e * m + k];
        cost += rk * rk;
    }
    return cost * 0.5f;
}

@compute @workgroup_size(64)
fn propose(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = element(gid, groups);
    if (e >= params.n || status[e] != 0u) {
        return;
    }
    let n = params.unknowns;
    let m = params.residuals;
    let jb = e * m * n;
    let cost = half_squared_norm(e);
    var s = state[e];
    s.z = cost;
    state[e] = s;
    var g: array<f32, 16>;
    var a: array<f32, 256>;
    var finite = is_finite(cost);
    var gmax = 0.0f;
    for (var c = 0u; c < n; c++) {
        var gc = 0.0f;
        for (var k = 0u; k < m; k++) {
            gc += jac[jb + k * n + c] * r[e * m + k];
        }
        g[c] = gc;
        for (var d = c; d < n; d++) {
            var t = 0.0f;
            for (var k = 0u; k < m; k++) {
                t += jac[jb + k * n + c] * jac[jb + k * n + d];
            }
            a[c * 16u + d] = t;
        }
        finite = finite && is_finite(gc);
        gmax = max(gmax, abs(gc));
    }
    if (!finite) {
        status[e] = 4u;
        return;
    }
    if (gmax <= params.gradient_tolerance) {
        status[e] = 1u;
        return;
    }
    let lambda = s.x;
    for (var c = 0u; c < n; c++) {
        a[c * 17u] += lambda * max(a[c * 17u], 1e-12f);
    }
    for (var c = 0u; c < n; c++) {
        var d0 = a[c * 17u];
        for (var k = 0u; k < c; k++) {
            d0 -= a[k * 16u + c] * a[k * 16u + c];
        }
        if (!(d0 > 0.0f)) {
            // Not positive definite: propose nothing; the acceptance raises lambda.
            s.w = 0.0f;
            state[e] = s;
            for (var q = 0u; q < n; q++) {
                x_try[e * n + q] = x[e * n + q];
            }
            return;
        }
        let u = sqrt(d0);
        a[c * 17u] = u;
        for (var d = c + 1u; d < n; d++) {
            var t = a[c * 16u + d];
            for (var k = 0u; k < c; k++) {
                t -= a[k * 16u + c] * a[k * 16u + d];
            }
            a[c * 16u + d] = t / u;
        }
    }
    var delta: array<f32, 16>;
    for (var c = 0u; c < n; c++) {
        var t = -g[c];
        for (var k = 0u; k < c; k++) {
            t -= a[k * 16u + c] * delta[k];
        }
        delta[c] = t / a[c * 17u];
    }
    for (var step = 0u; step < n; step++) {
        let c = n - 1u - step;
        var t = delta[c];
        for (var k = c + 1u; k < n; k++) {
            t -= a[c * 16u + k] * delta[k];
        }
        delta[c] = t / a[c * 17u];
    }
    // The reduction the linear model predicts: -g.delta - |J delta|^2 / 2.
    var gd = 0.0f;
    var step2 = 0.0f;
    var size2 = 0.0f;
    for (var c = 0u; c < n; c++) {
        gd += g[c] * delta[c];
        step2 += delta[c] * delta[c];
        size2 += x[e * n + c] * x[e * n + c];
    }
    var jd2 = 0.0f;
    for (var k = 0u; k < m; k++) {
        var t = 0.0f;
        for (var c = 0u; c < n; c++) {
            t += jac[jb + k * n + c] * delta[c];
        }
        jd2 += t * t;
    }
    s.w = -gd - 0.5f * jd2;
    state[e] = s;
    if (sqrt(step2) <= params.step_tolerance * (sqrt(size2) + params.step_tolerance)) {
        status[e] = 2u;
        return;
    }
    for (var c = 0u; c < n; c++) {
        x_try[e * n + c] = x[e * n + c] + delta[c];
    }
}

@compute @workgroup_size(64)
fn accept(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = element(gid, groups);
    if (e >= params.n || status[e] != 0u) {
        return;
    }
    let n = params.unknowns;
    let cost_try = half_squared_norm(e);
    var s = state[e];
    let reduction = s.z - cost_try;
    if (s.w > 0.0f && is_finite(cost_try) && reduction > 0.0f) {
        let t = 2.0f * (reduction / s.w) - 1.0f;
        for (var c = 0u; c < n; c++) {
            x[e * n + c] = x_try[e * n + c];
        }
        let cost = s.z;
        s = vec4<f32>(s.x * max(1.0f - t * t * t, 1.0f / 3.0f), 2.0f, cost_try, s.w);
        state[e] = s;
        if (reduction <= params.cost_tolerance * cost) {
            status[e] = 3u;
        }
    } else {
        s = vec4<f32>(s.x * s.y, s.y * 2.0f, s.z, s.w);
        state[e] = s;
        if (!(s.x <= params.max_lambda)) {
            status[e] = 5u;
        }
    }
}
";

impl Gpu {
    /// Records one of the solver's passes over every element.
    pub(crate) fn record_lm(
        &self,
        work: &mut super::GpuWork,
        pass: LmPass,
        shape: LmShape,
        x: &Buffer<f32>,
        b: &LmBuffers,
    ) -> Result<(), Error> {
        use wgpu::BufferBindingType as B;
        self.check_lost()?;
        let entry = match pass {
            LmPass::Propose => "propose",
            LmPass::Accept => "accept",
        };
        let (rw, ro) = (
            B::Storage { read_only: false },
            B::Storage { read_only: true },
        );
        let layout = [
            (0, B::Uniform),
            (1, rw),
            (2, rw),
            (3, ro),
            (4, ro),
            (5, rw),
            (6, rw),
        ];
        let key = super::module_key(LM_WGSL, entry);
        let pipeline = self.compile(key, "gradfuse batched LM", LM_WGSL, entry, &layout)?;
        let o = shape;
        let uniform = [
            shape.elements as u32,
            shape.unknowns as u32,
            shape.residuals as u32,
            0,
            o.gradient_tolerance.to_bits(),
            o.step_tolerance.to_bits(),
            o.cost_tolerance.to_bits(),
            MAX_LAMBDA.to_bits(),
        ];
        let raws = [
            x.raw(),
            b.x_try.raw(),
            b.residuals.raw(),
            b.jacobians.raw(),
            b.state.raw(),
            b.status.raw(),
        ];
        let buffers: Vec<_> = (1..)
            .zip(raws)
            .map(|(binding, raw)| (binding, raw.gpu(), 0, None))
            .collect();
        let group = self.cached_bind_group(
            key,
            &pipeline.layout,
            "gradfuse batched LM",
            (0, &uniform),
            &buffers,
        );
        let workgroups = self.workgroups((shape.elements as u64).div_ceil(64).max(1));
        work.dispatch(entry, &pipeline.pipeline, &group, workgroups);
        Ok(())
    }
}
