use gradfuse::differentiable;

#[differentiable]
fn f(p: [f32; 3]) -> f32 {
    for i in 0..3 {}
    p[0]
}

fn main() {}
