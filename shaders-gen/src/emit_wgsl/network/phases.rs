//! The phases of the cooperative network adjoint's chunk loop, in the order it runs them,
//! after its prologue (`prologue.rs`) and up to its row of partial sums (`partials.rs`);
//! the value kernel's layers are these too (`value.rs`).

use super::outputs::{output_parts, paired_output_parts};
use super::{
    GradTile, NetworkPlan, Shape, activate, blocked, derivative, keeps_ties, line, record_ties,
};
use std::fmt::Write;

/// The loop, indented by `pad`, in which the workgroup's threads copy each of `layers`'
/// weights into its matrix of `vec4`s, a `vec4` a thread and step: on the H200 the
/// 8-64-64-64-1 adjoint ran 2.4% faster so than with a word a step (32.47 -> 31.70 ms at
/// 2^24; BENCHMARKS.md).
pub(super) fn weight_copies(plan: &NetworkPlan, sh: &Shape, layers: &[u32], pad: &str) -> String {
    let (h4, t) = (sh.hidden / 4, sh.threads);
    let mut s = format!(
        "for (var q = lid; q < {}u; q += {t}u) {{\n{pad}    \
         let j = q / {h4}u;\n{pad}    \
         let k4 = q % {h4}u;\n",
        sh.hidden * h4
    );
    for &l in layers {
        let _ = writeln!(
            s,
            "{pad}    {} = {};",
            sh.weight_vec4(l, "j", "k4"),
            weight_words(plan, l)
        );
    }
    s.push_str(pad);
    s.push('}');
    s
}

/// The `vec4` of `W_l[j][4 k4 ..]` read from the shared words (`j` and `k4` in scope),
/// zero in the padding.
pub(super) fn weight_words(plan: &NetworkPlan, l: u32) -> String {
    let words: Vec<String> = (0..4)
        .map(|c| {
            let k = if c == 0 {
                "4u * k4".to_string()
            } else {
                format!("4u * k4 + {c}u")
            };
            plan.weight(l, ("j", &k))
        })
        .collect();
    format!("vec4<f32>({})", words.join(", "))
}

/// The chunk's inputs (in `xc`) into rows `0..inputs` of `matrix`.
pub(super) fn store_x(sh: &Shape, matrix: &str, s: &mut String) {
    let i = sh.inputs;
    for r in 0..sh.prefetch {
        let _ = writeln!(
            s,
            "        {{\n            let q = lid + {}u;\n            let e = q / {i}u;\n            \
             let f = q % {i}u;\n            if (q < {}u) {{\n                \
             {matrix}[{}][e % 4u] = xc[{r}];\n            }}\n        }}",
            sh.threads * r,
            sh.chunk * i,
            sh.cell("f", "(f % 8u)", "e / 4u")
        );
    }
}

/// Zeros into `matrix`'s rows past the inputs up to `W1`'s last column block, where the
/// kernel streams it ([`NetworkPlan::streams_first_layer`]): the padded columns' zero
/// weights multiply them, and what those rows held before (the last chunk's `d_s1`) may be
/// infinite, whose product would be NaN in every element of the chunk.
pub(super) fn zero_padded_inputs(sh: &Shape, matrix: &str, s: &mut String) {
    let rows = (sh.w1_blocks * blocked::BLOCK).saturating_sub(sh.inputs);
    if rows == 0 {
        return;
    }
    let (cells, rv) = (rows * sh.rv, sh.rv);
    let at = sh.cell("f", "(f % 8u)", &format!("q % {rv}u"));
    for q in (0..cells).step_by(sh.threads as usize) {
        let _ = writeln!(
            s,
            "        {{\n            let q = lid + {q}u;\n            let f = {}u + q / {rv}u;\n            \
             if (q < {cells}u) {{\n                {matrix}[{at}] = vec4<f32>();\n            }}\n        }}",
            sh.inputs
        );
    }
}

