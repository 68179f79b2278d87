//! Which networks get the cooperative adjoint, read off their source.

use super::*;
use crate::abi::{self, KernelKind};
use crate::compile_str;

/// The plan of `src` and the adjoint WGSL `compile` wrote for it, which keeps wgpu's
/// bounds checks unless it is the cooperative kernel (the other kernels always do).
fn plan_of(src: &str) -> (Option<NetworkPlan>, String) {
    let c = compile_str(src).unwrap_or_else(|e| panic!("{src}: {:?}", e[0].to_string()));
    let plan = network_plan(&c.lowered.layout, &c.lowered.primal);
    assert_eq!(c.adjoint_form.bounds_checks, plan.is_none(), "{src}");
    let launch = |kind| crate::launch::kernel_launch(&c, kind);
    let value = c.wgsl_forward.contains("register-blocked");
    assert_eq!(launch(KernelKind::Adjoint).bounds_checks, plan.is_none());
    assert_eq!(launch(KernelKind::Forward).bounds_checks, !value);
    assert!(launch(KernelKind::Tangent).bounds_checks);
    // The cooperative kernels read their shared words from storage, the others as `abi`
    // says; gathered kernels are one element a thread whatever the plain ones are.
    let uniform = abi::shared_in_uniform(c.lowered.layout.shared_words, Precision::F32);
    let shared = |kind| launch(kind).shared.map(|s| s.uniform);
    assert_eq!(shared(KernelKind::Adjoint), Some(uniform && plan.is_none()));
    assert_eq!(shared(KernelKind::Forward), Some(uniform && !value));
    for kind in [KernelKind::Forward, KernelKind::Adjoint] {
        let gathered = crate::launch::per_element_launch(&c, kind);
        assert_eq!(gathered.shared.map(|s| s.uniform), Some(uniform));
        assert_eq!(gathered.workgroup_size, abi::WORKGROUP_SIZE);
        assert!(gathered.bounds_checks);
        assert_eq!(gathered.workgroup_bytes, 0);
    }
    // A cooperative kernel names its workgroup memory, and comes with the kernel of one
    // element a thread that a device of less runs.
    let (forward, adjoint) = (launch(KernelKind::Forward), launch(KernelKind::Adjoint));
    assert_eq!(c.forward_fallback.is_some(), value);
    assert_eq!(c.adjoint_fallback.is_some(), plan.is_some());
    assert_eq!(forward.workgroup_bytes > 0, value);
    let bytes = plan.as_ref().map_or(0, NetworkPlan::workgroup_bytes);
    assert_eq!(adjoint.workgroup_bytes, bytes, "{src}");
    assert!(bytes <= crate::emit_wgsl::NETWORK_WORKGROUP_BYTES);
    let per_element = |w: &Option<String>| (w.iter()).all(|w| !w.contains("register-blocked"));
    assert!(per_element(&c.forward_fallback) && per_element(&c.adjoint_fallback));
    (plan, c.wgsl_reverse)
}

/// Each hidden layer's activation, the first's first.
fn activations_of(plan: &NetworkPlan) -> Vec<crate::ir::Activation> {
    plan.layers.iter().map(|l| l.activation).collect()
}

/// Each hidden layer's rows as written, the first's first.
fn rows_of(plan: &NetworkPlan) -> Vec<u32> {
    plan.layers.iter().map(|l| l.rows).collect()
}

/// An `i`-`h`-`h`-1 network (`samples::DenseNetwork`) with activation `act`, `t`'s
/// attributes `t_attr` and the loss `loss`.
fn network(i: usize, h: usize, act: &'static str, t_attr: &'static str, loss: &str) -> String {
    crate::samples::DenseNetwork {
        activation: act,
        target_attr: t_attr,
        loss: loss.into(),
        ..crate::samples::DenseNetwork::new(i, h)
    }
    .source()
}

#[test]
fn the_readme_networks_get_the_cooperative_kernel() {
    for (i, h) in [(8, 64), (8, 32), (2, 64), (16, 32)] {
        let src = network(i, h, "s.tanh()", "#[constant]", "(y - t) * (y - t)");
        let (plan, wgsl) = plan_of(&src);
        let plan = plan.unwrap_or_else(|| panic!("{i}-{h}: no plan"));
        assert_eq!(
            (plan.inputs, plan.hidden, plan.element_words),
            (i as u32, h as u32, i as u32 + 1)
        );
        let w2 = (i * h + h) as u32;
        assert_eq!(plan.layers[1].weights.offset, w2);
        assert_eq!(plan.layers[1].weights.row_stride, h as u32);
        assert_eq!(plan.layers[0].bias, (i * h) as u32);
        assert_eq!(plan.outputs[0].bias + 1, plan.shared_words);
        assert!(wgsl.contains("register-blocked matrix products"), "{i}-{h}");
    }
}

