//! Every function of the table on the GPU, over a wide sweep of inputs and the special
//! values, in ulps from the correctly rounded result (the f64 value rounded to f32): checks
//! gradfuse's own WGSL helpers (Cephes algorithms) and its NaN/inf/tie semantics.

mod common;

use common::device;
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
    assert!(
        failures.is_empty(),
        "{} on {}:\n{}",
        failures.len(),
        device().describe(),
        failures.join("\n")
    );
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
    assert!(
        failures.is_empty(),
        "{} on {}:\n{}",
        failures.len(),
        device().describe(),
        failures.join("\n")
    );
}
