//! Which cooperative matrices (tensor cores, through wgpu's experimental
//! `EXPERIMENTAL_COOPERATIVE_MATRIX`) the adapter offers, and the rate of their
//! multiply-adds against scalar FMAs, timed in one run:
//!
//! ```sh
//! cargo run --release -p gradfuse-runtime --example cooperative_matrices
//! cargo run --release -p gradfuse-runtime --example cooperative_matrices -- --validate k.wgsl
//! ```
//!
//! `--check` runs each operation the network kernels use once (row- and column-major
//! loads, a product, a sum of two matrices, a matrix times a scalar, the zero matrix) on one 16 x 16 tile
//! and compares it with the product computed here.
//! `--print` prints the matrices' kernels (16 x 16, f16 into f32) and times nothing.
//! The second form only checks a WGSL file with naga, every capability on: a kernel of
//! cooperative matrices can be checked on a machine whose driver has none (lavapipe).
//! Times are wall clock around a submit and a wait, so the rates are lower bounds; the
//! ratio of the two is what the network kernels' plans read (BENCHMARKS.md, "Tensor cores
//! through wgpu").

use std::time::Instant;

/// Trips of each kernel's loop.
const ITERS: u32 = 2048;
/// Workgroups of 128 threads of the scalar kernel (the matrices' kernel takes an eighth).
const GROUPS: u32 = 4096;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = args.iter().skip_while(|a| *a != "--validate").nth(1) {
        match std::fs::read_to_string(path) {
            Ok(src) => println!("{path}: {}", validate(&src)),
            Err(e) => println!("{path}: {e}"),
        }
        return;
    }
    if args.iter().any(|a| a == "--print") {
        for loads in [false, true] {
            println!("{}", matrix_src(16, "f16", "f32", loads));
        }
        return;
    }
    let instance = wgpu::Instance::default();
    let adapter = match pollster::block_on(instance.request_adapter(&Default::default())) {
        Ok(a) => a,
        Err(e) => return println!("no adapter: {e}"),
    };
    let info = adapter.get_info();
    println!(
        "adapter: {} ({:?}, driver {})",
        info.name, info.backend, info.driver_info
    );
    let props = adapter.cooperative_matrix_properties();
    if props.is_empty() {
        println!("no cooperative matrices");
    }
    for p in &props {
        println!(
            "  {}x{}x{}: A, B {:?}; C, result {:?}",
            p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type
        );
    }
    if args.iter().any(|a| a == "--check") {
        return check(&adapter);
    }
    let wanted = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
    let Some((device, queue)) = matrix_device(&adapter, adapter.features() & wanted) else {
        return;
    };
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 64 << 20,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let inp = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let vals: Vec<f32> = (0..1 << 18).map(|i| ((i * 7 % 13) as f32) * 0.01).collect();
    queue.write_buffer(&inp, 0, bytemuck::cast_slice(&vals));
    let run = |src: &str, groups| time(&device, &queue, src, [&out, &inp], groups);

    let threads = GROUPS * 128;
    let t = run(&scalar_src(), GROUPS);
    let fma_rate = threads as f64 * ITERS as f64 * 8.0 / t;
    println!(
        "scalar FMA: {:.3} ms, {:.0} GFMA/s",
        t * 1e3,
        fma_rate / 1e9
    );
    for p in &props {
        let (Some(ab), Some(cr)) = (scalar_name(p.ab_type), scalar_name(p.cr_type)) else {
            continue;
        };
        // wgpu's WGSL has square matrices only.
        if p.m_size != p.n_size || p.n_size != p.k_size {
            continue;
        }
        let s = p.m_size;
        for loads in [false, true] {
            let src = matrix_src(s, ab, cr, loads);
            let groups = GROUPS / 8;
            let t = run(&src, groups);
            // Four subgroups a workgroup, four products a trip each.
            let fmas = groups as f64 * 16.0 * ITERS as f64 * (s * s * s) as f64;
            println!(
                "{s}x{s}x{s} {ab} -> {cr}, {}: {:.3} ms, {:.0} GFMA/s, {:.2}x scalar",
                if loads {
                    "A and B loaded each trip"
                } else {
                    "A and B in registers"
                },
                t * 1e3,
                fmas / t / 1e9,
                fmas / t / fma_rate
            );
        }
    }
}

/// A device of `adapter` with `features` and the adapter's limits (none, said why, where
/// it cannot be had).
fn matrix_device(
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
) -> Option<(wgpu::Device, wgpu::Queue)> {
    let request = adapter.request_device(&wgpu::DeviceDescriptor {
        label: None,
        required_features: features,
        required_limits: adapter.limits(),
        // Cooperative matrices are an experimental feature of wgpu 30.
        experimental_features: unsafe { wgpu::ExperimentalFeatures::enabled() },
        ..Default::default()
    });
    match pollster::block_on(request) {
        Ok(dq) => Some(dq),
        Err(e) => {
            println!("no device: {e}");
            None
        }
    }
}

