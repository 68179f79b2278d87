//! Transfers between host memory and the device, against the host link: uploads
//! (`Device::buffer`, `Device::write`), readbacks (`Device::read`), and
//! `value_and_grad_into` end to end against (bytes moved / link bandwidth) + kernel time,
//! each from the program's memory and from pinned memory (`Device::pinned`).
//!
//! `cargo bench --bench transfers` (16 MiB to 1 GiB) or `-- --quick` (1 MiB: CI runs it so
//! the bench cannot rot; lavapipe's numbers only show that it runs). The link's bandwidth
//! comes from the environment, measured on the same machine by
//! `python3 benches/transfers/link.py` (pinned PyTorch tensors copied each way, the way CUDA
//! users measure it): `GRADFUSE_LINK_UP_GBPS` and `GRADFUSE_LINK_DOWN_GBPS`; without them
//! the table leaves the ratios to the link out. Every time is the median of several
//! repetitions after a warm-up one. Real numbers come from an H100: see BENCHMARKS.md.
//! Set GRADFUSE_BENCH_OUT=path to also write the table to a file.

#[path = "common/mod.rs"]
mod common;

use common::transcendental4;
use gradfuse::{Device, Error};
use std::fmt::Write as _;
use std::time::Instant;

/// The link's bandwidth in GB/s one way, from the environment.
fn link(var: &str) -> Option<f64> {
    std::env::var(var).ok()?.trim().parse().ok()
}