#[test]
fn relu_networks_get_the_cooperative_kernel() {
    use crate::ir::{Activation, AtZero};
    for (i, h, act) in [
        (8, 64, "s.max(0.0)"),
        (4, 32, "0.0f32.max(s)"),
        (2, 64, "f32::max(s, 0.0)"),
    ] {
        let src = network(i, h, act, "#[constant]", "(y - t) * (y - t)");
        let (plan, wgsl) = plan_of(&src);
        let plan = plan.unwrap_or_else(|| panic!("{i}-{h} {act}: no plan"));
        assert_eq!(activations_of(&plan), [Activation::Relu(AtZero::Half); 2]);
        assert!(wgsl.contains("register-blocked matrix products"), "{act}");
        assert!(!wgsl.contains("gf_tanh("), "{act}");
    }
    // One layer of each.
    let src = network(8, 32, "s.tanh()", "#[constant]", "(y - t) * (y - t)").replacen(
        "h1[j] = s.tanh();",
        "h1[j] = s.max(0.0);",
        1,
    );
    let plan = plan_of(&src).0.expect("a plan");
    let tanh = Activation::Call(crate::ops::Func::Tanh);
    assert_eq!(
        activations_of(&plan),
        [Activation::Relu(AtZero::Half), tanh]
    );
    // A relu written as a branch, its derivative at zero as the branch says.
    let src = network(
        8,
        64,
        "if s > 0.0 { s } else { 0.0 }",
        "#[constant]",
        "(y - t) * (y - t)",
    )
    .replacen(
        "if s > 0.0 { s } else { 0.0 }",
        "if 0.0 <= s { s } else { 0.0 }",
        1,
    );
    let plan = plan_of(&src).0.expect("a plan");
    assert_eq!(
        activations_of(&plan),
        [
            Activation::Relu(AtZero::One),
            Activation::Relu(AtZero::Zero)
        ]
    );
}

#[test]
fn sigmoid_networks_get_the_cooperative_kernel() {
    use crate::ir::Activation;
    let sigmoid = "1.0 / (1.0 + (-s).exp())";
    let src = network(8, 32, sigmoid, "#[constant]", "(y - t) * (y - t)");
    let plan = plan_of(&src).0.expect("a plan");
    assert_eq!(activations_of(&plan), [Activation::Sigmoid; 2]);
}

#[test]
fn any_loss_of_y_and_the_elements_words() {
    let src = network(
        4,
        32,
        "s.tanh()",
        "#[constant]",
        "let d = y - t; (d * d + 1.0).ln() * x[1]",
    );
    let (plan, _) = plan_of(&src);
    let plan = plan.expect("a plan");
    // value and d/dy, from y and the element's words: x[1] and t read as words 1 and 4.
    let value = crate::interp::eval(&plan.loss, &[0.5, 0.0, 2.0, 0.0, 0.0, 0.25]);
    let d: f64 = 0.5 - 0.25;
    assert!((value[0] - (d * d + 1.0).ln() * 2.0).abs() < 1e-12);
    assert!((value[1] - 2.0 * d / (d * d + 1.0) * 2.0).abs() < 1e-12);
}

