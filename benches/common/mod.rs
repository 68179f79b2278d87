//! The functions both benches measure, each with its source text (for the IR's operation
//! count and the compile-time bench).
#![allow(dead_code)]

use gradfuse::differentiable;

/// Defines a benchmarked function and keeps its source, for the IR's operation count.
macro_rules! bench_fn {
    ($src:ident; fn $name:ident($($arg:ident: $ty:ty),*) -> f32 $body:block) => {
        #[differentiable]
        pub fn $name($($arg: $ty),*) -> f32 $body
        pub const $src: &str = stringify!(fn $name($($arg: $ty),*) -> f32 $body);
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

bench_fn! { EDGE_RESIDUAL; fn edge_residual(p: [f32; 3], q: [f32; 3], rest: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    (dx * dx + dy * dy + dz * dz).sqrt() - rest
}}
