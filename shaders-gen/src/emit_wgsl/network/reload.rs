//! The reverse pass of a cooperative adjoint whose matrices take turns
//! ([`NetworkPlan::reloads_weights`]): three hidden layers of 64 rows in three matrices of
//! 16 KiB, where keeping every matrix the reverse reads would take five.
//!
//! The forward pass (`phases::forward`) keeps its activations as the value kernel does
//! ([`super::value`]): the chunk's inputs, `h1` and `h2` in turn in `acts`, each overwriting
//! the last once every thread has read it, `h3` in registers, and the lanes' parts of the
//! output row in `w2s`, whose `W2` the forward pass has done with. The reverse pass then
//! - keeps `d_s3` in `w2s` for `d_h2 = W3^T d_s3` and `d_W3 += d_s3 h2^T`, and writes
//!   `d_s2` over `h2` in `acts`;
//! - computes `h1` again from the chunk's inputs (borrowing rows of `w2s`) into `w3s`,
//!   whose `W3` it has done with: the first layer is the cheap one, `I x 64` FMAs an
//!   element against `64 x 64`;
//! - copies `W2` into `w2s` again for `d_h1 = W2^T d_s2` and `d_W2 += d_s2 h1^T`, where it
//!   stays for the next chunk's forward pass;
//! - and once `d_W1` has read the inputs again (in `w3s`, over `h1`), stores `W3` into
//!   `w3s` for the next chunk, from registers it loaded before the second layer's reverse:
//!   on the H200 that hid the load's latency, 12% off the 16-64-64-33-2's adjoint and up
//!   to 1% off the others' (one, 32-64-64-64-1, 0.8% slower; BENCHMARKS.md). `W2`'s load
//!   taken as early (before the third layer's reverse) lost 0.4-0.9% on three of five.
//!
//! So each chunk copies 32 KiB of weights from the shared words (in L2 after the first
//! chunk) and computes the first layer twice, for 64 elements' three layers. On the H200
//! the 8-64-64-64-1 adjoint ran at 44% of the FMA ceiling so (32.5 ms at 2^24, 31.7 with
//! its copies a `vec4` a step), the 8-64-64-1's, which keeps its matrices, at 48%; without
//! the two copies (wrong sums) it ran 7.7% faster (BENCHMARKS.md).

use super::phases::{
    first_layer_sums, indented, layer_backward, second_and_first_layers_backward,
    store_activations_into, store_sum_adjoints, store_x, weight_copies, weight_words,
};
use super::{NetworkPlan, Shape, line};
use std::fmt::Write;

/// From `d_s3` in `w2s` down to `d_W1`, then `W3` copied in again: see the module doc.
pub(super) fn backward(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    debug_assert!(sh.reloads && sh.depth == 3);
    // `d_s2` over `h2`, once every thread has read `h2` for `d_W3` and its derivative; the
    // inputs over `d_s3`, which `d_h2` has read. In a block: layer 2's reverse takes the
    // same names.
    let mut block = String::new();
    layer_backward(plan, sh, 3, &mut block);
    line(&mut block, "        workgroupBarrier();");
    store_sum_adjoints(sh, "acts", &mut block);
    store_x(sh, "w2s", &mut block);
    let _ = writeln!(s, "        {{\n{}        }}", indented(&block));
    line(s, "        workgroupBarrier();");
    // `h1` again, into `w3s` (its ties are in `ties1` since the forward pass), in a block:
    // its sums take the forward pass's names.
    let mut block = String::new();
    first_layer_sums(sh, "w2s", &mut block);
    store_activations_into(plan, sh, (1, "s"), "w3s", false, &mut block);
    let _ = writeln!(s, "        {{\n{}        }}", indented(&block));
    line(s, "        workgroupBarrier();");
    copy_weights(plan, sh, 2, s);
    line(s, "        workgroupBarrier();");
    // `W3`'s words are loaded here and stored at the chunk's end, their latency hidden by
    // the second and first layers' reverse.
    let _ = writeln!(
        s,
        "        var pw3s: array<vec4<f32>, {}>;",
        weight_steps(sh)
    );
    weight_step_loop(sh, s);
    let _ = writeln!(
        s,
        "            pw3s[i] = {};\n        }}",
        weight_words(plan, 3)
    );
    second_and_first_layers_backward(plan, sh, "w3s", s);
    line(s, "        workgroupBarrier();");
    weight_step_loop(sh, s);
    let _ = writeln!(
        s,
        "            {} = pw3s[i];\n        }}",
        sh.weight_vec4(3, "j", "k4")
    );
    line(s, "    }");
}

/// The `vec4`s of a weight matrix each thread copies: 4 at 64 rows and 256 threads.
fn weight_steps(sh: &Shape) -> u32 {
    let vec4s = sh.hidden * sh.hidden / 4;
    debug_assert!(vec4s.is_multiple_of(sh.threads));
    vec4s / sh.threads
}

/// The opening of a loop over the thread's [`weight_steps`], `i` each step's number, its
/// `vec4` at row `j`, column group `k4`.
fn weight_step_loop(sh: &Shape, s: &mut String) {
    let (h4, t) = (sh.hidden / 4, sh.threads);
    let _ = writeln!(
        s,
        "        for (var i = 0u; i < {}u; i++) {{\n            \
         let q = lid + {t}u * i;\n            \
         let j = q / {h4}u;\n            \
         let k4 = q % {h4}u;",
        weight_steps(sh)
    );
}

/// `W_l` copied into `w{l}s` by the workgroup's threads.
fn copy_weights(plan: &NetworkPlan, sh: &Shape, l: u32, s: &mut String) {
    let _ = writeln!(s, "        {}", weight_copies(plan, sh, &[l], "        "));
}
