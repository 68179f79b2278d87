//! Every function of the table on the GPU, over a wide sweep of inputs and the special
//! values, in ulps from the correctly rounded result (the f64 value rounded to f32): checks
//! gradfuse's own WGSL helpers (Cephes algorithms) and its NaN/inf/tie semantics.

// `f_compare` spells `!(x < y)`, which differs from `x >= y` at NaN: that is what it tests.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

mod common;

use common::{assert_none, device};
use gradfuse::differentiable;

macro_rules! unary {
    ($($name:ident: $method:ident),* $(,)?) => {
        $(
            #[differentiable]
            pub fn $name(x: f32) -> f32 {
                x.$method()
            }
        )*
        /// `(name, GPU kernel over a batch, f64 reference)`.
        fn functions() -> Vec<(&'static str, fn(&[f32]) -> Vec<f32>, fn(f64) -> f64)> {
            vec![$((
                stringify!($method),
                |xs: &[f32]| {
                    let args: Vec<$name::Args> = xs.iter().map(|&x| $name::Args { x }).collect();
                    $name::kernel(device()).value(&args).unwrap()
                },
                |x: f64| x.$method(),
            )),*]
        }
        /// `(name, every mode of the function over a batch)`.
        fn modes() -> Vec<(&'static str, fn(&[f32]) -> Modes)> {
            vec![$((
                stringify!($method),
                |xs: &[f32]| {
                    let args: Vec<$name::Args> = xs.iter().map(|&x| $name::Args { x }).collect();
                    let one = $name::Grad { x: 1.0 };
                    let (gv, gg) = $name::kernel(device()).value_and_grad(&args).unwrap();
                    let (tv, td) = $name::kernel(device()).jvp(&args, &vec![one; xs.len()]).unwrap();
                    Modes {
                        plain: xs.iter().map(|&x| $name(x)).collect(),
                        cpu_reverse: args
                            .iter()
                            .map(|a| {
                                let (v, g) = $name::value_and_grad(a);
                                (v, g.x)
                            })
                            .collect(),
                        cpu_forward: args.iter().map(|a| $name::jvp(a, &one)).collect(),
                        gpu_reverse: gv.into_iter().zip(gg.into_iter().map(|g| g.x)).collect(),
                        gpu_forward: tv.into_iter().zip(td).collect(),
                    }
                },
            )),*]
        }
    };
}

unary!(
    f_sin: sin, f_cos: cos, f_tan: tan, f_asin: asin, f_acos: acos, f_atan: atan,
    f_sinh: sinh, f_cosh: cosh, f_tanh: tanh, f_exp: exp, f_exp2: exp2, f_ln: ln,
    f_log2: log2, f_log10: log10, f_sqrt: sqrt, f_recip: recip, f_abs: abs,
    f_signum: signum, f_floor: floor, f_ceil: ceil, f_round: round,
);

/// Distance in units in the last place between two f32 (NaN only matches NaN; infinities
/// only themselves).
fn ulps(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if a == b {
        return 0;
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        (if i < 0 { i32::MIN - i } else { i }) as i64
    };
    (key(a) - key(b)).unsigned_abs()
}

/// Inputs: special values, ties of rounding, and a log-spaced sweep of both signs.
fn inputs() -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        2.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-30,
        -1e-30,
    ];
    let mut e = -20.0f64;
    while e <= 3.9 {
        let x = 10f64.powf(e) as f32;
        xs.push(x);
        xs.push(-x);
        e += 0.0137;
    }
    xs
}

