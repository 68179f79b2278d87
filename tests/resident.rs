//! Device-resident buffers and recordings: launches over `gradfuse::Buffer`s, recorded
//! together and submitted once, give what the host-slice launchers give (the same kernels:
//! the same bits), on the GPU and on the CPU device; bad bindings are errors that record
//! nothing.

mod common;

use common::{Rng, device, rel_error};
use gradfuse::{Device, Error, differentiable};

#[differentiable]
pub fn fit(x: [f32; 2], #[constant] y: f32, #[shared] w: [f32; 3]) -> f32 {
    let r = (w[0] * x[0] + w[1] * x[1] + w[2]).tanh() - y;
    r * r
}

#[differentiable]
pub fn spring(p: [f32; 3], q: [f32; 3]) -> f32 {
    let d = ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
    (d - 1.0) * (d - 1.0)
}

#[differentiable]
pub fn wide(x: [f32; 32], #[shared] s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..32 {
        acc += (x[i] - s) * (x[i] - s);
    }
    acc
}

fn fit_args(n: usize, seed: u64) -> Vec<fit::Args> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| fit::Args {
            x: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
            y: rng.uniform(-0.5, 0.5),
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The resident launch gives the host launcher's bits, on both devices.
fn resident_matches_host(d: &Device) {
    let n = 3000;
    let args = fit_args(n, 7);
    let w = fit::Shared {
        w: [0.3, -0.7, 0.1],
    };
    let (values, grads, shared_grad) = fit::kernel(d).value_and_grad(&args, &w).unwrap();

    let args_buf = d.buffer(&args).unwrap();
    let w_buf = d.buffer(&[w]).unwrap();
    let values_buf = d.zeros::<f32>(n).unwrap();
    let grads_buf = d.zeros::<fit::Grad>(n).unwrap();
    let sg_buf = d.zeros::<fit::SharedGrad>(1).unwrap();
    let k = fit::kernel(d);
    let mut rec = d.record();
    k.value_and_grad_to(
        &mut rec,
        &args_buf,
        &w_buf,
        &values_buf,
        &grads_buf,
        &sg_buf,
    )
    .unwrap();
    // Nothing has run before the submit.
    assert!(d.read(&values_buf).unwrap().iter().all(|&v| v == 0.0));
    rec.submit().unwrap();
    assert_eq!(bits(&d.read(&values_buf).unwrap()), bits(&values));
    let got: Vec<fit::Grad> = d.read(&grads_buf).unwrap();
    assert_eq!(got, grads);
    assert_eq!(d.read(&sg_buf).unwrap(), vec![shared_grad]);
    // And the per-element CPU reverse mode agrees (an independent path).
    let mut sum = [0.0f64; 3];
    for (a, (v, g)) in args.iter().zip(values.iter().zip(&grads)) {
        let (cv, cg, csg) = fit::value_and_grad(a, &w);
        assert!((cv - v).abs() <= 1e-5 * cv.abs().max(1.0));
        let e = rel_error(&g.x.map(f64::from), &cg.x.map(f64::from), 1e-3);
        assert!(e < 1e-4, "{e}");
        for (s, c) in sum.iter_mut().zip(csg.w) {
            *s += f64::from(c);
        }
    }
    let e = rel_error(&shared_grad.w.map(f64::from), &sum, 1e-3);
    assert!(
        e < 1e-3,
        "shared gradient {:?} vs {sum:?}: {e}",
        shared_grad.w
    );
}

#[test]
fn resident_launches_give_the_host_launchers_bits() {
    resident_matches_host(device());
    resident_matches_host(&Device::cpu());
}

/// Several launches recorded into one submission give what separate submissions give,
/// and a buffer written by one launch of the recording is read by the next.
fn chained_equals_separate(d: &Device) {
    let n = 777;
    let mut rng = Rng(3);
    let args: Vec<spring::Args> = (0..n)
        .map(|_| spring::Args {
            p: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), 0.5],
            q: [rng.uniform(-1.0, 1.0), 0.0, rng.uniform(-1.0, 1.0)],
        })
        .collect();
    let k = spring::kernel(d);
    let a = d.buffer(&args).unwrap();
    let (v1, g1, v2) = (
        d.zeros::<f32>(n).unwrap(),
        d.zeros::<spring::Grad>(n).unwrap(),
        d.zeros::<f32>(n).unwrap(),
    );
    let mut rec = d.record();
    k.value_and_grad_to(&mut rec, &a, &v1, &g1).unwrap();
    k.value_to(&mut rec, &a, &v2).unwrap();
    rec.submit().unwrap();

    let (want_v, want_g) = k.value_and_grad(&args).unwrap();
    let want_v2 = k.value(&args).unwrap();
    assert_eq!(bits(&d.read(&v1).unwrap()), bits(&want_v));
    assert_eq!(d.read(&g1).unwrap(), want_g);
    assert_eq!(bits(&d.read(&v2).unwrap()), bits(&want_v2));

    // Gradient-descent steps written as launches and writes: each reads what the last wrote.
    let mut host = args.clone();
    for _ in 0..3 {
        let (_, g) = k.value_and_grad(&host).unwrap();
        for (h, g) in host.iter_mut().zip(&g) {
            for i in 0..3 {
                h.p[i] -= 0.1 * g.p[i];
                h.q[i] -= 0.1 * g.q[i];
            }
        }
        let mut rec = d.record();
        k.value_and_grad_to(&mut rec, &a, &v1, &g1).unwrap();
        rec.submit().unwrap();
        let g: Vec<spring::Grad> = d.read(&g1).unwrap();
        let mut now: Vec<spring::Args> = d.read(&a).unwrap();
        for (h, g) in now.iter_mut().zip(&g) {
            for i in 0..3 {
                h.p[i] -= 0.1 * g.p[i];
                h.q[i] -= 0.1 * g.q[i];
            }
        }
        d.write(&a, &now).unwrap();
    }
    assert_eq!(d.read(&a).unwrap(), host);
}

