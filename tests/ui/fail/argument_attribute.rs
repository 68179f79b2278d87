use gradfuse::differentiable;

#[differentiable]
fn f(#[shared] w: f32, #[constant(x)] c: f32, #[inline] x: f32, #[allow(unused)] y: f32) -> f32 {
    w * x + c
}

#[differentiable]
fn g(#[constant] a: f32, #[constant] b: f32) -> f32 {
    a * b
}

fn main() {}
