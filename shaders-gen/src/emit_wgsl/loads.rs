//! A kernel's loads: the element's argument words (straight from its row, or through
//! workgroup memory where rows are wide), the shared words, and an adjoint's seed.

use super::COMPONENTS;
use super::body::Ctx;
use super::float_literal;
use super::plan::{KernelPlan, StageArray};
use super::plus;
use crate::abi::{self, RowStage};
use crate::names::{Taken, element_name, fresh};
use crate::signature::Precision;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One `let` per argument word used (several words to a vector load); the shared words
/// after the element's, then, in an adjoint that sums shared gradients, the seed.
pub(super) fn emit_loads(plan: &KernelPlan, ctx: &mut Ctx, taken: &mut Taken, body: &mut String) {
    ctx.for_each_element(|ctx, _| emit_element_loads(plan, ctx, taken, body));
    emit_shared_loads(plan, ctx, body);
}

/// The names the loads declare by pattern rather than through [`fresh`] (each element's
/// row's vector loads `args_0`, `args_b_3`, ..), taken before any value is named so that a
/// user's local of that name is renamed rather than declared twice.
pub(super) fn declared_names(plan: &KernelPlan) -> Vec<String> {
    let chunks = match (plan.gathered, plan.lanes) {
        (false, lanes) if lanes > 1 => plan.layout.words / lanes,
        _ => 0,
    };
    let mut names: Vec<String> = (0..plan.elements as usize)
        .flat_map(|e| {
            let args = element_name("args", e);
            (0..chunks).map(move |c| format!("{args}_{c}"))
        })
        .collect();
    if plan.rows_as_vec4s
        && let Some(&(last, _)) = vec4_words(plan).last()
    {
        let [q, o, r, w] = VEC4_NAMES;
        names.extend([q, o].map(str::to_string));
        names.extend((0..vec4_reads(last)).flat_map(|j| [format!("{r}{j}"), format!("{w}{j}")]));
    }
    names
}

/// The element's argument words, from its row at `in_base` (the element being written's).
fn emit_element_loads(plan: &KernelPlan, ctx: &Ctx, taken: &mut Taken, body: &mut String) {
    if let Some((stage, array)) = plan.row_stage {
        return emit_staged_loads(plan, (stage, array), ctx, taken, body);
    }
    if plan.rows_as_vec4s {
        return emit_vec4_loads(plan, ctx, body);
    }
    let (words, lanes, loads) = (plan.layout.words, plan.lanes, &plan.loads);
    let row_chunks = if plan.gathered { 0 } else { words / lanes };
    let in_base = element_name("in_base", ctx.element);
    let args = element_name("args", ctx.element);
    for chunk in 0..row_chunks {
        let used: Vec<(u32, usize)> = (chunk * lanes..(chunk + 1) * lanes)
            .filter_map(|w| loads[w as usize].map(|i| (w, i)))
            .collect();
        if used.is_empty() {
            continue;
        }
        let idx = format!("{in_base}{}", plus(chunk as usize));
        if lanes == 1 {
            let _ = writeln!(body, "    let {} = args[{idx}];", ctx.name(used[0].1));
        } else {
            let _ = writeln!(body, "    let {args}_{chunk} = args[{idx}];");
            for (w, i) in used {
                let c = COMPONENTS[(w % lanes) as usize];
                let _ = writeln!(body, "    let {} = {args}_{chunk}.{c};", ctx.name(i));
            }
        }
    }
}

/// `gf_shift4`, which a kernel reading its rows as `vec4`s ([`emit_vec4_loads`]) takes its
/// words with.
pub(super) const WGSL_SHIFT4: &str = "// Words o .. o + 3 of the eight words a, b.
fn gf_shift4(a: vec4<f32>, b: vec4<f32>, o: u32) -> vec4<f32> {
    let s1 = vec4<f32>(a.yzw, b.x);
    let s2 = vec4<f32>(a.zw, b.xy);
    let s3 = vec4<f32>(a.w, b.xyz);
    return select(select(a, s1, o == 1u), select(s2, s3, o == 3u), o >= 2u);
}";

/// The names of [`emit_vec4_loads`]: the row's first `vec4`, the row's offset in it, the
/// `vec4`s read and the `vec4`s of the row's words.
const VEC4_NAMES: [&str; 4] = ["row_q", "row_o", "row_r", "row_w"];

/// How many `vec4`s [`emit_vec4_loads`] reads of a row whose last word read is `last`: a
/// `vec4` past the one holding it, whichever the row's offset.
fn vec4_reads(last: u32) -> u32 {
    (last + 4) / 4 + 1
}

/// The words of a plan that reads its rows as `vec4`s, each with the node that reads it.
fn vec4_words(plan: &KernelPlan) -> Vec<(u32, usize)> {
    (0..plan.layout.words)
        .filter_map(|w| plan.loads[w as usize].map(|i| (w, i)))
        .collect()
}

