//! CPU benchmark (criterion): gradfuse's generated reverse mode (`value_and_grad`) against a
//! hand-written analytic gradient and against num-dual's forward-mode gradient; gradfuse's
//! `eval::<Dual<f64, N>>` against num-dual's `DualSVec64<N>`; and the compiler's own time
//! (lower, differentiate, optimize, emit) on generated 50- and 500-operation functions and on
//! a 10,000-iteration loop.
//!
//! `cargo bench --bench cpu` (criterion prints each group's entries side by side).

use criterion::{Criterion, criterion_group, criterion_main};
use gradfuse::Dual;
use nalgebra::SVector;
use num_dual::{DualNum, gradient};
use std::hint::black_box;

mod common;
use common::{edge_residual, rosenbrock4, transcendental4};

// Hand-written analytic gradients: the bar for value_and_grad.
fn transcendental4_hand(x: &[f32; 4]) -> (f32, [f32; 4]) {
    let (s, c, e, l, r) = (x[0].sin(), x[0].cos(), x[1].exp(), x[2].ln(), x[3].sqrt());
    (s * e + l * r, [c * e, s * e, r / x[2], 0.5 * l / r])
}

fn rosenbrock4_hand(x: &[f32; 4]) -> (f32, [f32; 4]) {
    let a = [x[1] - x[0] * x[0], x[2] - x[1] * x[1], x[3] - x[2] * x[2]];
    let b = [1.0 - x[0], 1.0 - x[1], 1.0 - x[2]];
    let v =
        100.0 * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]) + b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
    let g = [
        -400.0 * x[0] * a[0] - 2.0 * b[0],
        200.0 * a[0] - 400.0 * x[1] * a[1] - 2.0 * b[1],
        200.0 * a[1] - 400.0 * x[2] * a[2] - 2.0 * b[2],
        200.0 * a[2],
    ];
    (v, g)
}

fn edge_residual_hand(p: &[f32; 3], q: &[f32; 3], rest: f32) -> (f32, [f32; 7]) {
    let d = [q[0] - p[0], q[1] - p[1], q[2] - p[2]];
    let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
    let u = [d[0] / len, d[1] / len, d[2] / len];
    (len - rest, [-u[0], -u[1], -u[2], u[0], u[1], u[2], -1.0])
}

// The same functions written for num-dual, generic over its dual numbers.
fn transcendental4_nd<D: DualNum<Primitive = f64> + Copy>(x: SVector<D, 4>) -> D {
    x[0].sin() * x[1].exp() + x[2].ln() * x[3].sqrt()
}

fn rosenbrock4_nd<D: DualNum<Primitive = f64> + Copy>(x: SVector<D, 4>) -> D {
    let term = |i: usize| {
        let a = x[i + 1] - x[i] * x[i];
        let b = x[i] - 1.0;
        a * a * 100.0 + b * b
    };
    term(0) + term(1) + term(2)
}

fn edge_residual_nd<D: DualNum<Primitive = f64> + Copy>(x: SVector<D, 7>) -> D {
    let (dx, dy, dz) = (x[3] - x[0], x[4] - x[1], x[5] - x[2]);
    (dx * dx + dy * dy + dz * dz).sqrt() - x[6]
}

const BATCH: usize = 1024;

fn points<const N: usize>(seed: u64) -> Vec<[f32; N]> {
    let mut s = seed | 1;
    (0..BATCH)
        .map(|_| {
            std::array::from_fn(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                0.5 + 1.5 * ((s >> 40) as f32 / (1u64 << 24) as f32)
            })
        })
        .collect()
}

