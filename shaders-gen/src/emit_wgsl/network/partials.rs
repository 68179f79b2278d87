//! The cooperative network adjoint's last phase: the workgroup's row of partial sums of the
//! shared gradient, after its last chunk, in a fixed order (the second pass of the
//! reduction sums the rows).

use super::outputs::output_bias_grad;
use super::{GradTile, NetworkPlan, Shape, WordIndex, line, word};
use std::fmt::Write;

/// The parts after the first hand their `d_W_l` to it in turn, through `h1s` (word
/// `j * H + k`), which the last chunk has finished reading.
fn sum_parts(sh: &Shape, l: u32, s: &mut String) {
    let (h, m) = (sh.hidden, sh.sums_matrix());
    // `stmt(a, b)` for each word of the thread's tile, `q` its word of `h1s`.
    let each = |s: &mut String, stmt: &dyn Fn(u32, u32) -> String| {
        for (a, b) in (0..sh.ja).flat_map(|a| (0..sh.kb).map(move |b| (a, b))) {
            let _ = writeln!(
                s,
                "        {{ let q = (jb + {}u) * {h}u + kb + {}u; {} }}",
                sh.nj * a,
                sh.nk * b,
                stmt(a, b)
            );
        }
    };
    for p in 1..sh.parts {
        let _ = writeln!(s, "    workgroupBarrier();\n    if (part == {p}u) {{");
        each(s, &|a, b| format!("{m}[q / 4u][q % 4u] = gw{l}_{a}[{b}];"));
        line(s, "    }\n    workgroupBarrier();\n    if (part == 0u) {");
        each(s, &|a, b| format!("gw{l}_{a}[{b}] += {m}[q / 4u][q % 4u];"));
        line(s, "    }");
    }
}

/// The workgroup's row of partial sums: each `d_W_l` from each thread's registers (the
/// parts' added in order), the per-row sums over the column groups in turn (item `it` of
/// row `j` at word `it * H + j` of `h1s`), the outputs' bias gradients over the first
/// threads, one an element of the chunk.
pub(super) fn partial_sums(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let h = sh.hidden;
    let _ = writeln!(s, "    let row = group * {}u;", plan.shared_words);
    for l in 2..=sh.depth {
        let (layer, below) = (plan.layer(l), plan.layer(l - 1));
        sum_parts(sh, l, s);
        if sh.parts > 1 {
            line(s, "    if (part == 0u) {");
        }
        tile_stores(
            plan,
            sh.weight_tile(l),
            layer.weights,
            (layer.rows, below.rows),
            s,
        );
        if sh.parts > 1 {
            line(s, "    }");
        }
    }
    if sh.w1_tile {
        let layer = plan.layer(1);
        tile_stores(
            plan,
            sh.weight_tile(1),
            layer.weights,
            (layer.rows, sh.inputs),
            s,
        );
    }
    let _ = writeln!(
        s,
        "    workgroupBarrier();\n    for (var v = 0u; v < {}u; v++) {{\n        if (cg == v) {{",
        sh.column_groups
    );
    let (i, depth) = (sh.row_sum_inputs(), sh.depth);
    for r in 0..sh.lane_rows {
        let row = sh.row(r);
        let items = (0..i)
            .map(|k| (k, format!("gw1_{r}[{k}]")))
            .chain((1..=depth).map(|l| (i + l - 1, format!("gb{l}_{r}"))))
            .chain((0..sh.outputs).map(|o| {
                let gw = format!("gw{}_{}{r}", depth + 1, sh.out(o));
                (i + depth + o, gw)
            }));
        for (it, value) in items {
            let _ = writeln!(
                s,
                "            {{ let q = {}u + {row}; let old = select(0.0f, {m}[q / 4u][q % 4u], v > 0u); \
                 {m}[q / 4u][q % 4u] = old + {value}; }}",
                it * h,
                m = sh.sums_matrix()
            );
        }
    }
    store_row_sums(plan, sh, s);
}

/// Tile `t`'s words of `d_W_l` (shared words `weights`) from the thread's registers into
/// the workgroup's row of partial sums, each where its row and column are written: of the
/// layer's `rows` and its `columns` inputs, tested only where the tile reaches past them.
fn tile_stores(
    plan: &NetworkPlan,
    t: GradTile,
    weights: WordIndex,
    (rows, columns): (u32, u32),
    s: &mut String,
) {
    for (a, b) in t.cells() {
        let (j, k) = (t.row(a), t.col(b));
        let store = format!(
            "shared_partials[row + {}] = gw{}_{a}[{b}];",
            word(weights, &j, &k),
            t.l
        );
        let mut at = Vec::new();
        if t.nj * t.ja > rows {
            at.push((j.as_str(), rows));
        }
        if t.nk * t.kb > columns {
            at.push((k.as_str(), columns));
        }
        let _ = writeln!(s, "    {}", plan.store_written(&at, &store));
    }
}

