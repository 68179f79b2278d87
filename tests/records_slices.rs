//! A launch cut into many slices of records (`GRADFUSE_RECORDS_BYTES` set to one byte: a
//! slice per run of each workgroup): each slice's adjoint entry writes or adds to the
//! workgroup's row of partial sums, its outer entry adds the kept loops' products, and the
//! next-slice entry moves on, then back to the first slice for the next launch. Checked
//! against the CPU reverse mode's per-element gradients summed here in f64, on batches of
//! one slice and of three, a launch after another, in the streamed and the resident paths.
//!
//! The variable is read once per process, so this file holds one test.

mod common;

use common::{Rng, device};
use gradfuse::differentiable;

/// A 6-20-12-1 network: rows of 20 and 6 columns (not multiples of the 4 x 4 blocks' 4
/// columns apart), 12 and 20 trips.
#[differentiable]
pub fn net(
    #[constant] x: [f32; 6],
    #[constant] t: f32,
    #[shared] w1: [f32; 140],
    #[shared] w2: [f32; 252],
    #[shared] w3: [f32; 13],
) -> f32 {
    let mut h1 = [0.0; 20];
    for j in 0..20 {
        let mut s = w1[120 + j];
        for k in 0..6 {
            s += w1[j * 6 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 12];
    for j in 0..12 {
        let mut s = w2[240 + j];
        for k in 0..20 {
            s += w2[j * 20 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[12];
    for k in 0..12 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn words<T: bytemuck::Pod>(t: &T) -> Vec<f64> {
    bytemuck::cast_slice::<u8, f32>(bytemuck::bytes_of(t))
        .iter()
        .map(|&w| f64::from(w))
        .collect()
}

#[test]
fn sliced_launches_sum_every_slice_once() {
    // SAFETY: the only test of this process sets it before any launch reads it.
    unsafe { std::env::set_var(gradfuse::RECORDS_BYTES_ENV, "1") };
    assert!(net::WGSL_ADJOINT.contains("fn adjoint_outer("));
    let mut rng = Rng(17);
    let uniform = |rng: &mut Rng, n: usize, s: f64| -> Vec<f32> {
        (0..n).map(|_| rng.uniform(-s, s)).collect()
    };
    let shared = net::Shared {
        w1: uniform(&mut rng, 140, 0.5).try_into().expect("140"),
        w2: uniform(&mut rng, 252, 0.3).try_into().expect("252"),
        w3: uniform(&mut rng, 13, 0.4).try_into().expect("13"),
    };
    // One slice; then past 512 runs of 256: three runs per workgroup, three slices, the
    // last workgroup's last run cut short.
    for n in [3000usize, 3 * 512 * 256 - 700] {
        let batch: Vec<net::Args> = (0..n)
            .map(|_| net::Args {
                x: uniform(&mut rng, 6, 1.0).try_into().expect("6"),
                t: rng.uniform(-0.5, 0.5),
            })
            .collect();
        let mut want = vec![0.0f64; 405];
        for a in &batch {
            for (w, g) in want
                .iter_mut()
                .zip(words(&net::value_and_grad(a, &shared).2))
            {
                *w += g;
            }
        }
        let kernel = net::kernel(device());
        let (_, _, sg) = kernel.value_and_grad(&batch, &shared).expect("launch");
        let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
        for (w, (g, e)) in words(&sg).iter().zip(&want).enumerate() {
            assert!(
                (g - e).abs() / scale < 2e-5,
                "n = {n}: shared word {w}: {g} against {e}"
            );
        }
        // The slice is back at the first for the next launch: the same bits again.
        let again = kernel.value_and_grad(&batch, &shared).expect("launch").2;
        assert_eq!(
            bytemuck::bytes_of(&sg),
            bytemuck::bytes_of(&again),
            "n = {n}"
        );
        // A resident launch, recorded twice in one submission: its records buffer is its
        // own, and each launch starts at the first slice.
        let d = device();
        let args = d.buffer(&batch).expect("upload");
        let w = d.buffer(&[shared]).expect("upload");
        let values = d.zeros::<f32>(n).expect("alloc");
        let sums = [
            d.zeros::<net::SharedGrad>(1).expect("alloc"),
            d.zeros(1).expect("alloc"),
        ];
        let mut rec = d.record();
        for s in &sums {
            kernel
                .value_and_grad_to(&mut rec, &args, &w, &values, s)
                .expect("record");
        }
        rec.submit().expect("submit");
        for s in &sums {
            let got = d.read(s).expect("read");
            assert_eq!(
                bytemuck::bytes_of(&got[0]),
                bytemuck::bytes_of(&sg),
                "n = {n}"
            );
        }
    }
}
