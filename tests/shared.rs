//! `#[shared]` arguments: one value for the whole batch, and from a batch launch the
//! gradient of the sum of the values in them, reduced on the GPU in a fixed order. Checked
//! against the f64 interpreter, finite differences, duals and the CPU's own sums; the
//! reduction is checked for bit-identical results over runs and over chunked batches.

mod common;

use common::{Rng, device, rel_error, words_of};
use gradfuse::{Device, Dual, differentiable};
use gradfuse_shaders_gen::{ad, compile_str, interp};

with_source! {
    AFFINE_SRC,
    #[differentiable]
    pub fn affine_loss(x: [f32; 2], #[shared] w: [f32; 3]) -> f32 {
        let y = w[0] * x[0] + w[1] * x[1] + w[2];
        (y - 1.0) * (y - 1.0)
    }
}

with_source! {
    NET_SRC,
    // A 2-2-1 tanh network: inputs and target are data, the weights are shared; there
    // is no per-element gradient at all.
    #[differentiable]
    pub fn tiny_net(#[constant] x: [f32; 2], #[constant] target: f32, #[shared] w: [f32; 9]) -> f32 {
        let h0 = (w[0] * x[0] + w[1] * x[1] + w[2]).tanh();
        let h1 = (w[3] * x[0] + w[4] * x[1] + w[5]).tanh();
        let y = w[6] * h0 + w[7] * h1 + w[8];
        (y - target) * (y - target)
    }
}

with_source! {
    MIXED_SRC,
    // Three gradient words (stored directly, `tests/staged_gradients.rs`) next to the
    // reduction, a branch on a shared value, and a shared argument declared between
    // per-element ones.
    #[differentiable]
    pub fn mixed(p: [f32; 3], #[shared] s: f32, #[constant] c: f32) -> f32 {
        let scale = if s > 0.0 { s.sqrt() } else { -s };
        scale * (p[0] * p[1] + c * p[2].sin())
    }
}

with_source! {
    DECAY_SRC,
    // A nest over the unrolling budget stays a loop: shared words read at a computed
    // index, from the uniform buffer (the forward kernel) and in the reverse loop.
    #[differentiable]
    pub fn decay(x: f32, #[shared] w: [f32; 16]) -> f32 {
        let mut s = x;
        for r in 0..16 {
            for _ in 0..150 {
                s = s * 0.99 + w[r] * x;
            }
        }
        s
    }
}

with_source! {
    UNROLLED_SRC,
    // A nest just under the unrolling budget (`opt::UNROLL_BUDGET`): 1,936 operations of
    // straight-line code in every version. A bug fixed: at the old budget (4,096) a nest of
    // this shape, 16 x 100, unrolled too, and rustc crashed compiling its CPU versions.
    #[differentiable]
    pub fn unrolled(x: f32, #[shared] w: [f32; 16]) -> f32 {
        let mut s = x;
        for r in 0..16 {
            for _ in 0..60 {
                s = s * 0.99 + w[r] * x;
            }
        }
        s
    }
}

with_source! {
    STREAMED_SRC,
    // A table gradient longer than an adjoint sums per thread (`abi::MAX_ARRAY_SUM`),
    // streamed into the workgroup's sums: it is read in a nest over the unrolling budget,
    // each word 8 times (its gradient an accumulator array added into at computed
    // indices); `w`, read in straight-line code, is summed per thread in registers.
    #[differentiable]
    pub fn streamed(#[constant] x: [f32; 2], #[shared] table: [f32; 72], #[shared] w: [f32; 10]) -> f32 {
        let mut s = w[9] * x[0];
        for r in 0..9 {
            for _ in 0..8 {
                for k in 0..8 {
                    s = 0.9 * s + 0.1 * table[r * 8 + k] * (x[1] + s).sin();
                }
            }
        }
        for j in 0..9 {
            s += w[j] * x[0] * x[1];
        }
        s * s
    }
}