/// The end of [`partial_sums`]: the per-row sums, gathered in `h1s`, into the workgroup's
/// row of partial sums (item `it` of row `j` at the shared word its `it` names), and each
/// output's bias gradient summed over the first threads, one an element of the chunk.
fn store_row_sums(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (h, i, depth) = (sh.hidden, sh.row_sum_inputs(), sh.depth);
    // The per-row sums fill at most the sums matrix, `H` rows of the chunk's elements.
    debug_assert!(i + depth + sh.outputs <= sh.chunk);
    let ds = sh.ds_matrix(depth);
    // Row o of ds2s: output o's bias gradient of each of the chunk's first threads.
    let at_row = |o: u32| match o {
        0 => String::new(),
        o => format!("{}u + ", sh.rv * o),
    };
    let output_bias_stores: String = (0..sh.outputs)
        .map(|o| {
            format!(
                "        {ds}[{}lid / 4u][lid % 4u] = {};\n",
                at_row(o),
                output_bias_grad(sh, o)
            )
        })
        .collect();
    let w3_words: Vec<String> = (0..sh.outputs)
        .zip(&plan.outputs)
        .map(|(o, out)| {
            format!(
                "else if (it == {}u) {{\n            at = {};\n        }}",
                i + depth + o,
                word(out.weights, "j", "")
            )
        })
        .collect();
    // Item `inputs + l - 1`: layer `l`'s bias.
    let bias_items: Vec<String> = (0..depth)
        .zip(&plan.layers)
        .map(|(l, layer)| {
            format!(
                "if (it == {}u) {{\n            at = {}u + j;\n        }}",
                i + l,
                layer.bias
            )
        })
        .collect();
    let b3_sums: String = (0..sh.outputs)
        .zip(&plan.outputs)
        .map(|(o, out)| {
            let b3 = match o {
                0 => format!("b{}", depth + 1),
                o => format!("b{}_{o}", depth + 1),
            };
            format!(
                "        var {b3} = 0.0f;\n        \
                 for (var e = 0u; e < {}u; e++) {{\n            {b3} += {ds}[{}e / 4u][e % 4u];\n        }}\n        \
                 shared_partials[row + {}u] = {b3};\n",
                sh.chunk,
                at_row(o),
                out.bias
            )
        })
        .collect();
    // Items below `i` are `d_W1`'s columns, summed per row; where `d_W1` is a tile there
    // are none, and the first item is `d_b1`.
    let (default_at, first_bias) = if sh.w1_tile {
        (format!("{}u + j", plan.layer(1).bias), 1)
    } else {
        (word(plan.layer(1).weights, "j", "it"), 0)
    };
    let _ = writeln!(
        s,
        "        }}\n        workgroupBarrier();\n    }}\n    \
         if (lid < {chunk}u) {{\n{output_bias_stores}    }}\n    \
         workgroupBarrier();\n    \
         for (var q = lid; q < {}u; q += {}u) {{\n        \
         let it = q / {h}u;\n        let j = q % {h}u;\n        \
         var at = {};\n        \
         {} {}\n        \
         {}\n    }}\n    \
         if (lid == 0u) {{\n{b3_sums}    }}\n}}",
        (i + depth + sh.outputs) * h,
        sh.threads,
        default_at,
        bias_items[first_bias..].join(" else "),
        w3_words.join(" "),
        row_sum_store(plan, sh, i),
        chunk = sh.chunk,
    );
}

/// The store of item `it`'s row `j` of the per-row sums: items up to `inputs` (`d_W1`'s
/// columns and `d_b1`) are of the first layer's rows, item `inputs + l - 1` (`d_b_l`) of
/// layer `l`'s, the outputs' of the last layer's.
fn row_sum_store(plan: &NetworkPlan, sh: &Shape, inputs: u32) -> String {
    let m = sh.sums_matrix();
    let store = &format!("shared_partials[row + at] = {m}[q / 4u][q % 4u];");
    let h = plan.hidden;
    let rows: Vec<u32> = plan.layers.iter().map(|l| l.rows.min(h)).collect();
    if rows.iter().all(|r| *r == rows[0]) {
        return plan.store_written(&[("j", rows[0])], store);
    }
    let mut limit = format!("{}u", rows[rows.len() - 1]);
    for (l, r) in rows.iter().enumerate().rev().skip(1) {
        limit = format!("select({limit}, {r}u, it <= {}u)", inputs + l as u32);
    }
    format!("if (j < {limit}) {{ {store} }}")
}
