//! The shared-gradient reduction: the workgroup sum inside an adjoint kernel and the
//! second pass over the workgroups' partial sums. Both sum in a fixed order: the same
//! inputs give the same bits on every run, with no atomics.

use super::float_literal;
use super::streams::SumsIn;
use crate::abi;
use crate::names::{
    REDUCE_DISTINCT_FN, REDUCE_LEVELS_FN, REDUCE_RUN_FN, REDUCE_SLOT_FN, REDUCE_STAGE_FN,
};
use crate::signature::Precision;

/// The adjoint kernel's sums over the workgroup of the slots of `reduce_stage` (lane
/// `l`'s slot `k` at `k * 256 + l`; [`abi::reduce_lanes`] slots, 8 in f32 and 4 in f64)
/// into the workgroup's row of `shared_partials`: two levels of fixed-order sums leave 4
/// per slot (3 barriers; a binary tree takes 9), every level reading consecutive words
/// across a warp's lanes, without bank conflicts. Word `w` of the row is only ever written
/// by thread `w % 256`, which zeroed it first, so no two threads race on it. Registers
/// summed per thread are stored once, a slot's worth of consecutive words at a time;
/// streamed slots are added to their words, in order.
///
/// Fewer barriers measured slower on the H100 (8-32-32-1 adjoint at 2^20, streamed): 7.6 ms
/// with these 4 per 8 words, 11.7 ms with 3 (level 2 into a separate buffer, no barrier
/// after), 24.0 ms with 2 (the owner summing its slot's 32 partials alone).
///
/// `distinct`: whether the body calls [`REDUCE_DISTINCT_FN`] too, `static_runs` whether it
/// calls [`crate::names::SUM_RUN_FN`] instead of [`REDUCE_STAGE_FN`] (wide stages only).
pub(super) fn reduce_stage_fn(
    shared_words: u32,
    (streams, distinct, static_runs): (bool, bool, bool),
    sums_in: SumsIn,
    precision: Precision,
) -> String {
    const _: () = assert!(abi::WORKGROUP_SIZE == 256);
    if sums_in == SumsIn::Workgroup {
        let mut fns = wide_stage_fns(precision, !static_runs);
        if distinct {
            fns.push_str(&distinct_fn(precision));
        }
        if static_runs {
            fns.push_str(&super::static_runs::sum_run_fn());
        }
        return fns;
    }
    let owned = sums_in == SumsIn::Owned;
    let (t, zero) = (precision.name(), float_literal(0.0, precision));
    // Level 1: `per_slot` threads per slot, each summing `lanes` lanes; level 2: 4 threads
    // per slot, each summing `per_slot / 4` of level 1's sums.
    let lanes = abi::reduce_lanes(precision);
    let per_slot = abi::WORKGROUP_SIZE / lanes;
    let (level2_threads, level2_terms) = (4 * lanes, per_slot / 4);
    let (last1, last2) = (per_slot * (lanes - 1), 4 * (level2_terms - 1));
    let slot_sum =
        "(reduce_stage[b] + reduce_stage[b + 1u]) + (reduce_stage[b + 2u] + reduce_stage[b + 3u])";
    let mut s = format!(
        "// Sums each of reduce_stage's {lanes} slots over the workgroup's 256 lanes, in a fixed order,
// into lanes 0..4 of the slot.
fn {REDUCE_LEVELS_FN}(lid: u32) {{
    workgroupBarrier();
    // Thread (k, s) sums lanes s, s + {per_slot}, .., s + {last1} of slot k into lane s.
    let k = lid / {per_slot}u;
    let s = lid % {per_slot}u;
    var acc = {zero};
    for (var j = 0u; j < {lanes}u; j++) {{
        acc += reduce_stage[k * 256u + s + {per_slot}u * j];
    }}
    reduce_stage[k * 256u + s] = acc;
    workgroupBarrier();
    // Thread (k, q) sums lanes q, q + 4, .., q + {last2} of slot k into lane q.
    if (lid < {level2_threads}u) {{
        let k2 = lid / 4u;
        let q = lid % 4u;
        var acc2 = {zero};
        for (var j = 0u; j < {level2_terms}u; j++) {{
            acc2 += reduce_stage[k2 * 256u + q + 4u * j];
        }}
        reduce_stage[k2 * 256u + q] = acc2;
    }}
    workgroupBarrier();
}}

// Stores this workgroup's sums of words base..base + count (in slots 0..count) into its
// row of partial sums.
fn {REDUCE_RUN_FN}(lid: u32, group: u32, base: u32, count: u32) {{
    {REDUCE_LEVELS_FN}(lid);
    // The owner of word base + j is thread (base + j) % 256.
    let j = (lid + 256u - base % 256u) % 256u;
    if (j < count) {{
        let b = j * 256u;
        shared_partials[group * {shared_words}u + base + j] = {slot_sum};
    }}
    // The next words' stores wait for these reads.
    workgroupBarrier();
}}
"
    );
    if streams && owned {
        let m = abi::owned_sums(shared_words).unwrap_or(1);
        s.push_str(&format!(
            "
// Adds this workgroup's sums of the `count` staged slots to words `words`: each word's
// owner adds it to its own sums.
fn {REDUCE_STAGE_FN}(lid: u32, words: array<u32, {lanes}>, count: u32, owned: ptr<function, array<{t}, {m}>>) {{
    {REDUCE_LEVELS_FN}(lid);
    for (var j = 0u; j < count; j++) {{
        let word = words[j];
        if (word % 256u == lid) {{
            let b = j * 256u;
            (*owned)[word / 256u] += {slot_sum};
        }}
    }}
    // The next slots' stores wait for these reads.
    workgroupBarrier();
}}
"
        ));
    } else if streams {
        s.push_str(&format!(
            "
// Adds this workgroup's sums of the `count` staged slots into words `words` of its row.
fn {REDUCE_STAGE_FN}(lid: u32, group: u32, words: array<u32, {lanes}>, count: u32) {{
    {REDUCE_LEVELS_FN}(lid);
    for (var j = 0u; j < count; j++) {{
        let word = words[j];
        if (word % 256u == lid) {{
            let b = j * 256u;
            shared_partials[group * {shared_words}u + word] += {slot_sum};
        }}
    }}
    // The next slots' stores wait for these reads.
    workgroupBarrier();
}}
"
        ));
    }
    s
}

