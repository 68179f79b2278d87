use gradfuse::differentiable;

#[differentiable]
fn f(p: [f32; 3]) -> f32 {
    p[0] + p[3]
}

fn main() {}
