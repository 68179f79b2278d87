//! The performance corpus: 49 functions the generator was never tuned on (wide Jacobians,
//! per-element arrays read in loops, chains of transcendental calls, branches, `#[shared]`
//! tables, softmaxes over shared logits, and 24 random programs from fixed seeds), each
//! compiled at run time by the macro's compiler, and every kernel of each (value, adjoint
//! or Jacobian, tangent) timed
//! against its roofline: the larger of a coalesced copy of its bytes and its operations at
//! the device's FMA rate (each call weighted by its cost in FMAs, `costs.rs`), all
//! measured in the same run. Three rounds over the whole corpus
//! say how steady each kernel's time is.
//!
//! `cargo bench --bench corpus` (n = 2^20 and 2^24; on the H100, see BENCHMARKS.md) or
//! `cargo bench --bench corpus -- --quick` (n = 2^12, every function compiled and every fourth timed: that it runs).
//! Set GRADFUSE_BENCH_OUT=path to also write the tables to a file.
//! `GRADFUSE_CORPUS_SEEDS="24..64"`, `GRADFUSE_CORPUS_GRAMMAR="0..40"` and
//! `GRADFUSE_CORPUS_EXTRA=file.rs` time programs the corpus does not hold instead (random
//! programs of other seeds; functions of the whole language; every `fn` of a file):
//! the check on functions the generator was never measured on (`functions::unseen`).
//! `GRADFUSE_CORPUS_VARIANTS=dir` writes every kernel timed into `dir` and times
//! hand-edited variants beside them (`variants.rs`); with `GRADFUSE_CORPUS_WRITE_ONLY=1`
//! too, it writes and checks them, runs every kernel once, and times nothing (before and
//! after a generator change, `diff -r` says which kernels it moved). `GRADFUSE_CORPUS_ONLY="name other"` keeps the
//! functions whose names contain a word, `GRADFUSE_CORPUS_KINDS="adjoint"` the kernels of
//! those entry points. On lavapipe the 48 KiB network kernels run (and are checked)
//! themselves, not their fallbacks, as in the tests (`ceilings::as_the_tests_run`).

use compiled::compiled_spec;
use gradfuse::{Device, Error, KernelSpec};
use gradfuse_shaders_gen::abi::KernelKind;
use gradfuse_shaders_gen::compile_str;
use gradfuse_shaders_gen::launch::reverse_kind;
use std::collections::HashMap;
use std::fmt::Write as _;

#[path = "../ceilings/mod.rs"]
mod ceilings;
#[path = "../../tests/common/compiled.rs"]
mod compiled;
mod costs;
mod functions;
mod report;
mod variants;

use ceilings::{
    FMA_PER_THREAD, WARM_UP_S, copy_spec, fma_spec, inputs, kernel_time, median, sizes_from_env,
};
use costs::Costs;
use gradfuse_shaders_gen::launch::kernel_ir;
use report::{Kernel, Round};

/// Rounds over the whole corpus.
const ROUNDS: usize = 3;
/// Timed launches per kernel and round, after its warm-up.
pub(crate) const LAUNCHES: usize = 10;
/// Largest argument or output buffer of a timed launch: wider kernels run at the largest
/// power of two under it (the table says which n).
const MAX_BUFFER_BYTES: usize = 1 << 30;

/// The kernels of the corpus, three per function, each with its operations weighted by
/// `costs`.
fn kernels(quick: bool, costs: &Costs) -> Result<Vec<Kernel>, String> {
    let mut out = Vec::new();
    let unseen = functions::unseen()?;
    // With programs from outside the corpus, only those are timed.
    let functions = if unseen.is_empty() {
        functions::corpus()
    } else {
        unseen
    };
    for (k, f) in functions.into_iter().enumerate() {
        // Every function is compiled, quick or not: a corpus function that fails to compile
        // is a bug that CI's quick run must catch.
        let c = compile_str(&f.src).map_err(|e| format!("{}: {e:?}\n{}", f.name, f.src))?;
        if quick && k % 4 != 0 {
            continue;
        }
        // GRADFUSE_CORPUS_ONLY="branches random_13": only functions whose names contain one
        // of the words (a question about a few kernels need not wait for all of them).
        if let Ok(only) = std::env::var("GRADFUSE_CORPUS_ONLY")
            && !only.split_whitespace().any(|w| f.name.contains(w))
        {
            continue;
        }
        for kind in [KernelKind::Forward, reverse_kind(&c), KernelKind::Tangent] {
            // GRADFUSE_CORPUS_KINDS="adjoint": only kernels of these kinds (entry points).
            if let Ok(kinds) = std::env::var("GRADFUSE_CORPUS_KINDS")
                && !kinds.split_whitespace().any(|k| k == kind.entry_point())
            {
                continue;
            }
            let spec = compiled_spec(&f.name, &c, kind);
            let work = kernel_ir(&c, kind).map_or(0.0, |ir| ir.weighted_work(&|op| costs.of(op)));
            out.push(Kernel {
                function: f.name.clone(),
                family: f.family,
                kind: kind.entry_point(),
                spec,
                output_words: spec.output_words() as u32,
                work,
                rounds: Vec::new(),
                failed: None,
                sizes: None,
            });
        }
    }
    Ok(out)
}

