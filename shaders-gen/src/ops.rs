//! The one table of supported functions: what each computes and how each is written in
//! Rust and WGSL. Lowering, the optimizer, the interpreter and both emitters read this file
//! and nothing else about functions; their partial derivatives are the one derivative table
//! of the AD transforms (`ad/partials.rs`), which the conventions below describe.
//!
//! # Conventions where a derivative does not exist
//! - `abs`: derivative `signum(x)` away from zero and `0` at zero (a subgradient).
//! - `min`, `max`: the gradient goes to the smaller (larger) argument; on a tie it is split
//!   `0.5 / 0.5`, as JAX does. A NaN argument receives no gradient.
//! - `clamp(x, lo, hi)` is `if x < lo { lo } else if x > hi { hi } else { x }` (Rust's
//!   definition without its panic on `lo > hi`); the gradient is that of the branch taken,
//!   so at `x == lo` or `x == hi` it goes to `x`.
//! - `floor`, `ceil`, `round`, `signum`: derivative `0` everywhere (also at the jumps).
//! - `powf(x, y)`: the derivative in `y` is `0` where `x <= 0` (there `ln x` is not real).
//! - `hypot(x, y)`: gradient `0` at the origin.
//! - `sqrt` at `0`, `ln` at `0`, `asin`/`acos` at `±1`: the infinite derivative is kept
//!   (`inf`), not hidden.

use crate::signature::Precision;

/// A supported function, arithmetic included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the Rust method of the same name
pub enum Func {
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Sinh,
    Cosh,
    Tanh,
    Exp,
    Exp2,
    Ln,
    Log2,
    Log10,
    Sqrt,
    Recip,
    /// `x.powi(n)` with `n` an integer literal.
    Powi(i32),
    Powf,
    Abs,
    Signum,
    Min,
    Max,
    Clamp,
    Floor,
    Ceil,
    Round,
    MulAdd,
    Hypot,
    /// `x` itself, through a zero the GPU driver cannot prove is one. No user calls it: the
    /// kernels' reverse passes that recompute a segment of forward values from its
    /// checkpoint read the checkpoint through it ([`crate::opt::recompute`]), or the
    /// driver would find each recomputed value equal to the forward one it recomputes and
    /// keep that alive instead, which is what the recomputing is there to avoid.
    Fresh,
}

impl Func {
    /// About how many FMAs one call of `self` takes on a GPU, at least 1: the H100's, as
    /// `benches/corpus/costs.rs` measured them (`benches/corpus/h100_2026-11-25_all.md`;
    /// the same within 1% on the H200). The emitters weigh a kernel's work with it to
    /// tell whether its time goes to memory or to arithmetic; the corpus measures the
    /// device it runs on instead.
    pub fn gpu_cost(self) -> f64 {
        match self {
            Func::Add | Func::Sub | Func::Mul | Func::Neg | Func::MulAdd | Func::Abs => 1.0,
            Func::Fresh => 1.0,
            Func::Powi(_) => 1.7,
            Func::Div | Func::Recip | Func::Sqrt | Func::Exp | Func::Exp2 => 6.1,
            Func::Signum | Func::Min | Func::Max | Func::Floor | Func::Ceil => 6.1,
            Func::Clamp => 8.0,
            Func::Round => 11.4,
            Func::Sinh | Func::Cosh | Func::Tanh => 14.4,
            Func::Powf => 24.5,
            Func::Atan => 25.7,
            Func::Hypot => 27.8,
            Func::Cos | Func::Atan2 => 42.8,
            Func::Sin | Func::Ln | Func::Log2 | Func::Log10 => 46.0,
            Func::Asin | Func::Acos => 66.5,
            Func::Tan => 85.8,
        }
    }
}

