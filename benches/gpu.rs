//! GPU benchmark: generated kernels against hand-written WGSL and the device's measured
//! ceilings (a coalesced copy of the same bytes, a chain of FMAs), in one process on one
//! device; then where end-to-end time goes, and small-batch latency.
//!
//! `cargo bench --bench gpu` (full: n = 2^16 .. 2^26) or `cargo bench --bench gpu -- --quick`
//! (small n, a few seconds on lavapipe: CI runs it so the bench cannot rot; its numbers only
//! show that it runs). Real numbers come from an H100: see BENCHMARKS.md for the command.
//! Set GRADFUSE_BENCH_OUT=path to also write the tables to a file.

use gradfuse::{Device, Error, KernelSpec};
use gradfuse_shaders_gen::compile_str;
use std::fmt::Write as _;
use std::time::Instant;

mod ceilings;
mod common;
mod networks;
mod variants;
use ceilings::{
    FMA_PER_THREAD, WARM_UP_S, copy_spec, disagreement, fma_spec, inputs, kernel_time,
    kernel_times, median, no_cpu, sizes_from_env, spec,
};
use common::{
    EDGE_RESIDUAL, MLP_LOSS, ROSENBROCK4, SOFT_GATE16, TRANSCENDENTAL4, edge_residual, mlp_loss,
    rosenbrock4, soft_gate16, transcendental4,
};
use variants::{same_buffers_as, with_divided_lanes, with_elements, without_workgroup_sum};

/// `value_and_grad_into` over raw words: arguments, values, gradients.
type IntoLaunch = fn(&Device, &[f32], &mut [f32], &mut [f32]) -> Result<(), Error>;

