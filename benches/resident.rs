//! Resident work on one device: what a recorded training step costs against its launches
//! run alone, and what gathering arguments by index costs against the same kernel on
//! arguments gathered beforehand.
//!
//! `cargo bench --bench resident` (n = 2^20 and 2^24) or `-- --quick` (small n: CI runs it
//! so the bench cannot rot; lavapipe's numbers only show that it runs). Times are wall
//! clock over `k` launches recorded into one submission (one wait at the end), the median
//! of several rounds after a warm-up round: per-launch host costs (bind groups, uniforms)
//! count, as they do for a user. GPU times per pass come from a timed recording
//! (timestamps around each compute pass; "n/a" on a device without timestamp queries).
//! Real numbers come from an H100: see BENCHMARKS.md.
//! Set GRADFUSE_BENCH_OUT=path to also write the table to a file.

#[path = "../examples/common/mesh.rs"]
mod mesh;

use gradfuse::{Adam, Buffer, Device, Error, Index, Recording, Source, differentiable};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

/// A 2-4-1 tanh regression loss: a value_and_grad with a reduction of 17 shared weights.
#[differentiable]
pub fn fit(#[constant] x: [f32; 2], #[constant] t: f32, #[shared] w: [f32; 17]) -> f32 {
    let mut y = w[16];
    for j in 0..4 {
        let h = (w[2 * j] * x[0] + w[2 * j + 1] * x[1] + w[8 + j]).tanh();
        y += w[12 + j] * h;
    }
    (y - t) * (y - t)
}

/// One word in, the same word out: its value kernel is a copy, the bandwidth roofline.
#[differentiable]
pub fn copy(x: f32) -> f32 {
    x
}

/// Half the squared stretch of an edge against its rest length.
#[differentiable]
pub fn edge(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    let s = (dx * dx + dy * dy + dz * dz).sqrt() - rest;
    0.5 * s * s
}

