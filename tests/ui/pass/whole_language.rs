// The constructs of the whole language in one program: loops, mutation, branches,
// #[constant] and #[shared] arguments, vector results, calls and a custom derivative.
use gradfuse::{Device, differentiable};

#[differentiable]
fn square(x: f32) -> f32 {
    x * x
}

#[differentiable(grad = soft_abs_grad)]
fn soft_abs(x: f32) -> f32 {
    (x * x + 0.01).sqrt()
}

#[differentiable]
fn soft_abs_grad(x: f32) -> f32 {
    x / (x * x + 0.01).sqrt()
}

#[differentiable]
pub fn layer(#[constant] x: [f32; 4], #[shared] w: [f32; 8], #[shared] b: [f32; 2]) -> f32 {
    const OUT: usize = 2;
    let mut h = [0.0f32; 2];
    for j in 0..OUT {
        let mut s = b[j];
        for i in 0..4 {
            s += w[j * 4 + i] * x[i];
        }
        h[j] = if s > 0.0 { s } else { 0.01 * s };
    }
    square(h[0] - h[1]) + soft_abs(h[0])
}

#[differentiable]
pub fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn main() {
    let d = Device::cpu();
    let shared = layer::Shared { w: [0.5; 8], b: [0.1, -0.1] };
    let args = [layer::Args { x: [1.0, 2.0, 3.0, 4.0] }];
    let (values, _, sg) = layer::kernel(&d).value_and_grad(&args, &shared).unwrap();
    let (v, _, g) = layer::value_and_grad(&args[0], &shared);
    assert_eq!(values[0], v);
    assert_eq!(sg, g);
    let (c, j) = cross::value_and_jacobian(&cross::Args { a: [1.0, 0.0, 0.0], b: [0.0, 1.0, 0.0] });
    assert_eq!(c, [0.0, 0.0, 1.0]);
    // d c[2] / d a = [b[1], -b[0], 0].
    assert_eq!(j[2].a, [1.0, 0.0, 0.0]);
}
