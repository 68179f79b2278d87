use gradfuse::differentiable;

// A function is written in one precision, its signature's: each `f32` here is reported.
#[differentiable]
fn mixed(x: f64, p: [f64; 2], y: f32) -> f64 {
    let _s: f32 = 2.0f32 * std::f32::consts::PI * y;
    x * p[0] + 1.0
}

fn main() {}
