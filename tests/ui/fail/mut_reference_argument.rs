use gradfuse::differentiable;

#[differentiable]
fn f(x: f32, out: &mut [f32; 2]) -> f32 {
    x
}

fn main() {}
