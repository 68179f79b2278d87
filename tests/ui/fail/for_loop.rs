use gradfuse::differentiable;

#[differentiable]
fn f(p: [f32; 3], n: f32) -> f32 {
    let mut s = 0.0;
    for i in 0..p.len() {
        s += p[i];
    }
    for i in (0..3).rev() {
        s += p[i];
    }
    for i in 0..4 {
        s += p[i];
    }
    for i in 0..3 {
        if p[i] > 1.0 {
            break;
        }
        s += p[i + 1];
    }
    'outer: for _ in 0..3 {
        continue;
    }
    let mut k = 0;
    for i in 0..3 {
        k += i;
    }
    s
}

fn main() {}
