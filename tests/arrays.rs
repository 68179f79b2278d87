//! Arrays as values: loops that stay loops while they read and write arrays at computed
//! indices, on the CPU versions and on the GPU, checked against central differences of the
//! f64 interpreter (an oracle that shares no code with the AD transforms).

mod common;

use common::{Rng, central_differences, device, rel_error};
use gradfuse::{Device, differentiable};
use gradfuse_shaders_gen::{compile_str, interp};

with_source! {
    NET_SRC,
    // A 4-24-24-1 tanh network: the second layer's nest is over the unrolling budget, so it
    // stays a loop carrying `h2` and writing it at the loop index, reading `w2` (shared)
    // at computed indices.
    #[differentiable]
    pub fn net(
        #[constant] x: [f32; 4],
        #[constant] target: f32,
        #[shared] w1: [f32; 120],
        #[shared] w2: [f32; 600],
        #[shared] w3: [f32; 25],
    ) -> f32 {
        let mut h1 = [0.0; 24];
        for j in 0..24 {
            let mut s = w1[96 + j];
            for i in 0..4 {
                s += w1[j * 4 + i] * x[i];
            }
            h1[j] = s.tanh();
        }
        let mut h2 = [0.0; 24];
        for j in 0..24 {
            let mut s = w2[576 + j];
            for i in 0..24 {
                s += w2[j * 24 + i] * h1[i];
            }
            h2[j] = s.tanh();
        }
        let mut y = w3[24];
        for i in 0..24 {
            y += w3[i] * h2[i];
        }
        (y - target) * (y - target)
    }
}

with_source! {
    RELAX_SRC,
    // Per-element arrays carried through kept loops, read at `k - 1`, `k`, `k + 1` and
    // written at `k` (Gauss-Seidel sweeps): the reverse pass tapes the whole array per
    // sweep and restores it.
    #[differentiable]
    pub fn relax(p: [f32; 80], #[constant] c: f32) -> f32 {
        let mut q = p;
        for _ in 0..3 {
            for k in 1..79 {
                q[k] = 0.5 * q[k] + 0.25 * (q[k - 1] + q[k + 1]) + c * q[k].sin();
            }
            for k in 0..80 {
                q[k] *= 0.9;
            }
        }
        let mut s = 0.0;
        for k in 0..80 {
            s += q[k] * q[k] * p[79 - k];
        }
        s
    }
}

fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<_, f32>(std::slice::from_ref(t))
        .iter()
        .map(|v| *v as f64)
        .collect()
}

fn net_inputs(rng: &mut Rng, n: usize) -> (Vec<net::Args>, net::Shared) {
    let mut u = |s: f64| rng.uniform(-s, s);
    let shared = net::Shared {
        w1: std::array::from_fn(|_| u(0.6)),
        w2: std::array::from_fn(|_| u(0.3)),
        w3: std::array::from_fn(|_| u(0.4)),
    };
    let batch = (0..n)
        .map(|_| net::Args {
            x: std::array::from_fn(|_| u(1.0)),
            target: u(0.5),
        })
        .collect();
    (batch, shared)
}

#[test]
fn the_network_keeps_its_loops_and_reads_shared_words_in_place() {
    // The second layer is a loop in the tangent kernel, indexing the shared
    // buffer at run time instead of building its 600 words per thread. (The value kernel
    // unrolls it, reading each weight at a constant offset: `tests/unrolled_layers.rs`.)
    assert!(net::WGSL_TANGENT.contains("for (var j"));
    assert!(net::WGSL_TANGENT.contains("shared_args[(120u + u32("));
    // `w2[j * 24 + i]`, `i` unrolled: element `j * 6 + 30 + i / 4` of the uniform buffer at
    // lane `i % 4`, a constant; no index is clamped (all are proven in range).
    assert!(net::WGSL_TANGENT.contains(" / 4u + 30u].x"));
    assert!(net::WGSL_TANGENT.contains(" / 4u + 35u].w"));
    for wgsl in [net::WGSL_FORWARD, net::WGSL_TANGENT, net::WGSL_ADJOINT] {
        assert!(!wgsl.contains("clamp("));
    }
    // The adjoint is the workgroup's matrix products, its 24 rows padded to 32
    // (`tests/networks_cooperative.rs`); kept loops in an adjoint: `tests/outer_sums.rs`.
    assert!(net::WGSL_ADJOINT.contains("register-blocked"));
    assert!(
        !net::WGSL_TANGENT.contains("let w2_"),
        "w2 is never loaded word by word"
    );
    assert!(!net::WGSL_FORWARD.contains("for (var j"));
}

