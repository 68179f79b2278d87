//! A kernel's staged shared gradient planned when the kernel is written.
//!
//! `streams` writes each add into a slot of `reduce_stage` and each slot's word into
//! `stage_words`, and before a run of stages that would overflow the stage it sums the
//! stage over the workgroup (`gf_reduce_stage`), which reads every slot's word back and
//! looks for two slots holding one word (atomics on `stage_marks`): in general what the
//! stage holds is only known at run time. Where the kernel's body is straight-line code
//! whose every stage adds into a constant word (an unrolled loop over a `#[shared]` table,
//! summed in workgroup memory), what the stage holds at each check is known here. Each sum
//! is then a run of consecutive words, one a slot, in order up or down, and
//! [`SUM_RUN_FN`] adds slot `j`'s sum into word `first + j * step`: no words written, none
//! read back, no search for repeats. The stage still fills and sums at the same places, so
//! every word's sum is the same as before, bit for bit.
//!
//! The one thing the body does not know is where the element loop's back edge leaves the
//! stage: empty before the first element, the body's last run after the others. The plan
//! holds only where the body's first check sums that last run either way (it would not fit
//! beside the first run), so that from there on the stage is the same in every element.

use super::streams::{Streams, SumsIn};
use crate::ir::{Function, Op};
use crate::names::{REDUCE_LEVELS_FN, REDUCE_SLOT_FN, SUM_RUN_FN};

/// Stages holding consecutive words: slot `j` holds word `first + j * step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    /// The word of slot 0.
    pub first: u32,
    /// 1 where the words go up, -1 where they go down (1 for a single word).
    pub step: i32,
    /// Slots staged.
    pub count: u32,
}

impl Run {
    /// The run `words` (slot order) make, where they are consecutive.
    fn of(words: &[u32]) -> Option<Run> {
        let (&first, rest) = words.split_first()?;
        let step = match rest.first() {
            Some(&w) if w == first.wrapping_add(1) => 1,
            Some(&w) if w == first.wrapping_sub(1) => -1,
            Some(_) => return None,
            None => 1,
        };
        let consecutive = words
            .windows(2)
            .all(|p| i64::from(p[1]) - i64::from(p[0]) == i64::from(step));
        consecutive.then_some(Run {
            first,
            step,
            count: words.len() as u32,
        })
    }

    /// The call that sums the run over the workgroup into its words.
    pub(super) fn call(self) -> String {
        format!(
            "{SUM_RUN_FN}(lid, {}u, {}, {}u)",
            self.first, self.step, self.count
        )
    }
}

/// What every check for room in a kernel's body sums, known when it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct StaticRuns {
    /// For each check, in the order the body writes them: the run it sums, if any.
    checks: Vec<Option<Run>>,
    /// What the stage holds after the body: the next element's first check sums it, or
    /// the kernel after its last element.
    pub last: Run,
    /// Checks written so far.
    written: usize,
}

impl StaticRuns {
    /// What the next check sums: the first sums the last element's last run (if there
    /// was a last element: the caller tests the count), the others what the plan says.
    pub(super) fn next_check(&mut self) -> Option<Run> {
        let k = self.written;
        self.written += 1;
        if k == 0 {
            return Some(self.last);
        }
        self.checks.get(k).copied().flatten()
    }
}

/// The plan of the stage of kernel function `f` whose accumulators are `streams`, where
/// every check is known (see the module doc); `skipped(i)`: whether the body leaves node
/// `i` unwritten (its add is not staged). Checks happen where `Ctx::emit_stage` makes
/// room: before each run of [`Streams::segment`]'s stages, if the stage holds more than
/// the room the run leaves.
pub(super) fn static_runs(
    f: &Function,
    streams: &Streams,
    skipped: impl Fn(usize) -> bool,
) -> Option<StaticRuns> {
    // A loop that stages has checks of its own, in every trip.
    if streams.sums_in != SumsIn::Workgroup || !streams.bodies.is_empty() {
        return None;
    }
    let lanes = streams.lanes;
    let mut checks = Vec::new();
    let mut first_run = None;
    let mut stage: Vec<u32> = Vec::new();
    let mut run_left = 0u32;
    for i in 0..f.nodes.len() {
        // The body stages a node's add first, then its own words (each at `(i, done)`).
        let add = streams.adds.get(&i).filter(|_| !skipped(i));
        let mut staged = Vec::new();
        if let Some(add) = add {
            let Op::Int(k) = f.node(add.index).op else {
                return None;
            };
            staged.push((0, add.base + k.clamp(0, i64::from(add.len) - 1) as u32));
        }
        let own = streams.words.get(&i).into_iter().flatten();
        staged.extend(own.enumerate().map(|(done, (w, _))| (done as u32, *w)));
        for (done, word) in staged {
            if run_left == 0 {
                run_left = streams.segment(f, i, done);
                first_run.get_or_insert(run_left);
                let sums = stage.len() as u32 > lanes - run_left;
                checks.push(if sums { Some(Run::of(&stage)?) } else { None });
                if sums {
                    stage.clear();
                }
            }
            run_left -= 1;
            stage.push(word);
        }
    }
    let last = Run::of(&stage)?;
    // The first check must sum the last run, or the stage would differ element to element.
    (last.count > lanes - first_run?).then_some(StaticRuns {
        checks,
        last,
        written: 0,
    })
}

/// The WGSL of [`SUM_RUN_FN`] (the wide stage's, in either precision).
pub(super) fn sum_run_fn() -> String {
    format!(
        "
// Adds this workgroup's sums of the first `count` staged slots to words first,
// first + step, .. of word_sums, each slot's by a thread of its own: the kernel knows which
// words its slots hold, all different, so it writes none and looks for no repeats.
fn {SUM_RUN_FN}(lid: u32, first: u32, step: i32, count: u32) {{
    {REDUCE_LEVELS_FN}(lid);
    if (lid < count) {{
        word_sums[u32(i32(first) + i32(lid) * step)] += {REDUCE_SLOT_FN}(lid);
    }}
    // The next slots' stores wait for these reads.
    workgroupBarrier();
}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::Run;

    #[test]
    fn runs_are_consecutive_words_either_way() {
        let down = Run::of(&[31, 30, 29]).expect("down");
        assert_eq!((down.first, down.step, down.count), (31, -1, 3));
        let up = Run::of(&[4, 5]).expect("up");
        assert_eq!((up.first, up.step, up.count), (4, 1, 2));
        assert_eq!(Run::of(&[7]).map(|r| r.count), Some(1));
        assert_eq!(Run::of(&[4, 6]), None);
        assert_eq!(Run::of(&[4, 5, 4]), None);
        assert_eq!(Run::of(&[]), None);
    }
}
