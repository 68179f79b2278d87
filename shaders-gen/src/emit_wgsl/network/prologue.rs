//! The cooperative network kernels' entry point up to the chunk loop's first statements:
//! the thread's place, each later layer's weights (`W2` ..) copied into workgroup memory,
//! the lanes' rows of the first layer and of the biases in registers, the gradient's sums
//! declared, the first chunk's inputs loaded; then the chunk loop's opening.

use super::outputs::output_bias_grad;
use super::phases::{store_x, weight_copies, zero_padded_inputs};
use super::{NetworkPlan, Shape, W1_TILE_INPUT_LANES, WordIndex, blocked, line};
use std::fmt::Write;

/// The entry point up to the chunk loop's first statements (the module doc).
pub(super) fn entry_prologue(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    entry_head(plan, sh, s);
    lane_registers(plan, sh, s);
    if !sh.value {
        gradient_tiles(sh, s);
    }
    chunk_loop_head(plan, sh, s);
}

/// The entry point's signature, the thread's place and its tile's (`jb`, `kb`, `part`),
/// and each later layer's weights copied into its matrix, in one loop.
fn entry_head(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (h, t) = (sh.hidden, sh.threads);
    let layers: Vec<u32> = (2..=sh.depth).collect();
    let copies = if sh.blocked {
        // Its `W2` is copied in blocks as each product reads it.
        String::new()
    } else if sh.reloads {
        weight_copies(plan, sh, &layers, "    ")
    } else {
        let copies: String = (layers.iter())
            .map(|&l| weight_copy(plan, sh, l))
            .collect::<Vec<_>>()
            .join("        ");
        format!(
            "for (var q = lid; q < {}u; q += {t}u) {{\n        \
             let j = q / {h}u;\n        \
             let k = q % {h}u;\n        \
             {copies}    }}",
            h * h
        )
    };
    // The value kernel sums no gradient: no `d_W` tiles (`jb`, `kb`, `part`).
    let tiles = if sh.value {
        String::new()
    } else if sh.parts == 1 {
        format!(
            "let jb = lid / {nk}u;\n    let kb = lid % {nk}u;\n    ",
            nk = sh.nk
        )
    } else {
        format!(
            "let part = lid / {pt}u;\n    let jb = lid % {pt}u / {nk}u;\n    let kb = lid % {nk}u;\n    ",
            nk = sh.nk,
            pt = sh.threads / sh.parts
        )
    };
    let entry = if sh.value { "forward" } else { "adjoint" };
    let _ = writeln!(
        s,
        "@compute @workgroup_size({t})\n\
         fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: \
         vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n    \
         let group = wid.x + wid.y * groups.x;\n    \
         let n = params.n;\n    \
         let lr = lid % {rl}u;\n    \
         let l8 = lr % 8u;\n    \
         let cg = lid / {rl}u;\n    \
         let cw = cg * {}u;\n    \
         {tiles}\
         {copies}",
        sh.columns,
        rl = sh.row_lanes
    );
}

/// Each lane row's registers: its row of `W1` (where the kernel does not stream it), its
/// biases and output weights, and in the adjoint the sums of their gradients.
fn lane_registers(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let (i, ol) = (sh.inputs, sh.depth + 1);
    for r in 0..sh.lane_rows {
        let row = sh.row(r);
        if sh.w1_blocks == 0 {
            let _ = writeln!(
                s,
                "    var w1_{r}: array<f32, {i}>;\n    \
                 for (var k = 0u; k < {i}u; k++) {{ w1_{r}[k] = {}; }}",
                plan.weight(1, (&row, "k")),
            );
        }
        for (l, layer) in (1..).zip(&plan.layers) {
            let bias = plan.load(bias_words(layer.bias), (&row, ""), [Some(layer.rows), None]);
            let _ = writeln!(s, "    let b{l}_{r} = {bias};");
        }
        let last = plan.layer(sh.depth).rows;
        for (o, out) in (0..).zip(&plan.outputs) {
            let _ = writeln!(
                s,
                "    let w{ol}_{}{r} = {};",
                sh.out(o),
                plan.load(out.weights, (&row, ""), [Some(last), None])
            );
        }
        if sh.value {
            continue;
        }
        if !sh.w1_tile {
            let _ = writeln!(s, "    var gw1_{r}: array<f32, {i}>;");
        }
        for l in 1..=sh.depth {
            let _ = writeln!(s, "    var gb{l}_{r} = 0.0f;");
        }
        for o in 0..sh.outputs {
            let _ = writeln!(s, "    var gw{ol}_{}{r} = 0.0f;", sh.out(o));
        }
    }
}