/// `kernels` with each one's variants in `dir` after it (`variants.rs`), each checked
/// against it first (one that disagrees is a failed row).
fn with_variants(d: &Device, kernels: Vec<Kernel>, dir: &std::path::Path) -> Vec<Kernel> {
    let mut out = Vec::with_capacity(kernels.len());
    for k in kernels {
        let found = variants::variants_of(dir, &k.function, k.spec);
        let function = k.function.clone();
        let (family, kind, spec, output_words, work) =
            (k.family, k.kind, k.spec, k.output_words, k.work);
        out.push(k);
        for (name, variant) in found {
            // A variant that computes something else is a row of the table saying so, not
            // the end of the run: a screen of many variants reads the others' times.
            let failed = if name.ends_with("-unchecked") {
                None
            } else {
                let checked = variants::check(d, spec, variant, &batch(3000, spec.input_words));
                checked.err().map(|e| {
                    eprintln!("{}: {e}", variant.label);
                    e.to_string()
                })
            };
            out.push(Kernel {
                function: format!("{function}~{name}"),
                family,
                kind,
                spec: variant,
                output_words,
                work,
                rounds: Vec::new(),
                failed,
                sizes: None,
            });
        }
    }
    out
}

/// `n` elements of `words` reproducible argument words: one block repeated (what the
/// values are does not change a kernel's time, and 2^24 elements of 64 words would take
/// the host longer to draw than the device to run).
fn batch(n: usize, words: u32) -> Vec<f32> {
    let block = inputs(n.min(4096), words);
    let mut out = Vec::with_capacity(n * words as usize);
    while out.len() < n * words as usize {
        let take = block.len().min(n * words as usize - out.len());
        out.extend_from_slice(&block[..take]);
    }
    out
}

/// Median time of `LAUNCHES` launches after a warm-up of about [`WARM_UP_S`] of GPU time
/// (`GRADFUSE_CORPUS_WARM_UP_S` sets another), in one upload of the arguments: the
/// warm-up's length from `estimate` (seconds per launch).
///
/// The corpus once warmed each kernel up for 0.02 s, taking a busy device's clocks to be
/// settled: on the H100 the same kernels then measured up to 2.3x apart between rounds
/// (random_13's tangent 0.66 to 1.52 ms at 2^24), where 0.2 s kept every one within 1%.
/// Returns the medians of both passes and of the second pass alone (a shared reduction's
/// sum over the workgroups' partials; zero without one).
fn time(
    d: &Device,
    spec: &'static KernelSpec,
    input: &[f32],
    estimate: f64,
) -> Result<(f64, f64), Error> {
    let warm_up_s = std::env::var("GRADFUSE_CORPUS_WARM_UP_S")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(WARM_UP_S);
    let warm = (warm_up_s / estimate.max(1e-6)).ceil().clamp(3.0, 5000.0) as usize;
    let times = d.time_kernel(spec, input, warm + LAUNCHES)?;
    let timed = &times[warm..];
    Ok((
        median(timed.iter().map(gradfuse::KernelTime::total).collect()),
        median(timed.iter().map(|t| t.reduce).collect()),
    ))
}

/// The largest `n` up to `2^log_n` whose buffers stay under [`MAX_BUFFER_BYTES`].
fn fitting_n(log_n: u32, words: u32) -> usize {
    let mut n = 1usize << log_n;
    while n > 1024 && n * words as usize * 4 > MAX_BUFFER_BYTES {
        n /= 2;
    }
    n
}

