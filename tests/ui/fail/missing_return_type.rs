use gradfuse::differentiable;

#[differentiable]
fn f(x: f32) {
    let _y = x;
}

fn main() {}
