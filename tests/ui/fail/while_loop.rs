use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let mut y = x;
    while y > 1.0 {
        y *= 0.5;
    }
    loop {
        y += 1.0;
    }
}

fn main() {}