/// What naga says of `src`, every capability on.
fn validate(src: &str) -> String {
    use wgpu::naga::valid::{Capabilities, ValidationFlags, Validator};
    match wgpu::naga::front::wgsl::parse_str(src) {
        Err(e) => e.emit_to_string(src),
        Ok(m) => match Validator::new(ValidationFlags::all(), Capabilities::all()).validate(&m) {
            Ok(_) => "valid".into(),
            Err(e) => e.emit_to_string(src),
        },
    }
}

/// Eight independent FMA chains a thread.
fn scalar_src() -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@compute @workgroup_size(128)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
  var x0 = a[g.x % 1000u]; var x1 = x0 + 1.0; var x2 = x0 + 2.0; var x3 = x0 + 3.0;
  var x4 = x0 + 4.0; var x5 = x0 + 5.0; var x6 = x0 + 6.0; var x7 = x0 + 7.0;
  let m = a[7]; let c = a[9];
  for (var i = 0u; i < {ITERS}u; i++) {{
    x0 = fma(x0, m, c); x1 = fma(x1, m, c); x2 = fma(x2, m, c); x3 = fma(x3, m, c);
    x4 = fma(x4, m, c); x5 = fma(x5, m, c); x6 = fma(x6, m, c); x7 = fma(x7, m, c);
  }}
  o[g.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}}"
    )
}

/// Four accumulators a subgroup, four subgroups a workgroup; A and B from workgroup
/// memory, loaded once or (as a layer's product would) four tiles of each in turn.
fn matrix_src(s: u32, ab: &str, cr: &str, loads: bool) -> String {
    let en = if ab == "f16" || cr == "f16" {
        "enable f16;\n"
    } else {
        ""
    };
    let n = 4 * s * s + 8;
    let s2 = s * s;
    let mat = |ty: &str, role: &str| format!("coop_mat{s}x{s}<{ty}, {role}>");
    let (a, b, c) = (mat(ab, "A"), mat(ab, "B"), mat(cr, "C"));
    let loads_at = format!(
        "let ta = coopLoadT<{a}>(&wa[k], {s}u);
    let tb = coopLoadT<{b}>(&wb[k], {s}u);
    let ta2 = coopLoadT<{a}>(&wa[k + 4u], {s}u);
    let tb2 = coopLoadT<{b}>(&wb[k + 4u], {s}u);"
    );
    // Where the tiles are loaded: once before the loop, or at each trip.
    let (outside, inside) = if loads {
        (
            String::new(),
            format!("let k = (i & 3u) * S2;\n    {loads_at}"),
        )
    } else {
        (format!("let k = 0u;\n  {loads_at}"), String::new())
    };
    format!(
        "{en}enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read_write> o: array<{cr}>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
var<workgroup> wa: array<{ab}, {n}>;
var<workgroup> wb: array<{ab}, {n}>;
const S2: u32 = {s2}u;
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {{
  for (var i = l; i < {n}u; i += 128u) {{ wa[i] = {ab}(a[i]); wb[i] = {ab}(a[i + 7u]); }}
  workgroupBarrier();
  {outside}
  var c0 = coopLoadT<{c}>(&o[0], {s}u);
  var c1 = c0; var c2 = c0; var c3 = c0;
  for (var i = 0u; i < {ITERS}u; i++) {{
    {inside}
    c0 = coopMultiplyAdd(ta, tb, c0);
    c1 = coopMultiplyAdd(ta, tb2, c1);
    c2 = coopMultiplyAdd(ta2, tb, c2);
    c3 = coopMultiplyAdd(ta2, tb2, c3);
  }}
  let base = (w.x * 4u + l / 32u) * 4u * S2;
  coopStoreT(c0, &o[base], {s}u);
  coopStoreT(c1, &o[base + S2], {s}u);
  coopStoreT(c2, &o[base + S2 * 2u], {s}u);
  coopStoreT(c3, &o[base + S2 * 3u], {s}u);
}}"
    )
}

/// The WGSL name of a matrix scalar type this example times.
fn scalar_name(t: wgpu::CooperativeScalarType) -> Option<&'static str> {
    match t {
        wgpu::CooperativeScalarType::F16 => Some("f16"),
        wgpu::CooperativeScalarType::F32 => Some("f32"),
        _ => None,
    }
}

/// The fastest of seven launches of `src` in `groups` workgroups, in seconds (NaN where
/// it does not compile).
fn time(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &str,
    [out, inp]: [&wgpu::Buffer; 2],
    groups: u32,
) -> f64 {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let layout = pipeline.get_bind_group_layout(0);
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: out.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: inp.as_entire_binding(),
            },
        ],
    });
    if let Some(e) = pollster::block_on(scope.pop()) {
        println!("error: {e}");
        return f64::NAN;
    }
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups, 1, 1);
        }
        let t0 = Instant::now();
        queue.submit([enc.finish()]);
        if let Err(e) = device.poll(wgpu::PollType::wait_indefinitely()) {
            println!("error: {e}");
            return f64::NAN;
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    best
}

