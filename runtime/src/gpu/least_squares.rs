//! The least-squares solver's operations on the GPU (see `least_squares/ops.rs`): the same
//! steps, in the same order, as the CPU device's.

use super::Gpu;
use super::pipelines::EntryPoint;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::least_squares::ops::{BlockOp, MAX_DIAGONAL, MIN_DIAGONAL};
use std::sync::{Arc, OnceLock};

/// The WGSL of every operation: one thread per output word (`gram`, `block_times`,
/// `multiply`), per residual (`robust_*`) or per block row (`precondition`, whose
/// Cholesky factor and inverse live in the thread's own arrays).
fn wgsl() -> &'static str {
    static WGSL: OnceLock<String> = OnceLock::new();
    WGSL.get_or_init(|| {
        format!(
            "{}\nconst MIN_DIAGONAL: f32 = {MIN_DIAGONAL:e};\nconst MAX_DIAGONAL: f32 = {MAX_DIAGONAL:e};\n",
            WGSL_BODY
        )
    })
}

const WGSL_BODY: &str = "// gradfuse least squares: Gram blocks, robust losses, block preconditioner, products.

struct Params {
    n: u32,
    rows: u32,
    columns: u32,
    words: u32,
    first: u32,
    stride: u32,
    offset: u32,
    flag: u32,
    a: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src0: array<f32>;
@group(0) @binding(2) var<storage, read> src1: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst0: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst1: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst2: array<f32>;

fn thread(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

// (rho(s), rho'(s)) of the loss params.flag (0 squared, 1 Huber, 2 Cauchy), scale params.a.
fn loss(s: f32) -> vec2<f32> {
    let c = params.a;
    if (params.flag == 1u) {
        if (s <= c * c) {
            return vec2<f32>(s, 1.0);
        }
        let r = sqrt(s);
        return vec2<f32>(2.0 * c * r - c * c, c / r);
    }
    if (params.flag == 2u) {
        let q = s / (c * c);
        return vec2<f32>(c * c * log(1.0 + q), 1.0 / (1.0 + q));
    }
    return vec2<f32>(s, 1.0);
}

@compute @workgroup_size(256)
fn gram(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread(gid, groups);
    let w = params.words;
    if (t >= params.n * w * w) {
        return;
    }
    let k = t / (w * w);
    let ab = t % (w * w);
    let a = ab / w;
    let b = ab % w;
    var s = 0.0f;
    for (var r = 0u; r < params.rows; r++) {
        let at = (k * params.rows + r) * params.columns + params.first;
        s += src0[at + a] * src0[at + b];
    }
    dst0[k * params.stride + params.offset + ab] = s;
}

// dst0: cost per residual; dst1: residuals; dst2: Jacobian blocks.
@compute @workgroup_size(256)
fn robust_scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let k = thread(gid, groups);
    if (k >= params.n) {
        return;
    }
    var s = 0.0f;
    for (var r = 0u; r < params.rows; r++) {
        let v = dst1[k * params.rows + r];
        s += v * v;
    }
    let l = loss(s);
    dst0[k] = sqrt(l.x);
    let scale = sqrt(l.y);
    for (var r = 0u; r < params.rows; r++) {
        dst1[k * params.rows + r] *= scale;
    }
    let block = params.rows * params.columns;
    for (var q = 0u; q < block; q++) {
        dst2[k * block + q] *= scale;
    }
}

// src0: residuals; dst0: cost per residual.
@compute @workgroup_size(256)
fn robust_cost(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let k = thread(gid, groups);
    if (k >= params.n) {
        return;
    }
    var s = 0.0f;
    for (var r = 0u; r < params.rows; r++) {
        let v = src0[k * params.rows + r];
        s += v * v;
    }
    dst0[k] = sqrt(loss(s).x);
}

// src0: Gram blocks; src1: mask; dst0: inverses; dst1: damping. The same steps as the CPU
// device's `invert`.
@compute @workgroup_size(64)
fn precondition(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let r = gid.x + gid.y * groups.x * 64u;
    if (r >= params.n) {
        return;
    }
    let w = params.words;
    let base = r * w * w;
    var a: array<f32, 256>;
    var diagonal: array<f32, 16>;
    for (var q = 0u; q < w * w; q++) {
        a[q] = src0[base + q];
    }
    for (var i = 0u; i < w; i++) {
        let d = params.a * clamp(a[i * w + i], MIN_DIAGONAL, MAX_DIAGONAL);
        dst1[r * w + i] = d;
        a[i * w + i] += d;
        diagonal[i] = a[i * w + i];
    }
    for (var q = 0u; q < w * w; q++) {
        dst0[base + q] = 0.0;
    }
    if (src1[r * w] == 0.0) {
        return;
    }
    var factored = true;
    for (var j = 0u; j < w && factored; j++) {
        var s = a[j * w + j];
        for (var k = 0u; k < j; k++) {
            s -= a[j * w + k] * a[j * w + k];
        }
        // Not positive, or not finite (NaN fails the first test, infinity the second).
        if (!(s > 0.0) || s > 3.0e38) {
            factored = false;
            break;
        }
        let l = sqrt(s);
        a[j * w + j] = l;
        for (var i = j + 1u; i < w; i++) {
            var t = a[i * w + j];
            for (var k = 0u; k < j; k++) {
                t -= a[i * w + k] * a[j * w + k];
            }
            a[i * w + j] = t / l;
        }
    }
    if (!factored) {
        for (var i = 0u; i < w; i++) {
            dst0[base + i * w + i] = select(0.0, 1.0 / diagonal[i], diagonal[i] > 0.0);
        }
        return;
    }
    var y: array<f32, 16>;
    for (var c = 0u; c < w; c++) {
        for (var i = 0u; i < w; i++) {
            var s = select(0.0, 1.0, i == c);
            for (var k = 0u; k < i; k++) {
                s -= a[i * w + k] * y[k];
            }
            y[i] = s / a[i * w + i];
        }
        for (var ii = 0u; ii < w; ii++) {
            let i = w - 1u - ii;
            var s = y[i];
            for (var k = i + 1u; k < w; k++) {
                s -= a[k * w + i] * y[k];
            }
            y[i] = s / a[i * w + i];
        }
        for (var i = 0u; i < w; i++) {
            dst0[base + i * w + c] = y[i];
        }
    }
}

// src0: blocks; src1: x; dst0: out.
@compute @workgroup_size(256)
fn block_times(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread(gid, groups);
    let w = params.words;
    if (t >= params.n * w) {
        return;
    }
    let r = t / w;
    let i = t % w;
    var s = 0.0f;
    for (var c = 0u; c < w; c++) {
        s += src0[r * w * w + i * w + c] * src1[r * w + c];
    }
    dst0[t] = s;
}

// src0: a; src1: x; dst0: out.
@compute @workgroup_size(256)
fn multiply(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread(gid, groups);
    if (t >= params.n) {
        return;
    }
    let v = params.a * src0[t] * src1[t];
    dst0[t] = select(v, dst0[t] + v, params.flag != 0u);
}
";

/// A dispatch: entry point, uniform, bindings, threads and threads per workgroup.
struct Dispatch<'b> {
    entry: &'static str,
    params: [u32; 12],
    bindings: Vec<(u32, &'b Arc<RawBuffer>)>,
    threads: usize,
    group: u64,
}

fn dispatch_of(op: &BlockOp) -> Dispatch<'_> {
    match op {
        BlockOp::Gram { .. } => gram_dispatch(op),
        BlockOp::RobustScale { .. } => robust_scale_dispatch(op),
        BlockOp::RobustCost { .. } => robust_cost_dispatch(op),
        BlockOp::Precondition { .. } => precondition_dispatch(op),
        BlockOp::BlockTimes { .. } => block_times_dispatch(op),
        BlockOp::Multiply { .. } => multiply_dispatch(op),
    }
}

