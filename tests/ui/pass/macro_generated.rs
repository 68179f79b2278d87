// A differentiable function written by a macro_rules! macro: hygiene of the parameters.
use gradfuse::differentiable;

macro_rules! residual {
    ($name:ident, $scale:literal) => {
        #[differentiable]
        fn $name(p: [f32; 3], q: [f32; 3]) -> f32 {
            let dx = q[0] - p[0];
            let dy = q[1] - p[1];
            let dz = q[2] - p[2];
            $scale * (dx * dx + dy * dy + dz * dz)
        }
    };
}

residual!(half_squared_length, 0.5);

fn main() {
    let (v, g) = half_squared_length::value_and_grad(&half_squared_length::Args {
        p: [0.0; 3],
        q: [1.0, 2.0, 2.0],
    });
    assert_eq!(v, 4.5);
    assert_eq!(g.q, [1.0, 2.0, 2.0]);
}
