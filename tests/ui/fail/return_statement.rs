use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let above = x > 1.0;
    if above {
        return x;
    }
    2.0 * x
}

fn main() {}