fn gram_dispatch(op: &BlockOp) -> Dispatch<'_> {
    let BlockOp::Gram {
        jacobians,
        n,
        rows,
        columns,
        first,
        words,
        stride,
        offset,
        out,
    } = op
    else {
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    params[..7].copy_from_slice(&[
        u(*n),
        u(*rows),
        u(*columns),
        *words,
        *first,
        *stride,
        *offset,
    ]);
    let threads = n * (*words as usize).pow(2);
    Dispatch {
        entry: "gram",
        params,
        bindings: vec![(1, jacobians), (3, out)],
        threads,
        group: 256,
    }
}

fn robust_scale_dispatch(op: &BlockOp) -> Dispatch<'_> {
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
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    let (kind, scale) = loss.words();
    params[..3].copy_from_slice(&[u(*n), u(*rows), u(*columns)]);
    (params[7], params[8]) = (kind, scale.to_bits());
    let bindings = vec![(3, cost), (4, values), (5, jacobians)];
    Dispatch {
        entry: "robust_scale",
        params,
        bindings,
        threads: *n,
        group: 256,
    }
}

fn robust_cost_dispatch(op: &BlockOp) -> Dispatch<'_> {
    let BlockOp::RobustCost {
        loss,
        n,
        rows,
        values,
        cost,
    } = op
    else {
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    let (kind, scale) = loss.words();
    params[..2].copy_from_slice(&[u(*n), u(*rows)]);
    (params[7], params[8]) = (kind, scale.to_bits());
    let bindings = vec![(1, values), (3, cost)];
    Dispatch {
        entry: "robust_cost",
        params,
        bindings,
        threads: *n,
        group: 256,
    }
}