/// The workgroup sum of a kernel that keeps its words' sums in workgroup memory
/// ([`SumsIn::Workgroup`]): a wide stage of [`abi::wide_stage_slots`] slots, each summed in
/// one level (every thread sums a slot's run of lanes; 4 barriers per 32 f32 words, where
/// the 8-slot stage takes 4 per 8), then each slot's sum added into `word_sums` by a thread
/// of its own. Where two slots hold one word, the first one's thread adds both, in slot
/// order: no two threads add into one word, and the order is the same on every run. A bit
/// per word (`stage_marks`, set and cleared with atomics: which thread sets a bit first
/// does not change what the batch does) says whether the batch has such a word, so that
/// the common batch skips looking for one.
///
/// On the H100 (a 1,024-word `#[shared]` table read in a loop, adjoint at 2^24; variants of
/// the generated kernel, BENCHMARKS.md): 148.8 ms with owned sums (every thread looking
/// through every slot for its words after 4 barriers per 8 words), 107.7 ms with the slots'
/// threads adding into workgroup memory, 59.4 ms with that and the wide stage; the wide
/// stage with owned sums took 171.8 ms. Looking for repeated words in every batch (each
/// slot's thread comparing its word with every other) took 181.6 ms; the marks cost 1-2%
/// against a kernel that never looks (75.4 against 74.5 ms, one call).
///
/// `reads_words`: whether the kernel calls [`REDUCE_STAGE_FN`], which reads each slot's word
/// (not where it knows them, `static_runs`).
fn wide_stage_fns(precision: Precision, reads_words: bool) -> String {
    let (t, zero) = (precision.name(), float_literal(0.0, precision));
    let slots = abi::wide_stage_slots(precision);
    let stride = abi::WIDE_STAGE_STRIDE;
    let partials = abi::WORKGROUP_SIZE / slots;
    let terms: Vec<String> = (0..partials)
        .map(|p| match p {
            0 => "reduce_stage[b]".to_string(),
            p => format!("reduce_stage[b + {}u]", p * slots),
        })
        .collect();
    let slot_sum = pairwise(&terms);
    let fns = format!(
        "// Sums each of reduce_stage's {slots} slots (lane l of slot k at k * {stride} + l) over the
// workgroup's 256 lanes, in a fixed order, into lanes 0, {slots}, .. of the slot.
fn {REDUCE_LEVELS_FN}(lid: u32) {{
    workgroupBarrier();
    // Thread (k, s) sums lanes {slots}s .. {slots}s + {last} of slot k into lane {slots}s: a warp
    // reads one lane of each of {slots} slots at a time, in as many banks (the padding lane).
    let k = lid % {slots}u;
    let s = lid / {slots}u;
    var acc = {zero};
    for (var j = 0u; j < {slots}u; j++) {{
        acc += reduce_stage[k * {stride}u + s * {slots}u + j];
    }}
    reduce_stage[k * {stride}u + s * {slots}u] = acc;
    workgroupBarrier();
}}

// Slot j's sum over the workgroup, from its {partials} level sums.
fn {REDUCE_SLOT_FN}(j: u32) -> {t} {{
    let b = j * {stride}u;
    return {slot_sum};
}}
",
        last = slots - 1,
    );
    if !reads_words {
        return fns;
    }
    fns + &format!(
        "
// Adds this workgroup's sums of the `count` staged slots to words `words` of word_sums,
// each slot's by a thread of its own. Where two slots hold one word (stage_marks, one bit
// a word, says so at once), the first one's thread adds both, in slot order instead: no
// two threads add into one word, and the order is the same on every run.
fn {REDUCE_STAGE_FN}(lid: u32, words: array<u32, {slots}>, count: u32) {{
    {REDUCE_LEVELS_FN}(lid);
    var word = 0u;
    var bit = 0u;
    if (lid < count) {{
        word = words[lid];
        bit = 1u << (word % 32u);
        if ((atomicOr(&stage_marks[word / 32u], bit) & bit) != 0u) {{
            atomicStore(&stage_repeats, 1u);
        }}
    }}
    workgroupBarrier();
    if (lid < count) {{
        if (atomicLoad(&stage_repeats) == 0u) {{
            word_sums[word] += {REDUCE_SLOT_FN}(lid);
        }} else {{
            var first = true;
            for (var j = 0u; j < lid; j++) {{
                first = first && words[j] != word;
            }}
            if (first) {{
                var sum = {REDUCE_SLOT_FN}(lid);
                for (var j = lid + 1u; j < count; j++) {{
                    if (words[j] == word) {{
                        sum += {REDUCE_SLOT_FN}(j);
                    }}
                }}
                word_sums[word] += sum;
            }}
        }}
        atomicAnd(&stage_marks[word / 32u], ~bit);
    }}
    // The next slots' stores wait for these reads (and the marks for their clearing).
    workgroupBarrier();
    if (lid == 0u) {{
        atomicStore(&stage_repeats, 0u);
    }}
}}
"
    )
}

