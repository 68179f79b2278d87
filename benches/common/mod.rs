//! The functions both benches measure, each with its source text (for the IR's operation
//! count and the compile-time bench).
#![allow(dead_code)]

use gradfuse::differentiable;

/// Defines a benchmarked function and keeps its source, for the IR's operation count.
macro_rules! bench_fn {
    ($src:ident; fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[differentiable]
        pub fn $name($($arg: $ty),*) -> $ret $body
        pub const $src: &str = stringify!(fn $name($($arg: $ty),*) -> $ret $body);
    };
}

bench_fn! { TRANSCENDENTAL4; fn transcendental4(x: [f32; 4]) -> f32 {
    x[0].sin() * x[1].exp() + x[2].ln() * x[3].sqrt()
}}

bench_fn! { ROSENBROCK4; fn rosenbrock4(x: [f32; 4]) -> f32 {
    let a0 = x[1] - x[0] * x[0];
    let a1 = x[2] - x[1] * x[1];
    let a2 = x[3] - x[2] * x[2];
    let b0 = 1.0 - x[0];
    let b1 = 1.0 - x[1];
    let b2 = 1.0 - x[2];
    100.0 * (a0 * a0 + a1 * a1 + a2 * a2) + b0 * b0 + b1 * b1 + b2 * b2
}}

bench_fn! { TRANSCENDENTAL4_F64; fn transcendental4_f64(x: [f64; 4]) -> f64 {
    x[0].sin() * x[1].exp() + x[2].ln() * x[3].sqrt()
}}

bench_fn! { ROSENBROCK4_F64; fn rosenbrock4_f64(x: [f64; 4]) -> f64 {
    let a0 = x[1] - x[0] * x[0];
    let a1 = x[2] - x[1] * x[1];
    let a2 = x[3] - x[2] * x[2];
    let b0 = 1.0 - x[0];
    let b1 = 1.0 - x[1];
    let b2 = 1.0 - x[2];
    100.0 * (a0 * a0 + a1 * a1 + a2 * a2) + b0 * b0 + b1 * b1 + b2 * b2
}}

bench_fn! { EDGE_RESIDUAL_F64; fn edge_residual_f64(p: [f64; 3], q: [f64; 3], rest: f64) -> f64 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    (dx * dx + dy * dy + dz * dz).sqrt() - rest
}}

bench_fn! { EDGE_RESIDUAL; fn edge_residual(p: [f32; 3], q: [f32; 3], rest: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    (dx * dx + dy * dy + dz * dz).sqrt() - rest
}}

bench_fn! { REPROJECTION; fn reprojection(cam: [f32; 9], point: [f32; 3], obs: [f32; 2]) -> f32 {
    // A bundle-adjustment residual's squared norm: angle-axis rotation (Rodrigues),
    // translation, projection, radial distortion, focal length.
    let theta = (cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2] + 1e-12).sqrt();
    let kx = cam[0] / theta;
    let ky = cam[1] / theta;
    let kz = cam[2] / theta;
    let c = theta.cos();
    let s = theta.sin();
    let dot = (kx * point[0] + ky * point[1] + kz * point[2]) * (1.0 - c);
    let px = point[0] * c + (ky * point[2] - kz * point[1]) * s + kx * dot + cam[3];
    let py = point[1] * c + (kz * point[0] - kx * point[2]) * s + ky * dot + cam[4];
    let pz = point[2] * c + (kx * point[1] - ky * point[0]) * s + kz * dot + cam[5];
    let u = -px / pz;
    let v = -py / pz;
    let r2 = u * u + v * v;
    let d = cam[6] * (1.0 + cam[7] * r2 + cam[8] * r2 * r2);
    let ex = d * u - obs[0];
    let ey = d * v - obs[1];
    0.5 * (ex * ex + ey * ey)
}}

bench_fn! { CHAIN24; fn chain24(x: [f32; 24]) -> f32 {
    let mut s = 0.0;
    for i in 0..23 {
        s += (x[i] * x[i + 1]).sin() * (0.5 * x[i]).exp() + (x[i] - x[i + 1]) * (x[i] - x[i + 1]);
    }
    s
}}

/// Defines items and keeps their source text.
macro_rules! with_source {
    ($src:ident, $($item:tt)*) => {
        $($item)*
        pub const $src: &str = stringify!($($item)*);
    };
}

with_source! { MLP_LOSS,
    /// The per-sample loss of an 8-16-1 tanh network; the weights are shared by the batch.
    #[differentiable]
    pub fn mlp_loss(
        #[constant] x: [f32; 8],
        #[constant] target: f32,
        #[shared] w1: [f32; 128],
        #[shared] b1: [f32; 16],
        #[shared] w2: [f32; 16],
        #[shared] b2: f32,
    ) -> f32 {
        let mut y = b2;
        for j in 0..16 {
            let mut s = b1[j];
            for i in 0..8 {
                s += w1[j * 8 + i] * x[i];
            }
            y += w2[j] * s.tanh();
        }
        (y - target) * (y - target)
    }
}

with_source! { SOFT_GATE16,
    /// A soft logic gate: a softmax over 16 shared logits mixes the 16 relaxed functions of
    /// two inputs.
    #[differentiable]
    pub fn soft_gate16(a: f32, b: f32, #[constant] target: f32, #[shared] logits: [f32; 16]) -> f32 {
        let ab = a * b;
        let ops = [
            0.0, ab, a - ab, a, b - ab, b, a + b - 2.0 * ab, a + b - ab,
            1.0 - (a + b - ab), 1.0 - (a + b - 2.0 * ab), 1.0 - b, 1.0 - b + ab,
            1.0 - a, 1.0 - a + ab, 1.0 - ab, 1.0,
        ];
        let mut m = logits[0];
        for k in 1..16 {
            m = m.max(logits[k]);
        }
        let mut z = 0.0;
        let mut out = 0.0;
        for k in 0..16 {
            let e = (logits[k] - m).exp();
            z += e;
            out += e * ops[k];
        }
        let g = out / z;
        (g - target) * (g - target)
    }
}

/// Defines an I-H-H-1 tanh network with a squared-error loss, as a user writes it: the
/// per-element network of the GPU bench's network table; `$src` is its source text.
macro_rules! network {
    ($name:ident, $src:ident, $i:literal, $h:literal, $w1:literal, $w2:literal, $w3:literal) => {
        network!(@item $src, {
            pub fn $name(
                #[constant] x: [f32; $i],
                #[constant] t: f32,
                #[shared] w1: [f32; $w1],
                #[shared] w2: [f32; $w2],
                #[shared] w3: [f32; $w3],
            ) -> f32 {
                let mut h1 = [0.0; $h];
                for j in 0..$h {
                    let mut s = w1[$i * $h + j];
                    for k in 0..$i {
                        s += w1[j * $i + k] * x[k];
                    }
                    h1[j] = s.tanh();
                }
                let mut h2 = [0.0; $h];
                for j in 0..$h {
                    let mut s = w2[$h * $h + j];
                    for k in 0..$h {
                        s += w2[j * $h + k] * h1[k];
                    }
                    h2[j] = s.tanh();
                }
                let mut y = w3[$h];
                for k in 0..$h {
                    y += w3[k] * h2[k];
                }
                (y - t) * (y - t)
            }
        });
    };
    (@item $src:ident, { $($item:tt)* }) => {
        #[differentiable]
        $($item)*

        #[allow(dead_code)]
        pub const $src: &str = stringify!($($item)*);
    };
}

network!(net32, NET32_SRC, 8, 32, 288, 1056, 33);
network!(net64, NET64_SRC, 8, 64, 576, 4160, 65);
