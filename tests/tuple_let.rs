//! `let (a, b) = (x, y);` and `let (s, c) = x.sin_cos();`: names bound to a tuple of values, in every
//! generated version: the plain function (Rust's own meaning), the CPU reverse mode, and
//! the GPU kernels, against central differences of the f64 interpreter.

mod common;

use common::{Rng, central_differences, device, rel_error};
use gradfuse::differentiable;

with_source! {
    ROTATED_SRC,
    // A rotation by a cosine and sine bound together, a swap, a mutable name and one
    // left unbound, and `sin_cos` in both spellings.
    #[differentiable]
    pub fn rotated(p: [f32; 2], t: f32) -> f32 {
        let (c, s) = (t.cos(), t.sin());
        let (x, y) = (c * p[0] - s * p[1], s * p[0] + c * p[1]);
        let (x, y) = (y, x);
        let (mut acc, _) = (x * x, y);
        acc += 0.5 * y;
        let (s2, c2) = (2.0 * t).sin_cos();
        let (s3, _) = f32::sin_cos(p[0] * t);
        acc * (1.0 + t * t) + s2 * c2 + s3
    }
}

#[test]
fn a_tuple_let_binds_each_name_in_every_version() {
    let mut rng = Rng(41);
    let batch: Vec<rotated::Args> = (0..500)
        .map(|_| rotated::Args {
            p: [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)],
            t: rng.uniform(-2.0, 2.0),
        })
        .collect();
    let (values, grads) = rotated::kernel(device())
        .value_and_grad(&batch)
        .expect("launch");
    for (k, a) in batch.iter().enumerate() {
        let words = [a.p[0] as f64, a.p[1] as f64, a.t as f64];
        let (want, fd) = central_differences(ROTATED_SRC, &words, &[0, 1, 2]);
        // Rust's own meaning of the same body.
        let plain = rotated(a.p, a.t) as f64;
        assert!((plain - want).abs() <= 1e-5 * want.abs().max(1.0), "{k}");
        let (v, g) = rotated::value_and_grad(a);
        let cpu = [g.p[0] as f64, g.p[1] as f64, g.t as f64];
        let gpu = [
            grads[k].p[0] as f64,
            grads[k].p[1] as f64,
            grads[k].t as f64,
        ];
        assert!((v as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "{k}");
        assert!(
            (values[k] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
            "{k}"
        );
        assert!(
            rel_error(&cpu, &fd, 1.0) < 1e-4,
            "{k}: {cpu:?} against {fd:?}"
        );
        assert!(
            rel_error(&gpu, &fd, 1.0) < 1e-4,
            "{k}: {gpu:?} against {fd:?}"
        );
    }
}
