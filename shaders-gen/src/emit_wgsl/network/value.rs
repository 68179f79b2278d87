//! The value (forward) kernel of a network the cooperative adjoint computes: its chunk
//! loop and its layers' products as the adjoint has them ([`super::phases`]), without a
//! gradient, a tie mask or a stored activation the reverse would read.
//!
//! Only the layer being computed needs its input, so the activations live in one matrix
//! ([`NetworkPlan::value_workgroup_bytes`]) where the adjoint keeps one a layer: three
//! hidden layers of 64 rows fit 48 KiB (their two `W` matrices and the activations), which
//! the adjoint's five matrices do not. A layer's sums wait in registers until every thread
//! has read its input (a barrier), then overwrite it. Two matrices in turn would save that
//! barrier, but fit only where the network is shallow enough for one element a thread to
//! unroll every layer, and then that is the faster kernel ([`NetworkPlan::value_supported`]).

use super::outputs::{output_parts, sum_output_parts};
use super::phases::{first_layer_sums, indented, layer_product, store_activations, unpadded};
use super::{NetworkPlan, Shape, activate, line};
use std::fmt::Write;

/// The chunk's layers: `h_1 .. h_(L-1)` through the activation matrix, `h_L` as `t{r}_{c}`
/// in registers and each lane's part of the output rows into the matrix.
pub(super) fn layers(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    first_layer_sums(sh, &sh.x_matrix(), s);
    line(s, "        workgroupBarrier();");
    store_activations(plan, sh, 1, "s", s);
    line(s, "        workgroupBarrier();");
    // A layer between the first and the last, in a block of its own: its sums take the
    // last layer's names.
    for l in 2..sh.depth {
        let mut block = String::new();
        layer_product(sh, l, &mut block);
        line(&mut block, "        workgroupBarrier();");
        store_activations(plan, sh, l, "f", &mut block);
        let _ = writeln!(s, "        {{\n{}        }}", indented(&block));
        line(s, "        workgroupBarrier();");
    }
    let last = sh.depth;
    layer_product(sh, last, s);
    for r in 0..sh.lane_rows {
        for c in 0..sh.columns {
            let h = activate(plan.layer(last).activation, &format!("f{r}_{c}"));
            let _ = writeln!(
                s,
                "        let t{r}_{c} = {};",
                unpadded(plan, sh, last, r, h)
            );
        }
    }
    // The parts overwrite the last layer's input once every thread has read it.
    line(s, "        workgroupBarrier();");
    output_parts(sh, &sh.h_matrix(last), 0..sh.outputs, s);
    line(s, "        workgroupBarrier();");
}

/// The output rows summed over the lanes' parts by 64 threads, an element each, and the
/// loss's value into `values`; the chunk loop's end and the entry point's. The next
/// chunk's inputs wait for these reads at the loop's first barrier.
pub(super) fn outputs_and_loss(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    sum_output_parts(plan, sh, &sh.h_matrix(sh.depth), 0..sh.outputs, s);
    let ys: Vec<String> = (0..sh.outputs).map(|o| format!("y{o}")).collect();
    let (y, value) = if sh.outputs == 1 {
        ("y0".to_string(), "loss.x")
    } else {
        (
            format!("array<f32, {}>({})", sh.outputs, ys.join(", ")),
            "loss[0]",
        )
    };
    let _ = writeln!(
        s,
        "            }}\n            \
         let loss = gf_loss({y}, min(first + e, n - 1u) * {}u);\n            \
         if (first + e < n) {{\n                values[first + e] = {value};\n            }}\n        \
         }}\n    }}\n}}",
        plan.element_words
    );
}
