//! Per-element argument arrays read once per word at computed indices in kept loops are
//! read from the argument buffer at their index, never copied into private memory first
//! (`emit_wgsl::arrays::element_arrays`): value and tangent kernels, with shared words, with
//! vector results, in f64. Each is checked against the CPU versions, and the kernels that
//! keep the copy (gradients and Jacobians, which read the arrays again in their reverse
//! passes) beside them; the CPU reverse mode against central differences of the f64
//! interpreter.

mod common;

use common::{Rng, central_differences, device, rel_error};
use gradfuse::{Device, differentiable};

with_source! {
    NET_SRC,
    // A 4-24-24-2 softplus network whose weights are per-element arguments (each element
    // its own small model): the second layer, 576 words, is a kept loop reading `w2` at
    // `j * 24 + k`.
    #[differentiable]
    pub fn local_net(x: [f32; 4], w1: [f32; 96], w2: [f32; 576], w3: [f32; 48]) -> f32 {
        let mut h = [0.0; 24];
        for j in 0..24 {
            let mut s = 0.0;
            for k in 0..4 {
                s += w1[j * 4 + k] * x[k];
            }
            h[j] = (s.exp() + 1.0).ln();
        }
        let mut g = [0.0; 24];
        for j in 0..24 {
            let mut s = 0.0;
            for k in 0..24 {
                s += w2[j * 24 + k] * h[k];
            }
            g[j] = (s.exp() + 1.0).ln();
        }
        let mut e = 0.0;
        for c in 0..2 {
            let mut s = 0.0;
            for k in 0..24 {
                s += w3[c * 24 + k] * g[k];
            }
            e += s * s;
        }
        e
    }
}

with_source! {
    TABLE_SRC,
    // A table of 64 words per element read at `j` in a kept loop (its nest is over the
    // unrolling budget), with shared words.
    #[differentiable]
    pub fn table_fit(t: [f32; 64], x: f32, #[shared] c: [f32; 3]) -> f32 {
        let mut r = 0.0;
        for j in 0..64 {
            let mut s = 0.0;
            for k in 0..8 {
                s += (x * (k as f32) * 0.1 + t[j] * c[0]).sin();
            }
            r += s * x * c[1] + c[2] * s.cos();
        }
        r
    }
}

/// A vector result: two sums over a table read at computed indices in a kept loop.
#[differentiable]
pub fn table_pair(t: [f32; 64], x: [f32; 2]) -> [f32; 2] {
    let mut r0 = 0.0;
    let mut r1 = 0.0;
    for j in 0..64 {
        let mut s = 0.0;
        for k in 0..8 {
            s += (x[0] * (k as f32) * 0.1 + t[j]).sin();
        }
        r0 += s * s;
        r1 += s.cos() * x[1];
    }
    [r0, r1]
}

/// A table read at computed indices in a kept loop, one of whose words is also returned as
/// it is: that word is still loaded (an output is a reader; the first version dropped its
/// load with the rest of the array's, and the value kernel named an undefined `t_3`).
#[differentiable]
pub fn table_and_word(t: [f32; 256], x: f32) -> [f32; 2] {
    let mut s = 0.0;
    for i in 0..256 {
        s += (t[i] * x).sin().exp().tanh().cos().sin().exp().tanh().cos() * (i as f32);
    }
    [s, t[3]]
}

/// The same table in f64.
#[differentiable]
pub fn table_f64(t: [f64; 48], x: f64) -> f64 {
    let mut r = 0.0;
    for j in 0..48 {
        let mut s = 0.0;
        for k in 0..12 {
            s += (x * (k as f64) * 0.1 + t[j]).sin();
        }
        r += s * s * x;
    }
    r
}

fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<T, f32>(std::slice::from_ref(t))
        .iter()
        .map(|w| *w as f64)
        .collect()
}

fn net_batch(rng: &mut Rng, n: usize) -> Vec<local_net::Args> {
    (0..n)
        .map(|_| local_net::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            w1: std::array::from_fn(|_| rng.uniform(-0.8, 0.8)),
            w2: std::array::from_fn(|_| rng.uniform(-0.3, 0.3)),
            w3: std::array::from_fn(|_| rng.uniform(-0.3, 0.3)),
        })
        .collect()
}

