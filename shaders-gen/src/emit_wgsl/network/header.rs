//! The cooperative network kernels' module header: bindings, workgroup matrices, the
//! helpers the phases call, and the loss written from its IR with its derivative in `y`.

use super::activations::WGSL_RELU;
use super::{NetworkPlan, Shape};
use crate::ir::{Activation, Function, Op};
use crate::ops::Func;
use crate::ops::{WGSL_TANH_BRANCH_FREE, wgsl_helper};
use crate::signature::Precision;
use std::collections::BTreeSet;
use std::fmt::Write;

/// The module header (the module doc) of the kernel of `plan` named by `signature`.
pub(super) fn header(signature: &str, plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    header_comment(signature, plan, sh, s);
    bindings(sh, s);
    workgroup_matrices(plan, sh, s);
    helpers(plan, s);
}

/// The comment that opens the module: which kernel of which function, and its layout.
fn header_comment(signature: &str, plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let layers = match sh.depth {
        2 => "two".to_string(),
        3 => "three".to_string(),
        4 => "four".to_string(),
        d => d.to_string(),
    };
    if sh.value {
        let _ = writeln!(
            s,
            "// gradfuse forward (value) kernel of `{signature}`, its {layers} layers as\n\
             // register-blocked matrix products of the workgroup over chunks of {chunk} elements.\n\
             // Element i's words: args[{}i ..]; values[i]: the value.\n",
            plan.element_words,
            chunk = sh.chunk
        );
    } else {
        let reloads = if sh.reloads {
            "\n// Its weight matrices lend their memory to the chunk's activations and adjoints,\n\
             // the weights copied in again (`network/reload.rs`)."
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "// gradfuse adjoint (value and gradient) kernel of `{signature}`, its {layers} layers as\n\
             // register-blocked matrix products of the workgroup over chunks of {chunk} elements.{reloads}\n\
             // Element i's words: args[{}i ..]; shared_partials[{}g ..]: workgroup g's sum of\n\
             // d/d shared_args; values[i]: the value.\n",
            plan.element_words,
            plan.shared_words,
            chunk = sh.chunk
        );
    }
}

/// The parameters and the buffers, bound as the generated adjoint binds them.
fn bindings(sh: &Shape, s: &mut String) {
    s.push_str("struct Params {\n    n: u32,\n    per_thread: u32,\n}\n\n");
    s.push_str("@group(0) @binding(0) var<uniform> params: Params;\n");
    s.push_str("@group(0) @binding(1) var<storage, read> args: array<f32>;\n");
    s.push_str("@group(0) @binding(2) var<storage, read_write> values: array<f32>;\n");
    s.push_str("@group(0) @binding(4) var<storage, read> shared_args: array<f32>;\n");
    if !sh.value {
        s.push_str("@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;\n");
    }
    s.push('\n');
}

/// The workgroup's matrices, each with a comment on its layout: the later layers'
/// weights (or `wblk`, where the kernel streams them), then the chunk's.
fn workgroup_matrices(plan: &NetworkPlan, sh: &Shape, s: &mut String) {
    let h = sh.hidden;
    let later: String = (3..=sh.depth).map(|l| format!(", W{l}")).collect();
    if sh.blocked {
        super::blocked::declare(sh, s);
    } else if sh.padded {
        let _ = writeln!(
            s,
            "// W2[j][k]{later} at j * {} + k (rows padded).",
            sh.weight_row
        );
    } else {
        let _ = writeln!(
            s,
            "// W2[j][k]{later} at j * {h} + 4 * ((k / 4) ^ (j % {g})) + k % 4.",
            g = sh.groups
        );
    }
    for l in (2..=sh.depth).filter(|_| !sh.blocked) {
        if sh.reloads {
            let _ = writeln!(s, "var<workgroup> w{l}s: array<vec4<f32>, {}>;", h * h / 4);
        } else {
            let _ = writeln!(
                s,
                "var<workgroup> w{l}s: array<f32, {}>;",
                h * sh.weight_row
            );
        }
    }
    let (rv, chunk, stride) = (sh.rv, sh.chunk, sh.stride);
    if sh.padded {
        let _ = writeln!(
            s,
            "// Rows of {rv} vec4s ({chunk} elements) and one of padding, column c of row r at r * {stride} + c."
        );
    } else {
        let _ = writeln!(
            s,
            "// Rows of {rv} vec4s ({chunk} elements), column c of row r at r * {rv} + (c ^ (r % 8))."
        );
    }
    if sh.reloads {
        let _ = writeln!(s, "var<workgroup> acts: array<vec4<f32>, {}>;\n", h * rv);
    } else if sh.value {
        let rows = plan.value_rows();
        let _ = writeln!(s, "var<workgroup> acts: array<vec4<f32>, {}>;\n", rows * rv);
    } else {
        for l in 1..sh.depth {
            let _ = writeln!(s, "var<workgroup> h{l}s: array<vec4<f32>, {}>;", h * stride);
        }
        let _ = writeln!(
            s,
            "var<workgroup> ds2s: array<vec4<f32>, {}>;\n",
            sh.ds2_rows * stride
        );
    }
}

