use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let mut y = x;
    y += 1.0;
    y
}

fn main() {}
