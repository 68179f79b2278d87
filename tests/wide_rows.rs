//! Kernels whose argument rows are 128 bytes or wider, and which do little work per word
//! or map the rows through `tanh` (computed then without branches), load them through
//! workgroup memory (`in_stage`, or the stores' stage where the kernel
//! has one), consecutive threads loading consecutive words; an adjoint whose rows are
//! mapped through `tanh` reads them as `vec4`s from their aligned start instead. On the GPU, at a batch that ends inside a workgroup, every kernel
//! kind gives the CPU versions' values and derivatives, for rows read as `vec4`s, `vec2`s
//! and single words, in f32 and f64.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

/// 96 words a row (`vec4` loads), half of them without a gradient.
#[differentiable]
fn stencil48(u: [f32; 48], #[constant] k: [f32; 48]) -> f32 {
    let mut e = 0.0;
    for i in 1..47 {
        let d = u[i + 1] - 2.0 * u[i] + u[i - 1];
        e += k[i] * d * d + 0.1 * (u[i] - u[i - 1]).abs();
    }
    e
}

/// 37 words a row (single-word loads, rounds ending mid-row).
#[differentiable]
fn odd37(a: [f32; 36], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..35 {
        acc += (a[i] * s - a[i + 1]) * a[i + 1];
    }
    acc * s + a[35]
}

/// 36 gradient words (nine `vec4`s, an odd count: the rounds' slots unrotated) of a
/// 37-word row.
#[differentiable]
fn grad36(a: [f32; 36], #[constant] s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..36 {
        acc += a[i] * a[i] * (i as f32 * 0.1 + s) - a[35 - i] * s;
    }
    acc
}

/// 34 words a row (`vec2` loads; the tangent kernel's 68) and two results: a 2 x 34
/// Jacobian.
#[differentiable]
fn pair34(x: [f32; 34]) -> [f32; 2] {
    let mut r = [0.0; 2];
    for j in 0..2 {
        let mut t = 0.0;
        for k in 0..34 {
            t += x[k] * (j as f32 + 1.0) * x[33 - k];
        }
        r[j] = t;
    }
    r
}

/// 20 f64 words a row: 160 bytes.
#[differentiable]
fn chain64(a: [f64; 20]) -> f64 {
    let mut acc = 0.0f64;
    for i in 0..19 {
        acc += (a[i] - a[i + 1]) * (a[i] - a[i + 1]) * a[i];
    }
    acc
}

/// Elements: two whole workgroups and a part of a third.
const N: usize = 700;

fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 1e-4 * (1.0 + want.abs())
}

fn uniform<const W: usize>(rng: &mut Rng) -> [f32; W] {
    std::array::from_fn(|_| rng.uniform(-1.0, 1.0))
}

#[test]
fn wide_rows_are_loaded_through_the_stage() {
    for (what, wgsl, stage) in [
        ("stencil48 value", stencil48::WGSL_FORWARD, "in_stage"),
        ("stencil48 tangent", stencil48::WGSL_TANGENT, "in_stage"),
        // Its 48 gradient words (a `vec4` view) go out in rounds through a stage of
        // `vec4`s, which the rows share a word at a time.
        ("stencil48 adjoint", stencil48::WGSL_ADJOINT, "out_stage"),
        ("odd37 adjoint", odd37::WGSL_ADJOINT, "out_stage"),
        ("pair34 tangent", pair34::WGSL_TANGENT, "in_stage"),
        ("chain64 value", chain64::WGSL_FORWARD, "in_stage"),
    ] {
        assert!(
            wgsl.contains(&format!("the group loads them through {stage}")),
            "{what}: rows loaded through {stage}"
        );
    }
    assert!(
        stencil48::WGSL_ADJOINT.contains("grads: array<vec4<f32>>")
            && stencil48::WGSL_ADJOINT.contains("var<workgroup> out_stage: array<vec4<f32>, ")
            && stencil48::WGSL_ADJOINT.contains("consecutive vec4s"),
        "stencil48 adjoint: gradients stored in rounds of vec4s"
    );
    // A transcendental call per word, but not `tanh`: the loads overlap the arithmetic,
    // unstaged.
    assert!(!sin36::WGSL_FORWARD.contains("in_stage"));
    let mut rng = Rng(39);
    let args: Vec<sin36::Args> = (0..N)
        .map(|_| sin36::Args {
            a: uniform(&mut rng),
            s: rng.uniform(0.5, 1.5),
        })
        .collect();
    let values = sin36::kernel(device()).value(&args).expect("value");
    for (e, a) in args.iter().enumerate() {
        let want = sin36(a.a, a.s);
        assert!(close(values[e], want), "{e}: {} vs {want}", values[e]);
    }
}

