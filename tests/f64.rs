//! Functions written over f64 (issue "Second order and double precision", item 3): their
//! CPU versions against two independent f64 oracles (`f::eval` over `Dual<f64, N>` and
//! central differences), and their kernels (value, gradient, tangent, Jacobian, Hessian)
//! against the CPU versions to 1e-12 relative on the device, where the device has 64-bit
//! floats in shaders. The f64 WGSL math library (`shaders-gen/src/ops_f64.rs`: Vulkan's
//! transcendentals take 32-bit floats only) is held to Rust's f64 functions over wide
//! ranges of arguments.

// Hessians are indexed by row and column side by side.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, device};
use gradfuse::{Dual, differentiable};

/// Transcendentals, a loop kept as a loop, a branch and a `#[constant]` word, over f64.
#[differentiable]
pub fn mixed(x: [f64; 3], #[constant] c: f64, y: f64) -> f64 {
    let mut s = 0.0f64;
    for i in 0..3 {
        s += (x[i] * y).sin() * x[i].exp() + (x[i] * x[i] + 1.0).ln();
    }
    if s > c {
        s * y.tanh() + x[0].atan2(y) + std::f64::consts::PI * 1e-3 + f64::hypot(x[1], y)
    } else {
        s.cosh().sqrt() + (y * y).powf(0.7) - x[2].powi(3)
    }
}

/// A loop with no array index (a recorded tape in every reverse pass).
#[differentiable]
pub fn iterated64(x: f64, y: f64) -> f64 {
    let mut a = x;
    for _ in 0..30 {
        a = (a * y).sin() + 0.1 * x;
    }
    a * a + y.exp2() + x.log10()
}

/// A vector result: a Jacobian over f64.
#[differentiable]
pub fn polar64(r: f64, theta: f64) -> [f64; 2] {
    [r * theta.cos(), r * theta.sin()]
}

fn mixed_args(rng: &mut Rng) -> mixed::Args {
    mixed::Args {
        x: [
            rng.uniform(-1.5, 1.5) as f64 + 1e-9,
            rng.uniform(-1.5, 1.5) as f64,
            rng.uniform(0.1, 2.0) as f64,
        ],
        c: rng.uniform(-1.0, 1.0) as f64,
        y: rng.uniform(0.2, 1.8) as f64,
    }
}

/// `mixed`'s gradient by forward mode through `eval` (an implementation the generated
/// reverse pass shares nothing with).
fn mixed_dual_grad(a: &mixed::Args) -> [f64; 4] {
    let v = |k: usize, x: f64| Dual::<f64, 4>::variable(x, k);
    let d = mixed::eval(
        [v(0, a.x[0]), v(1, a.x[1]), v(2, a.x[2])],
        Dual::constant(a.c),
        v(3, a.y),
    );
    d.tangent()
}

fn rel(got: f64, want: f64, scale: f64) -> f64 {
    if got == want {
        return 0.0;
    }
    (got - want).abs() / want.abs().max(scale).max(1e-300)
}

#[test]
fn cpu_versions_agree_with_dual_numbers_and_differences() {
    let mut rng = Rng(64);
    for _ in 0..200 {
        let a = mixed_args(&mut rng);
        let (v, g) = mixed::value_and_grad(&a);
        assert_eq!(
            v,
            mixed(a.x, a.c, a.y),
            "value_and_grad's value is the function's"
        );
        let want = mixed_dual_grad(&a);
        let got = [g.x[0], g.x[1], g.x[2], g.y];
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        for k in 0..4 {
            let e = rel(got[k], want[k], scale);
            assert!(
                e < 1e-13,
                "word {k}: reverse {} vs dual {} ({e:e})",
                got[k],
                want[k]
            );
        }
        // Central differences in f64 (h = 1e-6: truncation and rounding near 1e-9).
        let h = 1e-6;
        let f = |k: usize, d: f64| {
            let mut b = a;
            match k {
                3 => b.y += d,
                _ => b.x[k] += d,
            }
            mixed(b.x, b.c, b.y)
        };
        for k in 0..4 {
            let fd = (f(k, h) - f(k, -h)) / (2.0 * h);
            let e = rel(got[k], fd, scale.max(1.0));
            assert!(
                e < 1e-6,
                "word {k}: reverse {} vs differences {fd} ({e:e})",
                got[k]
            );
        }
        // jvp along a random tangent is the gradient's dot product.
        let t = mixed::Grad {
            x: [rng.uniform(-1.0, 1.0) as f64, 0.5, -0.25],
            y: 0.75,
        };
        let (jv, jd) = mixed::jvp(&a, &t);
        let dot = got[0] * t.x[0] + got[1] * t.x[1] + got[2] * t.x[2] + got[3] * t.y;
        assert_eq!(jv, v);
        assert!(rel(jd, dot, scale) < 1e-13, "jvp {jd} vs {dot}");
    }
}