#[test]
fn chained_launches_equal_separate_ones() {
    chained_equals_separate(device());
    chained_equals_separate(&Device::cpu());
}

#[test]
fn bad_bindings_are_errors_that_record_nothing() {
    let d = device();
    let other = Device::cpu();
    let k = spring::kernel(d);
    let args = d
        .buffer(
            &[spring::Args {
                p: [0.0; 3],
                q: [1.0; 3],
            }; 4],
        )
        .unwrap();
    let v = d.zeros::<f32>(4).unwrap();
    let g = d.zeros::<spring::Grad>(4).unwrap();
    let short = d.zeros::<f32>(3).unwrap();
    let foreign = other.zeros::<f32>(4).unwrap();
    let mut rec = d.record();
    let e = k
        .value_and_grad_to(&mut rec, &args, &short, &g)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 4,
                got: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = k
        .value_and_grad_to(&mut rec, &args, &foreign, &g)
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    let e = spring::kernel(&other)
        .value_to(&mut rec, &args, &v)
        .unwrap_err();
    assert!(matches!(e, Error::WrongDevice(_)), "{e}");
    // The failed calls recorded nothing: this submit runs the one good launch alone.
    k.value_to(&mut rec, &args, &v).unwrap();
    rec.submit().unwrap();
    let want = k
        .value(
            &[spring::Args {
                p: [0.0; 3],
                q: [1.0; 3],
            }; 4],
        )
        .unwrap();
    assert_eq!(d.read(&v).unwrap(), want);
    // Reads and writes of the wrong length or device.
    assert!(matches!(
        d.write(&v, &[1.0; 5]),
        Err(Error::ShapeMismatch {
            expected: 4,
            got: 5,
            ..
        })
    ));
    assert!(matches!(d.read(&foreign), Err(Error::WrongDevice(_))));
    // Buffers hold whole 4-byte words.
    assert!(matches!(d.buffer(&[0u16; 3]), Err(Error::Unsupported(_))));
    // An empty batch: nothing to run, the shared gradient is zero.
    let empty = d.zeros::<fit::Args>(0).unwrap();
    let sg = d.buffer(&[fit::SharedGrad { w: [5.0; 3] }]).unwrap();
    let w = d.buffer(&[fit::Shared { w: [1.0; 3] }]).unwrap();
    let (ev, eg) = (d.zeros::<f32>(0).unwrap(), d.zeros::<fit::Grad>(0).unwrap());
    let mut rec = d.record();
    fit::kernel(d)
        .value_and_grad_to(&mut rec, &empty, &w, &ev, &eg, &sg)
        .unwrap();
    rec.submit().unwrap();
    assert_eq!(d.read(&sg).unwrap(), vec![fit::SharedGrad { w: [0.0; 3] }]);
}

