// Mutation, `if`/`else` and conditions: every generated version takes the branch the
// plain function takes, and the derivative is that of the branch taken.
use gradfuse::{Device, Dual, differentiable};

#[differentiable]
pub fn huber(mut r: f32, delta: f32) -> f32 {
    if r < 0.0 {
        r = -r;
    }
    let quadratic: bool = r <= delta;
    if quadratic { 0.5 * r * r } else { delta * (r - 0.5 * delta) }
}

#[differentiable]
fn safe_sqrt(x: f32) -> f32 {
    // `x.sqrt()` is NaN for x < 0, on the branch not taken: the gradient stays 0.
    let mut acc = [0.0f32; 2];
    acc[0] += if x > 0.0 { x.sqrt() } else { 0.0 };
    acc[1] = acc[0] * 2.0;
    {
        let twice = acc[1];
        acc[0] -= twice;
    }
    acc[0] + acc[1]
}

fn main() {
    for (r, delta) in [(0.5f32, 1.0f32), (-3.0, 1.0), (2.0, 1.0), (-0.25, 1.0)] {
        let args = huber::Args { r, delta };
        let want = if r.abs() <= delta { 0.5 * r * r } else { delta * (r.abs() - 0.5 * delta) };
        let want_dr = if r.abs() <= delta { r } else { delta * r.signum() };
        assert_eq!(huber(r, delta), want);
        assert_eq!(huber::eval(r, delta), want);
        let (v, g) = huber::value_and_grad(&args);
        assert_eq!(v, want);
        assert!((g.r - want_dr).abs() < 1e-6, "{r}: {} vs {want_dr}", g.r);
        let d = huber::eval(Dual::<f64, 2>::variable(r as f64, 0), Dual::variable(delta as f64, 1));
        assert!((d.tangent()[0] - want_dr as f64).abs() < 1e-12);
        assert!((d.tangent()[1] - g.delta as f64).abs() < 1e-6);
    }
    let (v, g) = safe_sqrt::value_and_grad(&safe_sqrt::Args { x: -4.0 });
    assert_eq!((v, g.x), (0.0, 0.0));
    let (v, g) = safe_sqrt::value_and_grad(&safe_sqrt::Args { x: 4.0 });
    assert_eq!((v, g.x), (2.0, 0.25));

    let device = Device::cpu();
    let batch = [safe_sqrt::Args { x: -1.0 }, safe_sqrt::Args { x: 9.0 }];
    let (values, grads) = safe_sqrt::kernel(&device).value_and_grad(&batch).unwrap();
    assert_eq!(values, [0.0, 3.0]);
    assert_eq!(grads[0].x, 0.0);
    assert!((grads[1].x - 1.0 / 6.0).abs() < 1e-7);
}
