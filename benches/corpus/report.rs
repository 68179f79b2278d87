//! The corpus's tables: per kernel kind, the distribution of the fraction of the roofline
//! reached and the spread over rounds; then every kernel's row.

use gradfuse::KernelSpec;
use std::fmt::Write as _;

/// One kernel of the corpus and its times.
pub struct Kernel {
    /// The function's name.
    pub function: String,
    /// The function's family.
    pub family: &'static str,
    /// `forward`, `adjoint`, `jacobian` or `tangent`.
    pub kind: &'static str,
    /// Its launch.
    pub spec: &'static KernelSpec,
    /// Output words per element.
    pub output_words: u32,
    /// Operations per element, each call weighted by its measured cost in FMAs.
    pub work: f64,
    /// One entry per round at the current size.
    pub rounds: Vec<Round>,
    /// Why it could not be timed, if it could not (the run goes on without it).
    pub failed: Option<String>,
    /// For a kernel whose workgroup size the runtime chooses, timed at a launch of its
    /// size: the fastest time in seconds at each size (as the runtime times them, on up to
    /// 2^20 elements) and the wall time of the choice in seconds.
    pub sizes: Option<(Vec<(u32, f64)>, f64)>,
}

/// One kernel's measurement in one round.
pub struct Round {
    /// Elements launched.
    pub n: usize,
    /// Median kernel time (both passes of a shared reduction).
    pub ms: f64,
    /// Of which the second pass of a shared reduction (median; zero without one).
    pub reduce_ms: f64,
    /// A coalesced copy of the kernel's argument and output bytes.
    pub copy_ms: f64,
    /// The kernel's operations at the device's FMA rate.
    pub arithmetic_ms: f64,
    /// The workgroup size it ran at (the runtime's choice, for a kernel it sizes).
    pub workgroup: u32,
}

impl Kernel {
    /// The roofline: the larger of the copy and arithmetic bounds (medians over rounds).
    fn bound_ms(&self) -> f64 {
        let copy = median(self.rounds.iter().map(|r| r.copy_ms).collect());
        let arithmetic = median(self.rounds.iter().map(|r| r.arithmetic_ms).collect());
        copy.max(arithmetic)
    }

    /// The median of its rounds' times.
    fn ms(&self) -> f64 {
        median(self.rounds.iter().map(|r| r.ms).collect())
    }

    /// The fraction of the roofline reached (1 at the roofline).
    pub fn of_roofline(&self) -> f64 {
        self.bound_ms() / self.ms()
    }

    /// How far apart its rounds are: slowest over fastest, less one.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = self.rounds.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| {
            (lo.min(r.ms), hi.max(r.ms))
        });
        hi / lo - 1.0
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The workgroup sizes the runtime chose: each sized kernel's times at every size, the one
/// it kept, and what choosing cost (the first large launch of a kernel pays it once).
fn sized_rows(kernels: &[Kernel]) -> Vec<String> {
    kernels
        .iter()
        .filter_map(|k| {
            let (times, wall) = k.sizes.as_ref().filter(|s| !s.0.is_empty())?;
            let at: Vec<String> = times.iter().map(|t| format!("{:.3}", t.1 * 1e3)).collect();
            let kept = k
                .rounds
                .last()
                .map_or(k.spec.workgroup_size, |r| r.workgroup);
            Some(format!(
                "| {} | {} | {} | {kept} | {:.0} |",
                k.function,
                k.kind,
                at.join(" | "),
                wall * 1e3
            ))
        })
        .collect()
}

fn sizes_table(kernels: &[Kernel], out: &mut String) {
    let rows = sized_rows(kernels);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nWorkgroup sizes chosen by the runtime: each kernel's fastest ms at each size (on up \
         to 2^20 elements), the size kept, and the wall time of choosing it\n\n\
         | function | kernel | 256 | 128 | 64 | 32 | kept | ms to choose |\n\
         |---|---|---|---|---|---|---|---|"
    );
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
}

/// A kernel's row up to its work: what it is, not how it ran.
fn row_head(k: &Kernel) -> String {
    // A size the runtime chose other than the kernel's own is part of the kernel's name.
    let kind = match k.rounds.last().map(|r| r.workgroup) {
        Some(size) if size != k.spec.workgroup_size => format!("{} ({size})", k.kind),
        _ => k.kind.to_string(),
    };
    format!(
        "| {} | {} | {kind} | {} | {} | {} | {:.0}",
        k.function, k.family, k.spec.input_words, k.output_words, k.spec.work_per_element, k.work
    )
}

/// The summary table and every kernel's row, at `2^log_n` (or the largest n under the
/// buffer bound).
pub fn tables(kernels: &[Kernel], log_n: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "n = 2^{log_n}: fraction of the roofline (the larger of the copy and FMA bounds)\n\n\
         | kernel kind | kernels | min | median | under 70% | worst spread over rounds | kernels over 10% spread |\n\
         |---|---|---|---|---|---|---|"
    );
    let mut kinds: Vec<&str> = kernels.iter().map(|k| k.kind).collect();
    kinds.sort();
    kinds.dedup();
    kinds.push("all");
    for kind in kinds {
        // Variants (`variants.rs`) and kernels that failed are rows, not part of the
        // corpus's distribution.
        let of: Vec<&Kernel> = kernels
            .iter()
            .filter(|k| kind == "all" || k.kind == kind)
            .filter(|k| k.failed.is_none() && !k.function.contains('~'))
            .collect();
        let fractions: Vec<f64> = of.iter().map(|k| k.of_roofline()).collect();
        let low = fractions.iter().filter(|f| **f < 0.7).count();
        let min = fractions.iter().copied().fold(f64::MAX, f64::min);
        let worst = of.iter().map(|k| k.spread()).fold(0.0, f64::max);
        let unsteady = of.iter().filter(|k| k.spread() > 0.1).count();
        let _ = writeln!(
            out,
            "| {kind} | {} | {:.0}% | {:.0}% | {low} | {:.0}% | {unsteady} |",
            of.len(),
            100.0 * min,
            100.0 * median(fractions),
            100.0 * worst
        );
    }
    sizes_table(kernels, &mut out);
    let _ = writeln!(
        out,
        "\n| function | family | kernel | words in | words out | ops | FMAs | n | ms (rounds) | copy ms | FMA ms | of roofline | spread | reduce ms |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for k in kernels {
        if let Some(why) = &k.failed {
            let why = why.replace(['\n', '|'], " ");
            let _ = writeln!(out, "{} | | failed: {why} | | | | |", row_head(k));
            continue;
        }
        let times: Vec<String> = k.rounds.iter().map(|r| format!("{:.3}", r.ms)).collect();
        let n = k.rounds.first().map_or(0, |r| r.n);
        let copy = median(k.rounds.iter().map(|r| r.copy_ms).collect());
        let fma = median(k.rounds.iter().map(|r| r.arithmetic_ms).collect());
        let reduce = median(k.rounds.iter().map(|r| r.reduce_ms).collect());
        let _ = writeln!(
            out,
            "{} | 2^{} | {} | {copy:.3} | {fma:.3} | {:.0}% | {:.0}% | {reduce:.3} |",
            row_head(k),
            n.trailing_zeros(),
            times.join(" / "),
            100.0 * k.of_roofline(),
            100.0 * k.spread()
        );
    }
    out.push('\n');
    out
}
