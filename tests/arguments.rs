//! `#[constant]` arguments: per-element data with no gradient. Every generated version
//! (eval with duals, value_and_grad, jvp, the GPU kernel) is compared with the f64
//! interpreter of the IR and with central finite differences over the differentiable words.

mod common;

use common::{Rng, device, rel_error, validate_wgsl};
use gradfuse::{Dual, differentiable};
use gradfuse_shaders_gen::{ad, compile_str, interp};

with_source! {
    WEIGHTED_SRC,
    #[differentiable]
    pub fn weighted_residual(
        p: [f32; 3],
        #[constant] target: [f32; 3],
        #[constant] weight: f32,
        scale: f32,
    ) -> f32 {
        let mut s = 0.0;
        s += (p[0] - target[0]) * (p[0] - target[0]);
        s += (p[1] - target[1]) * (p[1] - target[1]);
        s += (p[2] - target[2]).abs();
        // A constant may decide a branch: weights of zero switch the term off.
        if weight > 0.0 { weight * scale.exp() * s } else { scale * scale }
    }
}

with_source! {
    MASKED_SRC,
    // Four argument words but three gradient words: the adjoint kernel stages them.
    #[differentiable]
    pub fn masked(x: [f32; 2], #[constant] mask: f32, y: f32) -> f32 {
        let keep = mask > 0.5;
        let a = if keep { x[0] * y } else { x[1].sin() };
        a + x[1] * y.cos()
    }
}

/// The oracle: value and the gradient words of the differentiable arguments, in f64.
fn oracle(src: &str, words: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
    let c = compile_str(src).expect("the source compiles");
    let primal = &c.lowered.primal;
    let all = interp::eval(&ad::reverse(primal), words);
    let fd = interp::finite_difference_gradient(primal, words, 1e-6);
    let keep = c.lowered.layout.grad_words();
    let pick = |v: &[f64]| keep.iter().map(|w| v[*w as usize]).collect::<Vec<f64>>();
    (all[0], pick(&all[1..]), pick(&fd))
}

/// Values are sums of terms of size about one that may cancel: their error is judged
/// relative to the larger of the value and one.
fn close(got: f32, want: f64, tol: f64) -> bool {
    (got as f64 - want).abs() <= tol * want.abs().max(1.0)
}

fn weighted_args(rng: &mut Rng, weight: f32) -> weighted_residual::Args {
    let mut u = || rng.uniform(-1.5, 1.5);
    weighted_residual::Args {
        p: [u(), u(), u()],
        target: [u(), u(), u()],
        weight,
        scale: u(),
    }
}

#[test]
fn constant_arguments_have_no_gradient_and_the_others_are_right() {
    let mut rng = Rng(7);
    let batch: Vec<weighted_residual::Args> = (0..300)
        .map(|i| weighted_args(&mut rng, if i % 3 == 0 { 0.0 } else { 0.75 }))
        .collect();
    let d = device();
    let (values, grads) = weighted_residual::kernel(d)
        .value_and_grad(&batch)
        .expect("launch");
    for (i, a) in batch.iter().enumerate() {
        let words: Vec<f64> = bytemuck::cast_slice::<_, f32>(std::slice::from_ref(a))
            .iter()
            .map(|v| *v as f64)
            .collect();
        let (want_v, want_g, fd) = oracle(WEIGHTED_SRC, &words);
        assert!(
            rel_error(&fd, &want_g, 1e-3) < 1e-5,
            "oracle vs differences"
        );

        // `Grad` has `p` and `scale` only: this literal does not compile otherwise.
        let (v, g) = weighted_residual::value_and_grad(a);
        let weighted_residual::Grad { p, scale } = g;
        let got: Vec<f64> = p.iter().chain([&scale]).map(|x| *x as f64).collect();
        assert!(close(v, want_v, 1e-5), "{a:?}: {v} vs {want_v}");
        assert!(
            rel_error(&got, &want_g, 1.0) < 1e-5,
            "{got:?} vs {want_g:?}"
        );

        // Forward mode through the generic version: duals for p and scale only.
        let var = |x: f32, k: usize| Dual::<f64, 4>::variable(x as f64, k);
        let cst = |x: f32| Dual::<f64, 4>::constant(x as f64);
        let dual = weighted_residual::eval(
            [var(a.p[0], 0), var(a.p[1], 1), var(a.p[2], 2)],
            a.target.map(cst),
            cst(a.weight),
            var(a.scale, 3),
        );
        assert!(rel_error(&dual.tangent(), &want_g, 1.0) < 1e-10);

        // jvp: the tangent has the shape of Grad.
        let t = weighted_residual::Grad {
            p: [0.5, -1.0, 0.25],
            scale: 2.0,
        };
        let (jv, jd) = weighted_residual::jvp(a, &t);
        let dir: f64 = [0.5, -1.0, 0.25, 2.0]
            .iter()
            .zip(&want_g)
            .map(|(t, g)| t * g)
            .sum();
        let mag: f64 = want_g.iter().map(|g| g.abs()).sum::<f64>().max(1.0);
        assert_eq!(jv, v);
        assert!((jd as f64 - dir).abs() < 1e-5 * mag);

        // The batched kernel (GPU in CI).
        assert!(close(values[i], want_v, 2e-5));
        let gpu: Vec<f64> = grads[i]
            .p
            .iter()
            .chain([&grads[i].scale])
            .map(|x| *x as f64)
            .collect();
        assert!(
            rel_error(&gpu, &want_g, 1.0) < 2e-5,
            "{gpu:?} vs {want_g:?}"
        );
    }
}

