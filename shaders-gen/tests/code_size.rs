//! Generated code grows with the source, not with trip counts times array lengths: the
//! same network source at widths 8, 32 and 128 (153 to 17,793 shared words) gives WGSL and
//! Rust of about the same size. Loops over arrays stay loops; what unrolling adds is
//! bounded by `opt::UNROLL_BUDGET`, and in the value kernel, for layers over shared
//! weights, by `opt::VALUE_UNROLL_BUDGET` (width 64 unrolled, width 128 a loop). A deeper
//! network adds its layers' source, not a layer's unrolled weights.

use gradfuse_shaders_gen::samples::{deep_network, network};
use gradfuse_shaders_gen::{compile, emit_rust};

/// Bytes of the forward WGSL, the reverse WGSL and the Rust expansion of 8-H-H-1.
fn sizes(h: usize) -> [usize; 3] {
    let item: syn::ItemFn = syn::parse_str(&network(8, h, 1)).expect("the source parses");
    let c = compile(&item).expect("the network compiles");
    let rust = emit_rust::emit(&item, &c).to_string();
    [c.wgsl_forward.len(), c.wgsl_reverse.len(), rust.len()]
}

#[test]
fn the_value_kernel_unrolls_layers_up_to_its_budget() {
    let forward = |h: usize| {
        let item: syn::ItemFn = syn::parse_str(&network(8, h, 1)).expect("the source parses");
        compile(&item).expect("the network compiles").wgsl_forward
    };
    assert!(!forward(64).contains("for (var"), "width 64: a layer kept");
    assert!(forward(128).contains("for (var"), "width 128: unrolled");
}

#[test]
fn generated_code_does_not_grow_with_network_width() {
    let [s8, s32, s64, s128] = [sizes(8), sizes(32), sizes(64), sizes(128)];
    // The Rust carries the kernels' WGSL as string literals, hence its larger bound.
    let bounds = [
        ("forward WGSL", 1_000_000),
        ("reverse WGSL", 1_000_000),
        ("Rust", 2_000_000),
    ];
    for (k, (what, bound)) in bounds.into_iter().enumerate() {
        // From 32 to 128 the arrays grow 16-fold, the work 16-fold; the code at most
        // 4-fold (what unrolling an inner loop within the budget adds).
        assert!(
            s128[k] < 4 * s32[k],
            "{what}: {} bytes at width 32, {} at 128",
            s32[k],
            s128[k]
        );
        // And no width is far from the smallest: unrolling is bounded.
        for (h, s) in [(8, s8[k]), (32, s32[k]), (64, s64[k]), (128, s128[k])] {
            assert!(s < bound, "{what} at width {h}: {s} bytes");
        }
    }
}

/// 8-H-H-1 with a differentiable target: a per-element gradient keeps its adjoint one
/// element a thread at every width (the cooperative kernel of widths 32 and 64 computes
/// only shared gradients).
fn per_element_network(i: usize, h: usize) -> String {
    network(i, h, 1).replace("#[constant] t:", "t:")
}

/// The adjoint's shared-gradient sums, read from its WGSL: per-thread sums declared, adds
/// staged at a computed index (an accumulator array streamed through a kept loop), words
/// staged one by one; and whether a loop's rows are summed as outer products.
fn adjoint_sums(i: usize, h: usize) -> (usize, usize, usize, bool) {
    let src = per_element_network(i, h);
    let item: syn::ItemFn = syn::parse_str(&src).expect("the source parses");
    let wgsl = compile(&item).expect("the network compiles").wgsl_reverse;
    let staged = |computed: bool| {
        wgsl.lines()
            .filter(|l| l.contains("stage_words[stage_count] = "))
            .filter(|l| l.contains("+ u32(") == computed)
            .count()
    };
    (
        wgsl.matches("var sum_").count(),
        staged(true),
        staged(false),
        wgsl.contains("var<workgroup> outer_stage"),
    )
}