/// The wide stage's sum where no two slots hold one word (see `streams::TripSlots`).
fn distinct_fn(precision: Precision) -> String {
    let slots = abi::wide_stage_slots(precision);
    format!(
        "
// Adds this workgroup's sums of the `count` staged slots to words `words` of word_sums,
// each slot's by a thread of its own, where no two slots hold one word (a loop's group of
// trips, each staging a word of its own): no marks to look for repeats.
fn {REDUCE_DISTINCT_FN}(lid: u32, words: array<u32, {slots}>, count: u32) {{
    {REDUCE_LEVELS_FN}(lid);
    if (lid < count) {{
        word_sums[words[lid]] += {REDUCE_SLOT_FN}(lid);
    }}
    // The next slots' stores wait for these reads.
    workgroupBarrier();
}}
"
    )
}

/// `terms` added in pairs, then pairs of pairs: `(a + b) + (c + d)`.
fn pairwise(terms: &[String]) -> String {
    let half = |t: &[String]| match t.len() {
        1 => t[0].clone(),
        _ => format!("({})", pairwise(t)),
    };
    match terms.len() {
        1 => terms[0].clone(),
        n => {
            let (l, r) = terms.split_at(n / 2);
            format!("{} + {}", half(l), half(r))
        }
    }
}

/// The second pass of the shared-gradient reduction of a function with `shared_words`
/// shared words: workgroup `w` sums words `8w .. 8w + 8` of every first-pass workgroup's
/// partials ([`abi::REDUCE_WORDS_PER_WORKGROUP`]; in rows of the dispatch's second
/// dimension past its per-dimension limit). Thread `t` takes word `8w + t % 8` of the
/// partials' rows `t / 8`, `t / 8 + 32`, .. in order (a warp's load is four rows of eight
/// consecutive words), then a tree over the 32 slices: the same order on every run.
///
/// The pass once ran a workgroup a word, each thread reading every 256th row's partial
/// alone, a row apart (17 KiB for the 8-64-64-1 network's 4,353 words): 25 µs on the H200,
/// 2.4% of that network's adjoint at 2^20; this one takes 9 µs (`BENCHMARKS.md`).
/// `runtime/src/gpu/optim.rs`, whose updates can take this pass over, sums in the same
/// order.
pub fn emit_reduce_kernel(signature: &str, shared_words: u32, precision: Precision) -> String {
    const _: () = assert!(abi::WORKGROUP_SIZE == 32 * abi::REDUCE_WORDS_PER_WORKGROUP);
    let (w, sw) = (abi::REDUCE_WORDS_PER_WORKGROUP, shared_words);
    let (t, zero) = (precision.name(), float_literal(0.0, precision));
    let wg = abi::WORKGROUP_SIZE;
    format!(
        "// gradfuse reduction (second pass) of the shared gradients of `{signature}`.
// Workgroup w sums words {w}w .. {w}w + {w} of every first-pass workgroup's partial sums.

struct Params {{
    n: u32,
    // Nonzero: add to the sums (the later chunks of a launch too large for one binding).
    accumulate: u32,
}}

@group(0) @binding({pb}) var<uniform> params: Params;
@group(0) @binding({ib}) var<storage, read> partials: array<{t}>;
@group(0) @binding({ob}) var<storage, read_write> sums: array<{t}>;
var<workgroup> stage: array<{t}, {wg}>;

@compute @workgroup_size({wg})
fn reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    // Past 65535 workgroups they come in rows; the threads past the last word sum nothing
    // (the barriers below stay uniform).
    let word = {w}u * (wid.x + wid.y * groups.x) + lid % {w}u;
    let slice = lid / {w}u;
    let n = params.n;
    var acc = {zero};
    if (word < {sw}u) {{
        // Rows slice, slice + 32, .. added in order, four loads at a time in flight.
        var g = slice;
        for (; g + 96u < n; g += 128u) {{
            let a0 = partials[g * {sw}u + word];
            let a1 = partials[(g + 32u) * {sw}u + word];
            let a2 = partials[(g + 64u) * {sw}u + word];
            let a3 = partials[(g + 96u) * {sw}u + word];
            acc += a0;
            acc += a1;
            acc += a2;
            acc += a3;
        }}
        for (; g < n; g += 32u) {{
            acc += partials[g * {sw}u + word];
        }}
    }}
    stage[lid] = acc;
    workgroupBarrier();
    for (var stride = 16u; stride > 0u; stride = stride / 2u) {{
        if (slice < stride) {{
            stage[lid] += stage[lid + {w}u * stride];
        }}
        workgroupBarrier();
    }}
    if (slice == 0u && word < {sw}u) {{
        sums[word] = select(stage[lid], sums[word] + stage[lid], params.accumulate != 0u);
    }}
}}
",
        pb = abi::REDUCE_PARAMS_BINDING,
        ib = abi::REDUCE_INPUT_BINDING,
        ob = abi::REDUCE_OUTPUT_BINDING,
    )
}
