use gradfuse::differentiable;

#[differentiable]
fn ping(x: f32) -> f32 {
    if x > 1.0 { pong(x * 0.5) } else { x }
}

#[differentiable]
fn pong(x: f32) -> f32 {
    ping(x) + 1.0
}

#[differentiable]
fn itself(x: f32) -> f32 {
    itself(x * 0.5)
}

fn main() {}
