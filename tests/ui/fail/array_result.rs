use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> [f32; 2] {
    [x, x]
}

fn main() {}