fn gradients(c: &mut Criterion) {
    let x4: Vec<[f32; 4]> = points(1);
    let x7: Vec<[f32; 7]> = points(2);

    let mut g = c.benchmark_group("transcendental4 value and gradient, 1024 points");
    g.bench_function("gradfuse value_and_grad (f32 reverse)", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| {
                    transcendental4::value_and_grad(&transcendental4::Args { x: *x })
                        .1
                        .x[3]
                })
                .sum::<f32>()
        })
    });
    g.bench_function("hand-written gradient (f32)", |b| {
        b.iter(|| x4.iter().map(|x| transcendental4_hand(x).1[3]).sum::<f32>())
    });
    g.bench_function("gradfuse eval::<Dual<f64, 4>>", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| {
                    transcendental4::eval(std::array::from_fn(|i| {
                        Dual::<f64, 4>::variable(x[i] as f64, i)
                    }))
                    .tangent()[3]
                })
                .sum::<f64>()
        })
    });
    g.bench_function("num-dual gradient (DualSVec64<4>)", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| gradient(transcendental4_nd, &SVector::from(x.map(|v| v as f64))).1[3])
                .sum::<f64>()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("rosenbrock4 value and gradient, 1024 points");
    g.bench_function("gradfuse value_and_grad (f32 reverse)", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| {
                    rosenbrock4::value_and_grad(&rosenbrock4::Args { x: *x })
                        .1
                        .x[3]
                })
                .sum::<f32>()
        })
    });
    g.bench_function("hand-written gradient (f32)", |b| {
        b.iter(|| x4.iter().map(|x| rosenbrock4_hand(x).1[3]).sum::<f32>())
    });
    g.bench_function("gradfuse eval::<Dual<f64, 4>>", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| {
                    rosenbrock4::eval(std::array::from_fn(|i| {
                        Dual::<f64, 4>::variable(x[i] as f64, i)
                    }))
                    .tangent()[3]
                })
                .sum::<f64>()
        })
    });
    g.bench_function("num-dual gradient (DualSVec64<4>)", |b| {
        b.iter(|| {
            x4.iter()
                .map(|x| gradient(rosenbrock4_nd, &SVector::from(x.map(|v| v as f64))).1[3])
                .sum::<f64>()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("edge_residual value and gradient, 1024 points");
    g.bench_function("gradfuse value_and_grad (f32 reverse)", |b| {
        b.iter(|| {
            x7.iter()
                .map(|x| {
                    let a = edge_residual::Args {
                        p: [x[0], x[1], x[2]],
                        q: [x[3], x[4], x[5]],
                        rest: x[6],
                    };
                    edge_residual::value_and_grad(&a).1.q[2]
                })
                .sum::<f32>()
        })
    });
    g.bench_function("hand-written gradient (f32)", |b| {
        b.iter(|| {
            x7.iter()
                .map(|x| edge_residual_hand(&[x[0], x[1], x[2]], &[x[3], x[4], x[5]], x[6]).1[5])
                .sum::<f32>()
        })
    });
    g.bench_function("gradfuse eval::<Dual<f64, 7>>", |b| {
        b.iter(|| {
            x7.iter()
                .map(|x| {
                    let d = |i: usize| Dual::<f64, 7>::variable(x[i] as f64, i);
                    edge_residual::eval([d(0), d(1), d(2)], [d(3), d(4), d(5)], d(6)).tangent()[5]
                })
                .sum::<f64>()
        })
    });
    g.bench_function("num-dual gradient (DualSVec64<7>)", |b| {
        b.iter(|| {
            x7.iter()
                .map(|x| gradient(edge_residual_nd, &SVector::from(x.map(|v| v as f64))).1[5])
                .sum::<f64>()
        })
    });
    g.finish();
}

/// Source text of a function of `ops` chained operations over 4 arguments (a reproducible
/// mix of arithmetic and transcendental functions).
fn long_function(ops: usize) -> String {
    let mut src = String::from(
        "fn long(x: [f32; 4]) -> f32 {\n    let v0 = x[0];\n    let v1 = x[1];\n    let v2 = x[2];\n    let v3 = x[3];\n",
    );
    let mut s = 0x9E37_79B9u64;
    for i in 4..ops + 4 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (a, b) = ((s >> 33) as usize % i, (s >> 45) as usize % i);
        let e = match (s >> 20) % 6 {
            0 => format!("v{a} * v{b}"),
            1 => format!("v{a} + v{b}"),
            2 => format!("v{a} - 0.5 * v{b}"),
            3 => format!("v{a}.sin() * v{b}"),
            4 => format!("(v{a} * 0.1).tanh() + v{b}"),
            _ => format!("(v{a} * v{a} + 1.0).sqrt()"),
        };
        src.push_str(&format!("    let v{i} = {e};\n"));
    }
    let n = ops + 3;
    src.push_str(&format!("    v{n} + v{} + v{}\n}}\n", n - 1, n - 2));
    src
}

fn compile_time(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile: lower, differentiate, optimize, emit WGSL");
    for ops in [50usize, 500] {
        let src = long_function(ops);
        let item: syn::ItemFn = syn::parse_str(&src).expect("generated source parses");
        g.bench_function(format!("{ops} operations"), |b| {
            b.iter(|| {
                gradfuse_shaders_gen::compile(black_box(&item))
                    .expect("compiles")
                    .wgsl_reverse
                    .len()
            })
        });
    }
    // A loop stays a loop: compiling 10,000 iterations costs what 10 do.
    let looped = "fn relax(x: f32, w: [f32; 2]) -> f32 {
        let mut s = x;
        for i in 0..10000 {
            s = s * 0.999 + (w[0] * s + w[1] * (i as f32) * 0.0001).sin() * 0.001;
        }
        s * s
    }";
    let item: syn::ItemFn = syn::parse_str(looped).expect("parses");
    g.bench_function("10,000-iteration loop", |b| {
        b.iter(|| {
            gradfuse_shaders_gen::compile(black_box(&item))
                .expect("compiles")
                .wgsl_reverse
                .len()
        })
    });
    g.finish();
}

criterion_group!(benches, gradients, compile_time);
criterion_main!(benches);
