use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    while x > 0.0 {}
    x
}

fn main() {}
