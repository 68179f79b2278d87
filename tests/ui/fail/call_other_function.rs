use gradfuse::differentiable;

fn helper(x: f32) -> f32 {
    x * x
}

#[differentiable]
fn f(x: f32) -> f32 {
    helper(x) + 1.0
}

fn main() {}
