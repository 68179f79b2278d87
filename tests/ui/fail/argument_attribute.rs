use gradfuse::differentiable;

#[differentiable]
fn f(#[shared] w: f32, x: f32) -> f32 {
    w * x
}

fn main() {}
