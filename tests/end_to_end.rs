//! The three workloads the language issue names, end to end on the CPU and the GPU: the
//! per-sample loss of an 8-16-1 tanh network with `#[shared]` weights and loops over its
//! layers, a 16-way soft logic gate with a softmax over `#[shared]` logits, and a mesh edge
//! residual with `[f32; 3]` points. Each is checked against the f64 interpreter (itself
//! checked by finite differences): values, per-element gradients, and the gradient of the
//! batch's sum in the shared arguments.

mod common;

use common::{Rng, device};
use gradfuse::{Device, differentiable};
use gradfuse_shaders_gen::ir::Function;
use gradfuse_shaders_gen::{ad, compile_str, interp};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

// The network and the gate are the GPU bench's workloads: one definition for both.
#[path = "../benches/common/mod.rs"]
mod workloads;
use workloads::{MLP_LOSS as MLP_SRC, SOFT_GATE16 as GATE_SRC, mlp_loss, soft_gate16};

with_source! {
    EDGE_SRC,
    #[differentiable]
    pub fn edge_residual(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
        let mut d2 = 0.0;
        for k in 0..3 {
            let d = q[k] - p[k];
            d2 += d * d;
        }
        let r = d2.sqrt() - rest;
        r * r
    }
}

/// The unoptimized IR of a source and its reverse mode, compiled once per source and
/// thread (the IR holds spans, which stay on their thread).
fn compiled(src: &'static str) -> &'static (Function, Function) {
    thread_local! {
        static CACHE: RefCell<Vec<(&'static str, &'static (Function, Function))>> =
            const { RefCell::new(Vec::new()) };
    }
    CACHE.with(|cache| {
        if let Some((_, c)) = cache.borrow().iter().find(|(s, _)| *s == src) {
            return *c;
        }
        let primal = compile_str(src)
            .expect("the source compiles")
            .lowered
            .primal;
        let reverse = ad::reverse(&primal);
        let c: &'static (Function, Function) = Box::leak(Box::new((primal, reverse)));
        cache.borrow_mut().push((src, c));
        c
    })
}

/// The oracle for one element: value, and every input word's derivative (element words,
/// then shared words). The first few calls per source check it by central differences.
fn oracle(src: &'static str, words: &[f64]) -> (f64, Vec<f64>) {
    static CHECKED: AtomicUsize = AtomicUsize::new(0);
    let (primal, reverse) = compiled(src);
    let all = interp::eval(reverse, words);
    if CHECKED.fetch_add(1, Ordering::Relaxed).is_multiple_of(200) {
        let fd = interp::finite_difference_gradient(primal, words, 1e-6);
        let scale = all[1..].iter().fold(1.0f64, |m, g| m.max(g.abs()));
        for (g, d) in all[1..].iter().zip(&fd) {
            assert!(
                (g - d).abs() <= 1e-5 * scale,
                "oracle {g} vs differences {d}"
            );
        }
    }
    (all[0], all[1..].to_vec())
}

fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<_, f32>(std::slice::from_ref(t))
        .iter()
        .map(|v| *v as f64)
        .collect()
}

/// `got` against `want`, each error relative to the largest magnitude in `want` and one.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * scale,
            "{what}[{k}]: {g} vs {w} (scale {scale})"
        );
    }
}

/// Checks a batch's shared gradient against the f64 sum of the oracle's, relative to the
/// sum of the magnitudes of the terms.
fn assert_sum(what: &str, got: &[f32], terms: &[Vec<f64>]) {
    for (k, g) in got.iter().enumerate() {
        let want: f64 = terms.iter().map(|t| t[k]).sum();
        let magnitude: f64 = terms.iter().map(|t| t[k].abs()).sum::<f64>().max(1e-30);
        assert!(
            (*g as f64 - want).abs() <= 2e-5 * magnitude,
            "{what}[{k}]: {g} vs {want}"
        );
    }
}

fn mlp_case(rng: &mut Rng, n: usize) -> (Vec<mlp_loss::Args>, mlp_loss::Shared) {
    let mut u = |s: f64| rng.uniform(-s, s);
    let shared = mlp_loss::Shared {
        w1: std::array::from_fn(|_| u(0.5)),
        b1: std::array::from_fn(|_| u(0.1)),
        w2: std::array::from_fn(|_| u(0.5)),
        b2: u(0.1),
    };
    let batch = (0..n)
        .map(|_| mlp_loss::Args {
            x: std::array::from_fn(|_| u(1.0)),
            target: u(1.0),
        })
        .collect();
    (batch, shared)
}

