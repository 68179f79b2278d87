//! The phases of the cooperative network adjoint's entry point, in the order it runs them.

use super::{NetworkPlan, Shape, THREADS, cell, word};
use std::fmt::Write;

/// Lines of WGSL, each pushed with its newline.
fn line(s: &mut String, text: &str) {
    s.push_str(text);
    s.push('\n');
}

/// The thread's rows, `0..8`.
const ROWS: std::ops::Range<u32> = 0..8;

/// The swizzle term of the thread's row `r` (`(row / 4) % 8`, the same for each four).
fn swz(r: u32) -> String {
    format!("z{}", r / 4)
}

/// The four components of a `vec4`.
const XYZW: [&str; 4] = ["x", "y", "z", "w"];

/// The entry point up to the chunk loop's first statements: the thread's place, `W2`
/// copied into workgroup memory, the thread's rows' biases, output weights and a share of
/// `W1` in registers, the sums, the first chunk's inputs loaded.
pub(super) fn entry_prologue(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (h, rb) = (sh.hidden, sh.row_blocks);
    let slices = 4 / (rb * rb);
    let _ = writeln!(
        s,
        "@compute @workgroup_size({THREADS})\n\
         fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: \
         vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n    \
         let group = wid.x + wid.y * groups.x;\n    \
         let per_thread = params.per_thread;\n    \
         let n = params.n;\n    \
         let wp = lid / 32u;\n    \
         let l = lid % 32u;\n    \
         let la = l / 8u;\n    \
         let lb = l % 8u;\n    \
         // The tile: rows 4 rg + c and 4 rg + 16 + c, the elements of vec4 group eg.\n    \
         let rg = 8u * (wp % {rb}u) + la;\n    \
         let eg = 8u * (wp / {rb}u) + lb;\n    \
         let z0 = rg % 8u;\n    \
         let z1 = (rg + 4u) % 8u;\n    \
         // d_W2's tile: the same rows, the columns of group kg, the elements of vec4 groups\n    \
         // e_lo.. (all of them when the warps' tiles cover d_W2, else the warp's quarter).\n    \
         let kg = 8u * ((wp / {rb}u) % {rb}u) + lb;\n    \
         let e_lo = (wp / {}u) * {}u;\n    \
         // d_W1's: row j1, columns k1 + {}i.\n    \
         let j1 = lid % {h}u;\n    \
         let k1 = lid / {h}u;\n    \
         for (var q = lid; q < {}u; q += {THREADS}u) {{\n        \
         let j = q / {h}u;\n        \
         let k = q % {h}u;\n        \
         w2s[j * {}u + ((k / 4u) ^ ((j / 4u) % 8u))][k % 4u] = sw({});\n    }}",
        rb * rb,
        sh.groups / slices,
        THREADS / h,
        h * h,
        sh.wgroups,
        word(plan.second.weights, "j", "k"),
    );
    for r in ROWS {
        let row = Shape::row(r);
        let _ = writeln!(
            s,
            "    let b1_{r} = sw({}u + {row});\n    \
             let b2_{r} = sw({}u + {row});\n    \
             let w3_{r} = sw({});\n    \
             var gb1_{r} = 0.0f;\n    \
             var gb2_{r} = 0.0f;\n    \
             var gw3_{r} = 0.0f;",
            plan.first.bias,
            plan.second.bias,
            word(plan.output, &row, "")
        );
    }
    let (hi, w1) = (h * sh.inputs, sh.w1_regs);
    let _ = writeln!(
        s,
        "    // W1[q % {h}][q / {h}] for q = lid + {THREADS}i, stored transposed each chunk.\n    \
         var w1r: array<f32, {w1}>;\n    \
         var gw1: array<f32, {w1}>;\n    \
         for (var i = 0u; i < {w1}u; i++) {{\n        \
         let q = min(lid + {THREADS}u * i, {}u);\n        \
         w1r[i] = sw({});\n    }}\n    \
         var gb3 = 0.0f;",
        hi - 1,
        word(
            plan.first.weights,
            &format!("q % {h}u"),
            &format!("q / {h}u")
        ),
    );
    for r in ROWS {
        let _ = writeln!(
            s,
            "    var gw2_{r}_0 = 0.0f;\n    var gw2_{r}_1 = 0.0f;\n    \
             var gw2_{r}_2 = 0.0f;\n    var gw2_{r}_3 = 0.0f;"
        );
    }
    let _ = writeln!(
        s,
        "    let base = group * per_thread * {THREADS}u;\n    var xr: array<f32, {}>;",
        sh.prefetch
    );
    prefetch(plan, sh, "base", "    ", s);
    let _ = writeln!(
        s,
        "    for (var idx = 0u; idx < per_thread * {}u; idx++) {{\n        \
         let first = base + idx * {}u;\n        \
         if (first >= n) {{\n            break;\n        }}\n        \
         workgroupBarrier();\n        \
         let xc = xr;",
        sh.chunks(),
        sh.elements
    );
    prefetch(
        plan,
        sh,
        &format!("first + {}u", sh.elements),
        "        ",
        s,
    );
    store_x(sh, s);
    let _ = writeln!(
        s,
        "        for (var i = 0u; i < {w1}u; i++) {{\n            \
         let q = lid + {THREADS}u * i;\n            \
         if (q < {hi}u) {{\n                \
         let j = q % {h}u;\n                \
         ds2s[{}u + (q / {h}u) * {}u + j / 4u][j % 4u] = w1r[i];\n            }}\n        }}\n        \
         workgroupBarrier();",
        sh.w1t, sh.wgroups
    );
}

