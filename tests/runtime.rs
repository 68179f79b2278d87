//! The runtime's contract, on the GPU (lavapipe in CI) and the CPU fallback: any batch size,
//! NaN and infinity propagated as on the CPU, bit-identical repeated runs, errors as values.

mod common;

use common::{Rng, device};
use gradfuse::{Device, Error, differentiable};

#[differentiable]
pub fn wide(p: [f32; 8]) -> f32 {
    let a = p[0] * p[1] + p[2].sin() * p[3];
    let b = (p[4] - p[5]).exp() * 0.01 + p[6] * p[6];
    a + b - p[7]
}

/// Touches the functions whose NaN and infinity behaviour differs between WGSL builtins and
/// Rust (min, max, clamp, signum, round, powf, atan2), and ordinary IEEE propagation.
#[differentiable]
pub fn special(x: f32, y: f32) -> f32 {
    let a = x.min(y) + x.max(y) + x.clamp(-1.0, 1.0);
    let b = x.signum() + y.round() + x.abs() * y;
    let c = x.exp() + y.sin() + x.atan2(y) + (x * x + 1.0).powf(0.5);
    a + b + c
}

fn wide_args(n: usize, seed: u64) -> Vec<wide::Args> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| wide::Args {
            p: std::array::from_fn(|_| rng.uniform(-2.0, 2.0)),
        })
        .collect()
}

fn close(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 2e-5 * a.abs().max(b.abs()).max(1.0)
}

fn devices() -> Vec<&'static Device> {
    static CPU: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    vec![device(), CPU.get_or_init(Device::cpu)]
}

#[test]
fn empty_batch() {
    for d in devices() {
        let k = wide::kernel(d);
        assert_eq!(k.value(&[]).unwrap(), Vec::<f32>::new());
        let (v, g) = k.value_and_grad(&[]).unwrap();
        assert!(v.is_empty() && g.is_empty(), "{}", d.describe());
    }
}

#[test]
fn batch_of_one_and_around_workgroup_edges() {
    for d in devices() {
        for n in [1usize, 63, 64, 65, 1000] {
            let args = wide_args(n, n as u64);
            let (v, g) = wide::kernel(d).value_and_grad(&args).unwrap();
            let vals = wide::kernel(d).value(&args).unwrap();
            assert_eq!((v.len(), g.len(), vals.len()), (n, n, n));
            for (i, a) in args.iter().enumerate() {
                let (cv, cg) = wide::value_and_grad(a);
                assert!(
                    close(v[i], cv) && close(vals[i], cv),
                    "{}: element {i} of {n}",
                    d.describe()
                );
                for (x, y) in g[i].p.iter().zip(cg.p) {
                    assert!(
                        close(*x, y),
                        "{}: element {i} of {n}: {:?} vs {cg:?}",
                        d.describe(),
                        g[i]
                    );
                }
            }
        }
    }
}

#[test]
fn batch_larger_than_a_storage_binding_is_split() {
    let d = device();
    let chunk = d.chunk_elements(&wide::ADJOINT_KERNEL);
    // 8M elements of 32 bytes: 256 MB of arguments and as much of gradients. Over lavapipe's
    // 128 MiB binding limit, over the runtime's 256 MiB streaming chunk on any GPU, and over
    // 65535 workgroups per dispatch dimension.
    let n = 8_000_000;
    assert!(n * std::mem::size_of::<wide::Args>() > 128 << 20);
    if d.is_gpu() {
        assert!(
            chunk < n,
            "a {n}-element batch must be split on {}: chunk {chunk}",
            d.describe()
        );
    }
    let args = wide_args(n, 7);
    let (v, g) = wide::kernel(d).value_and_grad(&args).unwrap();
    assert_eq!((v.len(), g.len()), (n, n));
    let mut bad = 0usize;
    for (i, a) in args.iter().enumerate() {
        let (cv, cg) = wide::value_and_grad(a);
        if !close(v[i], cv) || g[i].p.iter().zip(cg.p).any(|(x, y)| !close(*x, y)) {
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{bad} of {n} elements differ from the CPU");
}

#[test]
fn nan_and_infinity_propagate_as_on_the_cpu() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let mut args = Vec::new();
    for x in specials {
        for y in specials {
            args.push(special::Args { x, y });
        }
    }
    for d in devices() {
        let values = special::kernel(d).value(&args).unwrap();
        let (v, g) = special::kernel(d).value_and_grad(&args).unwrap();
        for (i, a) in args.iter().enumerate() {
            let plain = special(a.x, a.y);
            let (cv, cg) = special::value_and_grad(a);
            assert!(
                close(plain, cv),
                "CPU reverse vs plain at {a:?}: {cv} vs {plain}"
            );
            assert!(
                close(values[i], plain),
                "{}: value at {a:?}: {} vs {plain}",
                d.describe(),
                values[i]
            );
            assert!(
                close(v[i], plain),
                "{}: fused value at {a:?}: {} vs {plain}",
                d.describe(),
                v[i]
            );
            assert!(
                close(g[i].x, cg.x) && close(g[i].y, cg.y),
                "{}: gradient at {a:?}: {:?} vs {cg:?}",
                d.describe(),
                g[i]
            );
        }
    }
}

#[test]
fn repeated_runs_are_bit_identical() {
    let args = wide_args(100_000, 3);
    for d in devices() {
        let (v1, g1) = wide::kernel(d).value_and_grad(&args).unwrap();
        let (v2, g2) = wide::kernel(d).value_and_grad(&args).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v1), bits(&v2));
        assert_eq!(
            bits(bytemuck::cast_slice(&g1)),
            bits(bytemuck::cast_slice(&g2))
        );
    }
}