struct Case {
    name: &'static str,
    src: &'static str,
    words: u32,
    generated: [&'static KernelSpec; 2],
    hand: [&'static KernelSpec; 2],
    /// End to end: `kernel.value_and_grad(&[Args])` from host memory to host memory.
    end_to_end: fn(&Device, &[f32]) -> Result<(), Error>,
    /// The same into reused slices: `kernel.value_and_grad_into(&[Args], values, grads)`.
    end_to_end_into: IntoLaunch,
}

fn cases() -> Vec<Case> {
    let vg = |w: u32| [(2u32, 1u32), (3, w)];
    vec![
        Case {
            name: "transcendental4",
            src: TRANSCENDENTAL4,
            words: 4,
            generated: [
                &transcendental4::FORWARD_KERNEL,
                &transcendental4::ADJOINT_KERNEL,
            ],
            hand: [
                spec(
                    "hand transcendental4 value",
                    include_str!("hand/transcendental4_value.wgsl").into(),
                    "forward",
                    256,
                    4,
                    &[(2, 1)],
                    no_cpu,
                ),
                spec(
                    "hand transcendental4",
                    include_str!("hand/transcendental4.wgsl").into(),
                    "adjoint",
                    256,
                    4,
                    &vg(4),
                    no_cpu,
                ),
            ],
            end_to_end: |d, w| {
                transcendental4::kernel(d)
                    .value_and_grad(bytemuck::cast_slice(w))
                    .map(|_| ())
            },
            end_to_end_into: |d, w, v, g| {
                transcendental4::kernel(d).value_and_grad_into(
                    bytemuck::cast_slice(w),
                    v,
                    bytemuck::cast_slice_mut(g),
                )
            },
        },
        Case {
            name: "rosenbrock4",
            src: ROSENBROCK4,
            words: 4,
            generated: [&rosenbrock4::FORWARD_KERNEL, &rosenbrock4::ADJOINT_KERNEL],
            hand: [
                spec(
                    "hand rosenbrock4 value",
                    include_str!("hand/rosenbrock4_value.wgsl").into(),
                    "forward",
                    256,
                    4,
                    &[(2, 1)],
                    no_cpu,
                ),
                spec(
                    "hand rosenbrock4",
                    include_str!("hand/rosenbrock4.wgsl").into(),
                    "adjoint",
                    256,
                    4,
                    &vg(4),
                    no_cpu,
                ),
            ],
            end_to_end: |d, w| {
                rosenbrock4::kernel(d)
                    .value_and_grad(bytemuck::cast_slice(w))
                    .map(|_| ())
            },
            end_to_end_into: |d, w, v, g| {
                rosenbrock4::kernel(d).value_and_grad_into(
                    bytemuck::cast_slice(w),
                    v,
                    bytemuck::cast_slice_mut(g),
                )
            },
        },
        Case {
            name: "edge_residual",
            src: EDGE_RESIDUAL,
            words: 7,
            generated: [
                &edge_residual::FORWARD_KERNEL,
                &edge_residual::ADJOINT_KERNEL,
            ],
            hand: [
                spec(
                    "hand edge_residual value",
                    include_str!("hand/edge_residual_value.wgsl").into(),
                    "forward",
                    256,
                    7,
                    &[(2, 1)],
                    no_cpu,
                ),
                spec(
                    "hand edge_residual",
                    include_str!("hand/edge_residual.wgsl").into(),
                    "adjoint",
                    256,
                    7,
                    &vg(7),
                    no_cpu,
                ),
            ],
            end_to_end: |d, w| {
                edge_residual::kernel(d)
                    .value_and_grad(bytemuck::cast_slice(w))
                    .map(|_| ())
            },
            end_to_end_into: |d, w, v, g| {
                edge_residual::kernel(d).value_and_grad_into(
                    bytemuck::cast_slice(w),
                    v,
                    bytemuck::cast_slice_mut(g),
                )
            },
        },
    ]
}

/// What a fresh result allocation of `words` f32 costs beyond writing it: the page faults
/// of memory touched for the first time, which a launcher returning new `Vec`s pays and the
/// transfer measurements (into a reused buffer) do not.
fn first_touch(words: usize, repeats: usize) -> f64 {
    let mut reused = vec![0.0f32; words];
    let mut fresh = Vec::new();
    let mut warm = Vec::new();
    for r in 0..repeats.max(1) {
        let t = Instant::now();
        let mut v: Vec<f32> = bytemuck::zeroed_vec(words);
        v.fill(r as f32);
        fresh.push(t.elapsed());
        std::hint::black_box(&v);
        let t = Instant::now();
        reused.fill(r as f32);
        warm.push(t.elapsed());
        std::hint::black_box(&reused);
    }
    (median(fresh) - median(warm)).max(0.0)
}

/// A shared-parameter case: generated and hand-written kernels, value then value_and_grad.
struct SharedCase {
    name: &'static str,
    src: &'static str,
    words: u32,
    generated: [&'static KernelSpec; 2],
    hand: [&'static KernelSpec; 2],
}

fn shared_case_list() -> Vec<SharedCase> {
    let hand =
        |label, file: &str, entry, gen_spec| same_buffers_as(gen_spec, label, file.into(), entry);
    vec![
        SharedCase {
            name: "mlp 8-16-1 (161 shared)",
            src: MLP_LOSS,
            words: 9,
            generated: [&mlp_loss::FORWARD_KERNEL, &mlp_loss::ADJOINT_KERNEL],
            hand: [
                hand(
                    "hand mlp_loss value",
                    concat!(
                        include_str!("hand/tanh.wgsl"),
                        include_str!("hand/mlp_loss_value.wgsl")
                    ),
                    "forward",
                    &mlp_loss::FORWARD_KERNEL,
                ),
                hand(
                    "hand mlp_loss",
                    concat!(
                        include_str!("hand/tanh.wgsl"),
                        include_str!("hand/shared_reduce8.wgsl"),
                        include_str!("hand/mlp_loss.wgsl")
                    ),
                    "adjoint",
                    &mlp_loss::ADJOINT_KERNEL,
                ),
            ],
        },
        SharedCase {
            name: "soft gate 16 (16 shared)",
            src: SOFT_GATE16,
            words: 3,
            generated: [&soft_gate16::FORWARD_KERNEL, &soft_gate16::ADJOINT_KERNEL],
            hand: [
                hand(
                    "hand soft_gate16 value",
                    concat!(
                        include_str!("hand/soft_gate16_ops.wgsl"),
                        include_str!("hand/soft_gate16_value.wgsl")
                    ),
                    "forward",
                    &soft_gate16::FORWARD_KERNEL,
                ),
                hand(
                    "hand soft_gate16",
                    concat!(
                        include_str!("hand/soft_gate16_ops.wgsl"),
                        include_str!("hand/shared_reduce8.wgsl"),
                        include_str!("hand/soft_gate16.wgsl")
                    ),
                    "adjoint",
                    &soft_gate16::ADJOINT_KERNEL,
                ),
            ],
        },
    ]
}

/// One table row's measurements: the generated kernel (and its reduction's second pass),
/// the hand-written one, and the copy of the same bytes.
struct RowTimes {
    generated: f64,
    second_pass: f64,
    hand: f64,
    copy: f64,
}

impl RowTimes {
    fn measure(
        d: &Device,
        generated: &'static KernelSpec,
        hand: &'static KernelSpec,
        words: u32,
        input: &[f32],
        warmup: usize,
        launches: usize,
    ) -> Result<Self, Error> {
        // Two rounds, each kernel's best median kept: whichever kernel ran first after the
        // CPU prepared a row's inputs sometimes came out up to 2x slow on the H100 at
        // 2^26 (the same kernel at its usual speed in the next row), an effect of order,
        // not of the kernel.
        let copy = copy_spec(words, generated.output_words() as u32);
        let mut best: Option<RowTimes> = None;
        for _ in 0..2 {
            let (generated_t, second_pass) = kernel_times(d, generated, input, warmup, launches)?;
            let round = RowTimes {
                generated: generated_t,
                second_pass,
                hand: kernel_time(d, hand, input, warmup, launches)?,
                copy: kernel_time(d, copy, input, warmup, launches)?,
            };
            best = Some(match best {
                None => round,
                Some(b) => RowTimes {
                    generated: b.generated.min(round.generated),
                    second_pass: b.second_pass.min(round.second_pass),
                    hand: b.hand.min(round.hand),
                    copy: b.copy.min(round.copy),
                },
            });
        }
        Ok(best.expect("two rounds"))
    }

    /// The roofline time: the larger of the copy of the same bytes and `ops` per element
    /// at the FMA rate.
    fn roofline(&self, n: usize, ops: usize, fma_rate: f64) -> f64 {
        self.copy.max(n as f64 * ops as f64 / fma_rate)
    }
}

/// The hand-written kernel computes what the generated one does (else the comparison is
/// void): values, element gradients and, with `#[shared]` arguments, the batch's shared
/// gradient, for shared words that are not all equal.
fn check_hand(
    d: &Device,
    gen_spec: &'static KernelSpec,
    hand: &'static KernelSpec,
    input: &[f32],
) -> Result<(), Error> {
    let (outputs, sums) = disagreement(d, gen_spec, hand, input)?;
    assert!(
        outputs <= 1e-4,
        "{}: hand-written kernel disagrees by {outputs} (relative)",
        hand.label
    );
    assert!(
        sums <= 1e-4,
        "{}: hand-written shared gradient disagrees by {sums} of the largest sum",
        hand.label
    );
    Ok(())
}

/// The shared-parameter cases: generated against hand-written kernels and the device's
/// ceilings; the adjoints include both passes of the reduction of the shared gradient,
/// whose second pass is timed apart.
fn shared_cases(
    device: &Device,
    sizes: &[u32],
    warmup: usize,
    launches: usize,
    fma_rate: f64,
    out: &mut String,
) -> Result<(), Error> {
    let _ = writeln!(
        out,
        "\nShared-parameter cases (value_and_grad includes the reduction of the shared gradient over the batch: a sum per workgroup in the kernel, then a second pass over the workgroups' sums):\n"
    );
    let _ = writeln!(
        out,
        "| case | kernel | n | generated ms | hand ms | generated/hand | second pass ms (generated) | without the workgroup sum ms | reduction's share | GB/s | copy GB/s | IR ops per element | % of roofline |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for case in shared_case_list() {
        let compiled = compile_str(case.src).map_err(|e| Error::Validation {
            label: case.name.into(),
            message: format!("{e:?}"),
        })?;
        let ops = [
            compiled.primal.dynamic_op_count(),
            compiled.reverse.function().dynamic_op_count(),
        ];
        for k in 0..2 {
            check_hand(
                device,
                case.generated[k],
                case.hand[k],
                &inputs(3000, case.words),
            )?;
        }
        let variants: Vec<(u32, &'static KernelSpec)> = [1, 2, 4]
            .into_iter()
            .map(|e| (e, with_elements(case.generated[1], case.src, e)))
            .collect();
        for (_, v) in &variants {
            check_hand(device, case.generated[1], v, &inputs(3000, case.words))?;
        }
        for &log_n in sizes {
            let n = 1usize << log_n;
            let input = inputs(n, case.words);
            for (e, v) in &variants {
                let t = match kernel_time(device, v, &input, warmup, launches) {
                    Ok(t) => format!("{:.4}", t * 1e3),
                    Err(e) => format!("skipped: {e}"),
                };
                let _ = writeln!(
                    out,
                    "| {} | value_and_grad, {e} per thread | 2^{log_n} | {t} | | | | | | | | | |",
                    case.name,
                );
            }
            for (k, kind) in ["value", "value_and_grad"].iter().enumerate() {
                let out_words = case.generated[k].output_words() as u32;
                let times = RowTimes::measure(
                    device,
                    case.generated[k],
                    case.hand[k],
                    case.words,
                    &input,
                    warmup,
                    launches,
                );
                // The reduction's share: the second pass, and the in-kernel sum (the
                // kernel's time less that of the kernel without it).
                let unsummed = if k == 1 {
                    without_workgroup_sum(case.generated[1])
                        .and_then(|cut| kernel_times(device, cut, &input, warmup, launches).ok())
                } else {
                    None
                };
                let r = match times {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "| {} | {kind} | 2^{log_n} | skipped: {e} | | | | | | | | | |",
                            case.name
                        );
                        continue;
                    }
                };
                let (t, second) = (r.generated, r.second_pass);
                let bytes = (n * (case.words + out_words) as usize * 4) as f64;
                let bandwidth = bytes / r.copy;
                let roofline = r.roofline(n, ops[k], fma_rate);
                let _ = writeln!(
                    out,
                    "| {} | {kind} | 2^{log_n} | {:.4} | {:.4} | {:.2} | {:.4} | {} | {} | {:.0} | {:.0} | {} | {:.0}% |",
                    case.name,
                    t * 1e3,
                    r.hand * 1e3,
                    t / r.hand,
                    second * 1e3,
                    unsummed.map_or("".into(), |(u, _)| format!("{:.4}", u * 1e3)),
                    unsummed.map_or("".into(), |(u, u_second)| format!(
                        "{:.0}% ({:.0}% in the kernel)",
                        100.0 * (t - (u - u_second)) / t,
                        100.0 * ((t - second) - (u - u_second)) / t
                    )),
                    bytes / t / 1e9,
                    bandwidth / 1e9,
                    ops[k],
                    100.0 * roofline / t
                );
            }
        }
    }
    Ok(())
}

/// How the bench times kernels: warm-up launches, timed launches, end-to-end repetitions.
#[derive(Clone, Copy)]
struct Timing {
    warmup: usize,
    launches: usize,
    e2e_repeats: usize,
}

fn main() -> Result<(), Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    // `--shared-only`: just the shared-parameter cases.
    let shared_only = std::env::args().any(|a| a == "--shared-only");
    let device = Device::auto()?;
    // On lavapipe the network table's first launch of the 8-64-64-1's value kernel with its
    // lanes divided (hundreds of KB of unrolled WGSL) once waited past the 60 s default on
    // two busy cores, and CI fails on the skipped row: that limit is for hung devices.
    if device.is_software_gpu() {
        device.set_timeout(std::time::Duration::from_secs(600));
    }
    ceilings::as_the_tests_run(&device);
    let sizes: Vec<u32> = if quick {
        vec![12, 14]
    } else {
        vec![16, 20, 24, 26]
    };
    let (warmup, launches, e2e_repeats) = if quick { (1, 5, 3) } else { (3, 30, 7) };
    let timing = Timing {
        warmup,
        launches,
        e2e_repeats,
    };
    let mut out = String::new();
    let clock = if device.has_timestamps() {
        "GPU timestamp queries"
    } else {
        "wall clock (no timestamp queries)"
    };
    let _ = writeln!(
        out,
        "device: {}\nkernel times: median of {launches} launches after at least {warmup} warm-up launches and {WARM_UP_S} s of warm-up, {clock}; table rows: the best median of two rounds\n",
        device.describe()
    );

    let fma_n = if quick { 1 << 12 } else { 1 << 22 };
    let fma_time = kernel_time(&device, fma_spec(), &vec![0.5f32; fma_n], warmup, launches)?;
    let fma_rate = fma_n as f64 * FMA_PER_THREAD / fma_time;
    let _ = writeln!(
        out,
        "arithmetic ceiling: {:.0} GFMA/s ({:.0} GFLOP/s) from {fma_n} threads × {FMA_PER_THREAD} FMAs\n",
        fma_rate / 1e9,
        2.0 * fma_rate / 1e9
    );
    if network_modes(&device, quick, timing, fma_rate, &mut out)? {
        print!("{out}");
        return Ok(());
    }
    if !shared_only {
        main_table(&device, &sizes, timing, fma_rate, &mut out)?;
    }
    shared_cases(&device, &sizes, warmup, launches, fma_rate, &mut out)?;
    latency_table(&device, quick, &mut out)?;
    print!("{out}");
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
        std::fs::write(&path, &out).map_err(|e| Error::Readback(format!("writing {path}: {e}")))?;
    }
    Ok(())
}

/// The networks' tables alone, where asked for (`GRADFUSE_NET_VARIANTS=dir`: hand-edited
/// variants of the adjoints beside them; `--networks`: the network table, also written to
/// `GRADFUSE_BENCH_OUT`): whether one was.
fn network_modes(
    device: &Device,
    quick: bool,
    timing: Timing,
    fma_rate: f64,
    out: &mut String,
) -> Result<bool, Error> {
    let Timing {
        warmup, launches, ..
    } = timing;
    // The best of two rounds, as the main table's rows: a first round can run on clocks
    // still low (the 8-32-32-1 value at 2^20 once measured 0.71 ms, and 0.14 ms right
    // after).
    let best_of_two = |spec: &'static KernelSpec, input: &[f32]| -> Result<f64, Error> {
        let t = kernel_time(device, spec, input, warmup, launches)?;
        Ok(t.min(kernel_time(device, spec, input, warmup, launches)?))
    };
    if let Ok(dir) = std::env::var("GRADFUSE_NET_VARIANTS") {
        // Hand-edited variants of the networks' adjoints, next to the adjoints.
        let default: &[u32] = if quick { &[10] } else { &[20] };
        let net_sizes = sizes_from_env("GRADFUSE_NET_SIZES", default);
        out.push_str(&networks::variants_table(
            std::path::Path::new(&dir),
            &net_sizes,
            fma_rate,
            inputs,
            best_of_two,
            |spec, label, wgsl| same_buffers_as(spec, label, wgsl, spec.entry_point),
            |spec, variant| disagreement(device, spec, variant, &inputs(3000, 9)),
        )?);
        return Ok(true);
    }
    if !std::env::args().any(|a| a == "--networks") {
        return Ok(false);
    }
    // GRADFUSE_NET_SIZES="20 24": the sizes (log2) to time.
    let default: &[u32] = if quick { &[10] } else { &[20, 24] };
    let net_sizes = sizes_from_env("GRADFUSE_NET_SIZES", default);
    out.push_str(&networks::table(
        &net_sizes,
        fma_rate,
        inputs,
        best_of_two,
        without_workgroup_sum,
        |spec| {
            let variant = with_divided_lanes(spec);
            check_hand(device, spec, variant, &inputs(3000, 9))?;
            Ok(variant)
        },
        |spec, src, e| {
            let variant = with_elements(spec, src, e);
            check_hand(device, spec, variant, &inputs(3000, 9))?;
            Ok(variant)
        },
    ));
    if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
        let _ = std::fs::write(path, &*out);
    }
    Ok(true)
}