#[test]
fn networks_the_kernel_does_not_compute_keep_one_element_a_thread() {
    let cases = [
        // A width too narrow to pay for padding to 32, or too wide for 48 KiB.
        network(8, 16, "s.tanh()", "#[constant]", "(y - t) * (y - t)"),
        network(8, 160, "s.tanh()", "#[constant]", "(y - t) * (y - t)"),
        // A layer too narrow beside the other to pay for padding it to 64 rows.
        crate::samples::deep_network(8, &[64, 8], 1),
        crate::samples::deep_network(8, &[12, 64], 1),
        // Another activation.
        network(8, 32, "s.sin()", "#[constant]", "(y - t) * (y - t)"),
        network(8, 64, "s.max(0.1)", "#[constant]", "(y - t) * (y - t)"),
        // A per-element gradient (t differentiable).
        network(8, 32, "s.tanh()", "", "(y - t) * (y - t)"),
        // The loss reads a shared word, or an activation.
        network(
            8,
            32,
            "s.tanh()",
            "#[constant]",
            "(y - t) * (y - t) * w1[0]",
        ),
        network(
            8,
            32,
            "s.tanh()",
            "#[constant]",
            "(y - t) * (y - t) + h2[3]",
        ),
    ];
    for src in cases {
        let (plan, wgsl) = plan_of(&src);
        assert!(plan.is_none(), "{src}");
        assert!(!wgsl.contains("register-blocked matrix products"));
    }
    // A shared word no layer reads.
    let extra = network(8, 32, "s.tanh()", "#[constant]", "(y - t) * (y - t)")
        .replace("w3: [f32; 33]", "w3: [f32; 34]");
    assert!(plan_of(&extra).0.is_none());
    // More outputs than the kernel's `d_s2` matrix holds the lanes' parts of.
    assert!(plan_of(&crate::samples::network(8, 64, 3)).0.is_none());
    assert!(plan_of(&crate::samples::network(8, 32, 5)).0.is_none());
}

#[test]
fn widths_between_are_padded_to_the_next_kernel_width() {
    for (h, width) in [
        (17usize, 32u32),
        (20, 32),
        (32, 32),
        (33, 64),
        (48, 64),
        (64, 64),
        (65, 128),
        (96, 128),
        (128, 128),
    ] {
        let src = network(8, h, "s.tanh()", "#[constant]", "(y - t) * (y - t)");
        let (plan, wgsl) = plan_of(&src);
        let plan = plan.unwrap_or_else(|| panic!("width {h}: no plan"));
        assert_eq!(
            (rows_of(&plan), plan.hidden),
            (vec![h as u32; 2], width),
            "width {h}"
        );
        // Padded rows read zero weights and store no gradient; full widths test nothing.
        assert_eq!(
            wgsl.contains("select(0.0f, sw("),
            h as u32 != width,
            "width {h}"
        );
    }
}

#[test]
fn layers_of_two_widths_are_padded_to_the_wider() {
    for (rows, width) in [
        ([64u32, 32u32], 64u32),
        ([16, 64], 64),
        ([48, 24], 64),
        ([20, 30], 32),
        ([128, 64], 128),
        ([40, 100], 128),
    ] {
        let src = crate::samples::deep_network(8, &rows.map(|r| r as usize), 1);
        let (plan, _) = plan_of(&src);
        let plan = plan.unwrap_or_else(|| panic!("{rows:?}: no plan"));
        assert_eq!(
            (rows_of(&plan), plan.hidden),
            (rows.to_vec(), width),
            "{rows:?}"
        );
    }
}

#[test]
fn a_loop_over_output_rows_is_those_rows() {
    for (i, h, o) in [(8, 64, 2), (8, 32, 4), (3, 32, 3), (2, 32, 2)] {
        let (plan, wgsl) = plan_of(&crate::samples::network(i, h, o));
        let plan = plan.unwrap_or_else(|| panic!("{i}-{h}-{o}: no plan"));
        assert!(
            wgsl.contains("register-blocked matrix products"),
            "{i}-{h}-{o}"
        );
        // w3's rows after w1 and w2, row j at j * h, then its biases.
        let w3 = (i * h + h + h * h + h) as u32;
        assert_eq!(plan.outputs.len(), o);
        for (j, out) in plan.outputs.iter().enumerate() {
            assert_eq!(out.weights.offset, w3 + (j * h) as u32);
            assert_eq!(out.weights.row_stride, 1);
            assert_eq!(out.bias, w3 + (o * h + j) as u32);
        }
        // value and d/dy_j of the sum of (y_j - t_j)^2, t after x.
        let mut words = vec![0.0; o + i + o];
        for j in 0..o {
            words[j] = 0.5 + j as f64;
            words[o + i + j] = 0.25 * j as f64;
        }
        let value = crate::interp::eval(&plan.loss, &words);
        let mut want = 0.0;
        for j in 0..o {
            let d = 0.5 + j as f64 - 0.25 * j as f64;
            want += d * d;
            assert!(
                (value[1 + j] - 2.0 * d).abs() < 1e-12,
                "{i}-{h}-{o}: d/dy_{j}"
            );
        }
        assert!((value[0] - want).abs() < 1e-12, "{i}-{h}-{o}");
    }
}

