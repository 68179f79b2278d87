use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) -> f32 {
    let twice = |v: f32| v * 2.0;
    twice(x) + 1.0
}

#[differentiable]
fn g(x: f32) -> f32 {
    Some(x).unwrap_or(0.0)
}

fn main() {}