/// 37 words a row, a `sin` per word.
#[differentiable]
fn sin36(a: [f32; 36], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..35 {
        acc += (a[i] * s).sin() * a[i + 1];
    }
    acc * s + a[35]
}

#[test]
fn rows_mapped_through_tanh_are_staged_or_read_as_vec4s_and_match_the_cpu() {
    // Rows mapped through `tanh` (a call a word) are staged whatever the work per word, but
    // for the adjoint's, read as `vec4`s from their aligned start; `tanh` is computed
    // without branches in every kind.
    for (what, wgsl, staged) in [
        ("value", heavy36::WGSL_FORWARD, true),
        ("tangent", heavy36::WGSL_TANGENT, true),
        ("adjoint", heavy36::WGSL_ADJOINT, false),
    ] {
        assert_eq!(
            wgsl.contains("the group loads them through"),
            staged,
            "heavy36 {what}: rows staged"
        );
        assert_eq!(
            wgsl.contains("var<storage, read> args: array<vec4<f32>>;"),
            !staged,
            "heavy36 {what}: rows as vec4s"
        );
        assert!(
            wgsl.contains("tanh to about 2 ulp (Cephes' tanhf), without branches"),
            "heavy36 {what}: branch-free tanh"
        );
    }
    // The compiler reads past the last row by what the runtime pads bindings to.
    assert_eq!(
        u64::from(gradfuse_shaders_gen::abi::ARGS_BINDING_ALIGN),
        gradfuse::ARGS_BINDING_ALIGN
    );
    // Batches whose rows end inside a `vec4` (37 words a row): the last element's last
    // `vec4` is the binding's padding. One element, a launch binding its mapped buffers,
    // one copying into device buffers.
    for n in [1, 3, 699, 2047] {
        heavy36_matches_the_cpu(n);
    }
}

/// Arguments of both signs and past 0.625 and 9, where the two forms of `tanh` part.
fn heavy36_args(rng: &mut Rng, n: usize) -> Vec<heavy36::Args> {
    (0..n)
        .map(|_| heavy36::Args {
            a: std::array::from_fn(|_| rng.uniform(-12.0, 12.0)),
            s: rng.uniform(0.05, 1.5),
        })
        .collect()
}

/// Whether `got` is `want` of element `a` to the rounding of sums of 35 terms of up to 12
/// (the sum's size bounds the rounding, not the result's).
fn heavy36_near(a: &heavy36::Args, got: f32, want: f32) -> bool {
    let scale = 1.0 + a.a.iter().map(|x| x.abs()).sum::<f32>();
    (got - want).abs() <= 1e-5 * scale * (1.0 + want.abs())
}

