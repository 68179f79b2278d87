use gradfuse::differentiable;

#[differentiable]
fn f(x: f32, y: f32) -> f32 {
    x.sin(y) + x.atan2()
}

fn main() {}