fn check_mlp(device: &Device, n: usize) {
    let (batch, shared) = mlp_case(&mut Rng(17), n);
    let (values, _, sg) = mlp_loss::kernel(device)
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let mut terms = Vec::new();
    for (i, a) in batch.iter().enumerate() {
        let mut w = words(a);
        w.extend(words(&shared));
        let (v, g) = oracle(MLP_SRC, &w);
        // The element's 9 words are #[constant]: the gradient is the shared words'.
        let g = g[9..].to_vec();
        assert_close("mlp value", &[values[i] as f64], &[v], 2e-5);
        let (cv, _, csg) = mlp_loss::value_and_grad(a, &shared);
        assert_close("mlp cpu value", &[cv as f64], &[v], 1e-5);
        assert_close("mlp cpu shared gradient", &words(&csg), &g, 1e-5);
        terms.push(g);
    }
    assert_sum(
        "mlp shared gradient",
        bytemuck::cast_slice(std::slice::from_ref(&sg)),
        &terms,
    );
}

#[test]
fn mlp_with_shared_weights_and_loops_over_layers() {
    check_mlp(device(), 300);
    check_mlp(&Device::cpu(), 300);
    // A training step's worth of elements, twice: the same bits.
    let (batch, shared) = mlp_case(&mut Rng(23), 5000);
    let kernel = mlp_loss::kernel(device());
    let (_, _, first) = kernel.value_and_grad(&batch, &shared).expect("launch");
    let (_, _, again) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert_eq!(
        bytemuck::cast::<_, [u32; 161]>(first),
        bytemuck::cast::<_, [u32; 161]>(again)
    );
}

#[test]
fn soft_logic_gate_with_a_softmax_over_shared_logits() {
    let mut rng = Rng(29);
    let shared = soft_gate16::Shared {
        logits: std::array::from_fn(|_| rng.uniform(-2.0, 2.0)),
    };
    let batch: Vec<soft_gate16::Args> = (0..500)
        .map(|_| soft_gate16::Args {
            a: rng.uniform(0.0, 1.0),
            b: rng.uniform(0.0, 1.0),
            target: rng.uniform(0.0, 1.0),
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (values, grads, sg) = soft_gate16::kernel(d)
            .value_and_grad(&batch, &shared)
            .expect("launch");
        let mut terms = Vec::new();
        for (i, a) in batch.iter().enumerate() {
            let mut w = words(a);
            w.extend(words(&shared));
            let (v, g) = oracle(GATE_SRC, &w);
            assert_close("gate value", &[values[i] as f64], &[v], 2e-5);
            // Words: a, b, target (constant), then the 16 logits.
            assert_close(
                "gate gradient",
                &[grads[i].a as f64, grads[i].b as f64],
                &g[..2],
                2e-5,
            );
            let (_, cg, csg) = soft_gate16::value_and_grad(a, &shared);
            assert_close(
                "gate cpu gradient",
                &[cg.a as f64, cg.b as f64],
                &g[..2],
                1e-5,
            );
            assert_close("gate cpu logits gradient", &words(&csg), &g[3..], 1e-5);
            terms.push(g[3..].to_vec());
        }
        assert_sum("gate logits gradient", &sg.logits, &terms);
    }
}

#[test]
fn mesh_edge_residual_with_point_arrays() {
    let mut rng = Rng(31);
    let batch: Vec<edge_residual::Args> = (0..2000)
        .map(|_| edge_residual::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            q: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            rest: rng.uniform(0.5, 1.5),
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (values, grads) = edge_residual::kernel(d)
            .value_and_grad(&batch)
            .expect("launch");
        for (i, a) in batch.iter().enumerate() {
            let (v, g) = oracle(EDGE_SRC, &words(a));
            assert_close("edge value", &[values[i] as f64], &[v], 2e-5);
            // Words: p, q, rest (constant).
            assert_close("edge gradient", &words(&grads[i]), &g[..6], 2e-5);
            let (cv, cg) = edge_residual::value_and_grad(a);
            assert_close("edge cpu value", &[cv as f64], &[v], 1e-5);
            assert_close("edge cpu gradient", &words(&cg), &g[..6], 1e-5);
        }
    }
}

#[test]
fn end_to_end_kernels_are_valid_and_snapshotted() {
    for (name, src) in [
        ("mlp_loss_adjoint", mlp_loss::WGSL_ADJOINT),
        ("soft_gate16_forward", soft_gate16::WGSL_FORWARD),
        ("edge_residual_adjoint", edge_residual::WGSL_ADJOINT),
        (
            "edge_residual_adjoint_gathered",
            edge_residual::WGSL_ADJOINT_GATHERED,
        ),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}