/// The functions the phases call: the loss's helpers, the activations' `vec4` forms,
/// `dot_acc`, `sw`, and the loss itself with its derivative in `y`.
fn helpers(plan: &NetworkPlan, s: &mut String) {
    let mut helpers = BTreeSet::new();
    let body = loss_statements(&plan.loss, plan.outputs.len() as u32, &mut helpers);
    let tanh = plan.uses(|a| a == Activation::Call(Func::Tanh));
    if tanh {
        helpers.insert("gf_tanh");
    }
    for name in &helpers {
        // tanh without branches: a warp's elements take both of its paths.
        let src = match *name {
            "gf_tanh" => Some(WGSL_TANH_BRANCH_FREE),
            name => wgsl_helper(name, Precision::F32),
        };
        if let Some(src) = src {
            let _ = writeln!(s, "{src}\n");
        }
    }
    if tanh {
        s.push_str(
            "fn tanh4(v: vec4<f32>) -> vec4<f32> {\n    \
             return vec4<f32>(gf_tanh(v.x), gf_tanh(v.y), gf_tanh(v.z), gf_tanh(v.w));\n}\n\n",
        );
    }
    if plan.uses(|a| a == Activation::Sigmoid) {
        // As the IR computes `1.0 / (1.0 + (-s).exp())`, with the builtin `exp` (`ops`).
        s.push_str(
            "fn sigmoid4(v: vec4<f32>) -> vec4<f32> {\n    \
             return vec4<f32>(1.0) / (vec4<f32>(1.0) + exp(-v));\n}\n\n",
        );
    }
    if plan.uses(|a| matches!(a, Activation::Relu(_))) {
        let _ = writeln!(s, "{WGSL_RELU}");
    }
    // `acc += dot(p, q)` is a product and three FMAs, then an add.
    s.push_str(
        "// acc + p . q as four FMAs, in the order x, y, z, w.\n\
         fn dot_acc(p: vec4<f32>, q: vec4<f32>, acc: f32) -> f32 {\n    \
         return fma(p.w, q.w, fma(p.z, q.z, fma(p.y, q.y, fma(p.x, q.x, acc))));\n}\n\n",
    );
    s.push_str("fn sw(i: u32) -> f32 {\n    return shared_args[i];\n}\n\n");
    let (y, out) = loss_types(plan.outputs.len() as u32);
    let _ = writeln!(
        s,
        "// The loss and its derivative in y, from y and the element's words (from gf_row on).\n\
         fn gf_loss(gf_y: {y}, gf_row: u32) -> {out} {{\n{body}}}\n"
    );
}

/// The WGSL types of the loss's `y` and of its result `(value, d value / d y_0, ..)` for
/// `outputs` output rows: `f32` and `vec2` for one.
pub(super) fn loss_types(outputs: u32) -> (String, String) {
    if outputs == 1 {
        ("f32".into(), "vec2<f32>".into())
    } else {
        (
            format!("array<f32, {outputs}>"),
            format!("array<f32, {}>", outputs + 1),
        )
    }
}

/// The loss's statements: a `let` per node, `y` (its first `outputs` inputs) read from
/// `gf_y`, the element's words from `args` at row `gf_row`, returning `vec2(value,
/// d value / d y)` for one output and `array(value, d value / d y_0, ..)` for more.
fn loss_statements(f: &Function, outputs: u32, helpers: &mut BTreeSet<&'static str>) -> String {
    // The user's names, kept as the loss's locals, avoid WGSL's keywords as every
    // kernel's do: a target named `target` once failed to parse.
    let mut taken = crate::names::reserved();
    taken.insert("gf_y".into());
    taken.insert("gf_row".into());
    let ctx = super::super::body::Ctx::new(f, &mut taken);
    let mut s = String::new();
    for (i, node) in f.nodes.iter().enumerate() {
        let name = &ctx.names[i];
        match &node.op {
            Op::Input(0) if outputs == 1 => {
                let _ = writeln!(s, "    let {name} = gf_y;");
            }
            Op::Input(o) if *o < outputs => {
                let _ = writeln!(s, "    let {name} = gf_y[{o}];");
            }
            Op::Input(w) => {
                let _ = writeln!(s, "    let {name} = args[gf_row + {}u];", w - outputs);
            }
            Op::Const(_) | Op::Int(_) => {}
            op => {
                let _ = writeln!(s, "    let {name} = {};", ctx.expr(op, helpers));
            }
        }
    }
    let results: Vec<String> = f.outputs.iter().map(|v| ctx.operand(*v)).collect();
    let _ = writeln!(
        s,
        "    return {}({});",
        loss_types(outputs).1,
        results.join(", ")
    );
    s
}