/// How a function is written in WGSL.
#[derive(Clone, Copy, Debug)]
pub enum WgslForm {
    /// `a op b`.
    Infix(&'static str),
    /// `op a`.
    Prefix(&'static str),
    /// A WGSL builtin of this name, arguments in Rust order.
    Builtin(&'static str),
    /// A helper function from [`WGSL_HELPERS`], used where the WGSL builtin's semantics
    /// differ from Rust's (NaN handling, rounding of ties, negative bases).
    Helper(&'static str),
    /// An expression with `{0}`, `{1}` for the arguments (operands are always names or
    /// literals, and the expression is always a whole `let`, so it needs no parentheses).
    Template(&'static str),
}

/// How a function is written in Rust.
#[derive(Clone, Copy, Debug)]
pub enum RustForm {
    /// `a op b`.
    Infix(&'static str),
    /// `op a`.
    Prefix(&'static str),
    /// `a.name(b, ...)`: the f32 method, or `gradfuse::Real`'s method of the same name.
    Method(&'static str),
    /// `::gradfuse::Real::name(a, b, ...)`: used where the f32 method can panic.
    Real(&'static str),
}

/// One row of the table for a method a user can call.
#[derive(Clone, Copy, Debug)]
pub struct MethodInfo {
    /// The f32 method name.
    pub name: &'static str,
    /// Number of arguments, the receiver included.
    pub arity: usize,
    /// The function (for `powi`, with exponent 0 as a placeholder: the lowering reads the
    /// literal exponent).
    pub func: Func,
    /// The derivative, for documentation and error messages.
    pub derivative: &'static str,
}

/// Every method a user can call on an `f32`, in the order the README lists them.
pub const METHODS: &[MethodInfo] = &[
    m("sin", 1, Func::Sin, "cos x"),
    m("cos", 1, Func::Cos, "-sin x"),
    m("tan", 1, Func::Tan, "1 + tan² x"),
    m("asin", 1, Func::Asin, "1 / sqrt(1 - x²)"),
    m("acos", 1, Func::Acos, "-1 / sqrt(1 - x²)"),
    m("atan", 1, Func::Atan, "1 / (1 + x²)"),
    m(
        "atan2",
        2,
        Func::Atan2,
        "(x, -y) / (x² + y²) for y.atan2(x)",
    ),
    m("sinh", 1, Func::Sinh, "cosh x"),
    m("cosh", 1, Func::Cosh, "sinh x"),
    m("tanh", 1, Func::Tanh, "1 - tanh² x"),
    m("exp", 1, Func::Exp, "exp x"),
    m("exp2", 1, Func::Exp2, "ln 2 · exp2 x"),
    m("ln", 1, Func::Ln, "1 / x"),
    m("log2", 1, Func::Log2, "1 / (x ln 2)"),
    m("log10", 1, Func::Log10, "1 / (x ln 10)"),
    m("sqrt", 1, Func::Sqrt, "1 / (2 sqrt x)"),
    m("recip", 1, Func::Recip, "-1 / x²"),
    m("powi", 2, Func::Powi(0), "n x^(n-1); n an integer literal"),
    m(
        "powf",
        2,
        Func::Powf,
        "(y x^(y-1), ln x · x^y); 0 in y where x <= 0",
    ),
    m("abs", 1, Func::Abs, "signum x; 0 at 0"),
    m("signum", 1, Func::Signum, "0"),
    m("min", 2, Func::Min, "1 to the smaller; 0.5 each on a tie"),
    m("max", 2, Func::Max, "1 to the larger; 0.5 each on a tie"),
    m(
        "clamp",
        3,
        Func::Clamp,
        "that of the branch taken; x on a tie",
    ),
    m("floor", 1, Func::Floor, "0"),
    m("ceil", 1, Func::Ceil, "0"),
    m("round", 1, Func::Round, "0"),
    m("mul_add", 3, Func::MulAdd, "(b, a, 1) for a.mul_add(b, c)"),
    m(
        "hypot",
        2,
        Func::Hypot,
        "(x, y) / hypot(x, y); 0 at the origin",
    ),
];

const fn m(name: &'static str, arity: usize, func: Func, derivative: &'static str) -> MethodInfo {
    MethodInfo {
        name,
        arity,
        func,
        derivative,
    }
}

/// The method called `name`, if it is supported.
pub fn method(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().find(|m| m.name == name)
}

/// The supported method names, comma-separated, for error messages.
pub fn method_names() -> String {
    METHODS.iter().map(|m| m.name).collect::<Vec<_>>().join(" ")
}

/// WGSL helper functions, emitted into a module when one of its nodes uses them.
///
/// Each is `(name, helpers it calls, source)`; all reproduce Rust's f32 semantics where a
/// WGSL builtin differs (NaN handling, ties, negative bases) or is too imprecise. Vulkan
/// lets a driver's `sin`/`cos` be off by 2^-11 absolute and its `atan` by 4096 ulp, and
/// NVIDIA's driver uses hardware approximations (3e-4 relative error on the corpus, where
/// the CPU is within 1e-7): `sin cos tan tanh sinh ln log2 log10 asin acos atan atan2` are
/// computed here with Cephes' f32 algorithms, to 1-2 ulp on every GPU. `exp`, `exp2`,
/// `sqrt` and `pow` stay builtins: their Vulkan bounds are a few ulp.
pub const WGSL_HELPERS: &[(&str, &[&str], &str)] = &[
    (
        "gf_is_nan",
        &[],
        "// NaN by its bits: WGSL lets an implementation assume there are no NaNs, so x != x\n\
         // may be folded to false.\n\
         fn gf_is_nan(x: f32) -> bool {\n    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;\n}",
    ),
    (
        "gf_fresh",
        &[],
        "// x plus a zero the driver cannot prove is one (per_thread is far below 2^31): a\n\
         // recomputed value kept apart from the equal one its forward pass computed.\n\
         fn gf_fresh(x: f32) -> f32 {\n    return x + bitcast<f32>(params.per_thread & 0x80000000u);\n}",
    ),
    (
        "gf_min",
        &["gf_is_nan"],
        "// Rust's f32::min: a NaN argument yields the other one.\n\
         fn gf_min(a: f32, b: f32) -> f32 {\n    return select(select(min(a, b), a, gf_is_nan(b)), b, gf_is_nan(a));\n}",
    ),
    (
        "gf_max",
        &["gf_is_nan"],
        "// Rust's f32::max: a NaN argument yields the other one.\n\
         fn gf_max(a: f32, b: f32) -> f32 {\n    return select(select(max(a, b), a, gf_is_nan(b)), b, gf_is_nan(a));\n}",
    ),
    (
        "gf_clamp",
        &["gf_is_nan"],
        "// Rust's f32::clamp (without its panic when lo > hi): NaN stays NaN, tested by its bits\n\
         // because a driver may treat comparisons with NaN as true.\n\
         fn gf_clamp(x: f32, lo: f32, hi: f32) -> f32 {\n    if (gf_is_nan(x)) {\n        return x;\n    }\n    return select(select(x, hi, x > hi), lo, x < lo);\n}",
    ),
    (
        "gf_round",
        &[],
        "// Rust's f32::round: ties away from zero (WGSL's round() takes ties to even).\n\
         fn gf_round(x: f32) -> f32 {\n    let t = trunc(x);\n    return select(t, t + sign(x), abs(x - t) >= 0.5);\n}",
    ),
    (
        "gf_signum",
        &["gf_is_nan"],
        "// Rust's f32::signum: ±1 by the sign bit (also for ±0), NaN stays NaN.\n\
         fn gf_signum(x: f32) -> f32 {\n    let s = select(1.0, -1.0, (bitcast<u32>(x) & 0x80000000u) != 0u);\n    return select(s, x, gf_is_nan(x));\n}",
    ),
    (
        "gf_powf",
        &["gf_is_nan"],
        "// Rust's f32::powf (C99 Annex F): 1 for y = 0 or x = 1, NaN for a negative base and a\n\
         // non-integer exponent, signed zeros and infinities at the edges. WGSL's pow() is\n\
         // exp2(y * log2(x)), undefined for x < 0 and for x = 0.\n\
         fn gf_powf(x: f32, y: f32) -> f32 {\n    if (y == 0.0 || x == 1.0) {\n        return 1.0;\n    }\n    if (y == 1.0) {\n        return x;\n    }\n    if (gf_is_nan(x) || gf_is_nan(y)) {\n        return bitcast<f32>(0x7fc00000u);\n    }\n    let inf = bitcast<f32>(0x7f800000u);\n    let ax = abs(x);\n    let x_neg = (bitcast<u32>(x) & 0x80000000u) != 0u;\n    if (abs(y) == inf) {\n        if (ax == 1.0) {\n            return 1.0;\n        }\n        return select(0.0, inf, (ax > 1.0) == (y > 0.0));\n    }\n    let y_int = fract(y) == 0.0;\n    let y_odd = y_int && abs(y) < 16777216.0 && fract(y * 0.5) != 0.0;\n    if (y_int && abs(y) <= 8.0 && ax != 0.0 && ax != inf) {\n        // Small integer exponents by repeated squaring: a few ulp, where exp2(y log2 x)\n        // loses 0.35 |y log2 x| ulp and more on NVIDIA.\n        var base = select(ax, 1.0 / ax, y < 0.0);\n        var e = u32(abs(y));\n        var acc = 1.0;\n        loop {\n            if (e == 0u) {\n                break;\n            }\n            if ((e & 1u) == 1u) {\n                acc = acc * base;\n            }\n            base = base * base;\n            e = e >> 1u;\n        }\n        return select(acc, -acc, x_neg && y_odd);\n    }\n    var m = 0.0;\n    if (ax == 0.0) {\n        m = select(0.0, inf, y < 0.0);\n    } else if (ax == inf) {\n        m = select(0.0, inf, y > 0.0);\n    } else {\n        if (x_neg && !y_int) {\n            return bitcast<f32>(0x7fc00000u);\n        }\n        m = pow(ax, y);\n    }\n    return select(m, -m, x_neg && y_odd);\n}",
    ),
    (
        "gf_hypot",
        &["gf_is_nan"],
        "// Rust's f32::hypot: infinite if either argument is (even with a NaN), scaled by the\n\
         // larger argument so that it overflows only when the result does.\n\
         fn gf_hypot(x: f32, y: f32) -> f32 {\n    let inf = bitcast<f32>(0x7f800000u);\n    let ax = abs(x);\n    let ay = abs(y);\n    if (ax == inf || ay == inf) {\n        return inf;\n    }\n    if (gf_is_nan(x) || gf_is_nan(y)) {\n        return bitcast<f32>(0x7fc00000u);\n    }\n    let hi = max(ax, ay);\n    if (hi == 0.0) {\n        return 0.0;\n    }\n    // Scaled by 2^-64 (exactly) for the division: drivers divide through a reciprocal that\n    // flushes below 2^-126.\n    let s = select(1.0, 5.421010862427522e-20, hi > 1.8446744e19);\n    let r = (min(ax, ay) * s) / (hi * s);\n    return hi * sqrt(1.0 + r * r);\n}",
    ),
    (
        "gf_powi",
        &[],
        "// Rust's f32::powi: repeated squaring.\n\
         fn gf_powi(x: f32, n: i32) -> f32 {\n    var base = select(x, 1.0 / x, n < 0);\n    var e = u32(abs(n));\n    var acc = 1.0;\n    loop {\n        if (e == 0u) {\n            break;\n        }\n        if ((e & 1u) == 1u) {\n            acc = acc * base;\n        }\n        base = base * base;\n        e = e >> 1u;\n    }\n    return acc;\n}",
    ),
    (
        "gf_sin",
        &[],
        "// sin to about 1 ulp for |x| <= 8192 (Cephes' sinf): reduction by pi/4 in three parts,\n\
         // then a polynomial. Beyond 8192 the driver's sin (whose reduction is its own).\n\
         fn gf_sin(x: f32) -> f32 {\n    let ax = abs(x);\n    if (!(ax <= 8192.0)) {\n        return sin(x);\n    }\n    var j = u32(ax * 1.2732395);\n    var y = f32(j);\n    if ((j & 1u) == 1u) {\n        j = j + 1u;\n        y = y + 1.0;\n    }\n    j = j & 7u;\n    var neg = (bitcast<u32>(x) & 0x80000000u) != 0u;\n    if (j > 3u) {\n        neg = !neg;\n        j = j - 4u;\n    }\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    var s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    if (j == 1u || j == 2u) {\n        s = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    }\n    return select(s, -s, neg);\n}",
    ),
    (
        "gf_cos",
        &[],
        "// cos to about 1 ulp for |x| <= 8192 (Cephes' cosf); beyond, the driver's cos.\n\
         fn gf_cos(x: f32) -> f32 {\n    let ax = abs(x);\n    if (!(ax <= 8192.0)) {\n        return cos(x);\n    }\n    var j = u32(ax * 1.2732395);\n    var y = f32(j);\n    if ((j & 1u) == 1u) {\n        j = j + 1u;\n        y = y + 1.0;\n    }\n    j = j & 7u;\n    var neg = false;\n    if (j > 3u) {\n        neg = true;\n        j = j - 4u;\n    }\n    if (j > 1u) {\n        neg = !neg;\n    }\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    var c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    if (j == 1u || j == 2u) {\n        c = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    }\n    return select(c, -c, neg);\n}",
    ),
    (
        "gf_sincos",
        &[],
        "// (sin x, cos x) for a kernel that needs both (a derivative of either): gf_sin's and\n\
         // gf_cos's arithmetic, the reduction done once and both polynomials taken.\n\
         fn gf_sincos(x: f32) -> vec2<f32> {\n    let ax = abs(x);\n    if (!(ax <= 8192.0)) {\n        return vec2<f32>(sin(x), cos(x));\n    }\n    var j = u32(ax * 1.2732395);\n    var y = f32(j);\n    if ((j & 1u) == 1u) {\n        j = j + 1u;\n        y = y + 1.0;\n    }\n    j = j & 7u;\n    var neg_s = (bitcast<u32>(x) & 0x80000000u) != 0u;\n    var neg_c = false;\n    if (j > 3u) {\n        neg_s = !neg_s;\n        neg_c = true;\n        j = j - 4u;\n    }\n    if (j > 1u) {\n        neg_c = !neg_c;\n    }\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    let ps = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    let pc = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    let swap = j == 1u || j == 2u;\n    let s = select(ps, pc, swap);\n    let c = select(pc, ps, swap);\n    return vec2<f32>(select(s, -s, neg_s), select(c, -c, neg_c));\n}",
    ),
    (
        "gf_tan",
        &["gf_sincos"],
        "// tan as the ratio of the accurate sin and cos (about 2 ulp), reduced once.\n\
         fn gf_tan(x: f32) -> f32 {\n    let sc = gf_sincos(x);\n    return sc.x / sc.y;\n}",
    ),
    (
        "gf_tanh",
        &[],
        "// tanh to about 2 ulp (Cephes' tanhf): a polynomial below 0.625, where\n\
         // 1 - 2 / (exp(2|x|) + 1) would cancel; drivers may use a 2^-11 approximation.\n\
         // From 9.011 (13 ln 2) on 2 / (exp(2|x|) + 1) is under half an ulp of 1, and 1 is what it gives.\n\
         fn gf_tanh(x: f32) -> f32 {\n    let ax = abs(x);\n    if (ax >= 0.625) {\n        let t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);\n        return select(t, -t, x < 0.0);\n    }\n    let z = x * x;\n    return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;\n}",
    ),
    (
        "gf_sinh",
        &[],
        "// sinh to about 2 ulp (Cephes' sinhf): a polynomial below 1, where (e^x - e^-x) / 2\n\
         // (Vulkan's definition) cancels.\n\
         fn gf_sinh(x: f32) -> f32 {\n    let ax = abs(x);\n    if (ax > 1.0) {\n        let e = exp(ax);\n        let s = 0.5 * e - 0.5 / e;\n        return select(s, -s, x < 0.0);\n    }\n    let z = x * x;\n    return ((2.03721912945e-4 * z + 8.33028376239e-3) * z + 1.66667160211e-1) * z * x + x;\n}",
    ),
    (
        "gf_log_parts",
        &[],
        "// ln(x) = e ln 2 + r for finite x > 0 (Cephes' logf): returns (e, r). Drivers' log\n\
         // may be accurate only in absolute terms, which loses every digit near x = 1.\n\
         fn gf_log_parts(x: f32) -> vec2<f32> {\n    // Drivers' frexp of a subnormal is not to be trusted (lavapipe's is off by its leading\n    // zeros): scale it into the normal range by 2^25 first.\n    let sub = x < bitcast<f32>(0x00800000u);\n    let fr = frexp(select(x, x * 33554432.0, sub));\n    var m = fr.fract;\n    var e = f32(fr.exp) - select(0.0, 25.0, sub);\n    if (m < 0.70710678) {\n        e = e - 1.0;\n        m = m + m - 1.0;\n    } else {\n        m = m - 1.0;\n    }\n    let z = m * m;\n    let p = ((((((((7.0376836292e-2 * m - 1.1514610310e-1) * m + 1.1676998740e-1) * m - 1.2420140846e-1) * m + 1.4249322787e-1) * m - 1.6668057665e-1) * m + 2.0000714765e-1) * m - 2.4999993993e-1) * m + 3.3333331174e-1) * m * z;\n    return vec2<f32>(e, m + (p - 0.5 * z));\n}",
    ),
    (
        "gf_log_special",
        &[],
        "// The logarithm where it is not finite: NaN below 0 and for NaN, -inf at 0, +inf at +inf.\n\
         fn gf_log_special(x: f32) -> f32 {\n    if (x == 0.0) {\n        return bitcast<f32>(0xff800000u);\n    }\n    if (x > 0.0) {\n        return x;\n    }\n    return bitcast<f32>(0x7fc00000u);\n}",
    ),
    (
        "gf_ln",
        &["gf_log_parts", "gf_log_special"],
        "// Natural logarithm to about 1 ulp.\n\
         fn gf_ln(x: f32) -> f32 {\n    if (!(x > 0.0) || x == bitcast<f32>(0x7f800000u)) {\n        return gf_log_special(x);\n    }\n    let er = gf_log_parts(x);\n    return er.y + er.x * -2.12194440e-4 + er.x * 0.693359375;\n}",
    ),
    (
        "gf_log2",
        &["gf_log_parts", "gf_log_special"],
        "// log2 to about 1 ulp, exact at powers of two.\n\
         fn gf_log2(x: f32) -> f32 {\n    if (!(x > 0.0) || x == bitcast<f32>(0x7f800000u)) {\n        return gf_log_special(x);\n    }\n    let er = gf_log_parts(x);\n    return er.y * 1.4426950408889634 + er.x;\n}",
    ),
    (
        "gf_log10",
        &["gf_log_parts", "gf_log_special"],
        "// log10 to about 2 ulp.\n\
         fn gf_log10(x: f32) -> f32 {\n    if (!(x > 0.0) || x == bitcast<f32>(0x7f800000u)) {\n        return gf_log_special(x);\n    }\n    let er = gf_log_parts(x);\n    return er.y * 0.4342944819032518 + er.x * 0.30102999566398120;\n}",
    ),
    (
        "gf_atan",
        &[],
        "// atan to about 2 ulp (Cephes' atanf): range reduction to |z| <= tan(pi/8), then a\n\
         // minimax polynomial.\n\
         fn gf_atan(x: f32) -> f32 {\n    let t = abs(x);\n    var base = 0.0;\n    var z = t;\n    if (t > 2.4142135) {\n        base = 1.5707964;\n        z = -1.0 / t;\n    } else if (t > 0.41421357) {\n        base = 0.7853982;\n        z = (t - 1.0) / (t + 1.0);\n    }\n    let zz = z * z;\n    let p = (((0.0805374449538 * zz - 0.138776856032) * zz + 0.199777106478) * zz - 0.333329491539) * zz;\n    let r = base + (p * z + z);\n    return select(r, -r, x < 0.0);\n}",
    ),
    (
        "gf_atan2",
        &["gf_atan", "gf_is_nan"],
        "// Rust's f32::atan2(y, x) (C99 Annex F): quadrants, signed zeros, infinities, NaN.\n\
         fn gf_atan2(y: f32, x: f32) -> f32 {\n    if (gf_is_nan(x) || gf_is_nan(y)) {\n        return bitcast<f32>(0x7fc00000u);\n    }\n    let y_neg = (bitcast<u32>(y) & 0x80000000u) != 0u;\n    let x_neg = (bitcast<u32>(x) & 0x80000000u) != 0u;\n    let inf = bitcast<f32>(0x7f800000u);\n    if (abs(x) == inf && abs(y) == inf) {\n        let a = select(0.7853982, 2.3561945, x_neg);\n        return select(a, -a, y_neg);\n    }\n    if (abs(y) == inf || x == 0.0) {\n        if (y == 0.0) {\n            return select(select(0.0, 3.1415927, x_neg), select(-0.0, -3.1415927, x_neg), y_neg);\n        }\n        return select(1.5707964, -1.5707964, y_neg);\n    }\n    if (abs(x) == inf) {\n        return select(select(0.0, -0.0, y_neg), select(3.1415927, -3.1415927, y_neg), x_neg);\n    }\n    // Drivers divide through a reciprocal that flushes below 2^-126: scale huge arguments\n    // by 2^-64 (exactly) first.\n    let s = select(1.0, 5.421010862427522e-20, max(abs(x), abs(y)) > 1.8446744e19);\n    let a = gf_atan((y * s) / (x * s));\n    if (!x_neg) {\n        return a;\n    }\n    return select(a + 3.1415927, a - 3.1415927, y_neg);\n}",
    ),
    (
        "gf_asin",
        &["gf_atan2", "gf_atan", "gf_is_nan"],
        "// asin(x) = atan2(x, sqrt((1 - x)(1 + x))): accurate up to |x| = 1.\n\
         fn gf_asin(x: f32) -> f32 {\n    return gf_atan2(x, sqrt((1.0 - x) * (1.0 + x)));\n}",
    ),
    (
        "gf_acos",
        &["gf_atan2", "gf_atan", "gf_is_nan"],
        "// acos(x) = atan2(sqrt((1 - x)(1 + x)), x): accurate up to |x| = 1.\n\
         fn gf_acos(x: f32) -> f32 {\n    return gf_atan2(sqrt((1.0 - x) * (1.0 + x)), x);\n}",
    ),
];

/// The WGSL helpers of kernels of `precision`: `(name, helpers it calls directly or not,
/// source)`.
pub fn wgsl_helpers(
    precision: Precision,
) -> &'static [(&'static str, &'static [&'static str], &'static str)] {
    match precision {
        Precision::F32 => WGSL_HELPERS,
        Precision::F64 => crate::ops_f64::WGSL_HELPERS_F64,
    }
}

/// Branch-free forms of helpers of [`WGSL_HELPERS`], the same arithmetic: every path
/// computed and the result selected, the driver's `sin`/`cos` for `|x| > 8192` selected
/// last. They give the branching forms' bits on lavapipe (`tests/branch_free.rs`); on the
/// H100 they agree within the corpus bench's 1e-4 (a driver may contract differently).
/// Without an `if` in them, the driver schedules a kernel's calls as one block. On the
/// H100 (BENCHMARKS.md, "Narrow outputs from registers, and branch-free `sin` and `cos`"),
/// value, tangent and Jacobian kernels ran up to 3x faster with them (`jacobian_4x32`
/// 1.43 -> 0.51 ms), but adjoints that call many of them lost up to 35% (`random_05`):
/// adjoint and Hessian kernels keep the branching forms.
pub const WGSL_BRANCH_FREE_HELPERS: &[(&str, &str)] = &[
    (
        "gf_sin",
        "// sin to about 1 ulp for |x| <= 8192 (Cephes' sinf), without branches: both\n// polynomials computed and one selected; beyond 8192 the driver's sin.\nfn gf_sin(x: f32) -> f32 {\n    let ax = abs(x);\n    let big = !(ax <= 8192.0);\n    let j0 = u32(select(ax, 0.0, big) * 1.2732395);\n    let odd = (j0 & 1u) == 1u;\n    let y = f32(j0) + select(0.0, 1.0, odd);\n    let j1 = (j0 + select(0u, 1u, odd)) & 7u;\n    let hi = j1 > 3u;\n    let neg = ((bitcast<u32>(x) & 0x80000000u) != 0u) != hi;\n    let j = select(j1, j1 - 4u, hi);\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    let ps = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    let pc = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    let s = select(ps, pc, j == 1u || j == 2u);\n    return select(select(s, -s, neg), sin(x), big);\n}",
    ),
    (
        "gf_sincos",
        "// (sin x, cos x) for a kernel that needs both, without branches: gf_sin's and gf_cos's\n// arithmetic, the reduction done once; beyond 8192 the driver's.\nfn gf_sincos(x: f32) -> vec2<f32> {\n    let ax = abs(x);\n    let big = !(ax <= 8192.0);\n    let j0 = u32(select(ax, 0.0, big) * 1.2732395);\n    let odd = (j0 & 1u) == 1u;\n    let y = f32(j0) + select(0.0, 1.0, odd);\n    let j1 = (j0 + select(0u, 1u, odd)) & 7u;\n    let hi = j1 > 3u;\n    let j = select(j1, j1 - 4u, hi);\n    let neg_s = ((bitcast<u32>(x) & 0x80000000u) != 0u) != hi;\n    let neg_c = hi != (j > 1u);\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    let ps = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    let pc = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    let swap = j == 1u || j == 2u;\n    let s = select(ps, pc, swap);\n    let c = select(pc, ps, swap);\n    return select(vec2<f32>(select(s, -s, neg_s), select(c, -c, neg_c)), vec2<f32>(sin(x), cos(x)), big);\n}",
    ),
    (
        "gf_cos",
        "// cos to about 1 ulp for |x| <= 8192 (Cephes' cosf), without branches; beyond, the\n// driver's cos.\nfn gf_cos(x: f32) -> f32 {\n    let ax = abs(x);\n    let big = !(ax <= 8192.0);\n    let j0 = u32(select(ax, 0.0, big) * 1.2732395);\n    let odd = (j0 & 1u) == 1u;\n    let y = f32(j0) + select(0.0, 1.0, odd);\n    let j1 = (j0 + select(0u, 1u, odd)) & 7u;\n    let hi = j1 > 3u;\n    let j = select(j1, j1 - 4u, hi);\n    let neg = hi != (j > 1u);\n    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;\n    let z = r * r;\n    let pc = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;\n    let ps = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;\n    let c = select(pc, ps, j == 1u || j == 2u);\n    return select(select(c, -c, neg), cos(x), big);\n}",
    ),
];

/// The source of f32 helper `name` a kernel writes: its branch-free form
/// ([`WGSL_BRANCH_FREE_HELPERS`]) where `branch_free` and it has one.
pub fn wgsl_helper_source(name: &str, src: &'static str, branch_free: bool) -> &'static str {
    WGSL_BRANCH_FREE_HELPERS
        .iter()
        .find(|(n, _)| branch_free && *n == name)
        .map_or(src, |(_, free)| *free)
}

/// `gf_tanh` without branches, the same arithmetic: the polynomial and the exponential's
/// form both computed, one selected (it gives the branching form's bits on lavapipe,
/// `tests/branch_free.rs`). Two kinds of kernel take it, where a warp's `tanh`s diverge:
/// the cooperative network adjoint (`emit_wgsl::network`; its 8-64-64-1 adjoint ran 17.9
/// -> 16.1 ms at 2^24 on the H200 with it), and kernels that stage rows they map through
/// `tanh` or read them as `vec4`s (`abi::rows_mapped_by_tanh`). Other kernels keep the branching form: the
/// 8-32-32-1's value ran 0.113 -> 0.721 ms at 2^20 with it (BENCHMARKS.md, "Without bounds
/// checks"), random programs 1-7% slower (BENCHMARKS.md, "Rows mapped through `tanh`").
/// Neither form selects 1 past 9 any more: the formula gives the nearest float there (an ulp
/// under 1 up to 9.011, where the select gave 1), and the select's two instructions a `tanh`
/// were 2% of the 8-32-32-1 adjoint at 2^20 on the H100 (BENCHMARKS.md, "The division
/// measured").
pub const WGSL_TANH_BRANCH_FREE: &str = "// tanh to about 2 ulp (Cephes' tanhf), without branches: the polynomial below 0.625\n// and 1 - 2 / (exp(2|x|) + 1) above both computed, one selected.\nfn gf_tanh(x: f32) -> f32 {\n    let ax = abs(x);\n    let t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);\n    let z = x * x;\n    let p = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;\n    return select(p, select(t, -t, x < 0.0), ax >= 0.625);\n}";

/// The source of the WGSL helper `name` of `precision`.
pub fn wgsl_helper(name: &str, precision: Precision) -> Option<&'static str> {
    wgsl_helpers(precision)
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, src)| *src)
}

/// The helpers `name` calls, directly or not.
pub fn wgsl_helper_deps(name: &str, precision: Precision) -> &'static [&'static str] {
    wgsl_helpers(precision)
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, deps, _)| *deps)
        .unwrap_or(&[])
}

impl Func {
    /// Number of arguments (the exponent of `powi` is part of the function, not an argument).
    pub fn arity(self) -> usize {
        use Func::*;
        match self {
            Add | Sub | Mul | Div | Atan2 | Powf | Min | Max | Hypot => 2,
            Clamp | MulAdd => 3,
            _ => 1,
        }
    }

    /// How it is written in WGSL in a kernel of `precision`: f64 kernels compute `exp`,
    /// `exp2` and `cosh` with helpers too (Vulkan's builtins take 32-bit floats only).
    pub fn wgsl_in(self, precision: Precision) -> WgslForm {
        match (precision, self) {
            (Precision::F64, Func::Exp) => WgslForm::Helper("gf_exp"),
            (Precision::F64, Func::Exp2) => WgslForm::Helper("gf_exp2"),
            (Precision::F64, Func::Cosh) => WgslForm::Helper("gf_cosh"),
            _ => self.wgsl(),
        }
    }

    /// How it is written in WGSL (in an f32 kernel).
    pub fn wgsl(self) -> WgslForm {
        use Func::*;
        use WgslForm as W;
        match self {
            Add => W::Infix("+"),
            Sub => W::Infix("-"),
            Mul => W::Infix("*"),
            Div => W::Infix("/"),
            Neg => W::Prefix("-"),
            Sin => W::Helper("gf_sin"),
            Cos => W::Helper("gf_cos"),
            Tan => W::Helper("gf_tan"),
            Asin => W::Helper("gf_asin"),
            Acos => W::Helper("gf_acos"),
            Atan => W::Helper("gf_atan"),
            Atan2 => W::Helper("gf_atan2"),
            Sinh => W::Helper("gf_sinh"),
            Cosh => W::Builtin("cosh"),
            Tanh => W::Helper("gf_tanh"),
            Exp => W::Builtin("exp"),
            Exp2 => W::Builtin("exp2"),
            Ln => W::Helper("gf_ln"),
            Log2 => W::Helper("gf_log2"),
            Log10 => W::Helper("gf_log10"),
            Sqrt => W::Builtin("sqrt"),
            Recip => W::Template("1.0 / {0}"),
            Powi(_) => W::Helper("gf_powi"),
            Powf => W::Helper("gf_powf"),
            Abs => W::Builtin("abs"),
            Signum => W::Helper("gf_signum"),
            Min => W::Helper("gf_min"),
            Max => W::Helper("gf_max"),
            Clamp => W::Helper("gf_clamp"),
            Floor => W::Builtin("floor"),
            Ceil => W::Builtin("ceil"),
            Round => W::Helper("gf_round"),
            MulAdd => W::Builtin("fma"),
            Hypot => W::Helper("gf_hypot"),
            Fresh => W::Helper("gf_fresh"),
        }
    }

    /// How it is written in Rust (f32 code and generic `S: Real` code alike).
    pub fn rust(self) -> RustForm {
        use Func::*;
        use RustForm as R;
        match self {
            Add => R::Infix("+"),
            Sub => R::Infix("-"),
            Mul => R::Infix("*"),
            Div => R::Infix("/"),
            Neg => R::Prefix("-"),
            // f32::clamp panics when lo > hi or either is NaN; Real::clamp never does.
            Clamp => R::Real("clamp"),
            Powi(_) => R::Method("powi"),
            // Only the kernels' IR holds it; written out, it is the value itself.
            Fresh => R::Prefix(""),
            other => R::Method(
                METHODS
                    .iter()
                    .find(|m| m.func == other)
                    .map(|m| m.name)
                    .unwrap_or("unreachable"),
            ),
        }
    }

    /// The value in f64: the interpreter's semantics, which are Rust's f32 semantics
    /// carried out in f64.
    pub fn eval(self, a: &[f64]) -> f64 {
        use Func::*;
        match self {
            Add => a[0] + a[1],
            Sub => a[0] - a[1],
            Mul => a[0] * a[1],
            Div => a[0] / a[1],
            Neg => -a[0],
            Sin => a[0].sin(),
            Cos => a[0].cos(),
            Tan => a[0].tan(),
            Asin => a[0].asin(),
            Acos => a[0].acos(),
            Atan => a[0].atan(),
            Atan2 => a[0].atan2(a[1]),
            Sinh => a[0].sinh(),
            Cosh => a[0].cosh(),
            Tanh => a[0].tanh(),
            Exp => a[0].exp(),
            Exp2 => a[0].exp2(),
            Ln => a[0].ln(),
            Log2 => a[0].log2(),
            Log10 => a[0].log10(),
            Sqrt => a[0].sqrt(),
            Recip => a[0].recip(),
            Powi(n) => a[0].powi(n),
            Powf => a[0].powf(a[1]),
            Abs => a[0].abs(),
            Signum => a[0].signum(),
            Min => a[0].min(a[1]),
            Max => a[0].max(a[1]),
            Clamp => clamp(a[0], a[1], a[2]),
            Floor => a[0].floor(),
            Ceil => a[0].ceil(),
            Round => a[0].round(),
            MulAdd => a[0].mul_add(a[1], a[2]),
            Hypot => a[0].hypot(a[1]),
            Fresh => a[0],
        }
    }
}

/// `clamp` as every gradfuse version computes it.
pub fn clamp(x: f64, lo: f64, hi: f64) -> f64 {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}