/// One step of a forward or `d_h1` product: each of the column group's `vec4` columns of
/// row `row` of `matrix` (swizzled; `base`, where not empty, a WGSL index of a row whose
/// number is a multiple of 8 that `row` counts from), broadcast to the group as
/// `{name}{c}`, times the lane's weight of each of its rows, `weight(r)`, added into
/// `{acc}{r}_{c}`.
pub(super) fn rank_one_step(
    sh: &Shape,
    (matrix, base, row, name): (&str, &str, u32, &str),
    weight: impl Fn(u32) -> String,
    acc: &str,
    s: &mut String,
) {
    for c in 0..sh.columns {
        let at = sh.column_cell(base, row, c);
        let _ = writeln!(s, "            let {name}{c} = {matrix}[{at}];");
        for r in 0..sh.lane_rows {
            let _ = writeln!(s, "            {acc}{r}_{c} += {} * {name}{c};", weight(r));
        }
    }
}

/// `h1 = act(W1 x + b1)` into its matrix, each layer but the last from the one before
/// into its own, then the last's sums `f` and `t = act(f)` in registers, and each lane's
/// part of the output rows into `ds2s`.
pub(super) fn forward(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    for (layer, l) in (1..).zip(&plan.layers) {
        if keeps_ties(l.activation) {
            let _ = writeln!(s, "        var ties{layer} = 0u;");
        }
    }
    if sh.w1_blocks > 0 {
        blocked::first_layer_product(plan, sh, &sh.x_matrix(), s);
    } else {
        first_layer_sums(sh, &sh.x_matrix(), s);
    }
    // Where the activations overwrite their input (the adjoint that reloads its weights),
    // every thread first reads it.
    let overwrite = |s: &mut String| {
        if sh.reloads {
            line(s, "        workgroupBarrier();");
        }
    };
    overwrite(s);
    store_activations(plan, sh, 1, "s", s);
    line(s, "        workgroupBarrier();");
    // A layer between the first and the last, in a block of its own: its sums take the
    // last layer's names.
    for l in 2..sh.depth {
        let mut block = String::new();
        layer_product(sh, l, &mut block);
        overwrite(&mut block);
        store_activations(plan, sh, l, "f", &mut block);
        let _ = writeln!(s, "        {{\n{}        }}", indented(&block));
        line(s, "        workgroupBarrier();");
    }
    if sh.blocked {
        blocked::layer_product(plan, sh, s);
    } else {
        layer_product(sh, sh.depth, s);
    }
    let last = sh.depth;
    for r in rows.clone() {
        for c in cols.clone() {
            let sums = format!("f{r}_{c}");
            let h2 = activate(plan.layer(last).activation, &sums);
            let _ = writeln!(
                s,
                "        let t{r}_{c} = {};",
                unpadded(plan, sh, last, r, h2)
            );
            let bit = sh.tie_bit(r, c);
            if let Some(ties) = record_ties(plan.layer(last).activation, last, &sums, bit) {
                let _ = writeln!(s, "        {ties}");
            }
        }
    }
    // The third and fourth outputs' parts overwrite the last block of `W2` that the threads
    // read ([`blocked`]).
    if sh.blocked && sh.outputs > 2 {
        line(s, "        workgroupBarrier();");
    }
    if sh.pairs_outputs {
        paired_output_parts(plan, sh, &sh.ds_matrix(last), s);
    } else {
        output_parts(sh, &sh.ds_matrix(last), 0..sh.outputs, s);
    }
    line(s, "        workgroupBarrier();");
}