#[test]
fn large_shared_gradients_are_streamed_and_small_ones_summed_per_thread() {
    // 2-4-4-1: 37 shared words, in registers per thread; nothing staged.
    let (sums, computed, words, outer) = adjoint_sums(2, 4);
    assert!(
        sums > 0 && computed == 0 && words == 0 && !outer,
        "{sums} {computed} {words} {outer}"
    );
    // 8-32-32-1 and 8-128-128-1 (1,377 and 17,793 words): no per-thread sum at all; both
    // hidden layers' gradients, accumulators carried through kept loops, are summed as
    // outer products (no add staged at a computed index); only the output layer's words
    // (H + 1, its loop unrolled) are staged one by one.
    for h in [32, 128] {
        let (sums, computed, words, outer) = adjoint_sums(8, h);
        assert_eq!(sums, 0, "width {h}: per-thread sums");
        assert!(outer, "width {h}: no outer products");
        assert_eq!(computed, 0, "width {h}: adds staged at a computed index");
        assert!(words <= h + 1, "width {h}: {words} words staged one by one");
    }
}

#[test]
fn the_adjoint_kernel_ir_emits_the_adjoint_kernel() {
    // The benches emit the adjoint again (other elements per thread) from this IR: with its
    // elements it is the generated kernel, kept loops and all (8-32-32-1 keeps its first
    // layer in the adjoint only).
    use gradfuse_shaders_gen::abi::KernelKind;
    use gradfuse_shaders_gen::emit_wgsl::emit_kernel_with_elements;
    for h in [4, 32] {
        let src = per_element_network(8, h);
        let item: syn::ItemFn = syn::parse_str(&src).expect("the source parses");
        let c = compile(&item).expect("the network compiles");
        let f = gradfuse_shaders_gen::adjoint_kernel_ir(&c);
        let layout = &c.lowered.layout;
        let again =
            emit_kernel_with_elements("", layout, KernelKind::Adjoint, &f, c.adjoint_elements);
        let body = |s: &str| s.split_once('\n').map(|(_, b)| b.to_string());
        assert_eq!(body(&again), body(&c.wgsl_reverse), "width {h}");
    }
}

/// Bytes of the forward and the reverse WGSL of 8-64-..-64-1 with `depth` hidden layers
/// (the target per element and differentiable: the adjoint one element a thread), and
/// whether every hidden layer's gradient is summed as outer products.
fn deep_sizes(depth: usize) -> (usize, usize, usize) {
    let src = deep_network(8, &vec![64; depth], 1).replace("#[constant] t:", "t:");
    let item: syn::ItemFn = syn::parse_str(&src).expect("the source parses");
    let c = compile(&item).expect("the network compiles");
    let outer = (1..=depth)
        .filter(|l| {
            let label = format!("rows of d/d w{l}, summed as outer products");
            c.wgsl_reverse.contains(&label)
        })
        .count();
    (c.wgsl_forward.len(), c.wgsl_reverse.len(), outer)
}

#[test]
fn generated_code_grows_with_network_depth_by_the_layers_source() {
    let [(f2, r2, o2), (f3, r3, o3), (f4, r4, o4)] = [deep_sizes(2), deep_sizes(3), deep_sizes(4)];
    // Hidden layers of one size share their gradient's zeros: each is still summed as
    // outer products, none streamed word by word (1.6 MB of reverse WGSL at depth 3, and
    // 181 s to build on lavapipe, before).
    assert_eq!(
        (o2, o3, o4),
        (2, 3, 4),
        "hidden layers summed as outer products"
    );
    // A layer's reverse code is its kept loop: tens of KB, not its 4,160 words'.
    for (depth, r) in [(3, r3), (4, r4)] {
        assert!(
            r < r2 + (depth - 2) * r2,
            "reverse at depth {depth}: {r} bytes, {r2} at 2"
        );
    }
    // The value kernel unrolls layers up to one budget for the kernel, not one a layer.
    for (depth, f) in [(3, f3), (4, f4)] {
        assert!(
            f < f2 * 5 / 4,
            "forward at depth {depth}: {f} bytes, {f2} at 2"
        );
    }
}