/// The element's argument words read as `vec4`s from its row's aligned start
/// ([`abi::mapped_rows_as_vec4s`]): `vec4`s `q .. q + n` of `args` (`q` the row's first
/// word over 4, clamped to the binding), then, for each four words of the row, the `vec4`
/// that holds them, shifted by the row's offset `o` out of two neighbours; each word is a
/// lane of those.
fn emit_vec4_loads(plan: &KernelPlan, ctx: &Ctx, body: &mut String) {
    let used = vec4_words(plan);
    let Some(&(last, _)) = used.last() else {
        return;
    };
    let reads = vec4_reads(last);
    let in_base = element_name("in_base", ctx.element);
    let [q, o, r, w] = VEC4_NAMES;
    let _ = writeln!(
        body,
        "    // Rows of {} words, read as {reads} vec4s from the row's aligned start.",
        plan.layout.words
    );
    let _ = writeln!(body, "    let {q} = {in_base} / 4u;");
    let _ = writeln!(body, "    let {o} = {in_base} % 4u;");
    for j in 0..reads {
        let _ = writeln!(
            body,
            "    let {r}{j} = args[min({q} + {j}u, arrayLength(&args) - 1u)];"
        );
    }
    for j in 0..reads - 1 {
        let _ = writeln!(
            body,
            "    let {w}{j} = gf_shift4({r}{j}, {r}{}, {o});",
            j + 1
        );
    }
    for (word, i) in used {
        let lane = COMPONENTS[(word % 4) as usize];
        let _ = writeln!(body, "    let {} = {w}{}.{lane};", ctx.name(i), word / 4);
    }
}

/// The shared words read as words (once for all elements), then, in an adjoint that sums
/// shared gradients, each element's seed.
fn emit_shared_loads(plan: &KernelPlan, ctx: &mut Ctx, body: &mut String) {
    let (words, loads) = (plan.layout.words, &plan.loads);
    let shared_loads = &loads[words as usize..(words + plan.layout.shared_words) as usize];
    for (k, load) in shared_loads.iter().enumerate() {
        if let Some(i) = load {
            ctx.shared_word.insert(*i, k as u32);
        }
    }
    // A shared array read only word by word reads the buffer at its index: its words
    // need no registers.
    ctx.plan_shared_arrays();
    let needed = ctx.needed();
    for (k, load) in shared_loads.iter().enumerate() {
        if let Some(i) = load
            && needed[*i]
        {
            let read = shared_word_read(plan, k as u32);
            let _ = writeln!(body, "    let {} = {read};", ctx.names[*i]);
        }
    }
    if plan.reduces
        && let Some(seed) = loads[(words + plan.layout.shared_words) as usize]
    {
        let _ = writeln!(
            body,
            "    // The adjoint's seed: elements past the end add nothing to the sums."
        );
        ctx.for_each_element(|ctx, e| {
            let _ = writeln!(
                body,
                "    let {} = select({}, {}, {});",
                ctx.name(seed),
                float_literal(0.0, ctx.precision),
                float_literal(1.0, ctx.precision),
                element_name("in_batch", e),
            );
        });
    }
}

/// Shared word `k` as the kernel reads it: from the uniform buffer's vectors, or the
/// storage buffer.
pub(super) fn shared_word_read(plan: &KernelPlan, k: u32) -> String {
    if plan.shared_uniform {
        let u = abi::uniform_lanes(plan.layout.precision);
        format!("shared_args[{}u].{}", k / u, COMPONENTS[(k % u) as usize])
    } else {
        format!("shared_args[{k}u]")
    }
}

/// One round of staged loads: a slice of every row.
struct Round {
    /// The slice's first word.
    first: u32,
    /// The slice's words.
    words: u32,
    /// The slice's loads per row (`words` over the loads' lanes).
    per_row: u32,
    /// The words of the slice the kernel reads, each with its node.
    used: Vec<(u32, usize)>,
}