#[test]
fn hessians_over_f64_are_symmetric_and_match_the_gradient() {
    let mut rng = Rng(65);
    for _ in 0..50 {
        let a = mixed_args(&mut rng);
        let (_, _, hess) = mixed::value_grad_hessian(&a);
        let grad = |b: &mixed::Args| {
            let g = mixed::value_and_grad(b).1;
            [g.x[0], g.x[1], g.x[2], g.y]
        };
        let h = 1e-6;
        for i in 0..4 {
            let (mut p, mut m) = (a, a);
            match i {
                3 => {
                    p.y += h;
                    m.y -= h;
                }
                _ => {
                    p.x[i] += h;
                    m.x[i] -= h;
                }
            }
            let (gp, gm) = (grad(&p), grad(&m));
            for j in 0..4 {
                assert_eq!(hess[i][j], hess[j][i], "symmetric to the bit");
                let fd = (gp[j] - gm[j]) / (2.0 * h);
                let e = rel(hess[i][j], fd, 1.0);
                assert!(
                    e < 1e-6,
                    "H[{i}][{j}] {} vs differences {fd} ({e:e})",
                    hess[i][j]
                );
            }
        }
    }
}

/// Largest relative difference of `got` from `want`, each word against the larger of
/// itself and `floor` times the largest word.
fn worst(got: &[f64], want: &[f64], floor: f64) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())) * floor;
    got.iter()
        .zip(want)
        .map(|(g, w)| rel(*g, *w, scale))
        .fold(0.0, f64::max)
}