/// The first layer's sums `s{r}_{c} = b1 + W1 x` for the thread's tile, the chunk's
/// inputs from `matrix` ([`Shape::x_matrix`] in the forward pass).
pub(super) fn first_layer_sums(sh: &Shape, matrix: &str, s: &mut String) {
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    for r in rows.clone() {
        for c in cols.clone() {
            let _ = writeln!(s, "        var s{r}_{c} = vec4<f32>(b1_{r});");
        }
    }
    let _ = writeln!(s, "        for (var k = 0u; k < {}u; k++) {{", sh.inputs);
    for c in cols.clone() {
        let x = sh.cell("k", "(k % 8u)", &format!("cw + {c}u"));
        let _ = writeln!(s, "            let x{c} = {matrix}[{x}];");
        for r in rows.clone() {
            let _ = writeln!(s, "            s{r}_{c} += w1_{r}[k] * x{c};");
        }
    }
    line(s, "        }");
}

/// Layer `l`'s activations of its sums `{sums}{r}_{c}` into its matrix
/// ([`Shape::h_matrix`]), and in the adjoint their ties into its mask.
pub(super) fn store_activations(
    plan: &NetworkPlan,
    sh: &Shape,
    l: u32,
    sums: &str,
    s: &mut String,
) {
    store_activations_into(plan, sh, (l, sums), &sh.h_matrix(l), !sh.value, s);
}

/// Layer `l`'s activations of its sums `{sums}{r}_{c}` into `matrix`, and where `ties`
/// their ties into its mask.
pub(super) fn store_activations_into(
    plan: &NetworkPlan,
    sh: &Shape,
    (l, sums): (u32, &str),
    matrix: &str,
    ties: bool,
    s: &mut String,
) {
    let a = plan.layer(l).activation;
    for r in 0..sh.lane_rows {
        for c in 0..sh.columns {
            let at = sh.cell(&sh.row(r), "l8", &format!("cw + {c}u"));
            let sums = format!("{sums}{r}_{c}");
            let h = unpadded(plan, sh, l, r, activate(a, &sums));
            let _ = writeln!(s, "        {matrix}[{at}] = {h};");
            let ties = record_ties(a, l, &sums, sh.tie_bit(r, c)).filter(|_| ties);
            if let Some(ties) = ties {
                let _ = writeln!(s, "        {ties}");
            }
        }
    }
}

/// `h`, layer `l`'s activations at lane row `r`, zero where the row is padding. A padded
/// row's sum is `0 * x`: NaN for an infinite `x`, which the next layer's zero weight would
/// carry into every written row (`0 * NaN`), where unpadded a `tanh` gives a finite value.
pub(super) fn unpadded(plan: &NetworkPlan, sh: &Shape, l: u32, r: u32, h: String) -> String {
    let rows = plan.layer(l).rows;
    if rows >= sh.row_lanes * (r + 1) {
        return h;
    }
    format!("select(vec4<f32>(0.0), {h}, {} < {rows}u)", sh.row(r))
}

/// Layer `l`'s sums `f{r}_{c} = b_l + W_l h_(l-1)` for the thread's tile, the weights from
/// `w{l}s` by lane, the activations from layer `l - 1`'s matrix broadcast.
pub(super) fn layer_product(sh: &Shape, l: u32, s: &mut String) {
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    for r in rows.clone() {
        for c in cols.clone() {
            let _ = writeln!(s, "        var f{r}_{c} = vec4<f32>(b{l}_{r});");
        }
    }
    let h = sh.hidden;
    for m in 0..sh.groups {
        if sh.reloads {
            lane_weights(sh, l, m, s);
        } else {
            let wr = sh.weight_row;
            if sh.padded {
                let _ = writeln!(
                    s,
                    "        {{\n            let wbase = lr * {wr}u + {}u;",
                    4 * m
                );
            } else {
                let _ = writeln!(
                    s,
                    "        {{\n            let wbase = lr * {h}u + 4u * ({m}u ^ (lr % {}u));",
                    sh.groups
                );
            }
            for i in 0..4 {
                for r in rows.clone() {
                    let _ = writeln!(
                        s,
                        "            let wv{r}_{i} = w{l}s[wbase + {}u];",
                        sh.row_lanes * r * wr + i
                    );
                }
            }
        }
        let input = sh.h_matrix(l - 1);
        for i in 0..4 {
            let weight = |r: u32| format!("wv{r}_{i}");
            rank_one_step(
                sh,
                (&input, "", 4 * m + i, &format!("h{i}_")),
                weight,
                "f",
                s,
            );
        }
        line(s, "        }");
    }
}

