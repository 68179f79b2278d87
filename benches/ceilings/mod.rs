//! What the GPU benches measure kernels with and against: launch descriptions of
//! hand-written and reference kernels, the device's ceilings measured in the same run (a
//! coalesced copy of a kernel's bytes, a chain of FMAs), reproducible inputs and the median
//! kernel time after a warm-up that lets the clocks settle.
#![allow(dead_code)]

use gradfuse::{Device, Error, KernelSpec, KernelTime, OutputSpec, SharedSpec};
use std::time::Duration;

/// A kernel spec for a hand-written or reference kernel (specs are `'static`: leaked, once).
pub fn spec(
    label: &'static str,
    wgsl: String,
    entry: &'static str,
    wg: u32,
    input_words: u32,
    outputs: &[(u32, u32)],
    cpu: fn(&[f32], &mut [f32]),
) -> &'static KernelSpec {
    spec_shared(label, wgsl, entry, wg, input_words, outputs, None, cpu)
}

/// [`spec`] for a kernel with `#[shared]` arguments: it uses the generated kernel's shared
/// buffers (and, for an adjoint, its second pass of the reduction).
#[allow(clippy::too_many_arguments)]
pub fn spec_shared(
    label: &'static str,
    wgsl: String,
    entry: &'static str,
    wg: u32,
    input_words: u32,
    outputs: &[(u32, u32)],
    shared: Option<&'static SharedSpec>,
    cpu: fn(&[f32], &mut [f32]),
) -> &'static KernelSpec {
    let outputs: &'static [OutputSpec] = Box::leak(
        outputs
            .iter()
            .map(|(binding, words)| OutputSpec {
                binding: *binding,
                words: *words,
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    Box::leak(Box::new(KernelSpec {
        label,
        wgsl: Box::leak(wgsl.into_boxed_str()),
        entry_point: entry,
        workgroup_size: wg,
        max_workgroups_per_dim: 65535,
        params_binding: 0,
        input_binding: 1,
        input_words,
        outputs,
        shared,
        // A hand-written kernel's few operations: never cut for work.
        work_per_element: 1,
        precision: gradfuse::Precision::F32,
        cpu,
        bounds_checks: true,
        workgroup_bytes: 0,
        fallback: None,
    }))
}

pub fn no_cpu(_: &[f32], _: &mut [f32]) {
    unreachable!("reference kernels run on the GPU only")
}

/// The bandwidth ceiling for a case's bytes: reads `n * inp` words and writes `n * out`
/// words, through buffers of exactly the generated kernel's sizes, as vec4s in a grid-stride
/// loop, so that every warp access is one contiguous 512-byte range. Needs `n * inp` and
/// `n * out` to be multiples of 4 (n is a power of two here).
pub fn copy_spec(inp: u32, out: u32) -> &'static KernelSpec {
    let wgsl = format!(
        "struct Params {{\n    n: u32,\n}}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read> args: array<vec4<f32>>;\n\
         @group(0) @binding(2) var<storage, read_write> values: array<vec4<f32>>;\n\
         @compute @workgroup_size(256)\n\
         fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
             let i = gid.x + gid.y * groups.x * 256u;\n    let n = params.n;\n    if (i >= n) {{\n        return;\n    }}\n\
             var acc = vec4<f32>(0.0);\n    for (var s = i; s < n * {inp}u / 4u; s += n) {{\n        acc += args[s];\n    }}\n\
             for (var s = i; s < n * {out}u / 4u; s += n) {{\n        values[s] = acc;\n    }}\n}}\n"
    );
    spec("copy", wgsl, "copy", 256, inp, &[(2, out)], no_cpu)
}

/// 8 independent chains of 256 FMAs per thread (named registers: an indexed private array
/// would live in local memory): the arithmetic ceiling.
pub const FMA_PER_THREAD: f64 = 8.0 * 256.0;
pub fn fma_spec() -> &'static KernelSpec {
    let chains: String = (0..8)
        .map(|j| format!("        a{j} = fma(a{j}, 0.9999, 0.0001);\n"))
        .collect();
    let inits: String = (0..8)
        .map(|j| format!("    var a{j} = x + {j}.0;\n"))
        .collect();
    let wgsl = format!(
        "struct Params {{\n    n: u32,\n}}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read> args: array<f32>;\n\
         @group(0) @binding(2) var<storage, read_write> values: array<f32>;\n\
         @compute @workgroup_size(256)\n\
         fn fma_peak(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
             let i = gid.x + gid.y * groups.x * 256u;\n    if (i >= params.n) {{\n        return;\n    }}\n\
             let x = args[i];\n{inits}    for (var k = 0u; k < 256u; k++) {{\n{chains}    }}\n\
             values[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;\n}}\n"
    );
    spec("fma", wgsl, "fma_peak", 256, 1, &[(2, 1)], no_cpu)
}

/// Reproducible arguments in (0.5, 2): inside every case's domain.
pub fn inputs(n: usize, words: u32) -> Vec<f32> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n * words as usize)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            0.5 + 1.5 * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

pub fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

/// Median kernel time (both passes of a shared gradient's reduction) after `warmup`
/// discarded launches.
pub fn kernel_time(
    d: &Device,
    spec: &'static KernelSpec,
    input: &[f32],
    warmup: usize,
    launches: usize,
) -> Result<f64, Error> {
    Ok(kernel_times(d, spec, input, warmup, launches)?.0)
}