#[test]
fn the_arrays_are_read_from_the_argument_rows() {
    // `w2[j * 24 + k]`: the row's vector `j * 6 + 25 + k / 4` at lane `k % 4`, a constant.
    for wgsl in [local_net::WGSL_FORWARD, local_net::WGSL_TANGENT] {
        assert!(wgsl.contains("args[in_base + u32("), "{wgsl}");
        assert!(!wgsl.contains("let w2_"), "w2 is never loaded word by word");
        assert!(!wgsl.contains("var w2"), "w2 is never copied");
    }
    // The adjoint reads the layer in its forward and its reverse pass: it copies it.
    assert!(local_net::WGSL_ADJOINT.contains("var w2"));
    for wgsl in [
        table_fit::WGSL_FORWARD,
        table_fit::WGSL_TANGENT,
        table_pair::WGSL_FORWARD,
        table_pair::WGSL_TANGENT,
        table_f64::WGSL_FORWARD,
    ] {
        assert!(!wgsl.contains("var t ="), "{wgsl}");
        assert!(wgsl.contains("args[in_base + "), "{wgsl}");
    }
}

#[test]
fn a_network_of_per_element_weights_matches_the_cpu_and_central_differences() {
    let mut rng = Rng(3);
    let batch = net_batch(&mut rng, 600);
    let tangents: Vec<local_net::Grad> = net_batch(&mut rng, 600)
        .into_iter()
        .map(bytemuck::cast)
        .collect();
    for dev in [device(), &Device::cpu()] {
        let k = local_net::kernel(dev);
        let values = k.value(&batch).expect("value");
        let (values_g, grads) = k.value_and_grad(&batch).expect("value_and_grad");
        let (values_t, dirs) = k.jvp(&batch, &tangents).expect("jvp");
        for (i, a) in batch.iter().enumerate() {
            let (v, g) = local_net::value_and_grad(a);
            let (_, d) = local_net::jvp(a, &tangents[i]);
            let tol = 1e-5 * v.abs().max(1e-2);
            assert!(
                (values[i] - v).abs() <= tol,
                "value {i}: {} vs {v}",
                values[i]
            );
            assert!((values_g[i] - v).abs() <= tol && (values_t[i] - v).abs() <= tol);
            // f32 sums in another order: relative to the element's largest word.
            let e = rel_error(&words(&grads[i]), &words(&g), 1.0);
            assert!(e < 1e-5, "element {i}: gradient off by {e:e}");
            assert!(
                (dirs[i] - d).abs() <= 1e-4 * d.abs().max(1e-2),
                "element {i}: directional derivative {} vs {d}",
                dirs[i]
            );
        }
    }
    // The CPU reverse mode against the interpreter, every seventh word of two elements.
    for a in batch.iter().take(2) {
        let all = words(a);
        let which: Vec<usize> = (0..all.len()).filter(|k| k % 7 == 0).collect();
        let (value, fd) = central_differences(NET_SRC, &all, &which);
        let (v, g) = local_net::value_and_grad(a);
        assert!((v as f64 - value).abs() <= 1e-5 * value.abs().max(1e-2));
        let g = words(&g);
        let g: Vec<f64> = which.iter().map(|k| g[*k]).collect();
        let e = rel_error(&g, &fd, 1e-2);
        assert!(e < 2e-3, "gradient off by {e:e}");
    }
}