/// The element's argument words through workgroup memory ([`RowStage`]). Every thread
/// first loads its share of every round's slices, consecutive threads consecutive words,
/// so that all of the group's loads are in flight at once (a round waiting for its own
/// loads cost the latency of memory once per round: on the H100, a kernel of 66-word rows
/// in 5 rounds ran at half the speed); then, round by round, the slices go into the stage
/// and, past a barrier, each thread takes its own element's words.
///
/// Round `k > 0` of an f32 row goes through the stage with its words' bits XORed with
/// `k` (undone as they are read), so that no two rounds read the same value from one
/// address. NVIDIA's Vulkan compiler (H100, driver 580.159.04) took two reads of one
/// address on either side of a barrier for one value when judging signs: `p0` and
/// `p1[27]`, each at its slot's first word in its round, made `p1[27] * p0` "a square",
/// so `abs` returned it negative, `< 0.0` was false and `sin` lost its sign
/// (`tests/computed_arguments.rs`, grammar seed 4294968237). Addresses differing by round
/// did not fix it in general (any two rounds' slots overlap); different values did.
fn emit_staged_loads(
    plan: &KernelPlan,
    (stage, array): (RowStage, StageArray),
    ctx: &Ctx,
    taken: &mut Taken,
    body: &mut String,
) {
    let (words, lanes) = (plan.layout.words, plan.lanes);
    let name = array.name();
    let rounds: Vec<Round> = (0..stage.rounds(words))
        .map(|round| {
            let first = round * stage.words;
            let here = stage.words.min(words - first);
            let used = (first..first + here)
                .filter_map(|w| plan.loads[w as usize].map(|i| (w, i)))
                .collect();
            Round {
                first,
                words: here,
                per_row: here / lanes,
                used,
            }
        })
        .filter(|r| !r.used.is_empty())
        .collect();
    let _ = writeln!(
        body,
        "    // Rows of {words} words, {} bytes apart: the group loads them through {name} in {} \
         rounds\n    // of {} words of every row, consecutive threads loading consecutive words.",
        words * 4 * plan.layout.precision.words_per_scalar(),
        rounds.len(),
        stage.words
    );
    let _ = writeln!(body, "    let in_group = i - lid;");
    let places = emit_places(plan, stage, &rounds, taken, body);
    // Every round's loads, before the first barrier.
    let loaded: Vec<Vec<(String, &str)>> = rounds
        .iter()
        .map(|r| {
            let offset = plus((r.first / lanes) as usize);
            places[&r.per_row]
                .iter()
                .map(|(src, at)| {
                    let v = fresh(taken, "in_load");
                    let _ = writeln!(body, "    let {v} = args[{src}{offset}];");
                    (v, at.as_str())
                })
                .collect()
        })
        .collect();
    for (k, (round, loads)) in rounds.iter().zip(&loaded).enumerate() {
        // Every round but the first waits until the last one's words are taken.
        if k > 0 || array != StageArray::Own {
            let _ = writeln!(body, "    workgroupBarrier();");
        }
        emit_round(plan, (stage, name), (round, k as u32), loads, ctx, body);
    }
    if array != StageArray::Own {
        let _ = writeln!(
            body,
            "    // {name} stages the stores too: every thread has taken its words first.\n    \
             workgroupBarrier();"
        );
    }
}

/// For each number of loads per row that a round takes, where each of a thread's loads
/// reads (its index in `args` less the round's first word) and where it goes in the
/// stage: `(src, at)` names, one pair per load.
fn emit_places(
    plan: &KernelPlan,
    stage: RowStage,
    rounds: &[Round],
    taken: &mut Taken,
    body: &mut String,
) -> BTreeMap<u32, Vec<(String, String)>> {
    let (lanes, stride, wg) = (plan.lanes, stage.stride, plan.workgroup_size());
    let mut places = BTreeMap::new();
    for round in rounds {
        let per_row = round.per_row;
        if places.contains_key(&per_row) {
            continue;
        }
        let parts = (0..per_row)
            .map(|part| {
                let load = match part {
                    0 => "lid".to_string(),
                    1 => format!("({wg} + lid)"),
                    p => format!("({p}u * {wg} + lid)"),
                };
                let (src, at) = (fresh(taken, "in_src"), fresh(taken, "in_at"));
                let _ = writeln!(
                    body,
                    "    let {src} = min(in_group + {load} / {per_row}u, params.n - 1u) * {}u + {load} % {per_row}u;\n    \
                     let {at} = {load} / {per_row}u * {stride}u + {load} % {per_row}u * {lanes}u;",
                    plan.layout.words / lanes
                );
                (src, at)
            })
            .collect();
        places.insert(per_row, parts);
    }
    places
}

/// One round, the `k`th: the thread's loads of the round into the stage, a barrier, then
/// the words of its own row's slice; an f32 round past the first masked by `k`
/// ([`emit_staged_loads`]).
fn emit_round(
    plan: &KernelPlan,
    (stage, name): (RowStage, &str),
    (round, k): (&Round, u32),
    loads: &[(String, &str)],
    ctx: &Ctx,
    body: &mut String,
) {
    let (first, lanes) = (round.first, plan.lanes as usize);
    // f64 rows go unmasked: naga has no bitcast of f64, and on the H100 the f64 kernels
    // read such pairs right (`f64_products_of_words_of_different_rounds_match_the_cpu`).
    let masked = k > 0 && plan.layout.precision == Precision::F32;
    let _ = writeln!(
        body,
        "    // Words {first}..{} of every row ({}){}.",
        first + round.words,
        plan.layout.words_runs_label(first, first + round.words),
        if masked {
            format!(", their bits XORed with {k} in the stage")
        } else {
            String::new()
        }
    );
    let mask = |word: String| match masked {
        true => format!("bitcast<f32>(bitcast<u32>({word}) ^ {k}u)"),
        false => word,
    };
    for (v, at) in loads {
        for (c, component) in COMPONENTS.iter().enumerate().take(lanes) {
            let word = match lanes {
                1 => v.clone(),
                _ => format!("{v}.{component}"),
            };
            let to = plan.row_stage_word(name, &format!("{at}{}", plus(c)));
            let _ = writeln!(body, "    {to} = {};", mask(word));
        }
    }
    let _ = writeln!(body, "    workgroupBarrier();");
    for (w, i) in &round.used {
        let at = plus((w - first) as usize);
        let word = plan.row_stage_word(name, &format!("lid * {}u{at}", stage.stride));
        let _ = writeln!(body, "    let {} = {};", ctx.name(*i), mask(word));
    }
}