#[test]
fn f64_kernels_match_the_cpu_to_1e_12() {
    let d = device();
    if !d.has_f64() {
        // The error an f64 launch gives there is tests/f64_unsupported.rs's.
        eprintln!(
            "{}: no 64-bit floats in shaders; f64 kernels not run",
            d.describe()
        );
        return;
    }
    let mut rng = Rng(66);
    let args: Vec<mixed::Args> = (0..1000).map(|_| mixed_args(&mut rng)).collect();
    let k = mixed::kernel(d);
    let values = k.value(&args).expect("value");
    let (vg_values, grads) = k.value_and_grad(&args).expect("value_and_grad");
    let tangents: Vec<mixed::Grad> = args
        .iter()
        .map(|_| mixed::Grad {
            x: [rng.uniform(-1.0, 1.0) as f64, 0.5, -0.25],
            y: rng.uniform(-1.0, 1.0) as f64,
        })
        .collect();
    let (jvp_values, dirs) = k.jvp(&args, &tangents).expect("jvp");
    let (h_values, h_grads, hessians) = k.value_grad_hessian(&args).expect("hessian");
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for (e, a) in args.iter().enumerate() {
        let (v, g) = mixed::value_and_grad(a);
        let (_, dir) = mixed::jvp(a, &tangents[e]);
        let (_, _, h) = mixed::value_grad_hessian(a);
        let gw: [f64; 4] = gradfuse::bytemuck::cast(g);
        let hw: [f64; 16] = gradfuse::bytemuck::cast(h);
        for x in [values[e], vg_values[e], jvp_values[e], h_values[e]] {
            got.push(x);
            want.push(v);
        }
        got.extend_from_slice(&gradfuse::bytemuck::cast::<_, [f64; 4]>(grads[e]));
        want.extend_from_slice(&gw);
        got.extend_from_slice(&gradfuse::bytemuck::cast::<_, [f64; 4]>(h_grads[e]));
        want.extend_from_slice(&gw);
        got.push(dirs[e]);
        want.push(dir);
        let (gh, wh): ([f64; 16], [f64; 16]) = (gradfuse::bytemuck::cast(hessians[e]), hw);
        assert!(
            worst(&gh, &wh, 1e-6) < 1e-12,
            "element {e}: Hessian {gh:?} vs CPU {wh:?}"
        );
    }
    let e = worst(&got, &want, 1e-6);
    assert!(e < 1e-12, "f64 kernels against the CPU: {e:e}");

    // A kept loop (a tape in the kernel) and a Jacobian.
    let it: Vec<iterated64::Args> = (0..500)
        .map(|_| iterated64::Args {
            x: rng.uniform(0.2, 2.0) as f64,
            y: rng.uniform(-1.0, 1.0) as f64,
        })
        .collect();
    let (iv, ig) = iterated64::kernel(d).value_and_grad(&it).expect("iterated");
    let (_, _, ih) = iterated64::kernel(d)
        .value_grad_hessian(&it)
        .expect("iterated H");
    for (e, a) in it.iter().enumerate() {
        let (v, g) = iterated64::value_and_grad(a);
        let (_, _, h) = iterated64::value_grad_hessian(a);
        let (gg, wg): ([f64; 2], [f64; 2]) =
            (gradfuse::bytemuck::cast(ig[e]), gradfuse::bytemuck::cast(g));
        let (gh, wh): ([f64; 4], [f64; 4]) =
            (gradfuse::bytemuck::cast(ih[e]), gradfuse::bytemuck::cast(h));
        let err = worst(&[iv[e]], &[v], 1.0)
            .max(worst(&gg, &wg, 1e-6))
            .max(worst(&gh, &wh, 1e-6));
        assert!(err < 1e-12, "iterated64 element {e}: {err:e}");
    }
    let pts: Vec<polar64::Args> = (0..300)
        .map(|_| polar64::Args {
            r: rng.uniform(0.1, 3.0) as f64,
            theta: rng.uniform(-40.0, 40.0) as f64,
        })
        .collect();
    let (pv, pj) = polar64::kernel(d).value_and_jacobian(&pts).expect("polar");
    for (e, a) in pts.iter().enumerate() {
        let (v, j) = polar64::value_and_jacobian(a);
        let (gj, wj): ([f64; 4], [f64; 4]) =
            (gradfuse::bytemuck::cast(pj[e]), gradfuse::bytemuck::cast(j));
        let err = worst(&pv[e], &v, 1e-6).max(worst(&gj, &wj, 1e-6));
        assert!(err < 1e-12, "polar64 element {e}: {err:e}");
    }
}

/// One-method functions, for the f64 math library.
macro_rules! unary {
    ($($name:ident: $method:ident),* $(,)?) => {$(
        #[differentiable]
        pub fn $name(x: f64) -> f64 {
            x.$method()
        }
    )*};
}

unary!(
    f_sin: sin, f_cos: cos, f_tan: tan, f_asin: asin, f_acos: acos, f_atan: atan,
    f_sinh: sinh, f_cosh: cosh, f_tanh: tanh, f_exp: exp, f_exp2: exp2, f_ln: ln,
    f_log2: log2, f_log10: log10, f_sqrt: sqrt, f_round: round, f_signum: signum,
);

#[differentiable]
pub fn f_powf(x: f64, y: f64) -> f64 {
    x.powf(y)
}

#[differentiable]
pub fn f_atan2(y: f64, x: f64) -> f64 {
    y.atan2(x)
}

#[differentiable]
pub fn f_hypot(x: f64, y: f64) -> f64 {
    x.hypot(y)
}

/// Arguments spread over `[lo, hi]` (evenly, plus random ones), and the edges.
fn spread(lo: f64, hi: f64, rng: &mut Rng) -> Vec<f64> {
    let mut xs: Vec<f64> = (0..=400)
        .map(|k| lo + (hi - lo) * k as f64 / 400.0)
        .collect();
    xs.extend(
        (0..400).map(|_| lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64),
    );
    xs
}