/// The inputs of the chunk at `first` into the registers `xr` (their latency hidden by
/// the chunk before).
fn prefetch(plan: &NetworkPlan, sh: &Shape, first: &str, pad: &str, s: &mut String) {
    let i = sh.inputs;
    for r in 0..sh.prefetch {
        let _ = writeln!(
            s,
            "{pad}{{\n{pad}    let q = min(lid + {}u, {}u);\n{pad}    \
             xr[{r}] = args[min({first} + q / {i}u, n - 1u) * {}u + {}u + q % {i}u];\n{pad}}}",
            THREADS * r,
            sh.elements * i - 1,
            plan.element_words,
            plan.first_input
        );
    }
}

/// The chunk's inputs (in `xc`) into rows `0..inputs` of `ds2s`, unswizzled.
fn store_x(sh: &Shape, s: &mut String) {
    let i = sh.inputs;
    for r in 0..sh.prefetch {
        let _ = writeln!(
            s,
            "        {{\n            let q = lid + {}u;\n            let e = q / {i}u;\n            \
             if (q < {}u) {{\n                \
             ds2s[(q % {i}u) * {}u + e / 4u][e % 4u] = xc[{r}];\n            }}\n        }}",
            THREADS * r,
            sh.elements * i,
            sh.groups
        );
    }
}

/// The `vec4` accumulators `{name}0..8`, one a row of the tile, set to `init(r)`.
fn accumulators(name: &str, init: impl Fn(u32) -> String, s: &mut String) {
    for r in ROWS {
        let _ = writeln!(s, "        var {name}{r} = {};", init(r));
    }
}

/// `acc{r} += w{r / 4}.c * v` for the tile's rows, where `w0`, `w1` hold rows `4 rg + c`
/// and `4 rg + 16 + c` (the operand of a product whose rows are along a `vec4`).
fn rank_one_by_groups(acc: &str, w: [&str; 2], v: &str, pad: &str, s: &mut String) {
    for r in ROWS {
        let _ = writeln!(
            s,
            "{pad}{acc}{r} = axpy4({}.{}, {v}, {acc}{r});",
            w[(r / 4) as usize],
            XYZW[(r % 4) as usize]
        );
    }
}

