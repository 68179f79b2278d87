use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let n = 3 * 4;
    x * 2
}

fn main() {}