/// Streamed, and too many shared words for each thread to keep the sums of the words it
/// owns (`abi::MAX_OWNED_SUMS` per thread): the staged slots are added into the
/// workgroup's row of partials in memory. 300 words read, every 233rd.
#[differentiable]
pub fn sparse_table(#[constant] x: f32, #[shared] table: [f32; 70000]) -> f32 {
    let mut s = 0.0;
    for k in 0..300 {
        s += table[k * 233] * (x + s).sin();
    }
    s
}

/// More shared words than a uniform buffer holds (`abi::MAX_UNIFORM_SHARED_WORDS`): read
/// from a storage buffer instead, at a computed index too.
#[differentiable]
pub fn lookup(#[constant] x: f32, #[shared] table: [f32; 16400]) -> f32 {
    let mut s = table[0];
    for k in 0..2 {
        s += x * table[16398 + k];
    }
    s * x
}

with_source! {
    WIDE_SRC,
    // 32 words per element: a batch of a million is several chunks on every device.
    #[differentiable]
    pub fn wide(#[constant] x: [f32; 32], #[shared] w: [f32; 2]) -> f32 {
        let mut s = 0.0;
        s += x[0] * w[0] + x[31] * w[1];
        s += x[7] * x[8] * w[0] * w[1];
        s * s
    }
}

/// Value, element gradient words and shared gradient words of the oracle, with finite
/// differences of the same words; `words` are the element's words then the shared words.
struct Oracle {
    value: f64,
    grad: Vec<f64>,
    fd: Vec<f64>,
}

fn oracle(src: &str, words: &[f64]) -> Oracle {
    let c = compile_str(src).expect("the source compiles");
    let primal = &c.lowered.primal;
    let layout = &c.lowered.layout;
    let all = interp::eval(&ad::reverse(primal), words);
    let fd = interp::finite_difference_gradient(primal, words, 1e-6);
    let keep: Vec<u32> = layout
        .grad_words()
        .into_iter()
        .chain(layout.words..layout.words + layout.shared_words)
        .collect();
    Oracle {
        value: all[0],
        grad: keep.iter().map(|w| all[1 + *w as usize]).collect(),
        fd: keep.iter().map(|w| fd[*w as usize]).collect(),
    }
}

fn f32s<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<_, f32>(std::slice::from_ref(t))
        .iter()
        .map(|v| *v as f64)
        .collect()
}

/// The largest error relative to the larger of the largest gradient word and one.
fn scaled_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

/// Error of a batch sum, relative to the sum of the magnitudes of its terms (the scale of
/// its rounding error in any order).
fn sum_error(got: &[f32], want: &[f64], magnitude: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .zip(magnitude)
        .map(|((g, w), m)| (*g as f64 - w).abs() / m.max(1e-30))
        .fold(0.0, f64::max)
}

