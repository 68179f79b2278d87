use gradfuse::differentiable;

#[differentiable]
fn f(p: [f32; 3], k: f32) -> f32 {
    let i = 1;
    p[i]
}

fn main() {}