#[test]
fn tables_with_shared_words_vector_results_and_f64_match_the_cpu() {
    let mut rng = Rng(8);
    let shared = table_fit::Shared {
        c: [0.7, -0.4, 0.3],
    };
    let batch: Vec<table_fit::Args> = (0..777)
        .map(|_| table_fit::Args {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let pairs: Vec<table_pair::Args> = (0..500)
        .map(|_| table_pair::Args {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            x: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
        })
        .collect();
    let f64s: Vec<table_f64::Args> = (0..300)
        .map(|_| table_f64::Args {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f64),
            x: rng.uniform(-1.0, 1.0) as f64,
        })
        .collect();
    let fit_tangents: Vec<table_fit::Grad> = (0..batch.len())
        .map(|_| table_fit::Grad {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let shared_tangent = table_fit::SharedGrad {
        c: [0.1, 0.2, -0.3],
    };
    let pair_tangents: Vec<table_pair::Grad> = (0..pairs.len())
        .map(|_| table_pair::Grad {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            x: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
        })
        .collect();
    // The CPU reverse mode against the interpreter: the element's words, then the shared.
    for a in batch.iter().take(2) {
        let mut all = words(a);
        all.extend(shared.c.iter().map(|w| *w as f64));
        let which: Vec<usize> = (0..all.len()).collect();
        let (value, fd) = central_differences(TABLE_SRC, &all, &which);
        let (v, g, s) = table_fit::value_and_grad(a, &shared);
        assert!((v as f64 - value).abs() <= 1e-5 * value.abs().max(1.0));
        let mut got = words(&g);
        got.extend(s.c.iter().map(|w| *w as f64));
        let e = rel_error(&got, &fd, 1e-2);
        assert!(e < 2e-3, "table_fit gradient off by {e:e}");
    }
    for dev in [device(), &Device::cpu()] {
        let (values, grads, sg) = table_fit::kernel(dev)
            .value_and_grad(&batch, &shared)
            .expect("table_fit");
        let mut sum = [0.0f64; 3];
        for (i, a) in batch.iter().enumerate() {
            let (v, g, s) = table_fit::value_and_grad(a, &shared);
            assert!(
                (values[i] - v).abs() <= 1e-4 * v.abs().max(1.0),
                "value {i}"
            );
            let e = rel_error(&words(&grads[i]), &words(&g), 1.0);
            assert!(e < 1e-5, "element {i}: gradient off by {e:e}");
            for (t, w) in sum.iter_mut().zip(s.c) {
                *t += w as f64;
            }
        }
        let got: Vec<f64> = sg.c.iter().map(|w| *w as f64).collect();
        assert!(rel_error(&got, &sum, 1e-2) < 1e-4, "{got:?} vs {sum:?}");
        // The value and tangent kernels, which read the table from the rows.
        let k = table_fit::kernel(dev);
        let values = k.value(&batch, &shared).expect("table_fit value");
        let (tv, td) = k
            .jvp(&batch, &shared, &fit_tangents, &shared_tangent)
            .expect("table_fit jvp");
        for (i, a) in batch.iter().enumerate() {
            let (v, d) = table_fit::jvp(a, &shared, &fit_tangents[i], &shared_tangent);
            let tol = 1e-4 * v.abs().max(1.0);
            assert!((values[i] - v).abs() <= tol && (tv[i] - v).abs() <= tol);
            assert!(
                (td[i] - d).abs() <= 1e-4 * d.abs().max(1.0),
                "jvp {i}: {} vs {d}",
                td[i]
            );
        }
        let (pv, pd) = table_pair::kernel(dev)
            .jvp(&pairs, &pair_tangents)
            .expect("table_pair jvp");
        for (i, a) in pairs.iter().enumerate() {
            let (v, d) = table_pair::jvp(a, &pair_tangents[i]);
            for r in 0..2 {
                assert!((pv[i][r] - v[r]).abs() <= 1e-4 * v[r].abs().max(1.0));
                assert!(
                    (pd[i][r] - d[r]).abs() <= 1e-4 * d[r].abs().max(1.0),
                    "pair jvp {i}"
                );
            }
        }
        let (values, jacobians) = table_pair::kernel(dev)
            .value_and_jacobian(&pairs)
            .expect("table_pair");
        for (i, a) in pairs.iter().enumerate() {
            let (v, j) = table_pair::value_and_jacobian(a);
            for r in 0..2 {
                assert!((values[i][r] - v[r]).abs() <= 1e-4 * v[r].abs().max(1.0));
                let e = rel_error(&words(&jacobians[i][r]), &words(&j[r]), 1.0);
                assert!(e < 1e-5, "element {i}, row {r}: Jacobian off by {e:e}");
            }
        }
        if !dev.has_f64() {
            continue;
        }
        let (values, grads) = table_f64::kernel(dev)
            .value_and_grad(&f64s)
            .expect("table_f64");
        let plain = table_f64::kernel(dev)
            .value(&f64s)
            .expect("table_f64 value");
        for (i, a) in f64s.iter().enumerate() {
            let (v, g) = table_f64::value_and_grad(a);
            assert!(
                (plain[i] - v).abs() <= 1e-12 * v.abs().max(1.0),
                "f64 value {i}"
            );
            assert!(
                (values[i] - v).abs() <= 1e-12 * v.abs().max(1.0),
                "f64 value {i}"
            );
            for (x, y) in grads[i].t.iter().zip(g.t) {
                assert!((x - y).abs() <= 1e-11, "f64 gradient {i}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn a_table_word_also_returned_is_still_loaded() {
    assert!(table_and_word::WGSL_FORWARD.contains("let t_3 = "));
    let mut rng = Rng(9);
    let batch: Vec<table_and_word::Args> = (0..300)
        .map(|_| table_and_word::Args {
            t: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            x: rng.uniform(-1.0, 1.0),
        })
        .collect();
    for dev in [device(), &Device::cpu()] {
        let values = table_and_word::kernel(dev)
            .value(&batch)
            .expect("table_and_word");
        for (i, a) in batch.iter().enumerate() {
            let v = table_and_word(a.t, a.x);
            assert!(
                (values[i][0] - v[0]).abs() <= 1e-4 * v[0].abs().max(1.0),
                "{i}"
            );
            assert_eq!(values[i][1], a.t[3], "{i}");
        }
    }
}