fn heavy36_matches_the_cpu(n: usize) {
    let mut rng = Rng(40 + n as u64);
    let args = heavy36_args(&mut rng, n);
    let tangents: Vec<heavy36::Grad> = (0..n)
        .map(|_| heavy36::Grad {
            a: uniform(&mut rng),
            s: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let k = heavy36::kernel(device());
    let values = k.value(&args).expect("value");
    let (values2, grads) = k.value_and_grad(&args).expect("value_and_grad");
    let (values3, dirs) = k.jvp(&args, &tangents).expect("jvp");
    for (e, a) in args.iter().enumerate() {
        let want = heavy36(a.a, a.s);
        let (_, g) = heavy36::value_and_grad(a);
        let (_, dir) = heavy36::jvp(a, &tangents[e]);
        let near = |got, want| heavy36_near(a, got, want);
        for got in [values[e], values2[e], values3[e]] {
            assert!(near(got, want), "n {n}, {e}: value {got} vs {want}");
        }
        for w in 0..36 {
            assert!(near(grads[e].a[w], g.a[w]), "n {n}, {e}: d/d a[{w}]");
        }
        assert!(near(grads[e].s, g.s), "n {n}, {e}: d/d s");
        assert!(
            near(dirs[e], dir),
            "n {n}, {e}: tangent {} vs {dir}",
            dirs[e]
        );
    }
}

#[test]
fn rows_read_as_vec4s_from_device_buffers_match_the_cpu() {
    // A recorded launch binds the user's buffer of 37-word rows in chunks: the last
    // chunk's binding ends in the buffer's padding.
    let d = device();
    let mut rng = Rng(45);
    let n = 4093;
    let args = heavy36_args(&mut rng, n);
    let k = heavy36::kernel(d);
    let a = d.buffer(&args).expect("args");
    let (values, grads) = (
        d.zeros::<f32>(n).expect("values"),
        d.zeros::<heavy36::Grad>(n).expect("grads"),
    );
    let mut rec = d.record();
    k.value_and_grad_to(&mut rec, &a, &values, &grads)
        .expect("record");
    rec.submit().expect("submit");
    let (values, grads) = (
        d.read(&values).expect("read"),
        d.read(&grads).expect("read"),
    );
    for (e, a) in args.iter().enumerate() {
        let (v, g) = heavy36::value_and_grad(a);
        assert!(
            heavy36_near(a, values[e], v),
            "{e}: value {} vs {v}",
            values[e]
        );
        for w in 0..36 {
            assert!(heavy36_near(a, grads[e].a[w], g.a[w]), "{e}: d/d a[{w}]");
        }
        assert!(heavy36_near(a, grads[e].s, g.s), "{e}: d/d s");
    }
}

/// 37 words a row, but a `tanh` per word.
#[differentiable]
fn heavy36(a: [f32; 36], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..35 {
        acc += (a[i] * s).tanh() * a[i + 1];
    }
    acc * s + a[35]
}

#[test]
fn the_staged_loads_read_as_reviewed() {
    insta::assert_snapshot!("stencil48_forward", stencil48::WGSL_FORWARD);
}

#[test]
fn a_stencil_of_96_words_a_row_matches_the_cpu() {
    // One element (the group's other rows clamped to it), one past a whole group, and N.
    for n in [1, 257, N] {
        stencil48_matches_the_cpu(n);
    }
}

fn stencil48_matches_the_cpu(n: usize) {
    let mut rng = Rng(41 + n as u64);
    let args: Vec<stencil48::Args> = (0..n)
        .map(|_| stencil48::Args {
            u: uniform(&mut rng),
            k: uniform(&mut rng),
        })
        .collect();
    let tangents: Vec<stencil48::Grad> = (0..n)
        .map(|_| stencil48::Grad {
            u: uniform(&mut rng),
        })
        .collect();
    let k = stencil48::kernel(device());
    let values = k.value(&args).expect("value");
    let (values2, grads) = k.value_and_grad(&args).expect("value_and_grad");
    let (values3, dirs) = k.jvp(&args, &tangents).expect("jvp");
    for (e, a) in args.iter().enumerate() {
        let want = stencil48(a.u, a.k);
        let (v, g) = stencil48::value_and_grad(a);
        let (_, dir) = stencil48::jvp(a, &tangents[e]);
        for got in [values[e], values2[e], values3[e]] {
            assert!(close(got, want), "{e}: value {got} vs {want}");
        }
        assert!(close(v, want), "{e}");
        for w in 0..48 {
            assert!(close(grads[e].u[w], g.u[w]), "{e}: d/d u[{w}]");
        }
        assert!(close(dirs[e], dir), "{e}: tangent {} vs {dir}", dirs[e]);
    }
}

#[test]
fn rows_of_37_words_match_the_cpu() {
    let mut rng = Rng(42);
    let args: Vec<odd37::Args> = (0..N)
        .map(|_| odd37::Args {
            a: uniform(&mut rng),
            s: rng.uniform(0.5, 1.5),
        })
        .collect();
    let k = odd37::kernel(device());
    let values = k.value(&args).expect("value");
    let (_, grads) = k.value_and_grad(&args).expect("value_and_grad");
    for (e, a) in args.iter().enumerate() {
        let (v, g) = odd37::value_and_grad(a);
        assert_eq!(v, odd37(a.a, a.s));
        assert!(close(values[e], v), "{e}: {} vs {v}", values[e]);
        for w in 0..36 {
            assert!(close(grads[e].a[w], g.a[w]), "{e}: d/d a[{w}]");
        }
        assert!(close(grads[e].s, g.s), "{e}: d/d s");
    }
}

/// Gradients of 36 words go out in rounds of `vec4`s, nine slots an element, unrotated
/// (the 48-word stencil's twelve are rotated): one element, a round of 64 and part of the
/// next, and two workgroups and part of a third, against the CPU's reverse mode.
#[test]
fn gradients_of_nine_vec4s_in_rounds_match_the_cpu() {
    assert!(
        grad36::WGSL_ADJOINT.contains("consecutive vec4s")
            && grad36::WGSL_ADJOINT.contains("let grads_at = (lid % grads_per_round) * 9u;"),
        "grad36 adjoint: rounds of nine vec4s, unrotated"
    );
    let k = grad36::kernel(device());
    for n in [1, 70, N] {
        let mut rng = Rng(44 + n as u64);
        let args: Vec<grad36::Args> = (0..n)
            .map(|_| grad36::Args {
                a: uniform(&mut rng),
                s: rng.uniform(0.5, 1.5),
            })
            .collect();
        let (values, grads) = k.value_and_grad(&args).expect("value_and_grad");
        for (e, a) in args.iter().enumerate() {
            let (v, g) = grad36::value_and_grad(a);
            assert_eq!(v, grad36(a.a, a.s));
            assert!(close(values[e], v), "{n}, {e}: {} vs {v}", values[e]);
            for w in 0..36 {
                assert!(close(grads[e].a[w], g.a[w]), "{n}, {e}: d/d a[{w}]");
            }
        }
    }
}

#[test]
fn two_results_of_34_words_a_row_match_the_cpu() {
    let mut rng = Rng(43);
    let args: Vec<pair34::Args> = (0..N)
        .map(|_| pair34::Args {
            x: uniform(&mut rng),
        })
        .collect();
    let tangents: Vec<pair34::Grad> = (0..N)
        .map(|_| pair34::Grad {
            x: uniform(&mut rng),
        })
        .collect();
    let k = pair34::kernel(device());
    let (values, jacobians) = k.value_and_jacobian(&args).expect("value_and_jacobian");
    let (_, dirs) = k.jvp(&args, &tangents).expect("jvp");
    for (e, a) in args.iter().enumerate() {
        let (v, j) = pair34::value_and_jacobian(a);
        let (_, dir) = pair34::jvp(a, &tangents[e]);
        assert_eq!(v, pair34(a.x));
        for m in 0..2 {
            assert!(close(values[e][m], v[m]), "{e}: result[{m}]");
            assert!(close(dirs[e][m], dir[m]), "{e}: tangent of result[{m}]");
            for w in 0..34 {
                let (got, want) = (jacobians[e][m].x[w], j[m].x[w]);
                assert!(close(got, want), "{e}: d{m}/dx[{w}] {got} vs {want}");
            }
        }
    }
}

#[test]
fn f64_rows_of_160_bytes_match_the_cpu() {
    let d = device();
    if !d.has_f64() {
        eprintln!("skipped: the device has no 64-bit floats in shaders");
        return;
    }
    let mut rng = Rng(44);
    let args: Vec<chain64::Args> = (0..N)
        .map(|_| chain64::Args {
            a: std::array::from_fn(|_| f64::from(rng.uniform(-1.0, 1.0))),
        })
        .collect();
    let (values, grads) = chain64::kernel(d)
        .value_and_grad(&args)
        .expect("value_and_grad");
    for (e, a) in args.iter().enumerate() {
        let (v, g) = chain64::value_and_grad(a);
        assert_eq!(v, chain64(a.a));
        assert!((values[e] - v).abs() <= 1e-12 * (1.0 + v.abs()), "{e}");
        for w in 0..20 {
            let (got, want) = (grads[e].a[w], g.a[w]);
            assert!((got - want).abs() <= 1e-12 * (1.0 + want.abs()), "{e}: {w}");
        }
    }
}