/// The median of `repeats` runs of `f` after one warm-up run, in seconds.
fn median_of(repeats: usize, mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    f()?;
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// One row: what moved, its bytes, its time, and the share of the link it reached.
fn row(out: &mut String, what: &str, bytes: usize, secs: f64, link_gbps: Option<f64>) {
    let gbps = bytes as f64 / secs / 1e9;
    let share = link_gbps.map_or("n/a".into(), |l| format!("{:.0}%", 100.0 * gbps / l));
    let _ = writeln!(
        out,
        "| {what} | {} MiB | {:.3} | {gbps:.1} | {share} |",
        bytes >> 20,
        secs * 1e3
    );
}

/// The ways this device may stage uploads, each as the switch and a label for its rows:
/// through host memory and through wgpu's mapped buffers where it has host memory for it
/// (`Device::set_host_staging`), else the one way.
fn staging_modes(d: &Device) -> Vec<(bool, &'static str)> {
    if d.has_host_staging() {
        vec![
            (true, ", through host memory"),
            (false, ", through wgpu's mapped buffers"),
        ]
    } else {
        vec![(true, "")]
    }
}

/// Uploads and readbacks of `bytes` through the public buffer API.
fn buffer_rows(
    d: &Device,
    bytes: usize,
    repeats: usize,
    up: Option<f64>,
    down: Option<f64>,
    out: &mut String,
) -> Result<(), Error> {
    let host: Vec<f32> = (0..bytes / 4).map(|i| i as f32).collect();
    for (on, through) in staging_modes(d) {
        d.set_host_staging(on);
        let t = median_of(repeats, || d.buffer(&host).map(drop))?;
        row(
            out,
            &format!("upload: `Device::buffer`{through}"),
            bytes,
            t,
            up,
        );
        let buffer = d.buffer(&host)?;
        let t = median_of(repeats, || d.write(&buffer, &host))?;
        row(
            out,
            &format!("upload: `Device::write`{through}"),
            bytes,
            t,
            up,
        );
    }
    d.set_host_staging(true);
    let buffer = d.buffer(&host)?;
    let t = median_of(repeats, || d.read(&buffer).map(drop))?;
    row(
        out,
        "readback: `Device::read` (a new `Vec`)",
        bytes,
        t,
        down,
    );
    let mut back = vec![0.0f32; host.len()];
    let t = median_of(repeats, || d.read_into(&buffer, &mut back))?;
    row(
        out,
        "readback: `Device::read_into` (the caller's slice)",
        bytes,
        t,
        down,
    );
    pinned_rows(d, &buffer, &host, repeats, (up, down), out)?;
    // What host memory itself allows, for reading the rows above: one core's memcpy, and
    // one slice per thread of rayon's pool, into memory already touched.
    let t = median_of(repeats, || {
        back.copy_from_slice(&host);
        Ok(())
    })?;
    row(out, "host memcpy, one thread", bytes, t, None);
    let t = median_of(repeats, || {
        use rayon::prelude::*;
        back.par_chunks_mut(1 << 18)
            .zip(host.par_chunks(1 << 18))
            .for_each(|(b, h)| b.copy_from_slice(h));
        Ok(())
    })?;
    row(
        out,
        &format!("host memcpy, {} threads", rayon::current_num_threads()),
        bytes,
        t,
        None,
    );
    if d.read(&buffer)? != host {
        return Err(Error::Readback("the bench read back other words".into()));
    }
    Ok(())
}

/// `Device::write` and `Device::read_into` of `buffer` from and into pinned memory
/// holding `host`'s words, where the device has it.
fn pinned_rows(
    d: &Device,
    buffer: &gradfuse::Buffer<f32>,
    host: &[f32],
    repeats: usize,
    (up, down): (Option<f64>, Option<f64>),
    out: &mut String,
) -> Result<(), Error> {
    let mut pinned = d.pinned::<f32>(host.len())?;
    if !pinned.is_pinned() {
        return Ok(());
    }
    pinned.copy_from_slice(host);
    let bytes = std::mem::size_of_val(host);
    let t = median_of(repeats, || d.write(buffer, &pinned))?;
    row(
        out,
        "upload: `Device::write` from pinned memory",
        bytes,
        t,
        up,
    );
    let t = median_of(repeats, || d.read_into(buffer, &mut pinned))?;
    row(
        out,
        "readback: `Device::read_into` into pinned memory",
        bytes,
        t,
        down,
    );
    if pinned[..] != *host {
        return Err(Error::Readback(
            "pinned memory read back other words".into(),
        ));
    }
    Ok(())
}

/// `value_and_grad_into` of a 4-word function at `n` elements against the link and the
/// kernel: from and into the program's memory, and (where the device has it) pinned memory.
fn end_to_end_row(
    d: &Device,
    n: usize,
    repeats: usize,
    up: Option<f64>,
    down: Option<f64>,
    out: &mut String,
) -> Result<(), Error> {
    let args: Vec<transcendental4::Args> = (0..n)
        .map(|i| transcendental4::Args {
            x: [0.1 + (i % 7) as f32, 0.5, 1.0 + (i % 5) as f32, 2.0],
        })
        .collect();
    let mut values = vec![0.0f32; n];
    let mut grads = vec![0.0f32; 4 * n];
    let kernel = transcendental4::kernel(d);
    let t = median_of(repeats, || {
        kernel.value_and_grad_into(&args, &mut values, bytemuck::cast_slice_mut(&mut grads))
    })?;
    let mut pinned_args = d.pinned::<transcendental4::Args>(n)?;
    pinned_args.copy_from_slice(&args);
    let mut pinned_values = d.pinned::<f32>(n)?;
    let mut pinned_grads = d.pinned::<transcendental4::Grad>(n)?;
    let pinned_t = pinned_args.is_pinned().then(|| {
        median_of(repeats, || {
            kernel.value_and_grad_into(&pinned_args, &mut pinned_values, &mut pinned_grads)
        })
    });
    let pinned_t = pinned_t.transpose()?;
    if pinned_t.is_some()
        && (bytemuck::cast_slice::<_, u32>(&pinned_values[..])
            != bytemuck::cast_slice::<_, u32>(&values)
            || bytemuck::cast_slice::<_, u32>(&pinned_grads[..])
                != bytemuck::cast_slice::<_, u32>(&grads))
    {
        return Err(Error::Readback("the pinned launch gave other bits".into()));
    }
    let input: &[f32] = bytemuck::cast_slice(&args);
    let mut kernel_times: Vec<f64> = d
        .time_kernel(&transcendental4::ADJOINT_KERNEL, input, repeats)?
        .iter()
        .map(|k| (k.main + k.reduce).as_secs_f64())
        .collect();
    kernel_times.sort_by(f64::total_cmp);
    let kernel_t = kernel_times[kernel_times.len() / 2];
    let (in_bytes, out_bytes) = (n * 16, n * 20);
    let floor = up
        .zip(down)
        .map(|(u, dn)| in_bytes as f64 / (u * 1e9) + out_bytes as f64 / (dn * 1e9) + kernel_t);
    for (from, t) in [("", Some(t)), (", pinned", pinned_t)] {
        let Some(t) = t else { continue };
        let _ = writeln!(
            out,
            "| transcendental4 `value_and_grad_into`{from} | 2^{} | {:.1} + {:.1} MiB | {:.3} | {:.4} | {} | {} |",
            n.trailing_zeros(),
            in_bytes as f64 / (1 << 20) as f64,
            out_bytes as f64 / (1 << 20) as f64,
            t * 1e3,
            kernel_t * 1e3,
            floor.map_or("n/a".into(), |f| format!("{:.3}", f * 1e3)),
            floor.map_or("n/a".into(), |f| format!("{:.2}", t / f)),
        );
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    // Only the small batches' table, for comparing launch paths in one call.
    let latency_only = std::env::args().any(|a| a == "--latency");
    let d = Device::auto()?;
    let (up, down) = (
        link("GRADFUSE_LINK_UP_GBPS"),
        link("GRADFUSE_LINK_DOWN_GBPS"),
    );
    let (sizes, elements, repeats): (&[usize], &[usize], usize) = if quick {
        (&[1 << 20], &[1 << 12], 3)
    } else if latency_only {
        (&[], &[], 7)
    } else {
        (
            &[16 << 20, 64 << 20, 128 << 20, 256 << 20, 1 << 30],
            &[1 << 20, 1 << 24],
            7,
        )
    };
    let mut out = String::new();
    let fmt_link = |l: Option<f64>| l.map_or("not given".into(), |l| format!("{l:.1} GB/s"));
    let _ = writeln!(
        out,
        "Transfers on {}; link: {} up, {} down (pinned, PyTorch)\n",
        d.describe(),
        fmt_link(up),
        fmt_link(down)
    );
    let _ = writeln!(out, "| what | size | ms | GB/s | % of the link |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for &bytes in sizes {
        buffer_rows(&d, bytes, repeats, up, down, &mut out)?;
    }
    let _ = writeln!(
        out,
        "\n| launch | n | bytes in + out | ms | kernel ms | bytes / link + kernel ms | ratio |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    // GRADFUSE_TRANSFER_ELEMENTS="20 24 26": other launch sizes (log2).
    let from_env: Option<Vec<usize>> = std::env::var("GRADFUSE_TRANSFER_ELEMENTS").ok().map(|v| {
        v.split_whitespace()
            .filter_map(|s| s.parse::<u32>().ok())
            .map(|l| 1 << l)
            .collect()
    });
    for &n in from_env.as_deref().unwrap_or(elements) {
        end_to_end_row(&d, n, repeats, up, down, &mut out)?;
    }
    let _ = writeln!(
        out,
        "\nSmall batches: median latency of `value_and_grad` against an empty submit-and-map \
         round trip on the same device, and of the same kernel recorded over device buffers \
         then one read of its values (a launch without the host slices' copies and mapped \
         upload).\n\n| n | value_and_grad µs | empty round trip µs | ratio | recorded launch \
         and read µs | its ratio |\n|---|---|---|---|---|---|"
    );
    let latency_repeats = if quick { 10 } else { 200 };
    let mut trips = d.time_roundtrip(latency_repeats)?;
    trips.sort();
    let trip = trips[trips.len() / 2].as_secs_f64();
    let small: &[usize] = if quick {
        &[1, 1024]
    } else {
        // Past 4,096 elements the launch copies through device buffers (`sets.rs`).
        &[1, 64, 1024, 4096, 16384]
    };
    for &n in small {
        let args = vec![
            transcendental4::Args {
                x: [0.3, 0.5, 1.5, 2.0]
            };
            n
        ];
        let kernel = transcendental4::kernel(&d);
        let t = median_of(latency_repeats, || kernel.value_and_grad(&args).map(drop))?;
        let (buffer, values) = (d.buffer(&args)?, d.zeros::<f32>(n)?);
        let grads = d.zeros::<transcendental4::Grad>(n)?;
        let mut host = vec![0.0f32; n];
        let recorded = median_of(latency_repeats, || {
            let mut rec = d.record();
            kernel.value_and_grad_to(&mut rec, &buffer, &values, &grads)?;
            rec.submit()?;
            d.read_into(&values, &mut host)
        })?;
        let _ = writeln!(
            out,
            "| {n} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} |",
            t * 1e6,
            trip * 1e6,
            t / trip,
            recorded * 1e6,
            recorded / trip
        );
    }
    print!("{out}");
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
        std::fs::write(&path, &out).map_err(|e| Error::Readback(format!("{path}: {e}")))?;
    }
    Ok(())
}