/// The operations `--check` runs, each into its own tile of the output: the products
/// of A and B read row-major (`coopLoadT`) or column-major (`coopLoad`), then sums and
/// scalings of the first product.
const CHECK_SRC: &str = "enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
var<workgroup> wa: array<f16, 256>;
var<workgroup> wb: array<f16, 256>;
var<workgroup> zero: array<f32, 256>;
@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) l: u32) {
  for (var i = l; i < 256u; i += 32u) { wa[i] = f16(a[i]); wb[i] = f16(a[256u + i]); zero[i] = 0.0; }
  workgroupBarrier();
  let z = coopLoadT<coop_mat16x16<f32, C>>(&zero[0], 16u);
  let ar = coopLoadT<coop_mat16x16<f16, A>>(&wa[0], 16u);
  let ac = coopLoad<coop_mat16x16<f16, A>>(&wa[0], 16u);
  let br = coopLoadT<coop_mat16x16<f16, B>>(&wb[0], 16u);
  let bc = coopLoad<coop_mat16x16<f16, B>>(&wb[0], 16u);
  let r = coopMultiplyAdd(ar, br, z);
  coopStoreT(r, &o[0], 16u);
  coopStoreT(coopMultiplyAdd(ar, bc, z), &o[256], 16u);
  coopStoreT(coopMultiplyAdd(ac, br, z), &o[512], 16u);
  coopStoreT(r + r, &o[768], 16u);
  coopStoreT(r * 0.5, &o[1024], 16u);
  let s: f32 = a[512];
  coopStoreT(r + r * s, &o[1280], 16u);
  var t = z;
  for (var i = 0u; i < 3u; i++) { t = t + r * s; }
  coopStoreT(t, &o[1536], 16u);
  coopStore(r, &o[1792], 16u);
  coopStoreT(coop_mat16x16<f32, C>(), &o[2048], 16u);
}";

/// `--check`: each of [`CHECK_SRC`]'s results against the same computed here, in f64 from
/// inputs every f16 holds exactly.
fn check(adapter: &wgpu::Adapter) {
    let wanted = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
    if !adapter.features().contains(wanted) {
        return println!("check: the adapter has no cooperative matrices");
    }
    let Some((device, queue)) = matrix_device(adapter, wanted) else {
        return;
    };
    let s = 0.375f32;
    let mut inputs: Vec<f32> = (0..512)
        .map(|i| ((i * 37 % 29) as f32 - 14.0) / 8.0)
        .collect();
    inputs.push(s);
    let (a, b) = (&inputs[..256], &inputs[256..512]);
    let at = |r: usize, c: usize| a[r * 16 + c] as f64;
    let bt = |r: usize, c: usize| b[r * 16 + c] as f64;
    let product = |x: &dyn Fn(usize, usize) -> f64, y: &dyn Fn(usize, usize) -> f64| {
        let mut p = vec![0.0f64; 256];
        for r in 0..16 {
            for c in 0..16 {
                p[r * 16 + c] = (0..16).map(|k| x(r, k) * y(k, c)).sum();
            }
        }
        p
    };
    let r = product(&at, &bt);
    let transpose = |m: &[f64]| {
        (0..256)
            .map(|i| m[(i % 16) * 16 + i / 16])
            .collect::<Vec<_>>()
    };
    let expected: Vec<(&str, Vec<f64>)> = vec![
        ("A B (row-major loads)", r.clone()),
        ("A B^T (B column-major)", product(&at, &|k, c| bt(c, k))),
        ("A^T B (A column-major)", product(&|r, k| at(k, r), &bt)),
        ("R + R", r.iter().map(|v| 2.0 * v).collect()),
        ("R * 0.5", r.iter().map(|v| 0.5 * v).collect()),
        ("R + R * s", r.iter().map(|v| v + v * s as f64).collect()),
        (
            "three times t = t + R * s",
            r.iter().map(|v| 3.0 * v * s as f64).collect(),
        ),
        ("R stored column-major", transpose(&r)),
        ("the zero constructor", vec![0.0; 256]),
    ];
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 9216,
        usage,
        mapped_at_creation: false,
    });
    let inp = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4 * inputs.len() as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&inp, 0, bytemuck::cast_slice(&inputs));
    if time(&device, &queue, CHECK_SRC, [&out, &inp], 1).is_nan() {
        return;
    }
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 9216,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&out, 0, &read, 0, 9216);
    queue.submit([enc.finish()]);
    read.slice(..).map_async(wgpu::MapMode::Read, |_| ());
    if let Err(e) = device.poll(wgpu::PollType::wait_indefinitely()) {
        return println!("error: {e}");
    }
    let got: Vec<f32> = match read.slice(..).get_mapped_range() {
        Ok(view) => bytemuck::cast_slice(&view).to_vec(),
        Err(e) => return println!("error: {e}"),
    };
    for (i, (name, want)) in expected.iter().enumerate() {
        let tile = &got[i * 256..(i + 1) * 256];
        let err = (tile.iter().zip(want))
            .map(|(g, w)| (*g as f64 - w).abs())
            .fold(0.0, f64::max);
        let verdict = if err < 1e-3 { "ok" } else { "WRONG" };
        println!(
            "check {name}: {verdict} (largest error {err:.3e}; first {} for {})",
            tile[1], want[1]
        );
    }
}