/// `h1 = tanh(W1 x + b1)` into its matrix, from the inputs and `W1^T` in `ds2s`.
pub(super) fn layer_one(sh: &Shape, s: &mut String) {
    accumulators("a", |r| format!("vec4<f32>(b1_{r})"), s);
    let (wg, w1t) = (sh.wgroups, sh.w1t);
    let _ = writeln!(
        s,
        "        for (var k = 0u; k < {}u; k++) {{\n            \
         let wa = ds2s[{w1t}u + k * {wg}u + rg];\n            \
         let wb = ds2s[{w1t}u + k * {wg}u + rg + 4u];\n            \
         let xq = ds2s[k * {}u + eg];",
        sh.inputs, sh.groups
    );
    rank_one_by_groups("a", ["wa", "wb"], "xq", "            ", s);
    line(s, "        }");
    for r in ROWS {
        let at = cell(&Shape::row(r), sh.groups, "eg", &swz(r));
        let _ = writeln!(s, "        h1s[{at}] = tanh4(a{r});");
    }
    line(s, "        workgroupBarrier();");
}

/// `s2 = W2 h1 + b2` and `h2 = tanh(s2)` in registers (`t0..8`), and the tile's part of
/// the output row into row `4 (wp % H/32) + la` of `ds2s`.
pub(super) fn forward(sh: &Shape, s: &mut String) {
    accumulators("f", |r| format!("vec4<f32>(b2_{r})"), s);
    let (wg, g) = (sh.wgroups, sh.groups);
    let _ = writeln!(s, "        for (var m = 0u; m < {wg}u; m++) {{");
    for r in ROWS {
        let at = cell(&Shape::row(r), wg, "m", &swz(r));
        let _ = writeln!(s, "            let w{r} = w2s[{at}];");
    }
    for i in 0..4 {
        let _ = writeln!(
            s,
            "            let h{i} = h1s[(4u * m + {i}u) * {g}u + (eg ^ (m % 8u))];"
        );
        for r in ROWS {
            let _ = writeln!(
                s,
                "            f{r} = axpy4(w{r}.{}, h{i}, f{r});",
                XYZW[i as usize]
            );
        }
    }
    line(s, "        }");
    for r in ROWS {
        let _ = writeln!(s, "        let t{r} = tanh4(f{r});");
    }
    let terms: Vec<String> = ROWS.map(|r| format!("w3_{r} * t{r}")).collect();
    let _ = writeln!(
        s,
        "        ds2s[(4u * (wp % {}u) + la) * {g}u + eg] = {};\n        workgroupBarrier();",
        sh.row_blocks,
        terms.join(" + ")
    );
}

/// The output row summed over the tiles' parts, the loss and its derivative `d_y` (one
/// thread an element, into the row after the parts), then `d_s2 = (1 - h2^2) w3 d_y` into
/// its matrix and the output row's gradients in registers.
pub(super) fn output_and_loss(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (g, parts) = (sh.groups, 4 * sh.row_blocks);
    let _ = writeln!(
        s,
        "        if (lid < {}u) {{\n            let e = lid;\n            var y = sw({}u);\n            \
         for (var p = 0u; p < {parts}u; p++) {{\n                \
         y += ds2s[p * {g}u + e / 4u][e % 4u];\n            }}\n            \
         let loss = gf_loss(y, min(first + e, n - 1u) * {}u);\n            \
         let inb = first + e < n;\n            \
         if (inb) {{\n                values[first + e] = loss.x;\n            }}\n            \
         let dy = select(0.0f, loss.y, inb);\n            \
         gb3 += dy;\n            \
         ds2s[{}u + e / 4u][e % 4u] = dy;\n        }}\n        \
         workgroupBarrier();\n        \
         let dyv = ds2s[{}u + eg];",
        sh.elements,
        plan.output_bias,
        plan.element_words,
        parts * g,
        parts * g
    );
    for r in ROWS {
        let _ = writeln!(
            s,
            "        gw3_{r} = dot_acc(t{r}, dyv, gw3_{r});\n        \
             let g{r} = (vec4<f32>(1.0) - t{r} * t{r}) * (w3_{r} * dyv);\n        \
             gb2_{r} += (g{r}.x + g{r}.y) + (g{r}.z + g{r}.w);"
        );
    }
    line(s, "        workgroupBarrier();");
    for r in ROWS {
        let at = cell(&Shape::row(r), g, "eg", &swz(r));
        let _ = writeln!(s, "        ds2s[{at}] = g{r};");
    }
    line(s, "        workgroupBarrier();");
}

