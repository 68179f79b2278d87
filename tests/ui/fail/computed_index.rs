use gradfuse::differentiable;

#[differentiable]
fn f(p: [f32; 3], k: f32) -> f32 {
    p[k as usize]
}

fn main() {}