#[test]
fn every_function_is_accurate_on_the_gpu() {
    // gradfuse's helpers: 1-2 ulp by construction, 3 allowed. Builtins: exp, exp2 and sqrt
    // have Vulkan bounds of a few ulp (exp: 3 + 2|x|), cosh is (e^x + e^-x) / 2 on top of
    // exp; recip is a division (2.5 ulp in Vulkan).
    let bound = |name: &str, x: f32| -> u64 {
        match name {
            "exp" | "exp2" | "cosh" | "sinh" => 3 + 2 * x.abs().min(100.0) as u64,
            "sqrt" | "recip" => 3,
            _ => 3,
        }
    };
    let xs = inputs();
    let mut failures = Vec::new();
    for (name, gpu, reference) in functions() {
        let got = gpu(&xs);
        let mut worst = (0u64, 0.0f32);
        for (&x, &g) in xs.iter().zip(&got) {
            // sin, cos and tan are gradfuse's own up to |x| = 8192, the driver's beyond.
            if matches!(name, "sin" | "cos" | "tan") && x.abs() > 8192.0 {
                continue;
            }
            let want = reference(x as f64) as f32;
            // Vulkan lets a driver flush subnormal results to zero.
            if want != 0.0 && want.abs() < f32::MIN_POSITIVE && g.abs() < f32::MIN_POSITIVE {
                continue;
            }
            let d = ulps(g, want);
            if d > bound(name, x) {
                failures.push(format!(
                    "{name}({x:e}) = {g:e} on the GPU, {want:e} correctly rounded: {d} ulp"
                ));
            }
            if d > worst.0 {
                worst = (d, x);
            }
        }
        println!("{name:<7} worst {} ulp at {:e}", worst.0, worst.1);
    }
    assert_none(&failures);
}

#[differentiable]
pub fn f_min(x: f32, y: f32) -> f32 {
    x.min(y)
}

#[differentiable]
pub fn f_max(x: f32, y: f32) -> f32 {
    x.max(y)
}

#[differentiable]
pub fn f_atan2(x: f32, y: f32) -> f32 {
    x.atan2(y)
}

#[differentiable]
pub fn f_powf(x: f32, y: f32) -> f32 {
    x.powf(y)
}

#[differentiable]
pub fn f_hypot(x: f32, y: f32) -> f32 {
    x.hypot(y)
}

#[differentiable]
pub fn f_clamp(x: f32, y: f32) -> f32 {
    x.clamp(-1.0, y.abs())
}

#[differentiable]
pub fn f_powi(x: f32, y: f32) -> f32 {
    x.powi(7) + y.powi(-3)
}

/// Each comparison's truth as a bit of the value (and a slope in `x` for the first two),
/// so that a comparison that differs from Rust's anywhere, NaN included, shows. WGSL's `!=`
/// on floats is ordered (false at NaN), Rust's is not: the GPU once took the other branch.
#[differentiable]
pub fn f_compare(x: f32, y: f32) -> f32 {
    let ne = if x != y { 1.0 } else { 0.0 };
    let eq = if x == y { 2.0 } else { 0.0 };
    let lt = if x < y { 4.0 } else { 0.0 };
    let le = if x <= y { 8.0 } else { 0.0 };
    let gt = if x > y { 16.0 } else { 0.0 };
    let ge = if x >= y { 32.0 } else { 0.0 };
    let not_lt = if !(x < y) { 64.0 } else { 0.0 };
    ne + eq + lt + le + gt + ge + not_lt
}