/// The opening of step `m` of layer `l`'s product in a kernel whose weight matrices are
/// `vec4` arrays ([`Shape::weight_vec4`]): the lane's `vec4` of columns `4m ..` of each of
/// its rows, `wv{r}_{i}` its words.
fn lane_weights(sh: &Shape, l: u32, m: u32, s: &mut String) {
    let _ = writeln!(
        s,
        "        {{\n            let wbase = lr * {}u + ({m}u ^ (lr % {}u));",
        sh.hidden / 4,
        sh.groups
    );
    for r in 0..sh.lane_rows {
        let _ = writeln!(
            s,
            "            let wq{r} = w{l}s[wbase + {}u];",
            sh.row_lanes * r * sh.hidden / 4
        );
        for (i, c) in ["x", "y", "z", "w"].into_iter().enumerate() {
            let _ = writeln!(s, "            let wv{r}_{i} = wq{r}.{c};");
        }
    }
}

/// From the last hidden layer down, each layer `l`'s `d_h_(l-1) = W_l^T d_s_l` for the
/// lane's rows, `d_W_l += d_s_l h_(l-1)^T` and `d_s_(l-1) = act'(s_(l-1)) d_h_(l-1)` in
/// registers ([`layer_backward`]), into `ds2s` for the layer below but the first; then the
/// inputs again and `d_W1 += d_s1 x^T`.
pub(super) fn backward(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    // A layer above the second, in a block of its own: its registers take the second's
    // names.
    for l in (3..=sh.depth).rev() {
        let mut block = String::new();
        layer_backward(plan, sh, l, &mut block);
        line(&mut block, "        workgroupBarrier();");
        store_sum_adjoints(sh, "ds2s", &mut block);
        let _ = writeln!(s, "        {{\n{}        }}", indented(&block));
        line(s, "        workgroupBarrier();");
    }
    second_and_first_layers_backward(plan, sh, "h1s", s);
    line(s, "    }");
}

/// The thread's tile of `e{r}_{c}`, the adjoints of the layer below's sums, into `matrix`.
pub(super) fn store_sum_adjoints(sh: &Shape, matrix: &str, s: &mut String) {
    for r in 0..sh.lane_rows {
        for c in 0..sh.columns {
            let at = sh.cell(&sh.row(r), "l8", &format!("cw + {c}u"));
            let _ = writeln!(s, "        {matrix}[{at}] = e{r}_{c};");
        }
    }
}

/// The second layer's part of [`backward`] ([`layer_backward`]), then the chunk's inputs
/// into `matrix` (whose `h1` that part has read) and `d_W1 += d_s1 x^T` from them.
pub(super) fn second_and_first_layers_backward(
    plan: &NetworkPlan,
    sh: &Shape,
    matrix: &str,
    s: &mut String,
) {
    layer_backward(plan, sh, 2, s);
    line(s, "        workgroupBarrier();");
    store_x(sh, matrix, s);
    if sh.w1_tile {
        let ds = sh.ds_matrix(2);
        store_sum_adjoints(sh, &ds, s);
        line(s, "        workgroupBarrier();");
        first_layer_tile(sh, (&ds, matrix), s);
        return;
    }
    line(s, "        workgroupBarrier();");
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    let _ = writeln!(s, "        for (var k = 0u; k < {}u; k++) {{", sh.inputs);
    for c in cols.clone() {
        let x = sh.cell("k", "(k % 8u)", &format!("cw + {c}u"));
        let _ = writeln!(s, "            let x{c} = {matrix}[{x}];");
    }
    for r in rows {
        let sum = cols.clone().fold(format!("gw1_{r}[k]"), |acc, c| {
            format!("dot_acc(e{r}_{c}, x{c}, {acc})")
        });
        let _ = writeln!(s, "            gw1_{r}[k] = {sum};");
    }
    line(s, "        }");
}

