//! Calls between `#[differentiable]` functions: in the same module and in another, `pub`
//! or not, nested, inside loops and branches; every generated version includes the callee.

mod common;

use common::{Rng, device};
use gradfuse::{Device, Dual, differentiable};
use gradfuse_shaders_gen::{compile_str, interp};

/// Geometry helpers in a module of their own.
mod geom {
    use gradfuse::differentiable;

    /// The squared distance of two points.
    #[differentiable]
    pub fn dist2(p: [f32; 3], q: [f32; 3]) -> f32 {
        let mut s = 0.0;
        for k in 0..3 {
            let d = q[k] - p[k];
            s += d * d;
        }
        s
    }

    /// The distance, through `dist2`.
    #[differentiable]
    pub fn dist(p: [f32; 3], q: [f32; 3]) -> f32 {
        dist2(p, q).sqrt()
    }
}

#[differentiable]
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { (1.0 + x.exp()).ln() }
}

/// Calls a private function of this module, a function of another module that calls a
/// third, and a call in a loop.
#[differentiable]
pub fn spring_energy(p: [f32; 3], q: [f32; 3], rest: f32, k: [f32; 2]) -> f32 {
    let stretch = geom::dist(p, q) - rest;
    let mut e = 0.5 * k[0] * stretch * stretch;
    for i in 0..2 {
        e += softplus(k[i] * p[i]);
    }
    e
}

const SOURCE: &str = "fn spring_energy(p: [f32; 3], q: [f32; 3], rest: f32, k: [f32; 2]) -> f32 {
    let mut s = 0.0;
    for c in 0..3 {
        let d = q[c] - p[c];
        s += d * d;
    }
    let stretch = s.sqrt() - rest;
    let mut e = 0.5 * k[0] * stretch * stretch;
    for i in 0..2 {
        let x = k[i] * p[i];
        e += if x > 20.0 { x } else { (1.0 + x.exp()).ln() };
    }
    e
}";

#[test]
fn calls_are_differentiated_through() {
    // The oracle: the same function written without calls.
    let c = compile_str(SOURCE).expect("compiles");
    let oracle = gradfuse_shaders_gen::ad::reverse(&c.lowered.primal);
    let mut rng = Rng(43);
    let batch: Vec<spring_energy::Args> = (0..400)
        .map(|_| spring_energy::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            q: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            rest: rng.uniform(0.2, 1.0),
            k: [rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0)],
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (values, grads) = spring_energy::kernel(d)
            .value_and_grad(&batch)
            .expect("launch");
        for (i, a) in batch.iter().enumerate() {
            let w: Vec<f64> = bytemuck::cast_slice::<_, f32>(std::slice::from_ref(a))
                .iter()
                .map(|v| *v as f64)
                .collect();
            let want = interp::eval(&oracle, &w);
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let (v, g) = spring_energy::value_and_grad(a);
            let cpu: Vec<f32> = bytemuck::cast_slice(std::slice::from_ref(&g)).to_vec();
            let gpu: Vec<f32> = bytemuck::cast_slice(std::slice::from_ref(&grads[i])).to_vec();
            assert!((v as f64 - want[0]).abs() < 1e-5 * scale);
            assert!((values[i] as f64 - want[0]).abs() < 2e-5 * scale);
            for k in 0..9 {
                assert!(
                    (cpu[k] as f64 - want[1 + k]).abs() < 1e-5 * scale,
                    "cpu {k}"
                );
                assert!(
                    (gpu[k] as f64 - want[1 + k]).abs() < 2e-5 * scale,
                    "gpu {k}"
                );
            }
        }
    }
    // Duals through eval, and the callee's own API.
    let a = &batch[0];
    let x = |v: f32, i: usize| Dual::<f64, 2>::variable(v as f64, i);
    let d = geom::dist::eval(
        [
            x(a.p[0], 0),
            Dual::constant(a.p[1] as f64),
            Dual::constant(a.p[2] as f64),
        ],
        a.q.map(|v| Dual::constant(v as f64)),
    );
    let (_, g) = geom::dist::value_and_grad(&geom::dist::Args { p: a.p, q: a.q });
    assert!((d.tangent()[0] - g.p[0] as f64).abs() < 1e-6);
}

#[test]
fn the_caller_kernel_is_valid_and_snapshotted() {
    for (name, src) in [
        ("spring_energy_adjoint", spring_energy::WGSL_ADJOINT),
        ("dist_forward", geom::dist::WGSL_FORWARD),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}