/// `d_W2 += d_s2 h1^T` into the registers `gw2_*`, `d_h1 = W2^T d_s2` and
/// `d_s1 = (1 - h1^2) d_h1` for the tile, `d_s1` over `h1` and the inputs again, then
/// `d_W1 += d_s1 x^T`.
pub(super) fn backward(sh: &Shape, s: &mut String) {
    let (wg, g) = (sh.wgroups, sh.groups);
    let slice = g / (4 / (sh.row_blocks * sh.row_blocks));
    let _ = writeln!(
        s,
        "        for (var e4 = e_lo; e4 < e_lo + {slice}u; e4++) {{"
    );
    for r in ROWS {
        let at = cell(&Shape::row(r), g, "e4", &swz(r));
        let _ = writeln!(s, "            let p{r} = ds2s[{at}];");
    }
    for c in 0..4 {
        let _ = writeln!(
            s,
            "            let q{c} = h1s[(4u * kg + {c}u) * {g}u + (e4 ^ (kg % 8u))];"
        );
    }
    for r in ROWS {
        for c in 0..4 {
            let _ = writeln!(
                s,
                "            gw2_{r}_{c} = dot_acc(p{r}, q{c}, gw2_{r}_{c});"
            );
        }
    }
    line(s, "        }");
    accumulators("d", |_| "vec4<f32>(0.0)".into(), s);
    let _ = writeln!(
        s,
        "        for (var jq = 0u; jq < {wg}u; jq++) {{\n            let z = jq % 8u;"
    );
    for i in 0..4 {
        let _ = writeln!(
            s,
            "            {{\n                let j = 4u * jq + {i}u;\n                \
             let wa = w2s[j * {wg}u + (rg ^ z)];\n                \
             let wb = w2s[j * {wg}u + ((rg + 4u) ^ z)];\n                \
             let gj = ds2s[j * {g}u + (eg ^ z)];"
        );
        rank_one_by_groups("d", ["wa", "wb"], "gj", "                ", s);
        line(s, "            }");
    }
    line(s, "        }");
    for r in ROWS {
        let at = cell(&Shape::row(r), g, "eg", &swz(r));
        let _ = writeln!(
            s,
            "        let hh{r} = h1s[{at}];\n        \
             let ds1_{r} = (vec4<f32>(1.0) - hh{r} * hh{r}) * d{r};\n        \
             gb1_{r} += (ds1_{r}.x + ds1_{r}.y) + (ds1_{r}.z + ds1_{r}.w);"
        );
    }
    line(s, "        workgroupBarrier();");
    for r in ROWS {
        let at = cell(&Shape::row(r), g, "eg", &swz(r));
        let _ = writeln!(s, "        h1s[{at}] = ds1_{r};");
    }
    store_x(sh, s);
    line(s, "        workgroupBarrier();");
    let step = THREADS / sh.hidden;
    let _ = writeln!(
        s,
        "        for (var e4 = 0u; e4 < {g}u; e4++) {{\n            \
         let p = h1s[{}];\n            \
         for (var i = 0u; i < {}u; i++) {{\n                \
         let q = ds2s[min(k1 + {step}u * i, {}u) * {g}u + e4];\n                \
         gw1[i] = dot_acc(p, q, gw1[i]);\n            }}\n        }}\n    }}",
        cell("j1", g, "e4", "((j1 / 4u) % 8u)"),
        sh.w1_regs,
        sh.inputs - 1
    );
}

