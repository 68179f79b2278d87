use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> (f32, [f32; 2]) {
    (x, x)
}

#[differentiable]
fn nested(x: f32) -> (f32, (f32, f32)) {
    (x, (x, x))
}

#[differentiable]
fn g(x: f32, #[shared] w: f32) -> [f32; 2] {
    [x, w]
}

#[differentiable]
fn h(x: f32) -> [f32; 2] {
    let y = x * 2.0;
    y
}

fn main() {}