/// `d_W1 += d_s1 x^T` for the thread's tile ([`NetworkPlan::tiles_first_layer`]), `d_s1` and
/// the chunk's inputs from their matrices (past the inputs, rows whose sums are never
/// stored), as `d_W2`'s tile.
fn first_layer_tile(sh: &Shape, (ds, xs): (&str, &str), s: &mut String) {
    let _ = writeln!(s, "        for (var e4 = 0u; e4 < {}u; e4++) {{", sh.rv);
    tile_product_step(sh, sh.weight_tile(1), (ds, xs), s);
    line(s, "        }");
}

/// One step of a tile's product over the chunk ([`GradTile`]), at `vec4` column `e4`:
/// its rows of `d_s` (`ps`) and of the inputs (`qs`), both swizzled, and a `vec4` dot
/// product into each of its words.
fn tile_product_step(sh: &Shape, t: GradTile, (ps, qs): (&str, &str), s: &mut String) {
    for a in 0..t.ja {
        let row = format!("({} + {}u)", t.j, t.nj * a);
        let at = sh.cell(&row, &format!("({} % 8u)", t.j), "e4");
        let _ = writeln!(s, "            let p{a} = {ps}[{at}];");
    }
    for b in 0..t.kb {
        let row = format!("({} + {}u)", t.k, t.nk * b);
        let swizzle = match t.k_swizzle {
            Some(k) => k.to_string(),
            None => format!("({row} % 8u)"),
        };
        let _ = writeln!(
            s,
            "            let q{b} = {qs}[{}];",
            sh.cell(&row, &swizzle, "e4")
        );
    }
    for (a, b) in t.cells() {
        let _ = writeln!(
            s,
            "            gw{l}_{a}[{b}] = dot_acc(p{a}, q{b}, gw{l}_{a}[{b}]);",
            l = t.l
        );
    }
}

/// Layer `l`'s part of [`backward`], its `d_s_l` in `ds2s`: `d{r}_{c}`, the lane's rows of
/// `W_l^T d_s_l`; `d_W_l`'s tile; `e{r}_{c} = act'(s_(l-1)) d{r}_{c}` from `h{l-1}s`.
pub(super) fn layer_backward(plan: &NetworkPlan, sh: &Shape, l: u32, s: &mut String) {
    let (rows, cols) = (0..sh.lane_rows, 0..sh.columns);
    for r in rows.clone() {
        for c in cols.clone() {
            let _ = writeln!(s, "        var d{r}_{c} = vec4<f32>(0.0);");
        }
    }
    if sh.blocked {
        blocked::transposed_product(plan, sh, s);
    } else {
        transposed_product(sh, l, s);
    }
    let ds = sh.ds_matrix(l);
    let below = l - 1;
    let hs = sh.h_below_matrix(below);
    weight_tile_product(sh, l, (&ds, &hs), s);
    for r in rows {
        for c in cols.clone() {
            let at = sh.cell(&sh.row(r), "l8", &format!("cw + {c}u"));
            let d = derivative(
                plan.layer(below).activation,
                &format!("hh{r}_{c}"),
                below,
                sh.tie_bit(r, c),
            );
            let _ = writeln!(
                s,
                "        let hh{r}_{c} = {hs}[{at}];\n        \
                 let e{r}_{c} = {d} * d{r}_{c};\n        \
                 gb{below}_{r} += (e{r}_{c}.x + e{r}_{c}.y) + (e{r}_{c}.z + e{r}_{c}.w);"
            );
        }
    }
}