#[test]
fn network_gradients_match_central_differences_on_cpu_and_gpu() {
    let mut rng = Rng(11);
    let (batch, shared) = net_inputs(&mut rng, 700);
    let shared_words = words(&shared);
    // The batch launch's shared gradient is the sum of the CPU version's per element, and
    // those match central differences of the f64 interpreter.
    for dev in [device(), &Device::cpu()] {
        let k = net::kernel(dev);
        let (values, _, sg) = k.value_and_grad(&batch, &shared).expect("launch");
        let got: Vec<f64> = words(&sg);
        let mut cpu_sum = vec![0.0f64; got.len()];
        for (i, a) in batch.iter().enumerate() {
            let (v, _, g) = net::value_and_grad(a, &shared);
            assert!(
                (values[i] - v).abs() <= 1e-5 * v.abs().max(1e-3),
                "value {i}"
            );
            for (s, w) in cpu_sum.iter_mut().zip(words(&g)) {
                *s += w;
            }
        }
        assert!(
            rel_error(&got, &cpu_sum, 1e-2) < 1e-3,
            "batch sum vs per-element"
        );
    }
    // Every fifth shared word of two elements (each difference runs the interpreter
    // twice), first and last words of each block included.
    let which: Vec<usize> = (0..shared_words.len())
        .filter(|k| k % 5 == 0 || [119, 120, 719, 720, 744].contains(k))
        .collect();
    for a in batch.iter().take(2) {
        let mut all = words(a);
        all.extend(&shared_words);
        let at: Vec<usize> = which.iter().map(|k| 5 + k).collect();
        let (value, fd) = central_differences(NET_SRC, &all, &at);
        let (v, _, g) = net::value_and_grad(a, &shared);
        assert!((v as f64 - value).abs() <= 1e-5 * value.abs().max(1e-3));
        let g = words(&g);
        let g: Vec<f64> = which.iter().map(|k| g[*k]).collect();
        let e = rel_error(&g, &fd, 1e-2);
        assert!(e < 2e-3, "shared gradient off by {e:e}");
    }
}

#[test]
fn carried_arrays_with_computed_indices_match_central_differences() {
    assert!(relax::WGSL_ADJOINT.contains("var tape"));
    let mut rng = Rng(5);
    let batch: Vec<relax::Args> = (0..24)
        .map(|_| relax::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            c: rng.uniform(-0.3, 0.3),
        })
        .collect();
    for dev in [device(), &Device::cpu()] {
        let (values, grads) = relax::kernel(dev).value_and_grad(&batch).expect("launch");
        for (i, a) in batch.iter().enumerate().take(6) {
            let all = words(a);
            let which: Vec<usize> = (0..80).collect();
            let (value, fd) = central_differences(RELAX_SRC, &all, &which);
            assert!(
                (values[i] as f64 - value).abs() <= 1e-4 * value.abs().max(1.0),
                "value {i}: {} vs {value}",
                values[i]
            );
            let g: Vec<f64> = grads[i].p.iter().map(|v| *v as f64).collect();
            let e = rel_error(&g, &fd, 1e-2);
            assert!(e < 1e-3, "element {i}: gradient off by {e:e}");
        }
    }
}

/// A bug fixed: a `macro_rules!` literal (`[f32; $n]`, `0..$n`) arrives as an invisible
/// group around the literal, and array lengths written so were rejected.
macro_rules! dot {
    ($name:ident, $n:literal) => {
        #[differentiable]
        pub fn $name(a: [f32; $n], #[constant] b: [f32; $n]) -> f32 {
            let mut s = 0.0;
            for k in 0..$n {
                s += a[k] * b[k] * a[$n - 1 - k];
            }
            s
        }
    };
}

dot!(dot40, 40);