/// The workgroup's row of partial sums: `d_W2` and `d_W1` from the threads' registers (a
/// quarter of `d_W2` from each warp summed in turn where a warp's tile is all of it), the
/// per-row sums over the tiles in turn (item `it` of row `j`, tile `c` at word
/// `(it H + j) G + c` of `h1s`), `d_b3` over the elements.
pub(super) fn partial_sums(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (h, g) = (sh.hidden, sh.groups);
    let whole = sh.row_blocks == 2;
    let _ = writeln!(
        s,
        "    let row = group * {}u;\n    workgroupBarrier();",
        plan.shared_words
    );
    for r in ROWS {
        let row = Shape::row(r);
        let sums = [("gb1", 0), ("gb2", 1), ("gw3", 2)];
        for (name, it) in sums {
            let _ = writeln!(
                s,
                "    {{ let f = ({}u + {row}) * {g}u + eg; h1s[f / 4u][f % 4u] = {name}_{r}; }}",
                it * h
            );
        }
        for c in 0..4 {
            let k = format!("4u * kg + {c}u");
            if whole {
                let at = word(plan.second.weights, &row, &k);
                let _ = writeln!(s, "    shared_partials[row + {at}] = gw2_{r}_{c};");
            } else {
                let _ = writeln!(
                    s,
                    "    {{ let f = wp * {}u + {row} * {h}u + {k}; ds2s[f / 4u][f % 4u] = gw2_{r}_{c}; }}",
                    h * h
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "    if (lid < {e}u) {{\n        let f = {}u + lid;\n        h1s[f / 4u][f % 4u] = gb3;\n    }}\n    \
         for (var i = 0u; i < {}u; i++) {{\n        let k = k1 + {}u * i;\n        \
         if (k < {}u) {{\n            shared_partials[row + {}] = gw1[i];\n        }}\n    }}\n    \
         workgroupBarrier();\n    \
         for (var q = lid; q < {}u; q += {THREADS}u) {{\n        \
         let it = q / {h}u;\n        let j = q % {h}u;\n        var sum = 0.0f;\n        \
         for (var c = 0u; c < {g}u; c++) {{\n            let f = q * {g}u + c;\n            \
         sum += h1s[f / 4u][f % 4u];\n        }}\n        \
         var at = {}u + j;\n        \
         if (it == 1u) {{\n            at = {}u + j;\n        }} \
         else if (it == 2u) {{\n            at = {};\n        }}\n        \
         shared_partials[row + at] = sum;\n    }}",
        3 * h * g,
        sh.w1_regs,
        THREADS / h,
        sh.inputs,
        word(plan.first.weights, "j1", "k"),
        3 * h,
        plan.first.bias,
        plan.second.bias,
        word(plan.output, "j", ""),
        e = sh.elements,
    );
    if !whole {
        let _ = writeln!(
            s,
            "    for (var q = lid; q < {}u; q += {THREADS}u) {{\n        var sum = 0.0f;\n        \
             for (var w = 0u; w < 4u; w++) {{\n            let f = w * {}u + q;\n            \
             sum += ds2s[f / 4u][f % 4u];\n        }}\n        \
             shared_partials[row + {}] = sum;\n    }}",
            h * h,
            h * h,
            word(
                plan.second.weights,
                &format!("q / {h}u"),
                &format!("q % {h}u")
            )
        );
    }
    let _ = writeln!(
        s,
        "    if (lid == 0u) {{\n        var b3 = 0.0f;\n        \
         for (var e = 0u; e < {}u; e++) {{\n            let f = {}u + e;\n            \
         b3 += h1s[f / 4u][f % 4u];\n        }}\n        \
         shared_partials[row + {}u] = b3;\n    }}\n}}",
        sh.elements,
        3 * h * g,
        plan.output_bias
    );
}
