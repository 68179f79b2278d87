use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let sq = |v: f32| v * v;
    x
}

fn main() {}