/// A cast is a view of the same words: reads and writes through it are the original's,
/// words that do not divide are an error, and a launch cannot read one view and write the
/// other.
fn cast_views_the_same_words(d: &Device) {
    let args = [
        spring::Args {
            p: [0.0, 1.0, 2.0],
            q: [3.0, 4.0, 5.0],
        },
        spring::Args {
            p: [6.0, 7.0, 8.0],
            q: [9.0, 10.0, 11.0],
        },
    ];
    let b = d.buffer(&args).unwrap();
    let rows = b.cast::<[f32; 3]>().unwrap();
    assert_eq!(rows.len(), 4);
    let want: Vec<[f32; 3]> = (0..4)
        .map(|r| [0, 1, 2].map(|c| (3 * r + c) as f32))
        .collect();
    assert_eq!(d.read(&rows).unwrap(), want);
    d.write(&rows, &[[-1.0; 3]; 4]).unwrap();
    assert_eq!(d.read(&b).unwrap()[1].q, [-1.0; 3]);
    let e = b.cast::<[f32; 5]>().unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 15,
                got: 12,
                ..
            }
        ),
        "{e}"
    );
    let values = b.cast::<f32>().unwrap();
    let mut rec = d.record();
    let e = spring::kernel(d)
        .value_to(&mut rec, &b, &values)
        .unwrap_err();
    assert!(matches!(e, Error::Aliased(_)), "{e}");
}

#[test]
fn casts_view_the_same_words() {
    cast_views_the_same_words(device());
    cast_views_the_same_words(&Device::cpu());
}

/// A batch larger than one storage binding (128 MiB on lavapipe) is launched in chunks
/// bound at offsets; the shared gradient adds the chunks' sums in order.
#[test]
fn resident_launches_past_one_binding_are_chunked() {
    let d = device();
    let n = 1_100_000; // 141 MB of arguments
    let mut rng = Rng(11);
    let args: Vec<wide::Args> = (0..n)
        .map(|_| {
            let mut x = [0.0f32; 32];
            x.iter_mut().for_each(|v| *v = rng.uniform(-1.0, 1.0));
            wide::Args { x }
        })
        .collect();
    let s = wide::Shared { s: 0.25 };
    let k = wide::kernel(d);
    let a = d.buffer(&args).unwrap();
    let sb = d.buffer(&[s]).unwrap();
    let v = d.zeros::<f32>(n).unwrap();
    let g = d.zeros::<wide::Grad>(n).unwrap();
    let sg = d.zeros::<wide::SharedGrad>(1).unwrap();
    let mut rec = d.record();
    k.value_and_grad_to(&mut rec, &a, &sb, &v, &g, &sg).unwrap();
    rec.submit().unwrap();
    let values = d.read(&v).unwrap();
    let grads = d.read(&g).unwrap();
    let mut want_sum = 0.0f64;
    for (i, x) in args.iter().enumerate() {
        let want: f64 = x.x.iter().map(|&t| (f64::from(t) - 0.25).powi(2)).sum();
        assert!(
            (f64::from(values[i]) - want).abs() < 1e-5 * want.max(1.0),
            "{i}"
        );
        for j in 0..32 {
            let gw = 2.0 * (f64::from(x.x[j]) - 0.25);
            assert!((f64::from(grads[i].x[j]) - gw).abs() < 1e-5, "{i} {j}");
            want_sum -= gw;
        }
    }
    let got = f64::from(d.read(&sg).unwrap()[0].s);
    assert!(
        (got - want_sum).abs() < 1e-4 * want_sum.abs().max(1e3),
        "{got} vs {want_sum}"
    );
}

/// A timed recording names each pass it ran, in order (GPU timestamps where the device has
/// them; the CPU device times nothing), and computes what an untimed one does.
#[test]
fn timed_recordings_name_their_passes() {
    for d in [device(), &Device::cpu()] {
        let args = [fit::Args {
            x: [0.5, -1.0],
            y: 0.25,
        }; 300];
        let w = fit::Shared {
            w: [0.3, -0.7, 0.1],
        };
        let (values, grads, shared_grad) = fit::kernel(d).value_and_grad(&args, &w).unwrap();
        let args = d.buffer(&args).unwrap();
        let w_buf = d.buffer(&[w]).unwrap();
        let (v, g) = (
            d.zeros::<f32>(300).unwrap(),
            d.zeros::<fit::Grad>(300).unwrap(),
        );
        let sg = d.zeros::<fit::SharedGrad>(1).unwrap();
        let mut rec = d.record_timed();
        let k = fit::kernel(d);
        k.value_and_grad_to(&mut rec, &args, &w_buf, &v, &g, &sg)
            .unwrap();
        let passes = rec.submit_timed().unwrap();
        assert_eq!(bits(&d.read(&v).unwrap()), bits(&values));
        assert_eq!(d.read(&g).unwrap(), grads);
        assert_eq!(d.read(&sg).unwrap(), vec![shared_grad]);
        let labels: Vec<&str> = passes.iter().map(|(l, _)| *l).collect();
        if !d.is_gpu() {
            assert!(labels.is_empty());
        } else if !labels.is_empty() {
            // The reduction's second pass, held back for a step that might take it over,
            // is a pass of its own.
            assert_eq!(labels, ["fit::adjoint", "fit::reduce"], "{}", d.describe());
        }
    }
}
