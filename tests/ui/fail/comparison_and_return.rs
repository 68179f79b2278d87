use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let above = x > 1.0;
    return x;
}

fn main() {}
