//! The value kernel unrolls a layer over `#[shared]` weights past the base budget
//! (`opt::VALUE_UNROLL_BUDGET`): each weight read at a constant offset, the activations in
//! registers. Checked against the network computed here in f64 (no code shared with the
//! generator) on batches that end mid-workgroup; and the rule's other side: a recurrence
//! over a shared sequence, a loop that reads the arrays it carries and a layer over
//! per-element weights stay loops, and still agree with their f64 computation.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

/// A 6-48-48-1 tanh network: its second layer is about 7,000 operations, past the base
/// budget of 2,048, so only the value kernel's wider budget unrolls it.
#[differentiable]
pub fn net48(
    #[constant] x: [f32; 6],
    #[constant] t: f32,
    #[shared] w1: [f32; 336],
    #[shared] w2: [f32; 2352],
    #[shared] w3: [f32; 49],
) -> f32 {
    let mut h1 = [0.0; 48];
    for j in 0..48 {
        let mut s = w1[6 * 48 + j];
        for k in 0..6 {
            s += w1[j * 6 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 48];
    for j in 0..48 {
        let mut s = w2[48 * 48 + j];
        for k in 0..48 {
            s += w2[j * 48 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[48];
    for k in 0..48 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

/// A recurrent scan over a shared 600-step sequence: each trip reads the last one's state,
/// so unrolling would buy no independent work; it stays a loop.
#[differentiable]
pub fn scan600(x: f32, w: f32, #[shared] seq: [f32; 600]) -> f32 {
    let mut h = 0.0;
    let mut acc = 0.0;
    for i in 0..600 {
        h = (0.5 * w * h + seq[i] * x).tanh();
        acc += h;
    }
    acc
}

/// An 8-64 layer over per-element weights, past the base budget: independent rows, but no
/// shared weight to read at a constant offset; it stays a loop.
#[differentiable]
pub fn local_layer(x: [f32; 8], w: [f32; 576]) -> f32 {
    let mut h = [0.0; 64];
    for j in 0..64 {
        let mut s = w[512 + j];
        for k in 0..8 {
            s += w[j * 8 + k] * x[k];
        }
        h[j] = s.tanh();
    }
    let mut y = 0.0;
    for j in 0..64 {
        y += h[j] * h[j];
    }
    y
}

/// Springs in a chain, 48 explicit Euler steps, stiffness and damping shared: a loop that
/// carries arrays only, like a layer, but reads what the step before left in them. It
/// stays a loop (a first form of the rule, carried arrays only, unrolled it).
#[differentiable]
pub fn springs(p0: [f32; 6], #[shared] kd: [f32; 2]) -> f32 {
    let mut p = p0;
    let mut v = [0.0; 6];
    for _t in 0..48 {
        let mut f = [0.0; 6];
        for i in 1..5 {
            f[i] = (0.5 + kd[0]) * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - (0.2 + kd[1]) * v[i];
        }
        for i in 0..6 {
            v[i] += 0.05 * f[i];
            p[i] += 0.05 * v[i];
        }
    }
    let mut e = 0.0;
    for i in 0..6 {
        e += (p[i] - 1.0) * (p[i] - 1.0);
    }
    e
}

fn springs_f64(p0: &[f32; 6], kd: &[f32; 2]) -> f64 {
    let mut p: Vec<f64> = p0.iter().map(|&x| f64::from(x)).collect();
    let mut v = [0.0f64; 6];
    let (k, d) = (0.5 + f64::from(kd[0]), 0.2 + f64::from(kd[1]));
    for _ in 0..48 {
        let mut f = [0.0f64; 6];
        for i in 1..5 {
            f[i] = k * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - d * v[i];
        }
        for i in 0..6 {
            v[i] += 0.05 * f[i];
            p[i] += 0.05 * v[i];
        }
    }
    p.iter().map(|x| (x - 1.0) * (x - 1.0)).sum()
}

fn net48_f64(x: &[f32; 6], t: f32, w1: &[f32], w2: &[f32], w3: &[f32]) -> f64 {
    let w = |a: &[f32], i: usize| f64::from(a[i]);
    let h1: Vec<f64> = (0..48)
        .map(|j| {
            let s = w(w1, 288 + j)
                + (0..6)
                    .map(|k| w(w1, j * 6 + k) * f64::from(x[k]))
                    .sum::<f64>();
            s.tanh()
        })
        .collect();
    let h2: Vec<f64> = (0..48)
        .map(|j| {
            let s = w(w2, 2304 + j) + (0..48).map(|k| w(w2, j * 48 + k) * h1[k]).sum::<f64>();
            s.tanh()
        })
        .collect();
    let y = w(w3, 48) + (0..48).map(|k| w(w3, k) * h2[k]).sum::<f64>();
    (y - f64::from(t)).powi(2)
}

fn uniform_array<const N: usize>(rng: &mut Rng, scale: f64) -> [f32; N] {
    std::array::from_fn(|_| rng.uniform(-scale, scale))
}

fn assert_close(what: &str, got: f32, want: f64) {
    assert!(
        (f64::from(got) - want).abs() <= 2e-5 * want.abs().max(1e-2),
        "{what}: {got} against {want}"
    );
}

#[test]
fn the_value_kernel_unrolls_layers_over_shared_weights() {
    // No loop and no function-scope array is left in the value kernel; the adjoint is the
    // workgroup's matrix products, its 48 rows padded to 64 (`tests/networks_cooperative.rs`).
    assert_eq!(net48::WGSL_FORWARD.matches("for (var").count(), 0);
    assert!(!net48::WGSL_FORWARD.contains("array<f32, 48>"));
    assert!(net48::WGSL_ADJOINT.contains("register-blocked"));
    let mut rng = Rng(48);
    let shared = net48::Shared {
        w1: uniform_array(&mut rng, 0.5),
        w2: uniform_array(&mut rng, 0.2),
        w3: uniform_array(&mut rng, 0.3),
    };
    let kernel = net48::kernel(device());
    for n in [1usize, 255, 257, 5000] {
        let batch: Vec<net48::Args> = (0..n)
            .map(|_| net48::Args {
                x: uniform_array(&mut rng, 1.5),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let values = kernel.value(&batch, &shared).expect("launch");
        assert_eq!(values.len(), n);
        for (i, (a, v)) in batch.iter().zip(&values).enumerate() {
            let want = net48_f64(&a.x, a.t, &shared.w1, &shared.w2, &shared.w3);
            assert_close(&format!("net48 element {i} of {n}"), *v, want);
        }
        // The value_and_grad kernel's values, from its products, agree too.
        let (from_adjoint, _, _) = kernel.value_and_grad(&batch, &shared).expect("launch");
        for (i, (v, w)) in values.iter().zip(&from_adjoint).enumerate() {
            assert!(
                (v - w).abs() <= 2e-5 * w.abs().max(1e-2),
                "element {i}: {v} against {w}"
            );
        }
    }
}

#[test]
fn recurrences_and_per_element_layers_stay_loops() {
    assert!(scan600::WGSL_FORWARD.contains("for (var"));
    assert!(local_layer::WGSL_FORWARD.contains("for (var"));
    let mut rng = Rng(600);
    let seq: [f32; 600] = uniform_array(&mut rng, 0.6);
    let batch: Vec<scan600::Args> = (0..300)
        .map(|_| scan600::Args {
            x: rng.uniform(0.5, 2.0),
            w: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let values = scan600::kernel(device())
        .value(&batch, &scan600::Shared { seq })
        .expect("launch");
    for (i, (a, v)) in batch.iter().zip(&values).enumerate() {
        let (mut h, mut acc) = (0.0f64, 0.0f64);
        for s in seq {
            h = (0.5 * f64::from(a.w) * h + f64::from(s) * f64::from(a.x)).tanh();
            acc += h;
        }
        assert!(
            (f64::from(*v) - acc).abs() <= 1e-4 * acc.abs().max(1.0),
            "scan600 element {i}: {v} against {acc}"
        );
    }
    let batch: Vec<local_layer::Args> = (0..300)
        .map(|_| local_layer::Args {
            x: uniform_array(&mut rng, 1.0),
            w: uniform_array(&mut rng, 0.4),
        })
        .collect();
    let values = local_layer::kernel(device()).value(&batch).expect("launch");
    for (i, (a, v)) in batch.iter().zip(&values).enumerate() {
        let want: f64 = (0..64)
            .map(|j| {
                let s = f64::from(a.w[512 + j])
                    + (0..8)
                        .map(|k| f64::from(a.w[j * 8 + k]) * f64::from(a.x[k]))
                        .sum::<f64>();
                s.tanh().powi(2)
            })
            .sum();
        assert_close(&format!("local_layer element {i}"), *v, want);
    }
}

#[test]
fn a_loop_that_reads_the_arrays_it_carries_stays_a_loop() {
    assert!(springs::WGSL_FORWARD.contains("for (var"));
    let mut rng = Rng(6);
    let kd: [f32; 2] = uniform_array(&mut rng, 0.3);
    let batch: Vec<springs::Args> = (0..300)
        .map(|_| springs::Args {
            p0: std::array::from_fn(|_| rng.uniform(0.5, 1.5)),
        })
        .collect();
    let values = springs::kernel(device())
        .value(&batch, &springs::Shared { kd })
        .expect("launch");
    for (i, (a, v)) in batch.iter().zip(&values).enumerate() {
        assert_close(&format!("springs element {i}"), *v, springs_f64(&a.p0, &kd));
    }
}
