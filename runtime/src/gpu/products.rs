//! The Jacobian products on the GPU (see `products.rs`): `J·v` one thread per output word,
//! each residual's `J_kᵀ u_k` one thread per column word before the scatter passes.

use super::Gpu;
use super::pipelines::EntryPoint;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::gather::Field;
use crate::products::{MAX_COLUMN_BLOCKS, ProductShape};
use std::sync::{Arc, OnceLock};

/// `rows`: `J_kᵀ u_k`, one thread per word.
const TRANSPOSE_WGSL: &str =
    "// gradfuse Jacobian products: each residual's J_k^T u_k, one thread per word.

struct Params {
    n: u32,
    rows: u32,
    columns: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> jac: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.x + gid.y * groups.x * 256u;
    if (t >= params.n * params.columns) {
        return;
    }
    let k = t / params.columns;
    let c = t % params.columns;
    var acc = 0.0f;
    for (var r = 0u; r < params.rows; r++) {
        acc += jac[(k * params.rows + r) * params.columns + c] * u[k * params.rows + r];
    }
    out[t] = acc;
}
";

/// `J·v` for up to [`MAX_COLUMN_BLOCKS`] arguments: argument `f`'s direction at binding
/// `3 + 2f`, its index at `4 + 2f` (read where bit `f` of `gathered` is set); arguments
/// past the count have no words.
fn times_wgsl() -> &'static str {
    static WGSL: OnceLock<String> = OnceLock::new();
    WGSL.get_or_init(|| {
        let mut s = String::from(
            "// gradfuse Jacobian products: J v, one thread per output word.

struct Params {
    n: u32,
    rows: u32,
    columns: u32,
    gathered: u32,
    words: array<vec4<u32>, 2>,
    first: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> jac: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
",
        );
        for f in 0..MAX_COLUMN_BLOCKS {
            s += &format!(
                "@group(0) @binding({}) var<storage, read> v{f}: array<f32>;\n\
                 @group(0) @binding({}) var<storage, read> i{f}: array<u32>;\n",
                3 + 2 * f,
                4 + 2 * f
            );
        }
        s += "
@compute @workgroup_size(256)
fn times(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.x + gid.y * groups.x * 256u;
    if (t >= params.n * params.rows) {
        return;
    }
    let k = t / params.rows;
    let jrow = t * params.columns;
    var acc = 0.0f;
";
        for f in 0..MAX_COLUMN_BLOCKS {
            let (q, c) = (f / 4, ["x", "y", "z", "w"][f % 4]);
            s += &format!(
                "    let w{f} = params.words[{q}].{c};
    if (w{f} > 0u) {{
        var row = k;
        if ((params.gathered & {bit}u) != 0u) {{
            row = i{f}[k];
        }}
        let first = jrow + params.first[{q}].{c};
        for (var j = 0u; j < w{f}; j++) {{
            acc += jac[first + j] * v{f}[row * w{f} + j];
        }}
    }}
",
                bit = 1u32 << f
            );
        }
        s += "    out[t] = acc;\n}\n";
        s
    })
}

impl Gpu {
    /// Records `out = J·v`.
    pub(crate) fn record_jacobian_times(
        &self,
        work: &mut super::GpuWork,
        s: ProductShape,
        jacobians: &Arc<RawBuffer>,
        fields: &[Field],
        out: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        let mut uniform = vec![s.n as u32, s.rows as u32, s.columns as u32, 0];
        let (mut words, mut first) = ([0u32; 8], [0u32; 8]);
        for (f, field) in fields.iter().enumerate() {
            words[f] = field.words;
            first[f] = field.args_offset;
            if field.index.is_some() {
                uniform[3] |= 1 << f;
            }
        }
        uniform.extend(words);
        uniform.extend(first);
        let mut storage = vec![(1, jacobians.gpu(), true), (2, out.gpu(), false)];
        for f in 0..MAX_COLUMN_BLOCKS {
            let b = 3 + 2 * f as u32;
            let (v, i) = match fields.get(f) {
                Some(field) => (
                    field.source.gpu(),
                    field
                        .index
                        .as_ref()
                        .map_or(field.source.gpu(), |i| i.entries.gpu()),
                ),
                None => (jacobians.gpu(), jacobians.gpu()),
            };
            storage.extend([(b, v, true), (b + 1, i, true)]);
        }
        let at = EntryPoint {
            module: "gradfuse J·v",
            wgsl: times_wgsl(),
            entry: "times",
            pass: "J·v",
        };
        let workgroups = self.workgroups(((s.n * s.rows) as u64).div_ceil(256));
        self.record_entry(work, &at, &uniform, &storage, workgroups)
    }

    /// Records each residual's `J_kᵀ u_k` into `rows` (`columns` words per residual).
    pub(crate) fn record_transpose_rows(
        &self,
        work: &mut super::GpuWork,
        s: ProductShape,
        jacobians: &Arc<RawBuffer>,
        u: &Arc<RawBuffer>,
        rows: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        let uniform = [s.n as u32, s.rows as u32, s.columns as u32, 0];
        let storage = [
            (1, jacobians.gpu(), true),
            (2, u.gpu(), true),
            (3, rows.gpu(), false),
        ];
        let at = EntryPoint {
            module: "gradfuse Jᵀ·u",
            wgsl: TRANSPOSE_WGSL,
            entry: "rows",
            pass: "Jᵀ·u",
        };
        let workgroups = self.workgroups(((s.n * s.columns) as u64).div_ceil(256));
        self.record_entry(work, &at, &uniform, &storage, workgroups)
    }
}