#[test]
fn two_argument_functions_match_rust_at_special_values() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.0,
        2.0,
        3.0,
        -3.0,
        1e-3,
        7.5,
        3e38,
        -2e-38,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let mut args = Vec::new();
    for x in specials {
        for y in specials {
            args.push((x, y));
        }
    }
    type Kernel = fn(&[(f32, f32)]) -> Vec<f32>;
    type Case = (&'static str, Kernel, fn(f32, f32) -> f32, u64);
    /// `(name, GPU kernel of the function $f over a batch of pairs, the function in Rust, ulp bound)`.
    macro_rules! case {
        ($name:literal, $f:ident, $cpu:expr, $bound:expr) => {
            (
                $name,
                |a: &[(f32, f32)]| {
                    let args: Vec<$f::Args> = a.iter().map(|&(x, y)| $f::Args { x, y }).collect();
                    $f::kernel(device()).value(&args).unwrap()
                },
                $cpu,
                $bound,
            )
        };
    }
    let cases: Vec<Case> = vec![
        case!("min", f_min, f_min, 0),
        case!("max", f_max, f_max, 0),
        case!("atan2", f_atan2, f_atan2, 3),
        // powf is WGSL's pow (exp2(y log2 x)) away from the special values: its error grows
        // with |y log2 x| (27 ulp at 0.001^7.5 on lavapipe, 44 at (2e-38)^-1 on the H100),
        // so finite results are checked against 4 + |y log2 x| ulp below (NVIDIA's is about
        // twice lavapipe's error); integer exponents up to 8 are gradfuse's repeated squaring;
        // the special values must be exact.
        case!("powf", f_powf, f_powf, 0),
        case!("hypot", f_hypot, f_hypot, 3),
        case!(
            "clamp",
            f_clamp,
            |x, y| gradfuse::Real::clamp(x, -1.0, y.abs()),
            0
        ),
        case!("powi", f_powi, f_powi, 3),
    ];
    let mut failures = Vec::new();
    for (name, gpu, cpu, bound) in cases {
        let got = gpu(&args);
        for (&(x, y), g) in args.iter().zip(got) {
            let want = cpu(x, y);
            // Vulkan lets a driver flush subnormal results to zero.
            if want != 0.0 && want.abs() < f32::MIN_POSITIVE && g.abs() < f32::MIN_POSITIVE {
                continue;
            }
            let d = ulps(g, want);
            let bound = if name == "powf" && want.is_finite() && want != 0.0 {
                4 + ((y as f64) * (x as f64).abs().log2()).abs() as u64
            } else {
                bound
            };
            if d > bound {
                failures.push(format!(
                    "{name}({x:e}, {y:e}) = {g:e} on the GPU, {want:e} in Rust: {d} ulp"
                ));
            }
        }
    }
    assert_none(&failures);
}

/// One function's every mode over a batch of inputs: `(value, derivative)` per input, the
/// derivative along the tangent 1.
struct Modes {
    /// The function itself, in Rust.
    plain: Vec<f32>,
    /// CPU reverse mode (`value_and_grad`).
    cpu_reverse: Vec<(f32, f32)>,
    /// CPU forward mode (`jvp`).
    cpu_forward: Vec<(f32, f32)>,
    /// The adjoint kernel.
    gpu_reverse: Vec<(f32, f32)>,
    /// The tangent kernel.
    gpu_forward: Vec<(f32, f32)>,
}

/// Whether two results agree as the README promises: both NaN, the same infinity, both
/// zero or subnormal (Vulkan lets a driver flush subnormals), or finite within `bound` ulp.
/// "Subnormal" reaches up to 2^-125 here: Vulkan specifies division only for denominators
/// up to 2^126, and NVIDIA's flushes quotients just above the subnormal range
/// (`log2`'s derivative at 1e38, 1.44e-38, is 0 there).
fn agree(a: f32, b: f32, bound: u64) -> bool {
    let tiny = |x: f32| x.abs() < 2.0 * f32::MIN_POSITIVE;
    (a.is_nan() && b.is_nan())
        || (tiny(a) && tiny(b))
        || (!a.is_nan() && !b.is_nan() && ulps(a, b) <= bound)
}

/// The hostile inputs: signed zeros, subnormals, infinities, NaN, the extremes of the
/// range, and ordinary values for contrast.
fn hostile() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        1e-38,
        -1e-38,
        1e38,
        -1e38,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.5,
        -2.5,
        100.0,
        -100.0,
    ]
}