#[test]
fn the_f64_math_library_is_within_a_few_ulp_of_rust() {
    let d = device();
    if !d.has_f64() {
        eprintln!("{}: no 64-bit floats in shaders; not run", d.describe());
        return;
    }
    let mut rng = Rng(67);
    let special = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-310,
        -1e-310,
        1e300,
    ];
    type Unary = (
        &'static str,
        fn(&gradfuse::Device, &[f64]) -> Vec<f64>,
        fn(f64) -> f64,
        f64,
        f64,
    );
    macro_rules! case {
        ($name:ident, $f:expr, $lo:expr, $hi:expr) => {
            (
                stringify!($name),
                |d: &gradfuse::Device, xs: &[f64]| {
                    let args: Vec<$name::Args> = xs.iter().map(|&x| $name::Args { x }).collect();
                    $name::kernel(d).value(&args).expect(stringify!($name))
                },
                $f,
                $lo,
                $hi,
            )
        };
    }
    let cases: Vec<Unary> = vec![
        case!(f_sin, f64::sin, -1e5, 1e5),
        case!(f_cos, f64::cos, -1e5, 1e5),
        case!(f_sin, f64::sin, -1e14, 1e14),
        case!(f_cos, f64::cos, 1e7, 1e9),
        case!(f_tan, f64::tan, -20.0, 20.0),
        case!(f_asin, f64::asin, -1.0, 1.0),
        case!(f_acos, f64::acos, -1.0, 1.0),
        case!(f_atan, f64::atan, -1e3, 1e3),
        case!(f_sinh, f64::sinh, -710.0, 710.0),
        case!(f_cosh, f64::cosh, -710.0, 710.0),
        case!(f_tanh, f64::tanh, -30.0, 30.0),
        case!(f_exp, f64::exp, -746.0, 710.0),
        case!(f_exp2, f64::exp2, -1076.0, 1025.0),
        case!(f_ln, f64::ln, 1e-300, 1e300),
        case!(f_log2, f64::log2, 0.0, 4.0),
        case!(f_log10, f64::log10, 0.0, 1e6),
        case!(f_sqrt, f64::sqrt, 0.0, 1e10),
        case!(f_round, f64::round, -10.0, 10.0),
        case!(f_signum, f64::signum, -1.0, 1.0),
    ];
    for (name, gpu, cpu, lo, hi) in cases {
        let mut xs = spread(lo, hi, &mut rng);
        xs.extend(special);
        // Integers (tan(-19) was 22 ulp off on the H100 once), and near 0 and 1, where
        // relative accuracy is hardest.
        xs.extend((-40..=40).map(f64::from));
        xs.extend((1..60).map(|k| 1.0 + (k as f64 - 30.0) * 1e-12));
        xs.extend((1..40).map(|k| 2f64.powi(-k * 20)));
        let got = gpu(d, &xs);
        for (x, g) in xs.iter().zip(&got) {
            let mut w = cpu(*x);
            if matches!(name, "f_sin" | "f_cos" | "f_tan") && x.abs() >= 2f64.powi(50) {
                // Documented: NaN past 2^50 (ops_f64.rs, README).
                w = f64::NAN;
            }
            let ok = if w.is_nan() {
                g.is_nan()
            } else if w.is_infinite() || w == 0.0 {
                // Exact, signed zero included.
                g.to_bits() == w.to_bits() || (w == 0.0 && *g == 0.0 && name == "f_round")
            } else {
                // Within 4 ulp of Rust's value at an argument within 2 ulp of x (a
                // backward error of 2 ulp, the most an argument reduction that is not
                // exact adds). NVIDIA's driver reorders the two-part reductions of exp and
                // tan in some kernels (probed on the H100: the same WGSL is exact in
                // others), so the reduced argument is only as good as x's last bits.
                let nearby = [
                    x * (1.0 + 2.0 * f64::EPSILON),
                    x * (1.0 - 2.0 * f64::EPSILON),
                ];
                let backward = nearby
                    .iter()
                    .map(|&y| (cpu(y) - w).abs())
                    .filter(|d| d.is_finite())
                    .fold(0.0f64, f64::max);
                let tol = 4.0 * f64::EPSILON * w.abs() + backward;
                (g - w).abs() <= tol
            };
            assert!(ok, "{name}({x:e}) = {g:e} on the device, {w:e} in Rust");
        }
    }
    // Two arguments: powf, atan2, hypot over grids with their edges.
    let mut grid = spread(-3.0, 3.0, &mut rng);
    grid.extend(special);
    grid.extend([1.0, -1.0, 2.0, 0.5, 3.0, -2.0]);
    let pairs: Vec<(f64, f64)> = grid
        .iter()
        .step_by(3)
        .flat_map(|&a| grid.iter().step_by(5).map(move |&b| (a, b)))
        .collect();
    let close = |name: &str, a: (f64, f64), g: f64, w: f64, tol: f64| {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || w == 0.0 {
            g.to_bits() == w.to_bits()
        } else {
            (g - w).abs() <= tol * w.abs()
        };
        assert!(ok, "{name}{a:?} = {g:e} on the device, {w:e} in Rust");
    };
    let pa: Vec<f_powf::Args> = pairs.iter().map(|&(x, y)| f_powf::Args { x, y }).collect();
    for (a, g) in pairs
        .iter()
        .zip(f_powf::kernel(d).value(&pa).expect("powf"))
    {
        close("powf", *a, g, a.0.powf(a.1), 1e-14);
    }
    let aa: Vec<f_atan2::Args> = pairs.iter().map(|&(y, x)| f_atan2::Args { y, x }).collect();
    for (a, g) in pairs
        .iter()
        .zip(f_atan2::kernel(d).value(&aa).expect("atan2"))
    {
        close("atan2", *a, g, a.0.atan2(a.1), 4.0 * f64::EPSILON);
    }
    let ha: Vec<f_hypot::Args> = pairs.iter().map(|&(x, y)| f_hypot::Args { x, y }).collect();
    for (a, g) in pairs
        .iter()
        .zip(f_hypot::kernel(d).value(&ha).expect("hypot"))
    {
        close("hypot", *a, g, a.0.hypot(a.1), 4.0 * f64::EPSILON);
    }
}

