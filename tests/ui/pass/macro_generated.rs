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

// Types passed as `$t:ty` fragments reach the attribute wrapped in invisible groups.
macro_rules! typed {
    ($name:ident, $p:ty, $x:ty) => {
        #[differentiable]
        fn $name(p: $p, x: $x) -> f32 {
            p[0] * x
        }
    };
}

typed!(scaled, [f32; 2], f32);

fn main() {
    let (v, g) = half_squared_length::value_and_grad(&half_squared_length::Args {
        p: [0.0; 3],
        q: [1.0, 2.0, 2.0],
    });
    assert_eq!(v, 4.5);
    assert_eq!(g.q, [1.0, 2.0, 2.0]);
    let (v, g) = scaled::value_and_grad(&scaled::Args { p: [2.0, 0.0], x: 3.0 });
    assert_eq!((v, g.p, g.x), (6.0, [3.0, 0.0], 2.0));
}