#[test]
fn staged_gradients_skip_constant_words() {
    let mut rng = Rng(11);
    let batch: Vec<masked::Args> = (0..1000)
        .map(|i| masked::Args {
            x: [rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)],
            mask: (i % 2) as f32,
            y: rng.uniform(-2.0, 2.0),
        })
        .collect();
    let (values, grads) = masked::kernel(device())
        .value_and_grad(&batch)
        .expect("launch");
    for (i, a) in batch.iter().enumerate() {
        let words = [a.x[0] as f64, a.x[1] as f64, a.mask as f64, a.y as f64];
        let (want_v, want_g, fd) = oracle(MASKED_SRC, &words);
        assert!(rel_error(&fd, &want_g, 1e-3) < 1e-5);
        let (v, g) = masked::value_and_grad(a);
        let got = [g.x[0] as f64, g.x[1] as f64, g.y as f64];
        assert!(close(v, want_v, 1e-5), "{a:?}: {v} vs {want_v}");
        assert!(rel_error(&got, &want_g, 1.0) < 1e-5);
        let gpu = [
            grads[i].x[0] as f64,
            grads[i].x[1] as f64,
            grads[i].y as f64,
        ];
        assert!(close(values[i], want_v, 2e-5));
        assert!(
            rel_error(&gpu, &want_g, 1.0) < 2e-5,
            "{gpu:?} vs {want_g:?}"
        );
    }
}

#[test]
fn constant_argument_kernels_are_valid_and_snapshotted() {
    for (name, src) in [
        ("weighted_residual_forward", weighted_residual::WGSL_FORWARD),
        ("weighted_residual_adjoint", weighted_residual::WGSL_ADJOINT),
        ("masked_adjoint", masked::WGSL_ADJOINT),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}

/// Arguments and locals named with raw identifiers (`r#type`, a keyword): the expansion used
/// to panic on the names it derives from them (`t_r#type`).
#[differentiable]
pub fn raw_names(r#type: f32, r#loop: [f32; 2], #[constant] r#in: f32) -> f32 {
    let r#match = r#type * r#loop[0];
    r#match * r#match + r#loop[1].sin() * r#in
}

#[test]
fn raw_identifiers_name_arguments_and_locals() {
    let a = raw_names::Args {
        r#type: 1.5,
        r#loop: [0.5, 0.25],
        r#in: 2.0,
    };
    let (t, l, i) = (1.5f64, [0.5f64, 0.25], 2.0f64);
    let want = (t * l[0]).powi(2) + l[1].sin() * i;
    let want_grad = [2.0 * t * l[0] * l[0], 2.0 * t * t * l[0], l[1].cos() * i];
    let (v, g) = raw_names::value_and_grad(&a);
    assert!(close(v, want, 1e-6));
    let got = [g.r#type, g.r#loop[0], g.r#loop[1]];
    for (g, w) in got.iter().zip(want_grad) {
        assert!(close(*g, w, 1e-6), "{g} vs {w}");
    }
    validate_wgsl("raw_names_adjoint", raw_names::WGSL_ADJOINT);
    let (values, grads) = raw_names::kernel(device())
        .value_and_grad(&[a; 300])
        .expect("launch");
    assert!(close(values[299], want, 1e-5));
    assert!(close(grads[299].r#loop[1], want_grad[2], 1e-5));
}
