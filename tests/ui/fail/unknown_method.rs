use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    x.cbrt() + x.to_degrees()
}

fn main() {}