#[test]
fn cpu_versions_match_the_oracle() {
    let mut rng = Rng(3);
    for _ in 0..50 {
        let mut u = || rng.uniform(-1.5, 1.5);
        let a = affine_loss::Args { x: [u(), u()] };
        let s = affine_loss::Shared { w: [u(), u(), u()] };
        let o = oracle(AFFINE_SRC, &words_of(&a, &s));
        assert!(rel_error(&o.fd, &o.grad, 1e-3) < 1e-5);
        let (v, g, sg) = affine_loss::value_and_grad(&a, &s);
        let got: Vec<f64> = f32s(&g).into_iter().chain(f32s(&sg)).collect();
        assert!((v as f64 - o.value).abs() <= 1e-5 * o.value.abs().max(1.0));
        // `y - 1.0` cancels where y is near 1: every gradient word carries that factor, so
        // errors are judged against gradients of the inputs' size (one), not their own.
        assert!(
            scaled_error(&got, &o.grad) < 1e-5,
            "{got:?} vs {:?}",
            o.grad
        );
        // jvp along every gradient word at once.
        let (jv, jd) = affine_loss::jvp(
            &a,
            &s,
            &affine_loss::Grad { x: [1.0, -0.5] },
            &affine_loss::SharedGrad {
                w: [0.25, 2.0, -1.0],
            },
        );
        let dir: f64 = [1.0, -0.5, 0.25, 2.0, -1.0]
            .iter()
            .zip(&o.grad)
            .map(|(t, g)| t * g)
            .sum();
        assert_eq!(jv, v);
        assert!((jd as f64 - dir).abs() <= 1e-5 * o.grad.iter().map(|g| g.abs()).sum::<f64>());
        // Duals through eval, shared arguments in the user's order.
        let var = |x: f32, k: usize| Dual::<f64, 5>::variable(x as f64, k);
        let d = affine_loss::eval(
            [var(a.x[0], 0), var(a.x[1], 1)],
            [var(s.w[0], 2), var(s.w[1], 3), var(s.w[2], 4)],
        );
        assert!(rel_error(&d.tangent(), &o.grad, 1.0) < 1e-10);

        let m = mixed::Args {
            p: [u(), u(), u()],
            c: u(),
        };
        let ms = mixed::Shared { s: u() };
        let o = oracle(MIXED_SRC, &words_of(&m, &ms));
        assert!(rel_error(&o.fd, &o.grad, 1e-3) < 1e-5);
        let (_, g, sg) = mixed::value_and_grad(&m, &ms);
        let got: Vec<f64> = f32s(&g).into_iter().chain(f32s(&sg)).collect();
        assert!(scaled_error(&got, &o.grad) < 1e-5);
    }
}

