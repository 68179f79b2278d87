use gradfuse::differentiable;

#[differentiable]
fn f(x: f32, p: [f32; 2]) -> f32 {
    let y = x;
    y = 2.0 * x;
    p[0] = 1.0;
    y + p[0]
}

fn main() {}
