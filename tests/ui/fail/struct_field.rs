use gradfuse::differentiable;

pub struct Point {
    pub x: f32,
}

#[differentiable]
fn f(p: Point) -> f32 {
    p.x * 2.0
}

fn main() {}