fn precondition_dispatch(op: &BlockOp) -> Dispatch<'_> {
    let BlockOp::Precondition {
        rows,
        words,
        lambda,
        gram,
        mask,
        inverse,
        damping,
    } = op
    else {
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    (params[0], params[3], params[8]) = (u(*rows), *words, lambda.to_bits());
    let bindings = vec![(1, gram), (2, mask), (3, inverse), (4, damping)];
    Dispatch {
        entry: "precondition",
        params,
        bindings,
        threads: *rows,
        group: 64,
    }
}

fn block_times_dispatch(op: &BlockOp) -> Dispatch<'_> {
    let BlockOp::BlockTimes {
        rows,
        words,
        blocks,
        x,
        out,
    } = op
    else {
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    (params[0], params[3]) = (u(*rows), *words);
    let bindings = vec![(1, blocks), (2, x), (3, out)];
    Dispatch {
        entry: "block_times",
        params,
        bindings,
        threads: rows * *words as usize,
        group: 256,
    }
}

fn multiply_dispatch(op: &BlockOp) -> Dispatch<'_> {
    let BlockOp::Multiply {
        scale,
        accumulate,
        a,
        x,
        out,
    } = op
    else {
        return Dispatch::none();
    };
    let mut params = [0u32; 12];
    let u = |x: usize| x as u32;
    (params[0], params[7], params[8]) = (u(out.words), u32::from(*accumulate), scale.to_bits());
    let bindings = vec![(1, a), (2, x), (3, out)];
    Dispatch {
        entry: "multiply",
        params,
        bindings,
        threads: out.words,
        group: 256,
    }
}

impl Dispatch<'_> {
    /// Nothing to dispatch.
    fn none() -> Self {
        Dispatch {
            entry: "none",
            params: [0; 12],
            bindings: Vec::new(),
            threads: 0,
            group: 256,
        }
    }
}

impl Gpu {
    /// Records one operation of the least-squares solver (bindings from 3 written).
    pub(crate) fn record_block_op(
        &self,
        work: &mut super::GpuWork,
        op: &BlockOp,
    ) -> Result<(), Error> {
        let d = dispatch_of(op);
        if d.threads == 0 {
            return Ok(());
        }
        let storage: Vec<_> = d
            .bindings
            .iter()
            .map(|&(binding, b)| (binding, b.gpu(), binding < 3))
            .collect();
        let at = EntryPoint {
            module: "gradfuse least squares",
            wgsl: wgsl(),
            entry: d.entry,
            pass: d.entry,
        };
        let workgroups = self.workgroups((d.threads as u64).div_ceil(d.group));
        self.record_entry(work, &at, &d.params, &storage, workgroups)
    }
}
