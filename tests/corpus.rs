//! The corpus: functions that together call every method of the function table. For each,
//! the generated WGSL is snapshotted and validated by naga, and every generated version
//! (plain, `eval::<f64>`, `eval::<Dual>`, `value_and_grad`, `jvp`, the GPU kernels) is
//! compared with the f64 interpreter of the IR, whose derivatives are in turn checked by
//! central finite differences.

// `piecewise` spells conditions the way a user might (`!(y < 1.5)`, `y == y`, which differ
// from `y >= 1.5` and `true` exactly at NaN): that is what it tests.
#![allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::eq_op,
    clippy::assign_op_pattern
)]

mod common;

use common::{Rng, device, rel_error};
use gradfuse::{Device, Dual, Error, HyperDual, Source, differentiable};
use gradfuse_shaders_gen::{ad, compile_str, interp, ops};

/// Values and flattened gradient words of a batch (or values and directional derivatives).
type ValuesAndGrads = (Vec<f32>, Vec<f32>);

/// A launch of the tangent kernel: device, argument words, tangent words.
type TangentLaunch = fn(&Device, &[f32], &[f32]) -> Result<ValuesAndGrads, Error>;

/// Everything generated for one corpus function, as functions over argument words.
struct Case {
    name: &'static str,
    src: &'static str,
    /// Inputs are drawn uniformly from this interval, inside every function's domain.
    domain: (f64, f64),
    wgsl_forward: &'static str,
    wgsl_adjoint: &'static str,
    wgsl_tangent: &'static str,
    plain: fn(&[f32]) -> f32,
    eval_f32: fn(&[f32]) -> f32,
    eval_f64: fn(&[f64]) -> f64,
    dual: fn(&[f64]) -> (f64, Vec<f64>),
    value_and_grad: fn(&[f32]) -> (f32, Vec<f32>),
    jvp: fn(&[f32], &[f32]) -> (f32, f32),
    gpu_value: fn(&Device, &[f32]) -> Result<Vec<f32>, Error>,
    gpu_grad: fn(&Device, &[f32]) -> Result<ValuesAndGrads, Error>,
    /// Values and directional derivatives by the tangent kernel (argument words, tangent
    /// words: every corpus argument is differentiable).
    gpu_jvp: TangentLaunch,
    /// The gathered kernels (forward, adjoint).
    wgsl_gathered: [&'static str; 2],
    /// Values and gradients by the gathered launch, every argument read through an index
    /// (element `k` reads row `n - 1 - k`), put back in the batch's order.
    gpu_gathered: fn(&Device, &[f32]) -> Result<ValuesAndGrads, Error>,
    wgsl_hessian: &'static str,
    /// The Hessian kernel's Hessians (flattened, row-major per element).
    gpu_hessian: fn(&Device, &[f32]) -> Result<Vec<f32>, Error>,
    /// `eval` over hyper-dual numbers, ε1 on word `i` and ε2 on word `j`.
    hyper: fn(&[f64], usize, usize) -> HyperDual<f64>,
}

/// Takes one argument of type `f32` or `[f32; N]` from an iterator of scalars.
macro_rules! take {
    ($it:ident, f32) => {
        $it.next().expect("enough words")
    };
    ($it:ident, [f32; $n:literal]) => {
        std::array::from_fn::<_, $n, _>(|_| $it.next().expect("enough words"))
    };
}

macro_rules! corpus {
    ($( domain = ($lo:expr, $hi:expr); fn $name:ident ( $($arg:ident : $ty:tt),* ) -> f32 $body:block )*) => {
        $(
            #[differentiable]
            pub fn $name($($arg: $ty),*) -> f32 $body
        )*

        fn cases() -> Vec<Case> {
            vec![$(Case {
                name: stringify!($name),
                src: stringify!(fn $name($($arg: $ty),*) -> f32 $body),
                domain: ($lo, $hi),
                wgsl_forward: $name::WGSL_FORWARD,
                wgsl_adjoint: $name::WGSL_ADJOINT,
                wgsl_tangent: $name::WGSL_TANGENT,
                plain: |w| {
                    let a = &bytemuck::cast_slice::<f32, $name::Args>(w)[0];
                    $name($(a.$arg),*)
                },
                eval_f32: |w| {
                    let mut it = w.iter().copied();
                    $(let $arg = take!(it, $ty);)*
                    $name::eval::<f32>($($arg),*)
                },
                eval_f64: |w| {
                    let mut it = w.iter().copied();
                    $(let $arg = take!(it, $ty);)*
                    $name::eval::<f64>($($arg),*)
                },
                dual: |w| {
                    let mut it = w.iter().enumerate().map(|(i, v)| Dual::<f64, 16>::variable(*v, i));
                    $(let $arg = take!(it, $ty);)*
                    let r = $name::eval($($arg),*);
                    (r.value(), r.tangent()[..w.len()].to_vec())
                },
                value_and_grad: |w| {
                    let a = &bytemuck::cast_slice::<f32, $name::Args>(w)[0];
                    let (v, g) = $name::value_and_grad(a);
                    (v, bytemuck::cast_slice(&[g]).to_vec())
                },
                jvp: |w, t| {
                    let a = &bytemuck::cast_slice::<f32, $name::Args>(w)[0];
                    let t = &bytemuck::cast_slice::<f32, $name::Grad>(t)[0];
                    $name::jvp(a, t)
                },
                gpu_value: |d, w| $name::kernel(d).value(bytemuck::cast_slice(w)),
                gpu_grad: |d, w| {
                    let (v, g) = $name::kernel(d).value_and_grad(bytemuck::cast_slice(w))?;
                    Ok((v, bytemuck::cast_slice(&g).to_vec()))
                },
                gpu_jvp: |d, w, t| $name::kernel(d).jvp(bytemuck::cast_slice(w), bytemuck::cast_slice(t)),
                wgsl_gathered: [$name::WGSL_FORWARD_GATHERED, $name::WGSL_ADJOINT_GATHERED],
                gpu_gathered: |d, w| {
                    let args: &[$name::Args] = bytemuck::cast_slice(w);
                    let n = args.len();
                    let reversed: Vec<u32> = (0..n as u32).rev().collect();
                    let index = d.index(&reversed, n)?;
                    let sources = $name::Sources {
                        $($arg: Source::Gather(
                            &d.buffer(&args.iter().map(|a| a.$arg).collect::<Vec<_>>())?,
                            &index,
                        )),*
                    };
                    let sinks = $name::Sinks { $($arg: &d.zeros(n)?),* };
                    let values = d.zeros::<f32>(n)?;
                    let mut rec = d.record();
                    $name::kernel(d).value_and_grad_gathered(&mut rec, &sources, &values, &sinks)?;
                    rec.submit()?;
                    let mut v = d.read(&values)?;
                    v.reverse();
                    // Row r's gradient is that of the one element reading it: element r's.
                    let rows: Vec<Vec<f32>> = vec![$(bytemuck::cast_slice(&d.read(sinks.$arg)?).to_vec()),*];
                    let mut g = Vec::new();
                    for r in 0..n {
                        for row in &rows {
                            let width = row.len() / n;
                            g.extend_from_slice(&row[r * width..(r + 1) * width]);
                        }
                    }
                    Ok((v, g))
                },
                wgsl_hessian: $name::WGSL_HESSIAN,
                gpu_hessian: |d, w| {
                    let (_, _, h) = $name::kernel(d).value_grad_hessian(bytemuck::cast_slice(w))?;
                    Ok(bytemuck::cast_slice(&h).to_vec())
                },
                hyper: |w, i, j| {
                    let one = |b: bool| if b { 1.0 } else { 0.0 };
                    let mut it = w.iter().enumerate().map(|(k, v)| HyperDual::hyper(*v, one(k == i), one(k == j), 0.0));
                    $(let $arg = take!(it, $ty);)*
                    $name::eval($($arg),*)
                },
            }),*]
        }
    };
}

corpus! {
    domain = (-1.5, 1.5);
    fn rosenbrock(x: f32, y: f32) -> f32 {
        let a = 1.0 - x;
        let b = y - x * x;
        a * a + 100.0 * b * b
    }

    domain = (-1.2, 1.2);
    fn trig(x: f32, y: f32) -> f32 {
        x.sin() * y.cos() + (0.5 * x).tan()
    }

    // Positive terms only: a sum that crosses zero is ill-conditioned for a relative bound.
    domain = (0.1, 0.9);
    fn inverse_trig(x: f32, y: f32) -> f32 {
        x.asin() + y.acos() * (x * y).atan()
    }

    domain = (-2.0, 2.0);
    fn bearing(p: [f32; 2], q: [f32; 2]) -> f32 {
        let dy = q[1] - p[1] + 5.0;
        let dx = q[0] - p[0] + 5.0;
        dy.atan2(dx)
    }

    domain = (0.1, 1.5);
    fn hyperbolic(x: f32, y: f32) -> f32 {
        x.sinh() * y.cosh() + (x + y).tanh()
    }

    domain = (0.1, 2.0);
    fn exponentials(x: f32, y: f32) -> f32 {
        x.exp() + y.exp2() * (x + 2.0).ln()
    }

    domain = (0.2, 3.0);
    fn logarithms(x: f32, y: f32) -> f32 {
        x.log2() + y.log10() * x
    }

    domain = (-2.0, 2.0);
    fn roots(x: f32, y: f32) -> f32 {
        (x * x + y * y + 1.0).sqrt() + (x + 3.0).recip()
    }

    domain = (0.5, 2.0);
    fn powers(x: f32, y: f32) -> f32 {
        x.powi(3) - y.powi(-2) + x.powf(y) + f32::powi(x, 5) * 0.1 + y.powi(1) + x.powi(0)
    }

    domain = (-2.0, 2.0);
    fn nonsmooth(x: f32, y: f32) -> f32 {
        (x - y).abs() + x.min(y) * x.max(0.5 * y)
    }

    domain = (-2.0, 2.0);
    fn clamped(x: f32, bounds: [f32; 2]) -> f32 {
        let lo = bounds[0] - 2.5;
        let hi = bounds[1] + 2.5;
        x.clamp(lo * 0.5, hi * 0.5) * x + x.signum() * x
    }

    domain = (-3.0, 3.0);
    fn rounding(x: f32, y: f32) -> f32 {
        x.floor() * y + y.ceil() * x + (x * y).round() + x * y
    }

    domain = (-1.0, 1.0);
    fn fused_dot(a: [f32; 3], b: [f32; 3]) -> f32 {
        a[0].mul_add(b[0], a[1].mul_add(b[1], a[2] * b[2]))
    }

    domain = (-1.0, 1.0);
    fn edge_length(p: [f32; 3], q: [f32; 3]) -> f32 {
        (q[0] - p[0] + 3.0).hypot(q[1] - p[1]).hypot(q[2] - p[2])
    }

    domain = (-1.0, 1.0);
    fn mesh_edge_residual(p: [f32; 3], q: [f32; 3], rest: f32) -> f32 {
        let dx = q[0] - p[0] + 2.0;
        let dy = q[1] - p[1];
        let dz = q[2] - p[2];
        let len = (dx * dx + dy * dy + dz * dz).sqrt();
        let r = len - (rest + 2.0);
        r * r
    }

    domain = (-2.0, 2.0);
    fn soft_gate(a: f32, b: f32, logits: [f32; 4]) -> f32 {
        let sa = 1.0 / (1.0 + (-a).exp());
        let sb = 1.0 / (1.0 + (-b).exp());
        let e0 = logits[0].exp();
        let e1 = logits[1].exp();
        let e2 = logits[2].exp();
        let e3 = logits[3].exp();
        let z = e0 + e1 + e2 + e3;
        (e0 * sa * sb + e1 * (sa + sb - sa * sb) + e2 * (1.0 - sa) + e3 * (sa + sb - 2.0 * sa * sb)) / z
    }

    domain = (-1.0, 1.0);
    fn tiny_mlp(x: [f32; 2], w: [f32; 9]) -> f32 {
        let h0 = (w[0] * x[0] + w[1] * x[1] + w[2]).tanh();
        let h1 = (w[3] * x[0] + w[4] * x[1] + w[5]).tanh();
        let y = w[6] * h0 + w[7] * h1 + w[8];
        let t = 0.25;
        (y - t) * (y - t)
    }

    domain = (0.5, 2.0);
    fn transcendental4(x: [f32; 4]) -> f32 {
        x[0].sin() * x[1].exp() + x[2].ln() * x[3].sqrt()
    }

    // `if`/`else` as expression and statement, `else if`, `&& || !` and comparisons. The
    // branch not taken is NaN on half the domain (`x.sqrt()` for x < 0, `(-x).ln()` for
    // x > 0): the gradient must still be that of the branch taken.
    domain = (-2.0, 2.0);
    fn piecewise(x: f32, y: f32) -> f32 {
        let r = if x > 0.0 { x.sqrt() * y } else { (-x).ln() + y * y };
        let inside = x.abs() <= 1.0;
        let mut s = r;
        if inside && y > -1.0 || !(y < 1.5) {
            s *= 2.0;
            s += x.exp();
        } else if x >= 1.0 {
            s -= y;
        } else if x != y && y == y {
            s = s * y;
        }
        s
    }

    // `let mut`, assignment and `+= -= *= /=` to locals and to array elements, nested blocks
    // with their own scope.
    domain = (0.5, 2.0);
    fn mutation(p: [f32; 3], w: f32) -> f32 {
        let mut acc = [0.0; 3];
        acc[0] = p[0] * w;
        acc[1] += p[1] * p[1];
        acc[2] -= p[2] / w;
        let mut t = acc[0] + acc[1];
        t /= w;
        {
            let t = t * t;
            acc[2] *= t;
        }
        let v = {
            let q = acc[2] + 1.0;
            q * q
        };
        t + acc[2] + v
    }

    // `for` loops: a loop-carried accumulator and array, indices computed from loop
    // indices, a nested loop, `i as f32`, `..=`, a `const` bound and a branch in a loop
    // body. Small and indexing at computed indices: unrolled (`opt::unroll_indexed_loops`).
    domain = (-1.0, 1.0);
    fn loops(x: [f32; 4], w: [f32; 3]) -> f32 {
        const N: usize = 3;
        let mut acc = 0.0;
        let mut h = [0.0f32; 3];
        for j in 0..N {
            let mut s = w[j];
            for i in 0..3 {
                s += x[i + 1] * w[2 - i] * (j as f32 + 1.0);
            }
            h[j] = s.tanh();
        }
        for k in 0..=2 {
            acc += h[k] * h[k];
            if acc > 0.5 {
                acc = acc.sqrt();
            }
        }
        acc + x[0] * x[0]
    }

    // A loop that stays a loop (no computed index): the reverse pass reads the carried
    // values the forward loop recorded on its tape.
    domain = (-1.0, 1.0);
    fn recurrence(x: f32, y: f32) -> f32 {
        let mut t = x;
        let mut s = 0.0;
        for k in 0..6 {
            t = (t * y + 0.3 * (k as f32)).sin();
            s += t * t;
        }
        s
    }

    domain = (-2.0, 2.0);
    fn literals(x: f32, _unused: f32) -> f32 {
        let v = [x, 2.0 * x, 3.0];
        let w: [f32; 2] = [0.5f32; 2];
        let _ = w[1];
        std::f32::consts::PI * v[0] * v[1] + v[2] * w[0] + core::f32::consts::E - std::f32::consts::LN_2
    }
}

#[test]
fn corpus_covers_every_method() {
    let srcs: String = cases().iter().map(|c| c.src).collect();
    for m in ops::METHODS {
        assert!(
            srcs.contains(&format!(".{}(", m.name)) || srcs.contains(&format!("::{}(", m.name)),
            "no corpus function calls `{}`",
            m.name
        );
    }
    assert!(cases().len() >= 15);
}

#[test]
fn wgsl_snapshots_and_naga_validation() {
    for c in cases() {
        common::validate_wgsl(c.name, c.wgsl_forward);
        common::validate_wgsl(c.name, c.wgsl_adjoint);
        common::validate_wgsl(c.name, c.wgsl_tangent);
        common::validate_wgsl(c.name, c.wgsl_hessian);
        for wgsl in c.wgsl_gathered {
            common::validate_wgsl(c.name, wgsl);
        }
        insta::assert_snapshot!(format!("{}_forward", c.name), c.wgsl_forward);
        insta::assert_snapshot!(format!("{}_adjoint", c.name), c.wgsl_adjoint);
        insta::assert_snapshot!(format!("{}_tangent", c.name), c.wgsl_tangent);
        insta::assert_snapshot!(format!("{}_hessian", c.name), c.wgsl_hessian);
    }
}

/// f32 arithmetic against the f64 oracle: the bound, over well-conditioned domains.
const F32_TOL: f64 = 1e-5;
/// GPU builtins (sin, exp, log, pow...) are not correctly rounded: Vulkan allows errors of
/// a few ulp (and absolute 2^-11 for sin/cos); measured on lavapipe they stay far inside
/// this. The inverse trigonometric functions are gradfuse's own helpers (about 2 ulp).
const GPU_TOL: f64 = 2e-5;
/// Gradients are judged norm-wise (max norm): each component's error relative to the
/// largest component. Component-wise, a gradient entry that is the small difference of large
/// terms (tiny_mlp, soft_gate) is ill-conditioned in f32 and misses 1e-5 by up to 2x.
const FLOOR: f64 = 1.0;

#[test]
fn numerics_agree_with_the_oracle() {
    let mut report = String::new();
    // Tolerance misses are collected, so one run shows every function that misses.
    let mut misses: Vec<String> = Vec::new();
    for c in cases() {
        let compiled = compile_str(c.src).unwrap_or_else(|e| panic!("{}: {:?}", c.name, e));
        let primal = &compiled.lowered.primal;
        // The oracle's gradient: reverse mode on the unoptimized IR, in f64 ...
        let reverse = ad::reverse(primal);
        let forward = ad::forward(primal);
        let words = primal.num_inputs as usize;
        let mut rng = Rng(0x5eed ^ (c.name.len() as u64 * 7919));
        let points = 48;
        let mut batch: Vec<f32> = Vec::new();
        let mut want_values = Vec::new();
        let mut want_grads = Vec::new();
        let mut worst = [0.0f64; 8];
        for _ in 0..points {
            let w32: Vec<f32> = (0..words)
                .map(|_| rng.uniform(c.domain.0, c.domain.1))
                .collect();
            let w: Vec<f64> = w32.iter().map(|v| *v as f64).collect();
            let oracle = interp::eval(primal, &w)[0];
            let adj = interp::eval(&reverse, &w);
            let grad = &adj[1..];
            // ... checked against central finite differences, which know nothing of AD.
            let fd = interp::finite_difference_gradient(primal, &w, 1e-6);
            let e_fd = rel_error(&fd, grad, 1e-3);
            assert!(
                e_fd < 1e-5,
                "{}: reverse mode vs finite differences at {w:?}: {grad:?} vs {fd:?}",
                c.name
            );
            // The optimized adjoint and tangent compute the same in f64.
            let opt_adj = interp::eval(compiled.reverse.function(), &w);
            assert!(
                rel_error(&opt_adj, &adj, 0.0) < 1e-12,
                "{}: optimizer changed the adjoint",
                c.name
            );
            // Forward mode: the directional derivative along a random tangent.
            let t32: Vec<f32> = (0..words).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let t: Vec<f64> = t32.iter().map(|v| *v as f64).collect();
            let dir: f64 = grad.iter().zip(&t).map(|(g, t)| g * t).sum();
            let mut wt = w.clone();
            wt.extend(&t);
            let tan = interp::eval(&forward, &wt);
            let opt_tan = interp::eval(&compiled.tangent, &wt);
            let gnorm: f64 = grad.iter().zip(&t).map(|(g, t)| (g * t).abs()).sum();
            assert!(
                (tan[1] - dir).abs() <= 1e-12 * gnorm.max(1e-30) + 1e-14,
                "{}: forward vs reverse",
                c.name
            );
            assert!(
                (opt_tan[1] - dir).abs() <= 1e-12 * gnorm.max(1e-30) + 1e-14,
                "{}: optimized tangent",
                c.name
            );

            // f64 versions: tight.
            let e64 = (c.eval_f64)(&w);
            assert!(
                rel_error(&[e64], &[oracle], 0.0) < 1e-12,
                "{}: eval::<f64> {e64} vs {oracle}",
                c.name
            );
            let (dv, dg) = (c.dual)(&w);
            assert!(
                rel_error(&[dv], &[oracle], 0.0) < 1e-12,
                "{}: Dual value",
                c.name
            );
            let e_dual = rel_error(&dg, grad, FLOOR);
            assert!(
                e_dual < 1e-10,
                "{}: Dual gradient {dg:?} vs {grad:?}",
                c.name
            );

            // f32 versions.
            let plain = (c.plain)(&w32) as f64;
            let ev32 = (c.eval_f32)(&w32) as f64;
            let (v, g) = (c.value_and_grad)(&w32);
            let g: Vec<f64> = g.iter().map(|x| *x as f64).collect();
            let (jv, jd) = (c.jvp)(&w32, &t32);
            let e = [
                rel_error(&[plain], &[oracle], 0.0),
                rel_error(&[ev32], &[oracle], 0.0),
                rel_error(&[v as f64], &[oracle], 0.0),
                rel_error(&g, grad, FLOOR),
                rel_error(&[jv as f64], &[oracle], 0.0),
                (jd as f64 - dir).abs() / gnorm.max(1e-30),
            ];
            for (k, e) in e.iter().enumerate() {
                worst[k] = worst[k].max(*e);
            }
            batch.extend(&w32);
            want_values.push(oracle);
            want_grads.extend(grad.iter().copied());
        }
        let names = [
            "plain",
            "eval::<f32>",
            "value_and_grad value",
            "value_and_grad grad",
            "jvp value",
            "jvp derivative",
        ];
        for (k, name) in names.iter().enumerate() {
            if worst[k] >= F32_TOL {
                misses.push(format!("{}: {name} off by {:e} relative", c.name, worst[k]));
            }
        }

        // The GPU (or the CPU fallback) on the whole batch.
        let d = device();
        let values = (c.gpu_value)(d, &batch).unwrap();
        let (gv, gg) = (c.gpu_grad)(d, &batch).unwrap();
        let (hv, hg) = (c.gpu_gathered)(d, &batch).unwrap();
        let mut e_val = 0.0f64;
        let mut e_grad = 0.0f64;
        for i in 0..points {
            let want = want_values[i];
            for got in [values[i], gv[i], hv[i]] {
                e_val = e_val.max(rel_error(&[got as f64], &[want], 0.0));
            }
            for grads in [&gg, &hg] {
                let got: Vec<f64> = grads[i * words..(i + 1) * words]
                    .iter()
                    .map(|x| *x as f64)
                    .collect();
                e_grad = e_grad.max(rel_error(
                    &got,
                    &want_grads[i * words..(i + 1) * words],
                    FLOOR,
                ));
            }
        }
        if e_val >= GPU_TOL {
            misses.push(format!("{}: GPU values off by {e_val:e}", c.name));
        }
        if e_grad >= GPU_TOL {
            misses.push(format!("{}: GPU gradients off by {e_grad:e}", c.name));
        }
        report.push_str(&format!(
            "{:<20} f32 grad {:.1e}  jvp {:.1e}  gpu value {:.1e}  gpu grad {:.1e}\n",
            c.name, worst[3], worst[5], e_val, e_grad
        ));
    }
    println!(
        "worst relative errors against the f64 oracle ({}):\n{report}",
        device().describe()
    );
    assert!(
        misses.is_empty(),
        "tolerances missed on {}:\n{}",
        device().describe(),
        misses.join("\n")
    );
}

/// Central difference of `f` at `w` along `t` with step `h`, in f64.
fn central_difference(f: fn(&[f64]) -> f64, w: &[f64], t: &[f64], h: f64) -> f64 {
    let at = |s: f64| -> Vec<f64> { w.iter().zip(t).map(|(w, t)| w + s * t).collect() };
    (f(&at(h)) - f(&at(-h))) / (2.0 * h)
}

/// JAX's `check_grads`, on the GPU: for every corpus function (together they call every
/// method of the table), forward mode (the tangent kernel) and reverse mode (the adjoint
/// kernel) against f64 central differences of `eval::<f64>` along 10 random directions per
/// point, with JAX's f32 tolerance (2e-3, absolute and relative); and forward against
/// reverse, `<grad, t> = J t`, tighter. A difference that changes when its step is halved
/// straddles a kink (`floor`, `abs`, a branch) and is skipped, as JAX's numerical check
/// would fail there too.
#[test]
fn check_grads_forward_and_reverse_on_the_gpu() {
    const TOL: f64 = 2e-3;
    let d = device();
    let mut misses = Vec::new();
    let mut report = String::new();
    for c in cases() {
        let words = compile_str(c.src).unwrap().lowered.layout.words as usize;
        let mut rng = Rng(0xc4ec ^ (c.name.len() as u64 * 104729));
        let points = 32;
        let w32: Vec<f32> = (0..points * words)
            .map(|_| rng.uniform(c.domain.0, c.domain.1))
            .collect();
        let (values, grads) = (c.gpu_grad)(d, &w32).unwrap();
        let (mut checked, mut skipped, mut worst_fd, mut worst_fr) = (0, 0, 0.0f64, 0.0f64);
        for _ in 0..10 {
            let t32: Vec<f32> = (0..points * words)
                .map(|_| rng.uniform(-1.0, 1.0))
                .collect();
            let (jv, jd) = (c.gpu_jvp)(d, &w32, &t32).unwrap();
            for i in 0..points {
                let row = i * words..(i + 1) * words;
                let w: Vec<f64> = w32[row.clone()].iter().map(|v| *v as f64).collect();
                let t: Vec<f64> = t32[row.clone()].iter().map(|v| *v as f64).collect();
                let cd = central_difference(c.eval_f64, &w, &t, 1e-4);
                let cd_half = central_difference(c.eval_f64, &w, &t, 5e-5);
                if (cd - cd_half).abs() > 1e-6 * (1.0 + cd.abs()) {
                    skipped += 1;
                    continue;
                }
                checked += 1;
                let reverse: f64 = grads[row.clone()]
                    .iter()
                    .zip(&t)
                    .map(|(g, t)| *g as f64 * t)
                    .sum();
                let scale: f64 = grads[row]
                    .iter()
                    .zip(&t)
                    .map(|(g, t)| (*g as f64 * t).abs())
                    .sum();
                for (mode, got) in [("forward", jd[i] as f64), ("reverse", reverse)] {
                    let e = (got - cd).abs() / (1.0 + cd.abs());
                    worst_fd = worst_fd.max(e);
                    if e > TOL {
                        misses.push(format!(
                            "{}: {mode} {got:e} vs central difference {cd:e} at {w:?} along {t:?}",
                            c.name
                        ));
                    }
                }
                let e = (jd[i] as f64 - reverse).abs() / scale.max(1e-30);
                worst_fr = worst_fr.max(e);
                if e > 1e-4 {
                    misses.push(format!(
                        "{}: forward {} vs reverse {reverse}",
                        c.name, jd[i]
                    ));
                }
                if jv[i] != values[i]
                    && (jv[i] as f64 - values[i] as f64).abs()
                        > 1e-5 * (1.0 + values[i].abs() as f64)
                {
                    misses.push(format!(
                        "{}: tangent kernel value {} vs adjoint's {}",
                        c.name, jv[i], values[i]
                    ));
                }
            }
        }
        assert!(checked >= 300, "{}: only {checked} smooth points", c.name);
        report.push_str(&format!(
            "{:<20} {checked} checked, {skipped} at kinks; vs differences {worst_fd:.1e}, forward vs reverse {worst_fr:.1e}\n",
            c.name
        ));
    }
    println!("check_grads on {}:\n{report}", d.describe());
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// Every corpus function's Hessian kernel (so every method's second derivative, and
/// branches, loops, arrays) against hyper-dual evaluation of its `eval` in f64, at 32
/// random points; symmetric to the bit.
#[test]
fn hessians_of_every_method_on_the_gpu() {
    let d = device();
    let mut misses = Vec::new();
    let mut report = String::new();
    for c in cases() {
        let n = compile_str(c.src).unwrap().lowered.layout.words as usize;
        let mut rng = Rng(0x4e55 ^ (c.name.len() as u64 * 7919));
        let points = 32;
        let w32: Vec<f32> = (0..points * n)
            .map(|_| rng.uniform(c.domain.0, c.domain.1))
            .collect();
        let h = (c.gpu_hessian)(d, &w32).unwrap();
        let mut worst = 0.0f64;
        for p in 0..points {
            let w: Vec<f64> = w32[p * n..(p + 1) * n].iter().map(|v| *v as f64).collect();
            let got = &h[p * n * n..(p + 1) * n * n];
            let mut want = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    want[i * n + j] = (c.hyper)(&w, i, j).eps1eps2();
                    if got[i * n + j].to_bits() != got[j * n + i].to_bits() {
                        misses.push(format!("{}: not symmetric at {w:?}", c.name));
                    }
                }
            }
            let got: Vec<f64> = got.iter().map(|v| *v as f64).collect();
            let e = rel_error(&got, &want, 1e-3);
            worst = worst.max(e);
            if e > 2e-3 {
                misses.push(format!(
                    "{}: {got:?}\nvs hyper-dual {want:?} at {w:?}",
                    c.name
                ));
            }
        }
        report.push_str(&format!("{:<20} worst {worst:.1e}\n", c.name));
    }
    println!("Hessians on {}:\n{report}", d.describe());
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