/// The adjoint's sums that are not a lane row's: the output biases' gradients and the
/// thread's tiles of `d_W1` (where it is one) and of each later layer's `d_W`.
fn gradient_tiles(sh: &Shape, s: &mut String) {
    for o in 0..sh.outputs {
        let _ = writeln!(s, "    var {} = 0.0f;", output_bias_grad(sh, o));
    }
    if sh.w1_tile {
        let _ = writeln!(
            s,
            "    let j1 = lid / {lanes}u;\n    let k1 = lid % {lanes}u;",
            lanes = W1_TILE_INPUT_LANES
        );
        for a in 0..sh.ja1 {
            let _ = writeln!(s, "    var gw1_{a}: array<f32, {}>;", sh.kb1);
        }
    }
    for l in 2..=sh.depth {
        for a in 0..sh.ja {
            let _ = writeln!(s, "    var gw{l}_{a}: array<f32, {}>;", sh.kb);
        }
    }
}

/// The first chunk's inputs loaded (and the first block of weights where the kernel
/// streams them), then the chunk loop's opening: the next chunk's inputs loaded while
/// this one's are stored into their matrix.
fn chunk_loop_head(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let chunk = sh.chunk;
    // The launch's chunks divided among the dispatched workgroups, `each` apiece and one
    // more for the first `extra`: a launch in one wave gives no multiprocessor a run more
    // than the rest (`ReductionSpec::divides_chunks`; whole runs a workgroup left the
    // 8-64-64-1's 2^20 elements on 128 of the H100's 132 multiprocessors).
    let _ = writeln!(
        s,
        "    let chunks = n / {chunk}u + select(0u, 1u, n % {chunk}u != 0u);\n    \
         let total = groups.x * groups.y;\n    \
         let each = chunks / total;\n    \
         let extra = chunks % total;\n    \
         let lo = group * each + min(group, extra);\n    \
         let hi = lo + each + select(0u, 1u, group < extra);\n    \
         let base = lo * {chunk}u;\n    \
         var xr: array<f32, {}>;",
        sh.prefetch
    );
    if sh.blocked {
        blocked::prologue(plan, sh, s);
    }
    // Only the first chunk's inputs are loaded before the loop: where the workgroup has
    // none (`base >= n`, possibly `n = 0`), none are read.
    line(s, "    if (base < n) {");
    prefetch(plan, sh, "base", "        ", s);
    line(s, "    }");
    let _ = writeln!(
        s,
        "    for (var idx = lo; idx < hi; idx++) {{\n        \
         let first = idx * {chunk}u;\n        \
         workgroupBarrier();\n        \
         let xc = xr;"
    );
    prefetch(plan, sh, &format!("first + {chunk}u"), "        ", s);
    store_x(sh, &sh.x_matrix(), s);
    zero_padded_inputs(sh, &sh.x_matrix(), s);
    line(s, "        workgroupBarrier();");
}

/// The statement that copies `W_l[j][k]` into its `f32` matrix (`j` and `k` in scope).
fn weight_copy(plan: &NetworkPlan, sh: &Shape, l: u32) -> String {
    format!(
        "w{l}s[{}] = {};\n",
        sh.weight_word("j", "k"),
        plan.weight(l, ("j", "k"))
    )
}

/// The inputs of the chunk at `first` into the registers `xr` (their latency hidden by
/// the chunk before), each element's clamped to the batch's last: written where `n >= 1`
/// (the kernel runs without bounds checks: the module doc). Clamped rather than guarded:
/// a branch around the loads cost the 8-64-64-1 adjoint 5% on the H200.
fn prefetch(plan: &NetworkPlan, sh: &Shape, first: &str, pad: &str, s: &mut String) {
    let i = sh.inputs;
    for r in 0..sh.prefetch {
        let _ = writeln!(
            s,
            "{pad}{{\n{pad}    let q = min(lid + {}u, {}u);\n{pad}    \
             xr[{r}] = args[min({first} + q / {i}u, n - 1u) * {}u + {}u + q % {i}u];\n{pad}}}",
            sh.threads * r,
            sh.chunk * i - 1,
            plan.element_words,
            plan.first_input
        );
    }
}

/// The words of a bias, `bias + j`, as a [`WordIndex`] of row `j`.
fn bias_words(bias: u32) -> WordIndex {
    WordIndex {
        offset: bias,
        row_stride: 1,
        column_stride: 0,
    }
}