#[test]
fn array_lengths_from_macro_literals() {
    let a: [f32; 40] = std::array::from_fn(|k| 0.1 * k as f32 - 1.0);
    let b: [f32; 40] = std::array::from_fn(|k| 1.0 - 0.05 * k as f32);
    let (_, g) = dot40::value_and_grad(&dot40::Args { a, b });
    // d/da_k of sum_j a_j b_j a_{39-j}: b_k a_{39-k} + a_{39-k} b_{39-k}.
    for k in 0..40 {
        let want = b[k] * a[39 - k] + a[39 - k] * b[39 - k];
        assert!((g.a[k] - want).abs() < 1e-5, "{k}: {} vs {want}", g.a[k]);
    }
}

with_source! {
    PATCHED_SRC,
    // A shared array whose gradient is a loop's accumulator array with one word patched
    // (`w[0]`'s gradient is its own term): found by the grammar fuzzer, whose WGSL named
    // the patched word without defining it (the adjoint kernel did not compile).
    #[differentiable]
    pub fn patched(x: f32, #[shared] w: [f32; 2]) -> f32 {
        let mut s = x;
        for i in 0..3 {
            s += w[1] * (i as f32) * x;
        }
        s * w[0]
    }
}

/// The shared gradient of `patched` over a batch, on the GPU and the CPU device, against
/// the sum of central differences of the f64 interpreter.
#[test]
fn a_shared_array_gradient_with_a_patched_word() {
    let c = compile_str(PATCHED_SRC).expect("compiles");
    let args: Vec<patched::Args> = (0..700)
        .map(|k| patched::Args {
            x: (k % 13) as f32 * 0.1 - 0.5,
        })
        .collect();
    let shared = patched::Shared { w: [0.7, -0.3] };
    let mut want = [0.0f64; 2];
    for a in &args {
        let words = [a.x as f64, shared.w[0] as f64, shared.w[1] as f64];
        let fd = interp::finite_difference_gradient(&c.lowered.primal, &words, 1e-6);
        want[0] += fd[1];
        want[1] += fd[2];
    }
    for d in [device(), &Device::cpu()] {
        let (_, _, g) = patched::kernel(d)
            .value_and_grad(&args, &shared)
            .expect("launch");
        let got = [g.w[0] as f64, g.w[1] as f64];
        assert!(
            rel_error(&got, &want, 1.0) < 1e-4,
            "{got:?} vs {want:?} on {}",
            d.describe()
        );
    }
}

with_source! {
    PAIRS_SRC,
    // A per-element array mapped word by word through `tanh`, then combined pairwise: in
    // the order written, all 64 mapped words are alive before the first is used.
    #[differentiable]
    pub fn pairs(a: [f32; 64], s: f32) -> f32 {
        let mut b = [0.0; 64];
        for i in 0..64 {
            b[i] = (a[i] * s).tanh();
        }
        let mut acc = 0.0;
        for i in 0..63 {
            acc += b[i] * a[i + 1] - b[i + 1] * a[i];
        }
        acc * acc
    }
}

#[test]
fn a_value_kernel_ordered_by_its_output_matches_the_interpreter() {
    // Ordered by its output (`opt::for_value_kernel`), the sum starts before the last
    // `tanh`; the adjoint keeps the order as written.
    let entry = |wgsl: &'static str| wgsl.split("@compute").nth(1).expect("an entry point");
    let forward = entry(pairs::WGSL_FORWARD);
    let first_sum = forward.find("let acc").expect("the sum");
    assert!(
        forward
            .rfind("gf_tanh(")
            .is_some_and(|last| first_sum < last)
    );
    let mut rng = Rng(11);
    let batch: Vec<pairs::Args> = (0..40)
        .map(|_| pairs::Args {
            a: std::array::from_fn(|_| rng.uniform(-1.5, 1.5)),
            s: rng.uniform(0.2, 2.0),
        })
        .collect();
    for dev in [device(), &Device::cpu()] {
        let values = pairs::kernel(dev).value(&batch).expect("launch");
        for (i, a) in batch.iter().enumerate() {
            let (want, _) = central_differences(PAIRS_SRC, &words(a), &[]);
            let got = values[i] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "element {i} on {}: {got} vs {want}",
                dev.describe()
            );
        }
    }
}
