use gradfuse::differentiable;

#[differentiable]
struct S {
    x: f32,
}

fn main() {}