#[test]
fn f64_kernels_validate_with_naga() {
    for (name, src) in [
        ("mixed forward", mixed::WGSL_FORWARD),
        ("mixed adjoint", mixed::WGSL_ADJOINT),
        ("mixed tangent", mixed::WGSL_TANGENT),
        ("mixed hessian", mixed::WGSL_HESSIAN),
        ("iterated64 adjoint", iterated64::WGSL_ADJOINT),
        ("polar64 jacobian", polar64::WGSL_JACOBIAN),
    ] {
        common::validate_wgsl_f64(name, src);
        assert!(src.contains("f64"), "{name} computes in f64");
    }
}

/// Resident launches of an f64 kernel (`value_and_grad_to`, `value_to` over
/// `gradfuse::Buffer`s) give the bits the host-slice launches give, on the device and on
/// the CPU fallback.
#[test]
fn resident_f64_launches_match_host_launches() {
    for d in [device(), &gradfuse::Device::cpu()] {
        if !d.has_f64() {
            continue;
        }
        let mut rng = Rng(68);
        let args: Vec<mixed::Args> = (0..700).map(|_| mixed_args(&mut rng)).collect();
        let k = mixed::kernel(d);
        let a = d.buffer(&args).expect("args");
        let (values, grads, values2) = (
            d.zeros::<f64>(args.len()).expect("values"),
            d.zeros::<mixed::Grad>(args.len()).expect("grads"),
            d.zeros::<f64>(args.len()).expect("values"),
        );
        let mut rec = d.record();
        k.value_and_grad_to(&mut rec, &a, &values, &grads)
            .expect("record");
        k.value_to(&mut rec, &a, &values2).expect("record");
        rec.submit().expect("submit");
        let (want_v, want_g) = k.value_and_grad(&args).expect("host launch");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&d.read(&values).expect("read")),
            bits(&want_v),
            "{}",
            d.describe()
        );
        // The forward kernel's values against the forward kernel's (NVIDIA's driver
        // compiles the adjoint kernel's value with other roundings).
        let want_v2 = k.value(&args).expect("host launch");
        assert_eq!(bits(&d.read(&values2).expect("read")), bits(&want_v2));
        let got: Vec<mixed::Grad> = d.read(&grads).expect("read");
        assert_eq!(got, want_g, "{}", d.describe());
    }
}