/// One round at `log_n`: every kernel timed once, and the copy of each kernel's bytes.
fn round(d: &Device, kernels: &mut [Kernel], log_n: u32, fma_rate: f64) -> Result<(), Error> {
    let mut copies: HashMap<(usize, u32, u32), f64> = HashMap::new();
    // GRADFUSE_CORPUS_SAMPLE="22": choose sizes on the first 2^22 elements (a screen of
    // the runtime's sample; 20, the runtime's, by default).
    let sample_log2 = std::env::var("GRADFUSE_CORPUS_SAMPLE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(20);
    let mut i = 0;
    while i < kernels.len() {
        // The kernels of one function share their arguments' buffer where their words agree.
        let function = kernels[i].function.clone();
        let (mut shape, mut input) = ((0, 0), Vec::new());
        while i < kernels.len() && kernels[i].function == function {
            let k = &mut kernels[i];
            if k.failed.is_some() {
                i += 1;
                continue;
            }
            let words = k.spec.input_words;
            let n = fitting_n(log_n, words.max(k.output_words));
            if shape != (words, n) {
                (shape, input) = ((words, n), batch(n, words));
            }
            let input = &input[..];
            let key = (n, words, k.output_words);
            let copy = match copies.get(&key) {
                Some(t) => *t,
                None => {
                    let t = kernel_time(d, copy_spec(words, k.output_words), input, 3, LAUNCHES)?;
                    copies.insert(key, t);
                    t
                }
            };
            let arithmetic = n as f64 * k.work / fma_rate;
            // A kernel the runtime sizes chooses its size at its first launch of 2^18
            // elements or more: here, apart, to report the times and what choosing costs.
            if k.sizes.is_none() && n >= 1 << 18 {
                let sample = &input[..n.min(1 << sample_log2) * words as usize];
                let start = std::time::Instant::now();
                match d.choose_workgroup_size(k.spec, sample) {
                    Ok(times) => k.sizes = Some((times, start.elapsed().as_secs_f64())),
                    Err(e) => eprintln!("{}: choosing its size: {e}", k.spec.label),
                }
            }
            let (t, reduce) = match time(d, k.spec, input, copy.max(arithmetic)) {
                Ok(t) => t,
                // One kernel the device refuses (a tape past its memory, say) is a row of
                // the table, not the end of the run.
                Err(e) => {
                    eprintln!("{}: {e}", k.spec.label);
                    k.failed = Some(e.to_string());
                    i += 1;
                    continue;
                }
            };
            k.rounds.push(Round {
                n,
                ms: t * 1e3,
                reduce_ms: reduce * 1e3,
                copy_ms: copy * 1e3,
                arithmetic_ms: arithmetic * 1e3,
                workgroup: d.workgroup_size_of(k.spec),
            });
            i += 1;
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let d = Device::gpu()?;
    ceilings::as_the_tests_run(&d);
    let mut out = String::new();
    let _ = writeln!(out, "device: {}", d.describe());
    // GRADFUSE_CORPUS_WRITE_ONLY=1 with GRADFUSE_CORPUS_VARIANTS=dir: the kernels are
    // written (and the variants checked), none timed: two generators compared text for
    // text in a minute, even on a CPU driver.
    let write_only = std::env::var("GRADFUSE_CORPUS_WRITE_ONLY").is_ok();
    let fma_n = if quick || write_only {
        1 << 12
    } else {
        1 << 22
    };
    let fma_t = kernel_time(&d, fma_spec(), &inputs(fma_n, 1), 3, LAUNCHES)?;
    let fma_rate = fma_n as f64 * FMA_PER_THREAD / fma_t;
    let _ = writeln!(
        out,
        "arithmetic ceiling: {:.0} GFMA/s ({fma_n} threads x {FMA_PER_THREAD} FMAs)\n",
        fma_rate / 1e9
    );
    let (costs, table) = Costs::measure(&d, fma_n, fma_rate)?;
    out.push_str(&table);
    print!("{out}");
    let mut kernels = kernels(quick, &costs)?;
    if let Ok(dir) = std::env::var("GRADFUSE_CORPUS_VARIANTS") {
        kernels = with_variants(&d, kernels, std::path::Path::new(&dir));
    }
    if write_only {
        // Every kernel is still built and run once: a generator that writes invalid WGSL
        // fails here, not in the timed run on another machine.
        for k in &kernels {
            kernel_time(&d, k.spec, &batch(300, k.spec.input_words), 1, 1)?;
        }
        return Ok(());
    }
    // GRADFUSE_CORPUS_SIZES="24": the sizes (log2) to time.
    let default: &[u32] = if quick { &[12] } else { &[20, 24] };
    let sizes = sizes_from_env("GRADFUSE_CORPUS_SIZES", default);
    for &log_n in &sizes {
        for k in kernels.iter_mut() {
            k.rounds.clear();
        }
        for r in 0..ROUNDS {
            eprintln!("2^{log_n}: round {} of {ROUNDS}", r + 1);
            round(&d, &mut kernels, log_n, fma_rate)?;
        }
        let tables = report::tables(&kernels, log_n);
        print!("{tables}");
        out.push_str(&tables);
        // Written after each size: a run cut short keeps the sizes it finished.
        if let Ok(path) = std::env::var("GRADFUSE_BENCH_OUT") {
            std::fs::write(path, &out)?;
        }
    }
    Ok(())
}