/// Every unary function of the table, at every hostile input, in every mode: CPU reverse
/// and forward mode against the function itself (values) and each other (derivatives),
/// the GPU's adjoint and tangent kernels against the CPU's. Where the GPU's `sin cos tan`
/// leave gradfuse's own helpers (|x| > 8192, the driver's) only NaN-ness must agree.
#[test]
fn every_mode_agrees_with_rust_at_hostile_inputs() {
    let xs = hostile();
    // Vulkan lets a driver flush subnormal inputs too: the GPU may answer for a signed zero.
    let flushed: Vec<f32> = xs
        .iter()
        .map(|&x| {
            if x.abs() < f32::MIN_POSITIVE {
                0.0f32.copysign(x)
            } else {
                x
            }
        })
        .collect();
    let mut failures = Vec::new();
    for (name, modes) in modes() {
        let m = modes(&xs);
        let at_zero = modes(&flushed);
        for (k, &x) in xs.iter().enumerate() {
            let want = m.plain[k];
            let (v, g) = m.cpu_reverse[k];
            let (want_flushed, g_flushed) = at_zero.cpu_reverse[k];
            let mut check = |what: &str, got: f32, want: f32, bound: u64| {
                let flushed_want = if what.ends_with("value") {
                    want_flushed
                } else {
                    g_flushed
                };
                let gpu = what.starts_with("GPU");
                if !(agree(got, want, bound) || gpu && agree(got, flushed_want, bound)) {
                    failures.push(format!("{name}({x:e}): {what} {got:e}, expected {want:e}"));
                }
            };
            check("CPU reverse value", v, want, 0);
            check("CPU forward value", m.cpu_forward[k].0, want, 0);
            check("CPU forward derivative", m.cpu_forward[k].1, g, 0);
            let driver = matches!(name, "sin" | "cos" | "tan") && (x.is_nan() || x.abs() > 8192.0);
            if driver {
                for (what, got) in [
                    ("GPU reverse value", m.gpu_reverse[k].0),
                    ("GPU forward value", m.gpu_forward[k].0),
                ] {
                    if got.is_nan() != want.is_nan() {
                        failures.push(format!("{name}({x:e}): {what} {got:e}, expected {want:e}"));
                    }
                }
                continue;
            }
            // Values: the bound of `every_function_is_accurate_on_the_gpu`; derivatives are
            // compositions of a few such functions.
            let bound = if matches!(name, "exp" | "exp2" | "cosh" | "sinh") {
                3 + 2 * x.abs().min(100.0) as u64
            } else {
                3
            };
            check("GPU reverse value", m.gpu_reverse[k].0, want, bound);
            check("GPU forward value", m.gpu_forward[k].0, want, bound);
            check("GPU reverse derivative", m.gpu_reverse[k].1, g, 4 * bound);
            check("GPU forward derivative", m.gpu_forward[k].1, g, 4 * bound);
        }
    }
    assert_none(&failures);
}

/// A two-argument function's every mode over a batch of pairs: value and the two partial
/// derivatives (forward mode: one launch per tangent `(1, 0)` and `(0, 1)`).
struct PairModes {
    plain: Vec<f32>,
    cpu_reverse: Vec<[f32; 3]>,
    cpu_forward: Vec<[f32; 3]>,
    gpu_reverse: Vec<[f32; 3]>,
    gpu_forward: Vec<[f32; 3]>,
}

/// Every mode of two-argument function `$f` over a batch of pairs.
macro_rules! pair_modes {
    ($f:ident) => {
        |pairs: &[(f32, f32)]| {
            let args: Vec<$f::Args> = pairs.iter().map(|&(x, y)| $f::Args { x, y }).collect();
            let (dx, dy) = ($f::Grad { x: 1.0, y: 0.0 }, $f::Grad { x: 0.0, y: 1.0 });
            let k = $f::kernel(device());
            let (gv, gg) = k.value_and_grad(&args).unwrap();
            let (tv, tx) = k.jvp(&args, &vec![dx; args.len()]).unwrap();
            let (_, ty) = k.jvp(&args, &vec![dy; args.len()]).unwrap();
            PairModes {
                // The generic version: Rust's own `clamp` panics on a NaN bound.
                plain: pairs.iter().map(|&(x, y)| $f::eval::<f32>(x, y)).collect(),
                cpu_reverse: args
                    .iter()
                    .map(|a| {
                        let (v, g) = $f::value_and_grad(a);
                        [v, g.x, g.y]
                    })
                    .collect(),
                cpu_forward: args
                    .iter()
                    .map(|a| [$f::jvp(a, &dx).0, $f::jvp(a, &dx).1, $f::jvp(a, &dy).1])
                    .collect(),
                gpu_reverse: (0..args.len()).map(|i| [gv[i], gg[i].x, gg[i].y]).collect(),
                gpu_forward: (0..args.len()).map(|i| [tv[i], tx[i], ty[i]]).collect(),
            }
        }
    };
}

