//! The cooperative network adjoint's output rows and loss: the lanes' parts summed a thread
//! an element of the chunk, the loss and `d_y`, then `d_s` of the last layer.

use super::{NetworkPlan, Shape, derivative, line};
use std::fmt::Write;
use std::ops::Range;

/// The name of output `o`'s bias gradient, a thread's sum over its elements (`gb3` after
/// two hidden layers).
pub(super) fn output_bias_grad(sh: &Shape, o: u32) -> String {
    let l = sh.depth + 1;
    if sh.outputs == 1 {
        format!("gb{l}")
    } else {
        format!("gb{l}_o{o}")
    }
}

/// Where output `o`'s parts go, of a kernel that writes them into `matrix`: that matrix
/// and its rows from `row_lanes o`; but for the third and fourth outputs of a kernel that
/// streams `W2` in blocks, whose `wblk` (of `ds2s`'s shape) is free from the forward
/// product's end to the reverse's first block, or of an adjoint that sums its outputs a
/// pair at a time ([`Shape::pairs_outputs`]), the first pair's rows.
fn part_place(sh: &Shape, matrix: &str, o: u32) -> (String, u32) {
    if sh.blocked && o >= 2 {
        ("wblk".into(), sh.row_lanes * (o - 2))
    } else if sh.pairs_outputs {
        (matrix.into(), sh.row_lanes * (o % 2))
    } else {
        (matrix.into(), sh.row_lanes * o)
    }
}

/// The lanes' parts of the first two outputs into `matrix`, their rows `y0` and `y1` summed
/// by a thread an element (kept to the loss), then the other outputs' parts into the same
/// rows: so that four outputs' parts take 32 rows of `d_s`'s matrix, not 64, and the
/// 8-32-32-4 adjoint's workgroup memory leaves a multiprocessor two workgroups
/// ([`Shape::pairs_outputs`]).
pub(super) fn paired_output_parts(plan: &NetworkPlan, sh: &Shape, matrix: &str, s: &mut String) {
    output_parts(sh, matrix, 0..2, s);
    line(s, "        workgroupBarrier();");
    line(s, "        var y0 = 0.0f;\n        var y1 = 0.0f;");
    let _ = writeln!(
        s,
        "        if (lid < {}u) {{\n            let e = lid;",
        sh.chunk
    );
    for o in 0..2 {
        let _ = writeln!(
            s,
            "            y{o} = sw({}u);",
            plan.outputs[o as usize].bias
        );
    }
    part_sums(sh, matrix, 0..2, s);
    line(s, "            }\n        }");
    // The other outputs' parts overwrite the rows the first pair's sums have read.
    line(s, "        workgroupBarrier();");
    output_parts(sh, matrix, 2..sh.outputs, s);
}

/// The lane's row of its part of a row of outputs that starts at `first`.
fn output_part_row(first: u32) -> String {
    if first == 0 {
        "lr".into()
    } else {
        format!("(lr + {first}u)")
    }
}

/// The output row summed over the lanes' parts, the loss and its derivative `d_y` (one
/// thread an element, `d_y` into row 32 of `ds2s`), then `d_s2 = act'(s2) w3 d_y` into
/// its matrix and the output row's gradients in registers.
pub(super) fn output_and_loss(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    if sh.outputs == 1 {
        one_output_and_loss(plan, sh, s);
    } else {
        outputs_and_loss(plan, sh, s);
    }
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    let ds = sh.ds_matrix(sh.depth);
    for o in 0..sh.outputs {
        for c in cols.clone() {
            let at = sh.dy_cell(o, &format!("cw + {c}u"));
            let _ = writeln!(s, "        let dy{}{c} = {ds}[{at}];", sh.out(o));
        }
    }
    let (last, ol) = (sh.depth, sh.depth + 1);
    for r in rows.clone() {
        for c in cols.clone() {
            let d = derivative(
                plan.layer(last).activation,
                &format!("t{r}_{c}"),
                last,
                sh.tie_bit(r, c),
            );
            let mut d_h2 = Vec::new();
            for o in 0..sh.outputs {
                let out = sh.out(o);
                let _ = writeln!(
                    s,
                    "        gw{ol}_{out}{r} = dot_acc(t{r}_{c}, dy{out}{c}, gw{ol}_{out}{r});"
                );
                d_h2.push(format!("w{ol}_{out}{r} * dy{out}{c}"));
            }
            let _ = writeln!(
                s,
                "        let g{r}_{c} = {d} * ({});\n        \
                 gb{last}_{r} += (g{r}_{c}.x + g{r}_{c}.y) + (g{r}_{c}.z + g{r}_{c}.w);",
                d_h2.join(" + ")
            );
        }
    }
    // The stores of `d_s` overwrite rows `0..H` of its matrix, which hold the `d_y` rows
    // (`32 ..`) past 32 rows: there every thread reads its `d_y` first.
    if sh.hidden > 32 {
        line(s, "        workgroupBarrier();");
    }
    for r in rows {
        for c in cols.clone() {
            let at = sh.cell(&sh.row(r), "l8", &format!("cw + {c}u"));
            let _ = writeln!(s, "        {ds}[{at}] = g{r}_{c};");
        }
    }
    line(s, "        workgroupBarrier();");
}