#[test]
fn an_output_array_written_in_a_loop_then_read_is_those_rows() {
    // y as a third layer without an activation, the loss reading its words after it.
    let src = output_array_network(8, 64, 2, "s.tanh()");
    let (plan, wgsl) = plan_of(&src);
    let plan = plan.expect("a plan");
    assert_eq!(plan.outputs.len(), 2);
    assert!(wgsl.contains("register-blocked matrix products"));
    // (y0 - t)^2 + 0.5 (y1 + t)^2, t after x.
    let mut words = vec![0.0; 2 + 8 + 1];
    (words[0], words[1], words[10]) = (1.0, 2.0, 0.5);
    let value = crate::interp::eval(&plan.loss, &words);
    assert!((value[0] - (0.25 + 0.5 * 6.25)).abs() < 1e-12);
    assert!((value[1] - 1.0).abs() < 1e-12 && (value[2] - 2.5).abs() < 1e-12);
}

/// A network whose outputs are an array written by a loop over its rows (a third dense
/// layer without an activation), the loss reading its first two words.
fn output_array_network(i: usize, h: usize, o: usize, act: &str) -> String {
    format!(
        "fn net(#[constant] x: [f32; {i}], #[constant] t: f32, #[shared] w1: [f32; {w1}],
                    #[shared] w2: [f32; {w2}], #[shared] w3: [f32; {w3}]) -> f32 {{
                let mut h1 = [0.0; {h}];
                for j in 0..{h} {{
                    let mut s = w1[{i} * {h} + j];
                    for k in 0..{i} {{ s += w1[j * {i} + k] * x[k]; }}
                    h1[j] = {act};
                }}
                let mut h2 = [0.0; {h}];
                for j in 0..{h} {{
                    let mut s = w2[{h} * {h} + j];
                    for k in 0..{h} {{ s += w2[j * {h} + k] * h1[k]; }}
                    h2[j] = {act};
                }}
                let mut y = [0.0; {o}];
                for j in 0..{o} {{
                    let mut s = w3[{h} * {o} + j];
                    for k in 0..{h} {{ s += w3[j * {h} + k] * h2[k]; }}
                    y[j] = s;
                }}
                (y[0] - t) * (y[0] - t) + 0.5 * (y[1] + t) * (y[1] + t)
            }}",
        w1 = i * h + h,
        w2 = h * h + h,
        w3 = h * o + o
    )
}

#[test]
fn a_loop_over_one_output_row_is_that_row() {
    for (i, h) in [(8, 64), (3, 32)] {
        let (plan, wgsl) = plan_of(&crate::samples::network(i, h, 1));
        let plan = plan.unwrap_or_else(|| panic!("{i}-{h}: no plan"));
        assert!(wgsl.contains("register-blocked matrix products"), "{i}-{h}");
        // w3 after w1 and w2, its weights then its bias; t after x.
        let w3 = (i * h + h + h * h + h) as u32;
        assert_eq!(plan.outputs.len(), 1);
        assert_eq!(plan.outputs[0].weights.offset, w3);
        assert_eq!(plan.outputs[0].weights.row_stride, 1);
        assert_eq!(plan.outputs[0].bias, w3 + h as u32);
        // value and d/dy of (y - t)^2, t being word i.
        let mut words = vec![0.0; 2 + i];
        words[0] = 0.75;
        words[1 + i] = 0.25;
        let value = crate::interp::eval(&plan.loss, &words);
        assert!((value[0] - 0.25).abs() < 1e-12 && (value[1] - 1.0).abs() < 1e-12);
    }
}