/// The two-argument functions at every pair of hostile inputs, in every mode: CPU modes
/// against the function and each other, the GPU's kernels against the CPU. `powf` away
/// from its special values is WGSL's `pow`, whose error grows with |y log2 x| (see
/// `two_argument_functions_match_rust_at_special_values`): there the GPU is held to
/// NaN-ness and infinities only.
#[test]
fn two_argument_functions_in_every_mode_at_hostile_inputs() {
    let xs = hostile();
    let pairs: Vec<(f32, f32)> = xs
        .iter()
        .flat_map(|&x| xs.iter().map(move |&y| (x, y)))
        .collect();
    type Modes2 = fn(&[(f32, f32)]) -> PairModes;
    let cases: Vec<(&str, Modes2, u64)> = vec![
        ("min", pair_modes!(f_min), 0),
        ("max", pair_modes!(f_max), 0),
        ("atan2", pair_modes!(f_atan2), 3),
        ("powf", pair_modes!(f_powf), 3),
        ("hypot", pair_modes!(f_hypot), 3),
        ("clamp", pair_modes!(f_clamp), 0),
        ("powi", pair_modes!(f_powi), 3),
        ("comparisons", pair_modes!(f_compare), 0),
    ];
    // A driver may flush subnormal inputs (NVIDIA's does): the GPU may answer for the pair
    // with its subnormals replaced by signed zeros (`min(0, 1e-45)` is then a tie).
    let flush = |x: f32| {
        if x.abs() < f32::MIN_POSITIVE {
            0.0f32.copysign(x)
        } else {
            x
        }
    };
    let flushed: Vec<(f32, f32)> = pairs.iter().map(|&(x, y)| (flush(x), flush(y))).collect();
    let mut failures = Vec::new();
    for (name, modes, bound) in cases {
        let m = modes(&pairs);
        let at_flushed = modes(&flushed);
        for (k, &(x, y)) in pairs.iter().enumerate() {
            let cpu = m.cpu_reverse[k];
            let mut check = |what: &str, got: [f32; 3], want: [f32; 3], bound: u64| {
                let gpu = what.starts_with("GPU");
                let alternative = if what.ends_with("reverse") {
                    at_flushed.cpu_reverse[k]
                } else {
                    at_flushed.cpu_forward[k]
                };
                for (j, part) in ["value", "d/dx", "d/dy"].iter().enumerate() {
                    let loose = name == "powf" && gpu && want[j].is_finite();
                    let bound = if j == 0 { bound } else { 4 * bound };
                    let ok = agree(got[j], want[j], bound)
                        || gpu && agree(got[j], alternative[j], bound)
                        || loose && got[j].is_finite();
                    if !ok {
                        failures.push(format!(
                            "{name}({x:e}, {y:e}) {part}: {what} {:e}, expected {:e}",
                            got[j], want[j]
                        ));
                    }
                }
            };
            let fwd = m.cpu_forward[k];
            check("CPU reverse", cpu, [m.plain[k], cpu[1], cpu[2]], 0);
            // Forward mode carries each tangent through every partial: a zero tangent times
            // an infinite partial is NaN (atan2(0, 1e-45) along y), where reverse mode keeps
            // the partials apart. Elsewhere the two agree.
            let masked = |r: [f32; 3]| {
                [
                    r[0],
                    if fwd[1].is_nan() { fwd[1] } else { r[1] },
                    if fwd[2].is_nan() { fwd[2] } else { r[2] },
                ]
            };
            check("CPU forward", fwd, masked([m.plain[k], cpu[1], cpu[2]]), 0);
            check("GPU reverse", m.gpu_reverse[k], cpu, bound);
            check("GPU forward", m.gpu_forward[k], fwd, bound);
        }
    }
    assert_none(&failures);
}

#[differentiable]
pub fn f_abs_sqrt(x: f32, y: f32) -> f32 {
    x.abs() + y.sqrt()
}

