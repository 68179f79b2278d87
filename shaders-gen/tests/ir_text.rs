//! Property: each pass can be reviewed on its own. The IR of a few functions is
//! snapshotted as text after lowering, after optimization, and after the reverse (adjoint)
//! and forward (tangent) transforms; a change in one pass shows in its own snapshot.

use gradfuse_shaders_gen::compile_str;

/// Every stage of one function, in one snapshot: lowered, optimized, adjoint, tangent.
fn stages(src: &str) -> String {
    let c = compile_str(src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
    format!(
        "== lowered\n{}\n== optimized (primal)\n{}\n== reverse\n{}\n== tangent\n{}\n",
        c.lowered.primal,
        c.primal,
        c.reverse.function(),
        c.tangent
    )
}

#[test]
fn branch_and_array() {
    insta::assert_snapshot!(stages(
        "fn f(p: [f32; 2], #[constant] k: f32) -> f32 {
            let d = p[0] - p[1];
            if d > 0.0 { k * d * d } else { d.sin() }
        }"
    ));
}

#[test]
fn kept_loop_with_tape() {
    // No computed index: the loop stays a loop, and its reverse reads a tape.
    insta::assert_snapshot!(stages(
        "fn f(x: f32, w: f32) -> f32 {
            let mut s = x;
            for i in 0..4 {
                s = (s * w + i as f32).tanh();
            }
            s
        }"
    ));
}

#[test]
fn vector_result() {
    insta::assert_snapshot!(stages(
        "fn f(r: f32, theta: f32) -> [f32; 2] {
            [r * theta.cos(), r * theta.sin()]
        }"
    ));
}

#[test]
fn the_text_names_every_node_once() {
    let c = compile_str("fn f(x: f32) -> f32 { let y = x * x; y.exp() }").expect("compiles");
    let text = c.primal.to_string();
    for i in 0..c.primal.nodes.len() {
        assert_eq!(
            text.matches(&format!("    %{i} = ")).count(),
            1,
            "node {i} in\n{text}"
        );
    }
    assert!(text.contains("// y"), "{text}");
}