/// `d_W_l += d_s_l h_(l-1)^T` for the thread's tile over its part's `vec4` columns of the
/// chunk ([`tile_product_step`]), `d_s_l` from `ds` and `h_(l-1)` from `hs`. Written out
/// a column a block but where `W_l` is streamed or reloaded: the driver kept the loop, and
/// written out the 8-64-64-1 adjoint ran 3.7% faster on the H200 (15.81 -> 15.23 ms at
/// 2^24), the 8-32-32-1's with padded rows 4.5% (BENCHMARKS.md, "Padded rows").
fn weight_tile_product(sh: &Shape, l: u32, (ds, hs): (&str, &str), s: &mut String) {
    let q = sh.rv / sh.parts;
    let column = |i: &str| match sh.parts {
        1 => String::new(),
        _ => format!("            let e4 = part * {q}u + {i};\n"),
    };
    if sh.blocked || sh.reloads {
        match sh.parts {
            1 => {
                let _ = writeln!(s, "        for (var e4 = 0u; e4 < {q}u; e4++) {{");
            }
            _ => {
                let _ = write!(
                    s,
                    "        for (var i4 = 0u; i4 < {q}u; i4++) {{\n{}",
                    column("i4")
                );
            }
        }
        tile_product_step(sh, sh.weight_tile(l), (ds, hs), s);
        line(s, "        }");
        return;
    }
    for i in 0..q {
        let mut block = String::new();
        if sh.parts == 1 {
            let _ = writeln!(block, "            let e4 = {i}u;");
        } else {
            block.push_str(&column(&format!("{i}u")));
        }
        tile_product_step(sh, sh.weight_tile(l), (ds, hs), &mut block);
        let _ = write!(s, "        {{\n{block}        }}\n");
    }
}

/// `d{r}_{c} += W_l^T d_s_l` for the thread's tile, the weights from `w{l}s` by lane, `d_s_l`
/// broadcast from its matrix.
fn transposed_product(sh: &Shape, l: u32, s: &mut String) {
    let (h, ds) = (sh.hidden, sh.ds_matrix(l));
    for j in 0..h {
        // The lane's rows' words of row `j` of `W_l` (`W_l^T`'s column): `f32` words at
        // `row + s`, or components `lr % 4` of `vec4`s ([`Shape::weight_vec4`]); `unit`
        // words an index.
        if sh.padded {
            // Row `j` of `W_l` is contiguous: the lane's words at `row + lr`.
            let row = j * sh.weight_row;
            line(s, "        {");
            for r in 0..sh.lane_rows {
                let at = row + sh.row_lanes * r;
                let _ = writeln!(s, "            let v{r} = w{l}s[{at}u + lr];");
            }
            rank_one_step(sh, (&ds, "", j, "g"), |r| format!("v{r}"), "d", s);
            line(s, "        }");
            continue;
        }
        let g = j % sh.groups;
        let (lane, row, unit, component) = if sh.reloads {
            (format!("(lr / 4u) ^ {g}u"), j * h / 4, 4, "[lr % 4u]")
        } else {
            (format!("4u * ((lr / 4u) ^ {g}u) + lr % 4u"), j * h, 1, "")
        };
        let _ = writeln!(s, "        {{\n            let s = {lane};");
        for r in 0..sh.lane_rows {
            let at = if r == 0 {
                "s".to_string()
            } else {
                format!("(s ^ {}u)", sh.row_lanes * r / unit)
            };
            let _ = writeln!(s, "            let v{r} = w{l}s[{row}u + {at}]{component};");
        }
        rank_one_step(sh, (&ds, "", j, "g"), |r| format!("v{r}"), "d", s);
        line(s, "        }");
    }
}

/// `block`'s lines, each but the empty ones indented four spaces more.
pub(super) fn indented(block: &str) -> String {
    block
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("    {l}\n")
            }
        })
        .collect()
}