/// The derivatives the README documents where the math has none, in every mode on the CPU
/// and the GPU, bit for bit: `abs` at ±0, ties of `min`/`max` (split 0.5/0.5) and `clamp`
/// (to `x`), `sqrt` at ±0 (infinite, kept), `powf` at negative bases (0 in the exponent),
/// `hypot` at the origin (0).
#[test]
fn documented_derivatives_at_special_points() {
    let inf = f32::INFINITY;
    // (function, x, y, value, d/dx, d/dy)
    type Point = (&'static str, f32, f32, f32, f32, f32);
    let points: Vec<Point> = vec![
        ("abs+sqrt", 0.0, 4.0, 2.0, 0.0, 0.25),
        ("abs+sqrt", -0.0, 4.0, 2.0, 0.0, 0.25),
        ("abs+sqrt", 1.0, 0.0, 1.0, 1.0, inf),
        ("abs+sqrt", -1.0, -0.0, 1.0, -1.0, -inf),
        ("min", 2.0, 2.0, 2.0, 0.5, 0.5),
        ("min", 1.0, 2.0, 1.0, 1.0, 0.0),
        ("min", f32::NAN, 2.0, 2.0, 0.0, 1.0),
        ("max", -3.0, -3.0, -3.0, 0.5, 0.5),
        ("max", 1.0, 2.0, 2.0, 0.0, 1.0),
        // The ties' NaN tests look at one operand where the other's NaN implies it
        // (`max(x, y) == x` is tested on `x` alone): each NaN still makes its test false.
        ("max", f32::NAN, 2.0, 2.0, 0.0, 1.0),
        ("max", 2.0, f32::NAN, 2.0, 1.0, 0.0),
        ("max", f32::NAN, f32::NAN, f32::NAN, 0.0, 0.0),
        ("min", 2.0, f32::NAN, 2.0, 1.0, 0.0),
        ("min", f32::NAN, f32::NAN, f32::NAN, 0.0, 0.0),
        ("clamp", -1.0, 5.0, -1.0, 1.0, 0.0),
        ("clamp", 5.0, 5.0, 5.0, 1.0, 0.0),
        ("clamp", 6.0, 5.0, 5.0, 0.0, 1.0),
        ("powf", -2.0, 3.0, -8.0, 12.0, 0.0),
        ("powf", 0.0, 3.0, 0.0, 0.0, 0.0),
        ("powf", 2.0, 3.0, 8.0, 12.0, 8.0 * std::f32::consts::LN_2),
        ("hypot", 0.0, 0.0, 0.0, 0.0, 0.0),
        ("hypot", 3.0, 4.0, 5.0, 0.6, 0.8),
    ];
    let mut failures = Vec::new();
    for (name, x, y, v, dx, dy) in points {
        let modes: fn(&[(f32, f32)]) -> PairModes = match name {
            "abs+sqrt" => pair_modes!(f_abs_sqrt),
            "min" => pair_modes!(f_min),
            "max" => pair_modes!(f_max),
            "clamp" => pair_modes!(f_clamp),
            "powf" => pair_modes!(f_powf),
            _ => pair_modes!(f_hypot),
        };
        let m = modes(&[(x, y)]);
        // Forward mode multiplies each tangent by each partial: along (1, 0) an infinite
        // partial in y still adds 0 * inf = NaN, as in JAX's jvp.
        let reverse = [v, dx, dy];
        let forward = [v, dx + 0.0 * dy, dy + 0.0 * dx];
        for (what, got, want) in [
            ("CPU reverse", m.cpu_reverse[0], reverse),
            ("CPU forward", m.cpu_forward[0], forward),
            ("GPU reverse", m.gpu_reverse[0], reverse),
            ("GPU forward", m.gpu_forward[0], forward),
        ] {
            // Exact, but for powf's and hypot's finite values (a few ulp on the GPU).
            let bound = if matches!(name, "powf" | "hypot") {
                4
            } else {
                0
            };
            if (0..3).any(|j| !agree(got[j], want[j], bound) || got[j].is_nan() != want[j].is_nan())
            {
                failures.push(format!(
                    "{name}({x}, {y}): {what} {got:?}, documented {want:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