/// Runs `value_and_grad` of `tiny_net` on `device` and checks it against the oracle:
/// values element by element, the shared gradient against the f64 sum of the oracle's.
fn check_net(device: &Device, n: usize) -> tiny_net::SharedGrad {
    let mut rng = Rng(n as u64);
    let shared = tiny_net::Shared {
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    let batch: Vec<tiny_net::Args> = (0..n)
        .map(|_| tiny_net::Args {
            x: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
            target: rng.uniform(-0.5, 0.5),
        })
        .collect();
    let (values, grads, sg) = tiny_net::kernel(device)
        .value_and_grad(&batch, &shared)
        .expect("launch");
    assert_eq!((values.len(), grads.len()), (n, n));
    let mut want = [0.0f64; 9];
    let mut magnitude = [0.0f64; 9];
    let c = compile_str(NET_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    for (i, a) in batch.iter().enumerate() {
        let all = interp::eval(&reverse, &words_of(a, &shared));
        assert!((values[i] as f64 - all[0]).abs() <= 2e-5 * all[0].abs().max(1.0));
        // Words: x (2), target, then the 9 shared ones.
        for k in 0..9 {
            want[k] += all[1 + 3 + k];
            magnitude[k] += all[1 + 3 + k].abs();
        }
    }
    let got = f32s(&sg).iter().map(|v| *v as f32).collect::<Vec<_>>();
    let e = sum_error(&got, &want, &magnitude);
    assert!(
        e < 1e-5,
        "{n}: shared gradient off by {e:e}: {got:?} vs {want:?}"
    );
    sg
}

#[test]
fn shared_gradients_are_the_batch_sums() {
    let d = device();
    for n in [1, 255, 256, 257, 10_000, 100_003] {
        check_net(d, n);
    }
    // The CPU fallback sums the same gradients (in another order).
    check_net(&Device::cpu(), 10_000);
}

#[test]
fn shared_reduction_is_bit_identical_across_runs() {
    let d = device();
    let first = check_net(d, 100_003);
    for _ in 0..3 {
        let again = check_net(d, 100_003);
        assert_eq!(
            bytemuck::cast::<_, [u32; 9]>(first),
            bytemuck::cast::<_, [u32; 9]>(again)
        );
    }
    let cpu = Device::cpu();
    assert_eq!(
        bytemuck::cast::<_, [u32; 9]>(check_net(&cpu, 5000)),
        bytemuck::cast::<_, [u32; 9]>(check_net(&cpu, 5000))
    );
}

#[test]
fn empty_batch_has_zero_shared_gradient() {
    let (v, g, sg) = tiny_net::kernel(device())
        .value_and_grad(&[], &tiny_net::Shared { w: [1.0; 9] })
        .expect("launch");
    assert!(v.is_empty() && g.is_empty());
    assert_eq!(sg.w, [0.0; 9]);
}

#[test]
fn gradients_and_reduction_together() {
    check_mixed(3000);
    // Past 512 workgroups' worth each thread takes several elements: here 1,028 runs of
    // 256, 3 per workgroup; the last workgroup's second run ends part way, its third is
    // wholly past the end. Gradient stores inside the element loop.
    check_mixed(2 * 512 * 256 + 1001);
}

fn check_mixed(n: usize) {
    let mut rng = Rng(5);
    let shared = mixed::Shared { s: 0.8 };
    let batch: Vec<mixed::Args> = (0..n)
        .map(|_| mixed::Args {
            p: [
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
            ],
            c: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let (values, grads, sg) = mixed::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let (mut want, mut magnitude) = (0.0f64, 0.0f64);
    let c = compile_str(MIXED_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    for (i, a) in batch.iter().enumerate() {
        // Words: p (3), c, then s; gradients after the value in the same order.
        let all = interp::eval(&reverse, &words_of(a, &shared));
        assert!((values[i] as f64 - all[0]).abs() <= 2e-5 * all[0].abs().max(1.0));
        let got = f32s(&grads[i]);
        assert!(rel_error(&got, &all[1..4], 1.0) < 2e-5, "{i}: {got:?}");
        want += all[5];
        magnitude += all[5].abs();
    }
    assert!(sum_error(&[sg.s], &[want], &[magnitude]) < 1e-5);
    // Forward kernel with shared arguments.
    let v = mixed::kernel(device())
        .value(&batch, &shared)
        .expect("launch");
    assert_eq!(v, values);
}

#[test]
fn chunked_batches_sum_their_chunks_in_order() {
    let d = device();
    let n = 1_100_000;
    assert!(n > d.chunk_elements(&wide::ADJOINT_KERNEL) || !d.is_gpu());
    let shared = wide::Shared { w: [0.5, -0.25] };
    let batch: Vec<wide::Args> = (0..n)
        .map(|i| wide::Args {
            x: std::array::from_fn(|k| ((i * 7 + k * 13) % 17) as f32 / 17.0 - 0.5),
        })
        .collect();
    let (_, _, sg) = wide::kernel(d)
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let (_, _, again) = wide::kernel(d)
        .value_and_grad(&batch, &shared)
        .expect("launch");
    assert_eq!(sg.w.map(f32::to_bits), again.w.map(f32::to_bits));
    let (mut want, mut magnitude) = ([0.0f64; 2], [0.0f64; 2]);
    for a in &batch {
        let (_, _, g) = wide::value_and_grad(a, &shared);
        for k in 0..2 {
            want[k] += g.w[k] as f64;
            magnitude[k] += (g.w[k] as f64).abs();
        }
    }
    let e = sum_error(&sg.w, &want, &magnitude);
    assert!(
        e < 1e-5,
        "shared gradient off by {e:e}: {:?} vs {want:?}",
        sg.w
    );
    let _ = WIDE_SRC;
}

#[test]
fn shared_kernels_are_valid_and_snapshotted() {
    for (name, src) in [
        ("affine_loss_forward", affine_loss::WGSL_FORWARD),
        ("affine_loss_adjoint", affine_loss::WGSL_ADJOINT),
        ("affine_loss_reduce", affine_loss::WGSL_REDUCE),
        ("tiny_net_adjoint", tiny_net::WGSL_ADJOINT),
        ("mixed_adjoint", mixed::WGSL_ADJOINT),
        ("mixed_adjoint_gathered", mixed::WGSL_ADJOINT_GATHERED),
        // 3 of 16,400 shared words have a gradient: 3 sums, the rest stored as zeros.
        ("lookup_adjoint", lookup::WGSL_ADJOINT),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}

#[test]
fn into_launchers_fill_the_callers_slices() {
    let mut rng = Rng(9);
    let shared = mixed::Shared { s: 0.8 };
    let batch: Vec<mixed::Args> = (0..1000)
        .map(|_| mixed::Args {
            p: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), 0.5],
            c: rng.uniform(-1.0, 1.0),
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let k = mixed::kernel(d);
        let (values, grads, sg) = k.value_and_grad(&batch, &shared).expect("launch");
        // Stale contents (a reused buffer) are overwritten.
        let mut v = vec![f32::NAN; batch.len()];
        let mut g: Vec<mixed::Grad> = vec![bytemuck::cast([f32::NAN; 3]); batch.len()];
        for _ in 0..2 {
            let sg_into = k
                .value_and_grad_into(&batch, &shared, &mut v, &mut g)
                .expect("launch");
            assert_eq!(
                bytemuck::cast_slice::<_, u32>(&v),
                bytemuck::cast_slice::<_, u32>(&values)
            );
            assert_eq!(
                bytemuck::cast_slice::<_, u32>(&g),
                bytemuck::cast_slice::<_, u32>(&grads)
            );
            assert_eq!(
                bytemuck::cast::<_, u32>(sg_into),
                bytemuck::cast::<_, u32>(sg)
            );
        }
        let short = k.value_and_grad_into(&batch, &shared, &mut v[1..], &mut g);
        assert!(
            matches!(short, Err(gradfuse::Error::ShapeMismatch { .. })),
            "{short:?}"
        );
    }
    // No per-element gradient words: `grads` is still one (empty) entry per element.
    let net = tiny_net::kernel(device());
    let args = [tiny_net::Args {
        x: [0.5, -0.25],
        target: 0.1,
    }; 3];
    let w = tiny_net::Shared { w: [0.3; 9] };
    let (values, _, sg) = net.value_and_grad(&args, &w).expect("launch");
    let mut v = [0.0f32; 3];
    let sg_into = net
        .value_and_grad_into(&args, &w, &mut v, &mut [tiny_net::Grad {}; 3])
        .expect("launch");
    assert_eq!((v.to_vec(), sg_into.w), (values, sg.w));
    let short = net.value_and_grad_into(&args, &w, &mut v, &mut [tiny_net::Grad {}; 2]);
    assert!(
        matches!(short, Err(gradfuse::Error::ShapeMismatch { .. })),
        "{short:?}"
    );
}

#[test]
fn shared_words_beyond_a_uniform_buffer_are_read_from_storage() {
    assert!(tiny_net::WGSL_ADJOINT.contains("var<uniform> shared_args: array<vec4<f32>, 3>"));
    assert!(lookup::WGSL_ADJOINT.contains("var<storage, read> shared_args: array<f32>"));
    assert!(lookup::WGSL_FORWARD.contains("var<storage, read> shared_args: array<f32>"));
    let mut rng = Rng(21);
    let mut shared = lookup::Shared {
        table: [0.0; 16400],
    };
    for w in shared.table.iter_mut() {
        *w = rng.uniform(-1.0, 1.0);
    }
    let batch: Vec<lookup::Args> = (0..5000)
        .map(|_| lookup::Args {
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let (values, _, sg) = lookup::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    // By hand, in f64: value (t0 + x (t1 + t2)) x; gradient in t0: x, in t1 and t2: x^2.
    let t = |k: usize| shared.table[k] as f64;
    let (mut d0, mut d12) = (0.0f64, 0.0f64);
    for (a, v) in batch.iter().zip(&values) {
        let x = a.x as f64;
        let want = (t(0) + x * (t(16398) + t(16399))) * x;
        assert!((*v as f64 - want).abs() < 1e-5, "{v} vs {want}");
        d0 += x;
        d12 += x * x;
    }
    let got = |k: usize| sg.table[k] as f64;
    assert!((got(0) - d0).abs() < 1e-3, "{} vs {d0}", got(0));
    assert!((got(16398) - d12).abs() < 1e-3 && (got(16399) - d12).abs() < 1e-3);
    assert!(sg.table[1..16398].iter().all(|g| *g == 0.0));
}

#[test]
fn shared_words_at_a_computed_index_in_a_loop() {
    // `w[r]`: an index proven in range, read without a clamp.
    assert!(decay::WGSL_FORWARD.contains("shared_args[(0u + u32(r"));
    assert!(!decay::WGSL_FORWARD.contains("clamp("));
    let mut rng = Rng(33);
    let shared = decay::Shared {
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    let batch: Vec<decay::Args> = (0..300)
        .map(|_| decay::Args {
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let kernel = decay::kernel(device());
    let (values, grads, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert_eq!(kernel.value(&batch, &shared).expect("launch"), values);
    let c = compile_str(DECAY_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    let (mut want, mut magnitude) = ([0.0f64; 16], [0.0f64; 16]);
    for (i, a) in batch.iter().enumerate() {
        // Words: x, then w (16); gradients after the value in the same order.
        let all = interp::eval(&reverse, &words_of(a, &shared));
        let scale = all[0].abs().max(1.0);
        assert!((values[i] as f64 - all[0]).abs() <= 1e-4 * scale, "{i}");
        assert!((grads[i].x as f64 - all[1]).abs() <= 1e-4 * all[1].abs().max(1.0));
        for k in 0..16 {
            want[k] += all[2 + k];
            magnitude[k] += all[2 + k].abs();
        }
    }
    let e = sum_error(&sg.w, &want, &magnitude);
    assert!(
        e < 1e-4,
        "shared gradient off by {e:e}: {:?} vs {want:?}",
        sg.w
    );
}

#[test]
fn a_nest_just_under_the_unrolling_budget_compiles_and_differentiates() {
    assert!(!unrolled::WGSL_FORWARD.contains("for ("), "unrolled");
    let c = compile_str(UNROLLED_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    let mut rng = Rng(41);
    let shared = unrolled::Shared {
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    for _ in 0..20 {
        let a = unrolled::Args {
            x: rng.uniform(-1.0, 1.0),
        };
        let (v, g, sg) = unrolled::value_and_grad(&a, &shared);
        // Words: x, then w (16); gradients after the value in the same order.
        let all = interp::eval(&reverse, &words_of(&a, &shared));
        assert!((v as f64 - all[0]).abs() <= 1e-4 * all[0].abs().max(1.0));
        let mut got = vec![g.x as f64];
        got.extend(sg.w.iter().map(|w| *w as f64));
        assert!(
            rel_error(&got, &all[1..], 1.0) < 1e-4,
            "{got:?} vs {:?}",
            &all[1..]
        );
    }
}

#[test]
fn streamed_shared_gradients_are_the_batch_sums_and_bit_identical() {
    assert!(
        streamed::WGSL_ADJOINT.contains("for ("),
        "the nest stays a loop"
    );
    // Each trip stages at a slot fixed by the trip, the word its index reads.
    assert!(streamed::WGSL_ADJOINT.contains("stage_words[stage_count + u32("));
    assert!(streamed::WGSL_ADJOINT.contains("] = 0u + u32("));
    assert!(!streamed::WGSL_ADJOINT.contains("clamp("));
    assert!(
        !streamed::WGSL_ADJOINT.contains("var sum_"),
        "no per-thread sums"
    );
    // The sums kept in workgroup memory, from a stage of 32 slots: each batch of slots
    // holds every one of 8 words 4 times (the middle loop reads the same 8 again), so the
    // slots' threads must add a word's repeats in order, one thread per word.
    assert!(streamed::WGSL_ADJOINT.contains("var<workgroup> word_sums: array<f32, 82>"));
    assert!(streamed::WGSL_ADJOINT.contains("stage_words: array<u32, 32>"));
    // The CPU version against the oracle on a few elements.
    let c = compile_str(STREAMED_SRC).expect("compiles");
    let reverse = ad::reverse(&c.lowered.primal);
    let mut rng = Rng(52);
    let shared = streamed::Shared {
        table: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    // 514 runs of 256: each thread takes 2 elements, the last run part way.
    let n = 512 * 256 + 300;
    let batch: Vec<streamed::Args> = (0..n)
        .map(|_| streamed::Args {
            x: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
        })
        .collect();
    for a in batch.iter().take(3) {
        let all = interp::eval(&reverse, &words_of(a, &shared));
        let (v, _, g) = streamed::value_and_grad(a, &shared);
        assert!((v as f64 - all[0]).abs() <= 1e-5 * all[0].abs().max(1.0));
        // Words: x (2), then the 82 shared ones.
        assert!(scaled_error(&f32s(&g), &all[3..]) < 1e-5);
    }
    let kernel = streamed::kernel(device());
    let (values, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
    let (mut want, mut magnitude) = (vec![0.0f64; 82], vec![0.0f64; 82]);
    for (a, v) in batch.iter().zip(&values) {
        let (cv, _, g) = streamed::value_and_grad(a, &shared);
        assert!((v - cv).abs() <= 1e-5 * cv.abs().max(1.0));
        for (k, g) in f32s(&g).into_iter().enumerate() {
            want[k] += g;
            magnitude[k] += g.abs();
        }
    }
    let got: Vec<f32> = f32s(&sg).iter().map(|v| *v as f32).collect();
    let e = sum_error(&got, &want, &magnitude);
    assert!(e < 1e-5, "shared gradient off by {e:e}");
    let (_, _, again) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert_eq!(
        bytemuck::cast::<_, [u32; 82]>(sg),
        bytemuck::cast::<_, [u32; 82]>(again)
    );
}

#[test]
fn streamed_sums_past_the_owned_bound_are_added_in_the_row() {
    let wgsl = sparse_table::WGSL_ADJOINT;
    assert!(wgsl.contains("stage_count++") && !wgsl.contains("owned_sums"));
    let mut rng = Rng(61);
    let mut shared = Box::new(sparse_table::Shared {
        table: [0.0; 70000],
    });
    for k in 0..300 {
        shared.table[k * 233] = rng.uniform(-0.1, 0.1);
    }
    let batch: Vec<sparse_table::Args> = (0..3000)
        .map(|_| sparse_table::Args {
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let (_, _, sg) = sparse_table::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let (mut want, mut magnitude) = (vec![0.0f64; 300], vec![0.0f64; 300]);
    for a in &batch {
        let (_, _, g) = sparse_table::value_and_grad(a, &shared);
        for k in 0..300 {
            want[k] += g.table[k * 233] as f64;
            magnitude[k] += (g.table[k * 233] as f64).abs();
        }
    }
    let got: Vec<f32> = (0..300).map(|k| sg.table[k * 233]).collect();
    let e = sum_error(&got, &want, &magnitude);
    assert!(e < 1e-5, "shared gradient off by {e:e}");
    let untouched = sg
        .table
        .iter()
        .enumerate()
        .filter(|(k, _)| k % 233 != 0 || *k >= 300 * 233);
    assert!(untouched.into_iter().all(|(_, g)| *g == 0.0));
}

/// Central difference of the f64 interpreter along `dir` (element words, then shared words).
fn directional_difference(src: &str, words: &[f64], dir: &[f64]) -> f64 {
    let c = compile_str(src).expect("the source compiles");
    let at = |s: f64| -> f64 {
        let y: Vec<f64> = words.iter().zip(dir).map(|(w, t)| w + s * t).collect();
        interp::eval(&c.lowered.primal, &y)[0]
    };
    (at(1e-5) - at(-1e-5)) / 2e-5
}

/// The tangent kernel with `#[shared]` arguments: each element's tangent and the batch's
/// shared tangent (a uniform buffer for `mixed`, per-element words with none for
/// `tiny_net`), on the GPU and the CPU device, against central differences of the f64
/// interpreter along the same direction.
#[test]
fn tangent_kernels_with_shared_tangents() {
    let mut rng = Rng(12);
    let n = 700;
    let batch: Vec<mixed::Args> = (0..n)
        .map(|_| mixed::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            c: rng.uniform(0.5, 1.5),
        })
        .collect();
    let tangents: Vec<mixed::Grad> = (0..n)
        .map(|_| mixed::Grad {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
        })
        .collect();
    let shared = mixed::Shared { s: 0.7 };
    let shared_tangent = mixed::SharedGrad { s: -0.4 };
    let nets: Vec<tiny_net::Args> = (0..n)
        .map(|_| tiny_net::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            target: rng.uniform(-0.5, 0.5),
        })
        .collect();
    let w = tiny_net::Shared {
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    let dw = tiny_net::SharedGrad {
        w: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
    };
    let no_tangents = vec![tiny_net::Grad {}; n];
    for d in [device(), &Device::cpu()] {
        let (values, derivatives) = mixed::kernel(d)
            .jvp(&batch, &shared, &tangents, &shared_tangent)
            .expect("launch");
        let plain = mixed::kernel(d).value(&batch, &shared).expect("launch");
        for i in 0..n {
            let words = words_of(&batch[i], &shared);
            let mut dir = f32s(&tangents[i]);
            dir.push(0.0); // c is #[constant]
            dir.push(shared_tangent.s as f64);
            let want = directional_difference(MIXED_SRC, &words, &dir);
            let e = (derivatives[i] as f64 - want).abs() / (1.0 + want.abs());
            assert!(e < 1e-4, "{i}: {} vs {want}", derivatives[i]);
            assert!((values[i] - plain[i]).abs() <= 1e-6 * (1.0 + plain[i].abs()));
        }
        let (values, derivatives) = tiny_net::kernel(d)
            .jvp(&nets, &w, &no_tangents, &dw)
            .expect("launch");
        for i in 0..n {
            let words = words_of(&nets[i], &w);
            let mut dir = vec![0.0; 3];
            dir.extend(f32s(&dw));
            let want = directional_difference(NET_SRC, &words, &dir);
            let e = (derivatives[i] as f64 - want).abs() / (1.0 + want.abs());
            assert!(e < 1e-4, "{i}: {} vs {want}", derivatives[i]);
            let o = oracle(NET_SRC, &words);
            assert!((values[i] as f64 - o.value).abs() < 1e-5 * (1.0 + o.value.abs()));
        }
        // 2 x 16,400 shared words: past a uniform buffer, read from storage.
        let xs: Vec<lookup::Args> = (0..n)
            .map(|k| lookup::Args { x: k as f32 * 0.01 })
            .collect();
        let table = lookup::Shared {
            table: std::array::from_fn(|k| (k % 7) as f32),
        };
        let mut dt = lookup::SharedGrad {
            table: [0.0; 16400],
        };
        (dt.table[0], dt.table[16398], dt.table[16399]) = (1.5, -2.0, 0.25);
        let (_, derivatives) = lookup::kernel(d)
            .jvp(&xs, &table, &vec![lookup::Grad {}; n], &dt)
            .expect("launch");
        for (a, got) in xs.iter().zip(derivatives) {
            let x = a.x as f64;
            let want = x * (1.5 + x * -2.0 + x * 0.25);
            assert!(
                (got as f64 - want).abs() < 1e-5 * (1.0 + want.abs()),
                "{got} vs {want}"
            );
        }
    }
}