/// The batch sizes (log2) named by environment variable `var` ("20 24"), or `default`.
pub fn sizes_from_env(var: &str, default: &[u32]) -> Vec<u32> {
    match std::env::var(var) {
        Ok(s) => s
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// GPU time of warm-up before each measured kernel, in seconds.
pub const WARM_UP_S: f64 = 0.2;
/// At most this many warm-up launches (tiny kernels reach [`WARM_UP_S`] slowly).
pub const MAX_WARM_UP_LAUNCHES: f64 = 1000.0;

/// Median kernel time and median time of the reduction's second pass.
pub fn kernel_times(
    d: &Device,
    spec: &'static KernelSpec,
    input: &[f32],
    warmup: usize,
    launches: usize,
) -> Result<(f64, f64), Error> {
    // Warm-up long enough for the device's clocks to settle: with 3 launches, some H100
    // rows measured right after the CPU had prepared the next inputs came out up to 3x
    // slow, the copy kernel's included (suspected: clocks lowered while the GPU idled).
    // At least `warmup` launches, and at least WARM_UP_S of GPU time.
    let first = d.time_kernel(spec, input, warmup)?;
    let per_launch = median(first.iter().map(KernelTime::total).collect()).max(1e-6);
    let more = (WARM_UP_S / per_launch).ceil().min(MAX_WARM_UP_LAUNCHES) as usize;
    if more > warmup {
        d.time_kernel(spec, input, more)?;
    }
    let times = d.time_kernel(spec, input, launches)?;
    Ok((
        median(times.iter().map(KernelTime::total).collect()),
        median(times.iter().map(|t| t.reduce).collect()),
    ))
}

/// `d` set up as `tests/common`'s device is: on a GPU implemented on the CPU (lavapipe,
/// which reports 32 KiB of workgroup memory and runs 48 KiB, its workgroup memory being the
/// host's), the cooperative network kernels run themselves, not their fallbacks.
pub fn as_the_tests_run(d: &Device) {
    if d.is_software_gpu() {
        d.set_workgroup_bytes(gradfuse_shaders_gen::emit_wgsl::NETWORK_WORKGROUP_BYTES);
    }
}

/// How far `other`'s results are from `gen_spec`'s on the same input: the largest
/// difference of an output word (relative to its size, at least 1) and of a shared-gradient
/// word (relative to the largest sum), for shared words that are not all equal. A word
/// that is NaN in both agrees (the corpus's inputs overflow some functions); NaN in one
/// only is infinitely far.
///
/// An error where the device would run a fallback in place of either kernel
/// ([`Device::kernel_for`]): both runs would then be that fallback, and any `other`, even
/// one that does not compile, would agree (the 48 KiB network kernels on lavapipe's
/// reported 32 KiB, before [`as_the_tests_run`]).
pub fn disagreement(
    d: &Device,
    gen_spec: &'static KernelSpec,
    other: &'static KernelSpec,
    input: &[f32],
) -> Result<(f32, f32), Error> {
    for spec in [gen_spec, other] {
        if !std::ptr::eq(d.kernel_for(spec)?, spec) {
            return Err(Error::Validation {
                label: other.label.into(),
                message: format!(
                    "this device runs {}'s fallback (it needs {} bytes of workgroup memory): \
                     a comparison would compare the fallback with itself",
                    spec.label, spec.workgroup_bytes
                ),
            });
        }
    }
    let n = input.len() / gen_spec.input_words as usize;
    let shared: Vec<f32> = inputs(1, gen_spec.shared_words() as u32)
        .iter()
        .map(|w| 0.6 * (w - 1.25))
        .collect();
    let run = |s: &'static KernelSpec| -> Result<(Vec<Vec<f32>>, Vec<f32>), Error> {
        let mut outs: Vec<Vec<f32>> = s
            .outputs
            .iter()
            .map(|o| vec![0.0; n * o.words as usize])
            .collect();
        let mut shared_grad = vec![0.0; s.shared_grad_words()];
        let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
        d.launch_shared(s, input, &shared, &mut views, &mut shared_grad)?;
        Ok((outs, shared_grad))
    };
    let ((g, gs), (h, hs)) = (run(gen_spec)?, run(other)?);
    let sum_scale = gs.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let outputs = g
        .iter()
        .flatten()
        .zip(h.iter().flatten())
        .fold(0.0f32, |m, (a, b)| {
            worse(m, (a, b), (a - b).abs() / a.abs().max(1.0))
        });
    let sums = gs.iter().zip(&hs).fold(0.0f32, |m, (a, b)| {
        worse(m, (a, b), (a - b).abs() / sum_scale)
    });
    Ok((outputs, sums))
}

/// The larger difference, `d` between `a` and `b`: NaN in both is no difference, NaN in
/// one counts as infinitely far (`f32::max` would drop it).
fn worse(m: f32, (a, b): (&f32, &f32), d: f32) -> f32 {
    if a.is_nan() && b.is_nan() {
        m
    } else if d.is_nan() {
        f32::INFINITY
    } else {
        m.max(d)
    }
}