/// Seconds per repetition of what `record` records, `k` times in one submission: the
/// median of `rounds` rounds after one warm-up round. Reading `tick` (one word) waits for
/// all the work submitted before it.
fn per_launch(
    d: &Device,
    k: usize,
    rounds: usize,
    tick: &Buffer<f32>,
    record: impl FnMut(&mut Recording<'_>) -> Result<(), Error>,
) -> Result<f64, Error> {
    timed_repetitions(d, k, rounds, tick, false, record)
}

/// As [`per_launch`]; `each`: every repetition recorded and submitted on its own (the GPU
/// runs one while the host records the next), else all `k` in one submission.
fn timed_repetitions(
    d: &Device,
    k: usize,
    rounds: usize,
    tick: &Buffer<f32>,
    each: bool,
    mut record: impl FnMut(&mut Recording<'_>) -> Result<(), Error>,
) -> Result<f64, Error> {
    median_per_repetition(rounds, k, || {
        let mut rec = d.record();
        for _ in 0..k {
            record(&mut rec)?;
            if each {
                std::mem::replace(&mut rec, d.record()).submit()?;
            }
        }
        rec.submit()?;
        d.read(tick).map(drop)
    })
}

/// Seconds per repetition of `run`, which does `k` repetitions: the median of `rounds`
/// rounds after one warm-up round.
fn median_per_repetition(
    rounds: usize,
    k: usize,
    mut run: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    let mut times = Vec::new();
    for round in 0..=rounds {
        let t = Instant::now();
        run()?;
        if round > 0 {
            times.push(t.elapsed().as_secs_f64() / k as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// GPU seconds per repetition of each pass label of what `record` records, `k` times in
/// one timed submission (empty without timestamp queries).
fn gpu_times(
    d: &Device,
    k: usize,
    mut record: impl FnMut(&mut Recording<'_>) -> Result<(), Error>,
) -> Result<BTreeMap<&'static str, f64>, Error> {
    let mut warm = d.record();
    record(&mut warm)?;
    warm.submit()?;
    let mut rec = d.record_timed();
    for _ in 0..k {
        record(&mut rec)?;
    }
    let mut by_label = BTreeMap::new();
    for (label, t) in rec.submit_timed()? {
        *by_label.entry(label).or_insert(0.0) += t.as_secs_f64() / k as f64;
    }
    Ok(by_label)
}

/// Milliseconds with three decimals, or "n/a".
fn ms(t: Option<f64>) -> String {
    t.map_or("n/a".into(), |t| format!("{:.3}", t * 1e3))
}

/// A reproducible value in [-1, 1) for `i`.
fn noise(i: usize) -> f32 {
    let z = (i as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// The training step table row at `n` elements.
fn training_row(d: &Device, n: usize, k: usize, rounds: usize) -> Result<String, Error> {
    let args: Vec<fit::Args> = (0..n)
        .map(|i| fit::Args {
            x: [noise(2 * i), noise(2 * i + 1)],
            t: noise(3 * i + 7),
        })
        .collect();
    let args = d.buffer(&args)?;
    let w = d.buffer(&[fit::Shared {
        w: std::array::from_fn(|i| 0.3 * noise(i + 11)),
    }])?;
    let (values, sg) = (d.zeros::<f32>(n)?, d.zeros::<fit::SharedGrad>(1)?);
    let kernel = fit::kernel(d);
    let tick = d.zeros::<f32>(1)?;
    let mut adam = Adam::new(1e-3);
    let vg = per_launch(d, k, rounds, &tick, |rec| {
        kernel.value_and_grad_to(rec, &args, &w, &values, &sg)
    })?;
    let step = per_launch(d, k, rounds, &tick, |rec| adam.step(rec, &w, &sg))?;
    let both = per_launch(d, k, rounds, &tick, |rec| {
        kernel.value_and_grad_to(rec, &args, &w, &values, &sg)?;
        adam.step(rec, &w, &sg)
    })?;
    let each = timed_repetitions(d, k, rounds, &tick, true, |rec| {
        kernel.value_and_grad_to(rec, &args, &w, &values, &sg)?;
        adam.step(rec, &w, &sg)
    })?;
    let passes = gpu_times(d, k, |rec| {
        kernel.value_and_grad_to(rec, &args, &w, &values, &sg)?;
        adam.step(rec, &w, &sg)
    })?;
    let gpu = (!passes.is_empty()).then(|| passes.values().sum::<f64>());
    // Steps recorded and dropped: an optimizer of their own, whose step count nothing runs.
    let mut dropped = Adam::new(1e-3);
    let host = median_per_repetition(rounds, k, || {
        let mut rec = d.record();
        for _ in 0..k {
            kernel.value_and_grad_to(&mut rec, &args, &w, &values, &sg)?;
            dropped.step(&mut rec, &w, &sg)?;
        }
        Ok(())
    })?;
    Ok(format!(
        "| 2^{} | {:.3} | {:.3} | {:.3} | {:.2} | {} | {} | {:.3} | {} | {:.2} |",
        n.trailing_zeros(),
        vg * 1e3,
        step * 1e3,
        both * 1e3,
        both / (vg + step),
        ms(gpu),
        gpu.map_or("n/a".into(), |g| format!("{:.2}", both / g)),
        each * 1e3,
        gpu.map_or("n/a".into(), |g| format!("{:.2}", each / g)),
        host * 1e6,
    ))
}

/// A grid of `side × side` vertices on a wavy sheet and its horizontal and vertical edges.
fn grid(side: usize) -> (Vec<[f32; 3]>, Vec<u32>, Vec<u32>) {
    let vertices = (0..side * side)
        .map(|v| {
            let (x, y) = ((v % side) as f32, (v / side) as f32);
            [x, y, 0.2 * noise(v)]
        })
        .collect();
    let (mut p, mut q) = (Vec::new(), Vec::new());
    for v in 0..side * side {
        if v % side + 1 < side {
            p.push(v as u32);
            q.push(v as u32 + 1);
        }
        if v / side + 1 < side {
            p.push(v as u32);
            q.push((v + side) as u32);
        }
    }
    (vertices, p, q)
}

/// A mesh's vertices and its edges' two vertex indices, and how the table names it.
struct Mesh {
    name: String,
    vertices: Vec<[f32; 3]>,
    p: Vec<u32>,
    q: Vec<u32>,
}

impl Mesh {
    /// The grid of `side × side` vertices, its edges in their own order or shuffled.
    fn grid(side: usize, shuffled: bool) -> Mesh {
        let (vertices, mut p, mut q) = grid(side);
        if shuffled {
            // Edges in a fixed random order: each vertex's edges far apart in memory.
            let mut order: Vec<usize> = (0..p.len()).collect();
            order.sort_by_key(|&e| (noise(e) * 1e6) as i64);
            (p, q) = (
                order.iter().map(|&e| p[e]).collect(),
                order.iter().map(|&e| q[e]).collect(),
            );
        }
        let name = format!(
            "{side} × {side} grid{}",
            if shuffled { ", edges shuffled" } else { "" }
        );
        Mesh {
            name,
            vertices,
            p,
            q,
        }
    }

    /// The icosphere of `levels` subdivisions, its edges as `mesh::edges` lists them.
    fn icosphere(levels: u32) -> Mesh {
        let (vertices, faces) = mesh::icosphere(levels);
        let (p, q) = mesh::edges(&faces);
        let name = format!("icosphere, {levels} subdivisions");
        Mesh {
            name,
            vertices,
            p,
            q,
        }
    }
}

/// The gathered-edge table row for a mesh. Returns the wall-clock row and the GPU-time
/// row.
fn edge_row(d: &Device, mesh: &Mesh, k: usize, rounds: usize) -> Result<(String, String), Error> {
    let Mesh {
        name,
        vertices,
        p,
        q,
    } = mesh;
    let m = p.len();
    let rest = vec![1.0f32; m];
    let pre: Vec<edge::Args> = (0..m)
        .map(|e| edge::Args {
            p: vertices[p[e] as usize],
            q: vertices[q[e] as usize],
            rest: rest[e],
        })
        .collect();
    let pre = d.buffer(&pre)?;
    let (values, grads) = (d.zeros::<f32>(m)?, d.zeros::<edge::Grad>(m)?);
    let kernel = edge::kernel(d);
    let tick = d.zeros::<f32>(1)?;
    let plain = per_launch(d, k, rounds, &tick, |rec| {
        kernel.value_and_grad_to(rec, &pre, &values, &grads)
    })?;
    let vbuf = d.buffer(vertices)?;
    let (pi, qi): (Index, Index) = (d.index(p, vertices.len())?, d.index(q, vertices.len())?);
    let rest = d.buffer(&rest)?;
    let vgrad = d.zeros::<[f32; 3]>(vertices.len())?;
    let sources = edge::Sources {
        p: Source::Gather(&vbuf, &pi),
        q: Source::Gather(&vbuf, &qi),
        rest: Source::Each(&rest),
    };
    let sinks = edge::Sinks {
        p: &vgrad,
        q: &vgrad,
    };
    let gathered_launch =
        |rec: &mut Recording<'_>| kernel.value_and_grad_gathered(rec, &sources, &values, &sinks);
    let by_rows = per_launch(d, k, rounds, &tick, gathered_launch)?;
    let rows_passes = gpu_times(d, k, gathered_launch)?;
    // The same launch with per-edge gradient rows and the segmented sum.
    d.set_gather_by_rows(false);
    let by_elements = per_launch(d, k, rounds, &tick, gathered_launch);
    let element_passes = gpu_times(d, k, gathered_launch);
    d.set_gather_by_rows(true);
    let (by_elements, element_passes) = (by_elements?, element_passes?);
    let plain_value = per_launch(d, k, rounds, &tick, |rec| {
        kernel.value_to(rec, &pre, &values)
    })?;
    let gathered_value = per_launch(d, k, rounds, &tick, |rec| {
        kernel.value_gathered(rec, &sources, &values)
    })?;
    let row = format!(
        "| {m} ({} vertices, {name}) | {:.3} | {:.3} | {:.2} | {:.3} | {:.3} | {:.2} | {:.3} | {:.2} |",
        vertices.len(),
        plain_value * 1e3,
        gathered_value * 1e3,
        gathered_value / plain_value,
        plain * 1e3,
        by_rows * 1e3,
        by_rows / plain,
        by_elements * 1e3,
        by_elements / plain
    );
    let pre_passes = gpu_times(d, k, |rec| {
        kernel.value_and_grad_to(rec, &pre, &values, &grads)
    })?;
    let words = d.buffer(&vec![copy::Args { x: 1.0 }; 2 * m])?;
    let copied = d.zeros::<f32>(2 * m)?;
    let copy_passes = gpu_times(d, k, |rec| copy::kernel(d).value_to(rec, &words, &copied))?;
    let pass = |t: &BTreeMap<&str, f64>, l: &str| t.get(l).copied();
    let pre_kernel = pass(&pre_passes, "edge::adjoint");
    let rows_kernel = pass(&rows_passes, "edge::adjoint_rows");
    let gathered_kernel = pass(&element_passes, "edge::adjoint (gathered)");
    let scatter = pass(&element_passes, "scatter_rows");
    // The segmented sum reads, per entry of both indices, its element and 3 gradient
    // words, per row the bounds of both indices, and writes 3 words per row.
    let (v, entries) = (vertices.len() as f64, 2.0 * m as f64);
    let sum_bytes = entries * 16.0 + v * 16.0 + v * 12.0;
    let copy_bytes = 2.0 * m as f64 * 8.0;
    let bandwidth = |bytes: f64, t: Option<f64>| t.map(|t| bytes / t / 1e9);
    let (sum_bw, copy_bw) = (
        bandwidth(sum_bytes, scatter),
        bandwidth(copy_bytes, pass(&copy_passes, "copy::forward")),
    );
    let gb = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.1}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a / b),
        _ => "n/a".into(),
    };
    let gpu_row = format!(
        "| {m} ({name}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        ms(pre_kernel),
        ms(rows_kernel),
        ratio(rows_kernel, pre_kernel),
        ms(gathered_kernel),
        ms(scatter),
        ratio(gathered_kernel.zip(scatter).map(|(a, b)| a + b), pre_kernel),
        gb(sum_bw),
        gb(copy_bw),
        ratio(sum_bw, copy_bw),
    );
    Ok((row, gpu_row))
}

fn main() -> Result<(), Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    let device = Device::auto()?;
    // The grid's 724 × 724 vertices make 1,046,904 edges; the icosphere's 8 subdivisions
    // 1,966,080.
    let (sizes, (side, levels), k, rounds): (&[u32], (usize, u32), usize, usize) = if quick {
        (&[12], (64, 3), 4, 3)
    } else {
        (&[20, 24], (724, 8), 50, 7)
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "device: {}\nms per repetition: {k} repetitions recorded into one submission (or, where a column says so, each submitted on its own), median of {rounds} rounds\n",
        device.describe()
    );
    let _ = writeln!(
        out,
        "Training step (value_and_grad with the shared gradient's reduction, then Adam on the shared weights)\n"
    );
    let _ = writeln!(
        out,
        "| n | value_and_grad ms | Adam ms | step ms | step / (value_and_grad + Adam) | its passes' GPU ms | step / GPU | step ms, a submission each | its / GPU | host µs to record a step |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for &s in sizes {
        let k = if s >= 24 { k.div_ceil(5) } else { k };
        let _ = writeln!(out, "{}", training_row(&device, 1 << s, k, rounds)?);
    }
    let _ = writeln!(
        out,
        "\nEdge residual value_and_grad: arguments gathered beforehand (per-edge rows, per-edge gradients) against gathered by index (vertex rows, per-vertex gradients summed in a fixed order)\n"
    );
    let _ = writeln!(
        out,
        "| edges | value: pre-gathered ms | value: gathered ms | ratio | value and gradient: pre-gathered ms | gathered, by rows ms | ratio | gathered, by elements ms | ratio |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    let mut gpu_rows = Vec::new();
    let meshes = [
        Mesh::grid(side, false),
        Mesh::grid(side, true),
        Mesh::icosphere(levels),
    ];
    for mesh in &meshes {
        let (row, gpu_row) = edge_row(&device, mesh, k, rounds)?;
        let _ = writeln!(out, "{row}");
        gpu_rows.push(gpu_row);
    }
    let _ = writeln!(
        out,
        "\nThe same, GPU time per pass (timestamps): the adjoint kernel on pre-gathered rows; gathered by rows (one thread per vertex sums its edges' gradients, each edge computed from both ends); gathered by elements (the kernel reads rows through the indices and stores per-edge gradients, then the segmented sum of both indices' gradients into the vertex rows); the segmented sum's bandwidth against a copy kernel's\n"
    );
    let _ = writeln!(
        out,
        "| edges | pre-gathered kernel ms | by rows ms | by rows / pre-gathered | by elements: kernel ms | segmented sum ms | (kernel + sum) / pre-gathered | segmented sum GB/s | copy GB/s | sum / copy |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for row in gpu_rows {
        let _ = writeln!(out, "{row}");
    }
    print!("{out}");
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
        let _ = std::fs::write(path, &out);
    }
    Ok(())
}