/// The one output row summed over the lanes' parts by a thread an element of the chunk,
/// the loss and `d_y`, into row 32 of `ds2s`.
fn one_output_and_loss(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let ds = sh.ds_matrix(sh.depth);
    let _ = writeln!(
        s,
        "        if (lid < {chunk}u) {{\n            let e = lid;\n            var y = sw({}u);\n            \
         for (var r = 0u; r < {}u; r++) {{\n                \
         y += {ds}[{at}][e % 4u];\n            }}\n            \
         let loss = gf_loss(y, min(first + e, n - 1u) * {}u);\n            \
         let inb = first + e < n;\n            \
         if (inb) {{\n                values[first + e] = loss.x;\n            }}\n            \
         let dy = select(0.0f, loss.y, inb);\n            \
         {} += dy;\n            \
         {ds}[{}][e % 4u] = dy;\n        }}\n        \
         workgroupBarrier();",
        plan.outputs[0].bias,
        sh.row_lanes,
        plan.element_words,
        output_bias_grad(sh, 0),
        sh.dy_cell(0, "e / 4u"),
        chunk = sh.chunk,
        at = sh.cell("r", "(r % 8u)", "e / 4u")
    );
}

/// The opening of the block of the first threads, one an element of the chunk: each output
/// row `y{o}` of `outputs` from its bias and the lanes' parts in `matrix` (output `o`'s in
/// rows `row_lanes o ..`, [`part_place`]), up to the end of their loop.
pub(super) fn sum_output_parts(
    plan: &NetworkPlan,
    sh: &Shape,
    matrix: &str,
    outputs: Range<u32>,
    s: &mut String,
) {
    let _ = writeln!(
        s,
        "        if (lid < {}u) {{\n            let e = lid;",
        sh.chunk
    );
    for o in outputs.clone() {
        let bias = plan.outputs[o as usize].bias;
        let _ = writeln!(s, "            var y{o} = sw({bias}u);");
    }
    part_sums(sh, matrix, outputs, s);
}

/// The loop of an element's thread over the lanes' parts of `outputs`, open at its end.
fn part_sums(sh: &Shape, matrix: &str, outputs: Range<u32>, s: &mut String) {
    let _ = writeln!(
        s,
        "            for (var r = 0u; r < {}u; r++) {{",
        sh.row_lanes
    );
    for o in outputs {
        let (matrix, first) = part_place(sh, matrix, o);
        let at = sh.cell(&format!("(r + {first}u)"), "(r % 8u)", "e / 4u");
        let _ = writeln!(s, "                y{o} += {matrix}[{at}][e % 4u];");
    }
}

/// The output rows summed over the lanes' parts by a thread an element (output
/// `o`'s parts in rows `row_lanes o ..`), the loss and each `d_y_o`, into row `32 + o` of
/// `ds2s` swizzled as the parts there: a thread writes its own element's word of the row
/// only, which it has read (unswizzled, it overwrote another element's part before that
/// element's thread had read it).
fn outputs_and_loss(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let ds = sh.ds_matrix(sh.depth);
    let first = if sh.pairs_outputs { 2 } else { 0 };
    sum_output_parts(plan, sh, &ds, first..sh.outputs, s);
    let ys: Vec<String> = (0..sh.outputs).map(|o| format!("y{o}")).collect();
    let _ = writeln!(
        s,
        "            }}\n            \
         let loss = gf_loss(array<f32, {}>({}), min(first + e, n - 1u) * {}u);\n            \
         let inb = first + e < n;\n            \
         if (inb) {{\n                values[first + e] = loss[0];\n            }}",
        sh.outputs,
        ys.join(", "),
        plan.element_words
    );
    for o in 0..sh.outputs {
        let _ = writeln!(
            s,
            "            let dy{o} = select(0.0f, loss[{}], inb);\n            \
             {} += dy{o};\n            \
             {ds}[{}][e % 4u] = dy{o};",
            o + 1,
            output_bias_grad(sh, o),
            sh.dy_cell(o, "e / 4u")
        );
    }
    line(s, "        }\n        workgroupBarrier();");
}

/// Each lane's part of each of `outputs`, `w_o . t` over its rows of the last layer's
/// activations `t{r}_{c}`, into rows `row_lanes o ..` of `matrix` ([`part_place`]).
pub(super) fn output_parts(sh: &Shape, matrix: &str, outputs: Range<u32>, s: &mut String) {
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    for o in outputs {
        for c in cols.clone() {
            let terms: Vec<String> = (rows.clone())
                .map(|r| format!("w{}_{}{r} * t{r}_{c}", sh.depth + 1, sh.out(o)))
                .collect();
            let (matrix, first) = part_place(sh, matrix, o);
            let at = sh.cell(&output_part_row(first), "l8", &format!("cw + {c}u"));
            let _ = writeln!(s, "        {matrix}[{at}] = {};", terms.join(" + "));
        }
    }
}