#[test]
fn deeper_networks_get_the_kernel_where_their_matrices_fit() {
    use crate::emit_wgsl::NETWORK_WORKGROUP_BYTES as WORKGROUP_BYTES;
    // (hidden layers, outputs, whether the kernel takes them): at 32 rows up to four
    // layers, whose three later matrices and three stored activations leave 16 KiB for
    // `d_s`, which holds four outputs' rows as two pairs (`NetworkPlan::pairs_outputs`);
    // at 64 rows two layers, or three whose weight matrices the kernel lends (`reload.rs`)
    // with up to two outputs, no more.
    for (hidden, outputs, cooperative) in [
        (vec![32usize, 32, 32], 1usize, true),
        (vec![32, 32, 32, 32], 1, true),
        (vec![20, 30, 24, 32], 3, true),
        (vec![32, 32, 32, 32], 4, true),
        (vec![32, 32, 32, 32], 5, false),
        (vec![32; 5], 1, false),
        (vec![64, 64, 64], 1, true),
        (vec![64, 64, 64], 2, true),
        (vec![64, 64, 64], 3, false),
        (vec![32, 64, 32], 1, true),
        (vec![64; 4], 1, false),
        (vec![16, 16, 16], 1, false),
        // At 128 rows two layers, `W2` streamed in blocks (`blocked.rs`), up to four
        // outputs.
        (vec![128, 128], 1, true),
        (vec![128, 128], 2, true),
        (vec![128, 128], 4, true),
        (vec![128, 128], 5, false),
        (vec![128, 128, 128], 1, false),
    ] {
        let src = crate::samples::deep_network(8, &hidden, outputs);
        let (plan, wgsl) = plan_of(&src);
        assert_eq!(plan.is_some(), cooperative, "{hidden:?} {outputs}");
        let Some(plan) = plan else { continue };
        assert!(plan.workgroup_bytes() <= WORKGROUP_BYTES, "{hidden:?}");
        let reloads = plan.hidden == 64 && hidden.len() == 3;
        assert_eq!(plan.reloads_weights(), reloads, "{hidden:?}");
        assert_eq!(wgsl.contains("weights copied in again"), reloads);
        assert_eq!(
            rows_of(&plan),
            hidden.iter().map(|r| *r as u32).collect::<Vec<_>>()
        );
        assert_eq!(plan.layers.len(), hidden.len());
        // Each layer's words follow the one before's (`samples::deep_network`): its
        // weights after the earlier layers' weights and biases.
        let mut offset = 0;
        for (layer, (rows, columns)) in
            (plan.layers.iter()).zip(hidden.iter().zip(std::iter::once(&8).chain(&hidden)))
        {
            assert_eq!(layer.weights.offset, offset as u32, "{hidden:?}");
            assert_eq!(layer.bias, (offset + rows * columns) as u32, "{hidden:?}");
            offset += rows * columns + rows;
        }
        assert_eq!(plan.blocks_weights(), plan.hidden == 128);
        for l in (2..=hidden.len()).filter(|_| !plan.blocks_weights()) {
            assert!(
                wgsl.contains(&format!("var<workgroup> w{l}s")),
                "{hidden:?}"
            );
        }
    }
}

/// A network's value kernel is the workgroup's products where one element a thread keeps
/// a layer over shared weights as a loop (past `opt::VALUE_UNROLL_BUDGET`), its layers are
/// of 64 rows and its value kernel's matrices fit ([`NetworkPlan::value_workgroup_bytes`]),
/// whether or not its adjoint is the cooperative one; one element a thread elsewhere.
#[test]
fn value_kernels_get_the_products_where_one_element_a_thread_keeps_a_layer_loop() {
    // (inputs, hidden layers, outputs, whether the value kernel is the cooperative one).
    for (inputs, hidden, outputs, cooperative) in [
        (8, vec![64usize, 64, 64], 1usize, true),
        (16, vec![64, 64, 33], 2, true),
        (32, vec![64, 64, 64], 1, true),
        // Every layer unrolled.
        (8, vec![64, 64], 1, false),
        (8, vec![32, 32, 32, 32], 1, false),
        // A loop kept at 32 rows, where one element a thread is faster.
        (8, vec![32; 8], 1, false),
        // Matrices past 48 KiB, widths past 64.
        (8, vec![64; 4], 1, false),
        (8, vec![128, 128], 1, false),
    ] {
        let src = crate::samples::deep_network(inputs, &hidden, outputs);
        let c = compile_str(&src).unwrap_or_else(|e| panic!("{src}: {:?}", e[0].to_string()));
        let name = format!("{inputs}-{hidden:?}-{outputs}");
        assert_eq!(
            c.wgsl_forward.contains("register-blocked"),
            cooperative,
            "{name}"
        );
        if cooperative {
            let plan = network_value_plan(&c.lowered.layout, &c.lowered.primal);
            let bytes = plan.map(|p| p.value_workgroup_bytes());
            assert!(bytes.is_some_and(|b| b <= crate::emit_wgsl::NETWORK_WORKGROUP_BYTES));
            let launch = crate::launch::kernel_launch(&c, KernelKind::Forward);
            assert!(
                !launch.bounds_checks && launch.workgroup_size == 256,
                "{name}"
            );
        }
    }
}
