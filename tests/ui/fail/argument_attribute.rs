use gradfuse::differentiable;

#[differentiable]
fn f(#[shared(all)] w: f32, #[constant(x)] c: f32, #[inline] x: f32, #[allow(unused)] y: f32) -> f32 {
    w * x + c
}

#[differentiable]
fn g(#[constant] a: f32, #[constant] b: f32) -> f32 {
    a * b
}

#[differentiable]
fn h(#[shared] a: f32, #[shared] b: [f32; 2]) -> f32 {
    a * b[0]
}

#[differentiable]
fn k(x: f32, #[shared] #[constant] scale: f32, #[shared] w: f64) -> f32 {
    x * scale
}

fn main() {}