#[test]
fn wrong_lengths_are_errors_not_panics() {
    for d in devices() {
        let input = vec![0.0f32; 8 * 10];
        let mut values = vec![0.0f32; 10];
        let mut grads = vec![0.0f32; 8 * 9];
        let err = d
            .launch(
                &wide::ADJOINT_KERNEL,
                &input,
                &mut [&mut values, &mut grads],
            )
            .unwrap_err();
        match err {
            Error::ShapeMismatch { expected, got, .. } => assert_eq!((expected, got), (80, 72)),
            e => panic!("expected a shape mismatch, got {e}"),
        }
        let err = d
            .launch(&wide::FORWARD_KERNEL, &input[..13], &mut [&mut values])
            .unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { got: 13, .. }), "{err}");
        let err = d
            .launch(&wide::FORWARD_KERNEL, &input, &mut [])
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::ShapeMismatch {
                    expected: 1,
                    got: 0,
                    ..
                }
            ),
            "{err}"
        );
        // The message says what was expected and what was got.
        let msg = d
            .launch(&wide::FORWARD_KERNEL, &input, &mut [&mut values[..3]])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("expected 10") && msg.contains("got 3"),
            "{msg}"
        );
    }
}

#[test]
fn describe_names_the_device() {
    let d = device();
    assert!(!d.describe().is_empty());
    assert!(Device::cpu().describe().starts_with("CPU"));
    if std::env::var("GRADFUSE_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(
            d.is_gpu(),
            "GRADFUSE_REQUIRE_GPU=1 but the tests run on {}",
            d.describe()
        );
    }
}

#[test]
fn devices_and_results_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Device>();
    shareable::<Error>();
    shareable::<wide::Args>();
    shareable::<wide::Grad>();
    // One device, used from several threads at once.
    let d = device();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let args = wide_args(1000, t);
                let (v, _) = wide::kernel(d).value_and_grad(&args).unwrap();
                for (a, v) in args.iter().zip(v) {
                    assert!(close(v, wide::value_and_grad(a).0));
                }
            });
        }
    });
}

#[test]
fn measurement_entry_points_return_samples() {
    let d = device();
    let args = wide_args(4096, 11);
    let times = d
        .time_kernel(&wide::ADJOINT_KERNEL, bytemuck::cast_slice(&args), 5)
        .unwrap();
    assert_eq!(times.len(), 5);
    let (up, down) = d.time_transfers(1 << 16, 3).unwrap();
    assert_eq!((up.len(), down.len()), (3, 3));
    assert_eq!(d.time_roundtrip(4).unwrap().len(), 4);
    if d.is_gpu() && !d.has_timestamps() {
        // Wall-clock timing of a submit and wait is never zero.
        assert!(times.iter().all(|t| !t.total().is_zero()));
    }
    // No shared gradient, no second pass.
    assert!(times.iter().all(|t| t.reduce.is_zero()));
    // More launches than one query set has timestamps for (4,096, 4 per launch): a bug
    // fixed, such a warm-up was rejected as a validation error.
    let small = wide_args(256, 12);
    let many = d
        .time_kernel(&wide::ADJOINT_KERNEL, bytemuck::cast_slice(&small), 1100)
        .unwrap();
    assert_eq!(many.len(), 1100);
}

#[test]
fn value_and_grad_into_reuses_the_callers_buffers() {
    for d in devices() {
        let k = wide::kernel(d);
        let mut values = vec![f32::NAN; 3000];
        let mut grads = vec![wide::Grad { p: [f32::NAN; 8] }; 3000];
        for seed in [1, 2] {
            let args = wide_args(3000, seed);
            let (want_v, want_g) = k.value_and_grad(&args).unwrap();
            k.value_and_grad_into(&args, &mut values, &mut grads)
                .unwrap();
            assert_eq!(
                bytemuck::cast_slice::<_, u32>(&values),
                bytemuck::cast_slice::<_, u32>(&want_v)
            );
            assert_eq!(
                bytemuck::cast_slice::<_, u32>(&grads),
                bytemuck::cast_slice::<_, u32>(&want_g)
            );
        }
        let args = wide_args(3000, 3);
        let mismatch = k.value_and_grad_into(&args, &mut values, &mut grads[..2999]);
        assert!(
            matches!(mismatch, Err(gradfuse::Error::ShapeMismatch { .. })),
            "{mismatch:?}"
        );
    }
}