/// The main table (each case's generated kernels against hand-written ones and the
/// roofline, at every size) and the end-to-end table after it.
fn main_table(
    device: &Device,
    sizes: &[u32],
    timing: Timing,
    fma_rate: f64,
    out: &mut String,
) -> Result<(), Error> {
    let Timing {
        warmup,
        launches,
        e2e_repeats,
    } = timing;
    let _ = writeln!(
        out,
        "| case | kernel | n | generated ms | hand ms | generated/hand | GB/s | copy GB/s | % of roofline |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    let mut e2e_rows = String::new();
    for case in cases() {
        let compiled = compile_str(case.src).map_err(|e| Error::Validation {
            label: case.name.into(),
            message: format!("{e:?}"),
        })?;
        let ops = [
            compiled.primal.op_count(),
            compiled.reverse.function().op_count(),
        ];
        for k in 0..2 {
            check_hand(
                device,
                case.generated[k],
                case.hand[k],
                &inputs(4096, case.words),
            )?;
        }
        for &log_n in sizes {
            let n = 1usize << log_n;
            let input = inputs(n, case.words);
            for (k, kind) in ["value", "value_and_grad"].iter().enumerate() {
                let out_words = case.generated[k].output_words() as u32;
                let times = RowTimes::measure(
                    device,
                    case.generated[k],
                    case.hand[k],
                    case.words,
                    &input,
                    warmup,
                    launches,
                );
                let r = match times {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "| {} | {kind} | 2^{log_n} | skipped: {e} | | | | | |",
                            case.name
                        );
                        continue;
                    }
                };
                let (gen_t, hand_t) = (r.generated, r.hand);
                let bytes = (n * (case.words + out_words) as usize * 4) as f64;
                let bandwidth = bytes / r.copy;
                let roofline = r.roofline(n, ops[k], fma_rate);
                let _ = writeln!(
                    out,
                    "| {} | {kind} | 2^{log_n} | {:.4} | {:.4} | {:.2} | {:.0} | {:.0} | {:.0}% |",
                    case.name,
                    gen_t * 1e3,
                    hand_t * 1e3,
                    gen_t / hand_t,
                    bytes / gen_t / 1e9,
                    bandwidth / 1e9,
                    100.0 * roofline / gen_t
                );
                if k == 1 {
                    let row =
                        end_to_end_row(device, &case, &input, (gen_t, out_words), e2e_repeats)?;
                    let _ = writeln!(e2e_rows, "| {} | 2^{log_n} | {row} |", case.name);
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\nGB/s: bytes the kernel must move (arguments in, results out) per second. copy: a coalesced kernel moving the same bytes. Roofline: the larger of bytes / copy bandwidth and IR operations / FMA rate (one IR operation counted as one FMA).\n"
    );
    let _ = writeln!(
        out,
        "End to end: `kernel.value_and_grad(&[Args])` from host memory to host memory, median of {e2e_repeats}, against the unavoidable: uploading the arguments, the kernel, reading back the results (each measured alone). `into`: `kernel.value_and_grad_into(&[Args], &mut values, &mut grads)` into slices the caller reuses.\n"
    );
    let _ = writeln!(
        out,
        "| case | n | end to end ms | upload ms | kernel ms | readback ms | sum ms | end to end / sum | first touch of results ms | end to end / (sum + first touch) | into ms | into / sum |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    out.push_str(&e2e_rows);
    Ok(())
}

/// A case's end-to-end row past its name and size: `value_and_grad` and
/// `value_and_grad_into` on `input` against the upload, the kernel (`kernel` s, of
/// `out_words` output words) and the readback, each timed alone.
fn end_to_end_row(
    device: &Device,
    case: &Case,
    input: &[f32],
    (kernel, out_words): (f64, u32),
    e2e_repeats: usize,
) -> Result<String, Error> {
    let n = input.len() / case.words as usize;
    let mut samples = Vec::new();
    (case.end_to_end)(device, input)?;
    for _ in 0..e2e_repeats {
        let t = Instant::now();
        (case.end_to_end)(device, input)?;
        samples.push(t.elapsed());
    }
    let e2e = median(samples);
    let mut values = vec![0.0f32; n];
    let mut grads = vec![0.0f32; n * case.words as usize];
    let mut samples = Vec::new();
    (case.end_to_end_into)(device, input, &mut values, &mut grads)?;
    for _ in 0..e2e_repeats {
        let t = Instant::now();
        (case.end_to_end_into)(device, input, &mut values, &mut grads)?;
        samples.push(t.elapsed());
    }
    let into = median(samples);
    let (up, _) = device.time_transfers(n * case.words as usize * 4, e2e_repeats)?;
    let (_, down) = device.time_transfers(n * out_words as usize * 4, e2e_repeats)?;
    let (up, down) = (median(up), median(down));
    let fresh = first_touch(n * out_words as usize, e2e_repeats);
    let floor = up + kernel + down;
    Ok(format!(
        "{:.3} | {:.3} | {:.4} | {:.3} | {:.3} | {:.2} | {:.3} | {:.2} | {:.3} | {:.2}",
        e2e * 1e3,
        up * 1e3,
        kernel * 1e3,
        down * 1e3,
        floor * 1e3,
        e2e / floor,
        fresh * 1e3,
        e2e / (floor + fresh),
        into * 1e3,
        into / floor
    ))
}

/// Small batches: `value_and_grad` of one and 1,024 elements against an empty
/// submit-and-map round trip.
fn latency_table(device: &Device, quick: bool, out: &mut String) -> Result<(), Error> {
    let _ = writeln!(
        out,
        "\nSmall batches: median latency of `value_and_grad` (edge_residual) against an empty submit-and-map round trip on the same device.\n"
    );
    let _ = writeln!(
        out,
        "| n | value_and_grad µs | empty round trip µs | ratio |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    let repeats = if quick { 10 } else { 200 };
    let trip = median(device.time_roundtrip(repeats)?);
    for n in [1usize, 1024] {
        let input = inputs(n, 7);
        let f = cases()[2].end_to_end;
        f(device, &input)?;
        let mut samples = Vec::new();
        for _ in 0..repeats {
            let t = Instant::now();
            f(device, &input)?;
            samples.push(t.elapsed());
        }
        let lat = median(samples);
        let _ = writeln!(
            out,
            "| {n} | {:.1} | {:.1} | {:.2} |",
            lat * 1e6,
            trip * 1e6,
            lat / trip
        );
    }
    Ok(())
}
