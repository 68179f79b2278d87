use gradfuse::differentiable;

// Every unsupported construct of a function is reported in one build.
#[differentiable]
fn f(x: f32, p: [f32; 2]) -> f32 {
    let a = x as f64;
    let b = p[2];
    let c = x % 2.0;
    let d = x.powi(p[0]);
    x
}

fn main() {}
