use gradfuse::differentiable;

#[differentiable]
fn f<T>(x: f32) -> f32 {
    x
}

fn main() {}
