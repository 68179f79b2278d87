use gradfuse::differentiable;

#[differentiable]
fn f(x: f32, p: [f32; 2]) -> f32 {
    let mut y = x;
    y %= 2.0;
    let big = true;
    if big {
        y = p;
    }
    let z = if x > 0.0 { y };
    let w = if x { y } else { 1.0 };
    y + z + w
}

fn main() {}
