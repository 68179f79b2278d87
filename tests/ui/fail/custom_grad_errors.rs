use gradfuse::differentiable;

#[differentiable]
fn two_words(x: f32, y: f32) -> [f32; 2] {
    [y, x]
}

// The derivative function must return one word per differentiable argument word.
#[differentiable(grad = two_words)]
fn wrong_length(x: f32) -> f32 {
    x * x
}

#[differentiable(gradient = two_words)]
fn wrong_key(x: f32, y: f32) -> f32 {
    x * y
}

fn main() {}
