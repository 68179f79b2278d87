//! The f64 half of the function table's WGSL: every helper an f64 kernel calls, under the
//! names the f32 helpers have (`ops::WGSL_HELPERS`), plus `gf_exp`, `gf_exp2` and `gf_cosh`.
//! Vulkan's GLSL.std.450 transcendentals (`exp`, `log`, `sin`, `pow`, ...) take 16- and
//! 32-bit floats only, so an f64 kernel cannot call them: each is computed here with range
//! reduction and a Taylor polynomial long enough for about 1 ulp, checked against Rust's
//! f64 functions by `tests/f64.rs`. Only IEEE-exact builtins are used (`sqrt`, `abs`,
//! `floor`, `ceil`, `fract`, `fma`, `ldexp`, `min`, `max`; not `round` or `trunc`, which lavapipe
//! gets wrong for large doubles).

/// The f64 WGSL helpers: `(name, helpers it calls directly or not, source)`.
pub const WGSL_HELPERS_F64: &[(&str, &[&str], &str)] = &[
    (
        "gf_fresh",
        &[],
        "// x plus a zero the driver cannot prove is one (per_thread is far below 2^31): a\n\
         // recomputed value kept apart from the equal one its forward pass computed.\n\
         fn gf_fresh(x: f64) -> f64 {\n    return x + f64(bitcast<f32>(params.per_thread & 0x80000000u));\n}",
    ),
    (
        "gf_is_nan",
        &[],
        r#"// NaN, tested on its f32 conversion's bits (a NaN stays NaN; every other f64 becomes a
// number or an infinity): WGSL lets an implementation assume there are no NaNs.
fn gf_is_nan(x: f64) -> bool {
    return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u;
}"#,
    ),
    (
        "gf_sign_bit",
        &[],
        r#"// The sign bit (also of -0.0 and -NaN), through the f32 conversion, which keeps it.
fn gf_sign_bit(x: f64) -> bool {
    return (bitcast<u32>(f32(x)) & 0x80000000u) != 0u;
}"#,
    ),
    (
        "gf_inf",
        &[],
        r#"// +inf (WGSL has no literal for it; the f32 one converts exactly).
fn gf_inf() -> f64 {
    return f64(bitcast<f32>(0x7f800000u));
}"#,
    ),
    (
        "gf_nan",
        &[],
        r#"// A quiet NaN.
fn gf_nan() -> f64 {
    return f64(bitcast<f32>(0x7fc00000u));
}"#,
    ),
    (
        "gf_min",
        &["gf_is_nan"],
        r#"// Rust's f64::min: a NaN argument yields the other one.
fn gf_min(a: f64, b: f64) -> f64 {
    return select(select(min(a, b), a, gf_is_nan(b)), b, gf_is_nan(a));
}"#,
    ),
    (
        "gf_max",
        &["gf_is_nan"],
        r#"// Rust's f64::max: a NaN argument yields the other one.
fn gf_max(a: f64, b: f64) -> f64 {
    return select(select(max(a, b), a, gf_is_nan(b)), b, gf_is_nan(a));
}"#,
    ),
    (
        "gf_clamp",
        &["gf_is_nan"],
        r#"// Rust's f64::clamp (without its panic when lo > hi): NaN stays NaN.
fn gf_clamp(x: f64, lo: f64, hi: f64) -> f64 {
    if (gf_is_nan(x)) {
        return x;
    }
    return select(select(x, hi, x > hi), lo, x < lo);
}"#,
    ),
    (
        "gf_round",
        &["gf_sign_bit"],
        r#"// Rust's f64::round: ties away from zero (WGSL's round() takes ties to even).
fn gf_round(x: f64) -> f64 {
    // By floor, the one rounding builtin every driver gets right in f64 (lavapipe's
    // round and trunc return large doubles unrounded); x - floor(x) is exact.
    let a = abs(x);
    let t = floor(a);
    let r = t + select(0.0lf, 1.0lf, a - t >= 0.5lf);
    return select(r, -r, gf_sign_bit(x));
}"#,
    ),
    (
        "gf_signum",
        &["gf_is_nan", "gf_sign_bit"],
        r#"// Rust's f64::signum: ±1 by the sign bit (also for ±0), NaN stays NaN.
fn gf_signum(x: f64) -> f64 {
    let s = select(1.0lf, -1.0lf, gf_sign_bit(x));
    return select(s, x, gf_is_nan(x));
}"#,
    ),
    (
        "gf_powi",
        &[],
        r#"// Rust's f64::powi: repeated squaring.
fn gf_powi(x: f64, n: i32) -> f64 {
    var base = select(x, 1.0lf / x, n < 0);
    var e = u32(abs(n));
    var acc = 1.0lf;
    loop {
        if (e == 0u) {
            break;
        }
        if ((e & 1u) == 1u) {
            acc = acc * base;
        }
        base = base * base;
        e = e >> 1u;
    }
    return acc;
}"#,
    ),
    (
        "gf_exp_poly",
        &[],
        r#"// exp(r) for |r| <= ln(2) / 2: its Taylor polynomial to r^13 (the next term is below
// 2^-57 of the result). Vulkan's exp and log take 32-bit floats only, so every f64
// transcendental here is gradfuse's own.
fn gf_exp_poly(r: f64) -> f64 {
    var p = 1.6059043836821613e-10lf;
    p = p * r + 2.08767569878681e-09lf;
    p = p * r + 2.505210838544172e-08lf;
    p = p * r + 2.755731922398589e-07lf;
    p = p * r + 2.7557319223985893e-06lf;
    p = p * r + 2.48015873015873e-05lf;
    p = p * r + 0.0001984126984126984lf;
    p = p * r + 0.001388888888888889lf;
    p = p * r + 0.008333333333333333lf;
    p = p * r + 0.041666666666666664lf;
    p = p * r + 0.16666666666666666lf;
    p = p * r + 0.5lf;
    p = p * r + 1.0lf;
    p = p * r + 1.0lf;
    return p;
}"#,
    ),
    (
        "gf_scale",
        &[],
        r#"// p * 2^k in two steps, so that neither factor over- or underflows before the product.
fn gf_scale(p: f64, k: f64) -> f64 {
    let half = i32(k * 0.5lf);
    return ldexp(ldexp(p, half), i32(k) - half);
}"#,
    ),
    (
        "gf_exp_scaled",
        &["gf_exp_poly", "gf_scale"],
        r#"// exp(x) 2^m for finite x: x = k ln 2 + r (ln 2 in two parts, the first exact times k),
// then exp(r) 2^(k + m), so that a scaled result overflows only if it is out of range.
fn gf_exp_scaled(x: f64, m: f64) -> f64 {
    let k = floor(x * 1.4426950408889634lf + 0.5lf);
    let r = (x - k * 0.6931471803691238lf) - k * 1.9082149292705877e-10lf;
    return gf_scale(gf_exp_poly(r), k + m);
}"#,
    ),
    (
        "gf_exp",
        &[
            "gf_is_nan",
            "gf_inf",
            "gf_exp_poly",
            "gf_scale",
            "gf_exp_scaled",
        ],
        r#"// exp to about 1 ulp, with its overflow, underflow and NaN.
fn gf_exp(x: f64) -> f64 {
    if (gf_is_nan(x)) {
        return x;
    }
    if (x > 709.782712893384lf) {
        return gf_inf();
    }
    if (x < -745.2lf) {
        return 0.0lf;
    }
    return gf_exp_scaled(x, 0.0lf);
}"#,
    ),
    (
        "gf_half_exp",
        &["gf_inf", "gf_exp_poly", "gf_scale", "gf_exp_scaled"],
        r#"// exp(x) / 2 for x >= 700 (sinh and cosh near the overflow): the halving is in the
// power of two, so neither exp(x) nor a product overflows first (NVIDIA's driver turned
// (e / 2) e into e (e / 2)... and overflowed). +inf stays +inf.
fn gf_half_exp(x: f64) -> f64 {
    return select(gf_exp_scaled(x, -1.0lf), x, x == gf_inf());
}"#,
    ),
    (
        "gf_exp2",
        &["gf_is_nan", "gf_inf", "gf_exp_poly", "gf_scale"],
        r#"// exp2 to about 1 ulp, exact at integers: 2^k exp((x - k) ln 2).
fn gf_exp2(x: f64) -> f64 {
    if (gf_is_nan(x)) {
        return x;
    }
    if (x >= 1024.0lf) {
        return gf_inf();
    }
    if (x < -1075.0lf) {
        return 0.0lf;
    }
    let k = floor(x + 0.5lf);
    return gf_scale(gf_exp_poly((x - k) * 0.6931471805599453lf), k);
}"#,
    ),
    (
        "gf_expm1",
        &[
            "gf_exp",
            "gf_is_nan",
            "gf_inf",
            "gf_exp_poly",
            "gf_scale",
            "gf_exp_scaled",
        ],
        r#"// exp(y) - 1 without the cancellation near 0: the series below |y| = 1/2.
fn gf_expm1(y: f64) -> f64 {
    if (abs(y) >= 0.5lf) {
        return gf_exp(y) - 1.0lf;
    }
    var p = 2.8114572543455206e-15lf;
    p = p * y + 4.779477332387385e-14lf;
    p = p * y + 7.647163731819816e-13lf;
    p = p * y + 1.1470745597729725e-11lf;
    p = p * y + 1.6059043836821613e-10lf;
    p = p * y + 2.08767569878681e-09lf;
    p = p * y + 2.505210838544172e-08lf;
    p = p * y + 2.755731922398589e-07lf;
    p = p * y + 2.7557319223985893e-06lf;
    p = p * y + 2.48015873015873e-05lf;
    p = p * y + 0.0001984126984126984lf;
    p = p * y + 0.001388888888888889lf;
    p = p * y + 0.008333333333333333lf;
    p = p * y + 0.041666666666666664lf;
    p = p * y + 0.16666666666666666lf;
    p = p * y + 0.5lf;
    p = p * y + 1.0lf;
    return y * p;
}"#,
    ),
    (
        "gf_sinh",
        &[
            "gf_exp",
            "gf_is_nan",
            "gf_inf",
            "gf_exp_poly",
            "gf_scale",
            "gf_half_exp",
            "gf_exp_scaled",
        ],
        r#"// sinh to about 2 ulp: the series below 1, where (e^x - e^-x) / 2 cancels; exp(x) / 2 by its exponent
// near the overflow (gf_half_exp), so that sinh overflows only where it should.
fn gf_sinh(x: f64) -> f64 {
    let a = abs(x);
    if (a < 1.0lf) {
        let z = x * x;
        var p = 8.22063524662433e-18lf;
        p = p * z + 2.8114572543455206e-15lf;
        p = p * z + 7.647163731819816e-13lf;
        p = p * z + 1.6059043836821613e-10lf;
        p = p * z + 2.505210838544172e-08lf;
        p = p * z + 2.7557319223985893e-06lf;
        p = p * z + 0.0001984126984126984lf;
        p = p * z + 0.008333333333333333lf;
        p = p * z + 0.16666666666666666lf;
        p = p * z + 1.0lf;
        return x * p;
    }
    var s = 0.0lf;
    if (a < 700.0lf) {
        let e = gf_exp(a);
        s = 0.5lf * e - 0.5lf / e;
    } else {
        s = gf_half_exp(a);
    }
    return select(s, -s, x < 0.0lf);
}"#,
    ),
    (
        "gf_cosh",
        &[
            "gf_exp",
            "gf_is_nan",
            "gf_inf",
            "gf_exp_poly",
            "gf_scale",
            "gf_half_exp",
            "gf_exp_scaled",
        ],
        r#"// cosh to about 1 ulp (exp(x) / 2 by its exponent near the overflow).
fn gf_cosh(x: f64) -> f64 {
    let a = abs(x);
    if (a < 700.0lf) {
        let e = gf_exp(a);
        return 0.5lf * e + 0.5lf / e;
    }
    return gf_half_exp(a);
}"#,
    ),
    (
        "gf_tanh",
        &[
            "gf_expm1",
            "gf_exp",
            "gf_is_nan",
            "gf_sign_bit",
            "gf_inf",
            "gf_exp_poly",
            "gf_scale",
            "gf_exp_scaled",
        ],
        r#"// tanh to about 2 ulp: expm1(2|x|) / (expm1(2|x|) + 2), which does not cancel near 0.
fn gf_tanh(x: f64) -> f64 {
    if (gf_is_nan(x)) {
        return x;
    }
    let a = abs(x);
    var t = 1.0lf;
    if (a < 22.0lf) {
        let m = gf_expm1(2.0lf * a);
        t = m / (m + 2.0lf);
    }
    return select(t, -t, gf_sign_bit(x));
}"#,
    ),
    (
        "gf_log_parts",
        &[],
        r#"// ln(x) = e ln 2 + r for finite x > 0: returns (e, r), r = ln(m) for m in [sqrt(1/2),
// sqrt(2)) by the series of 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172.
fn gf_log_parts(x: f64) -> vec2<f64> {
    // x = m 2^e, m in [1, 2): naga's frexp of an f64 needs 64-bit integers, and WGSL cannot
    // take an f64's bits; the exponent is read from an f32 copy scaled into its range.
    var y = x;
    var e = 0;
    for (var i = 0; i < 11; i++) {
        if (y >= 1.2676506002282294e30lf) {
            y = ldexp(y, -100);
            e = e + 100;
        } else if (y < 7.888609052210118e-31lf) {
            y = ldexp(y, 100);
            e = e - 100;
        }
    }
    var b = i32((bitcast<u32>(f32(y)) >> 23u) & 0xffu) - 127;
    var m = ldexp(y, -b);
    // The f32 copy may have rounded up to the next power of two.
    if (m < 1.0lf) {
        m = m + m;
        b = b - 1;
    }
    var ef = f64(e + b);
    if (m > 1.4142135623730951lf) {
        m = m * 0.5lf;
        ef = ef + 1.0lf;
    }
    let f = m - 1.0lf;
    let s = f / (2.0lf + f);
    let z = s * s;
    var p = 0.043478260869565216lf;
    p = p * z + 0.047619047619047616lf;
    p = p * z + 0.05263157894736842lf;
    p = p * z + 0.058823529411764705lf;
    p = p * z + 0.06666666666666667lf;
    p = p * z + 0.07692307692307693lf;
    p = p * z + 0.09090909090909091lf;
    p = p * z + 0.1111111111111111lf;
    p = p * z + 0.14285714285714285lf;
    p = p * z + 0.2lf;
    p = p * z + 0.3333333333333333lf;
    p = p * z + 1.0lf;
    return vec2<f64>(ef, 2.0lf * s * p);
}"#,
    ),
    (
        "gf_log_special",
        &["gf_nan", "gf_inf"],
        r#"// The logarithm where it is not finite: NaN below 0 and for NaN, -inf at 0, +inf at +inf.
fn gf_log_special(x: f64) -> f64 {
    if (x == 0.0lf) {
        return -gf_inf();
    }
    if (x > 0.0lf) {
        return x;
    }
    return gf_nan();
}"#,
    ),
    (
        "gf_ln",
        &["gf_log_parts", "gf_log_special", "gf_nan", "gf_inf"],
        r#"// Natural logarithm to about 1 ulp.
fn gf_ln(x: f64) -> f64 {
    if (!(x > 0.0lf) || x == gf_inf()) {
        return gf_log_special(x);
    }
    let er = gf_log_parts(x);
    return er.x * 0.6931471803691238lf + (er.x * 1.9082149292705877e-10lf + er.y);
}"#,
    ),
    (
        "gf_log2",
        &["gf_log_parts", "gf_log_special", "gf_nan", "gf_inf"],
        r#"// log2 to about 1 ulp, exact at powers of two.
fn gf_log2(x: f64) -> f64 {
    if (!(x > 0.0lf) || x == gf_inf()) {
        return gf_log_special(x);
    }
    let er = gf_log_parts(x);
    return er.x + er.y * 1.4426950408889634lf;
}"#,
    ),
    (
        "gf_log10",
        &["gf_log_parts", "gf_log_special", "gf_nan", "gf_inf"],
        r#"// log10 to about 2 ulp.
fn gf_log10(x: f64) -> f64 {
    if (!(x > 0.0lf) || x == gf_inf()) {
        return gf_log_special(x);
    }
    let er = gf_log_parts(x);
    return er.x * 0.30102999566398120lf + er.y * 0.4342944819032518lf;
}"#,
    ),
    (
        "gf_sincos",
        &["gf_nan"],
        r#"// (sin x, cos x) to about 1 ulp for |x| < 2^50: x = k pi/2 + r, then Taylor polynomials on
// |r| <= pi/4 and the quadrant from k. NaN past 2^50 (about 1.1e15), where an exact
// reduction needs a table of 2/pi's bits (Payne-Hanek) that this library does not carry.
fn gf_sincos(x: f64) -> vec2<f64> {
    let k = floor(x * 0.6366197723675814lf + 0.5lf);
    // x - k pi/2 exactly enough: pi/2 in seven parts of 23 bits and k = kh + kl (|kl| below
    // 2^20, the sign of k), so every product is exact, subtracted largest first (each difference exact
    // while it cancels). No fma: drivers may compute it unfused (lavapipe does).
    let kh_abs = floor(abs(k) * 9.5367431640625e-7lf) * 1048576.0lf;
    let kh = select(kh_abs, -kh_abs, k < 0.0lf);
    let kl = k - kh;
    var r = x;
    r = r - kh * 1.570796251296997lf;
    r = r - kh * 7.549789415861596e-08lf;
    r = r - kl * 1.570796251296997lf;
    r = r - kh * 5.390302529957765e-15lf;
    r = r - kl * 7.549789415861596e-08lf;
    r = r - kh * 3.2820031633724233e-22lf;
    r = r - kl * 5.390302529957765e-15lf;
    r = r - kh * 3.795010649787914e-29lf;
    r = r - kl * 3.2820031633724233e-22lf;
    r = r - kh * 1.2293330898111133e-36lf;
    r = r - kl * 3.795010649787914e-29lf;
    r = r - kh * 2.7337005381646456e-44lf;
    r = r - kl * 1.2293330898111133e-36lf;
    r = r - kl * 2.7337005381646456e-44lf;
    let z = r * r;
    var sp = -8.22063524662433e-18lf;
    sp = sp * z + 2.8114572543455206e-15lf;
    sp = sp * z + -7.647163731819816e-13lf;
    sp = sp * z + 1.6059043836821613e-10lf;
    sp = sp * z + -2.505210838544172e-08lf;
    sp = sp * z + 2.7557319223985893e-06lf;
    sp = sp * z + -0.0001984126984126984lf;
    sp = sp * z + 0.008333333333333333lf;
    sp = sp * z + -0.16666666666666666lf;
    sp = sp * z + 1.0lf;
    var c = 4.110317623312165e-19lf;
    c = c * z + -1.5619206968586225e-16lf;
    c = c * z + 4.779477332387385e-14lf;
    c = c * z + -1.1470745597729725e-11lf;
    c = c * z + 2.08767569878681e-09lf;
    c = c * z + -2.755731922398589e-07lf;
    c = c * z + 2.48015873015873e-05lf;
    c = c * z + -0.001388888888888889lf;
    c = c * z + 0.041666666666666664lf;
    c = c * z + -0.5lf;
    c = c * z + 1.0lf;
    let s = r * sp;
    let q = k - 4.0lf * floor(k * 0.25lf);
    var sc = vec2<f64>(s, c);
    sc = select(sc, vec2<f64>(c, -s), q == 1.0lf);
    sc = select(sc, vec2<f64>(-s, -c), q == 2.0lf);
    sc = select(sc, vec2<f64>(-c, s), q == 3.0lf);
    // Past 2^50 the quadrant needs more of pi than this reduction holds; NaN and the
    // infinities give NaN. A select, not an early return: with one, NVIDIA's driver
    // compiled the reduction into garbage (probed on the H100).
    let nan = gf_nan();
    return select(sc, vec2<f64>(nan, nan), !(abs(x) < 1125899906842624.0lf));
}"#,
    ),
    (
        "gf_sin",
        &["gf_sincos", "gf_nan"],
        r#"// sin (see gf_sincos); sin(-0) = -0.
fn gf_sin(x: f64) -> f64 {
    return select(gf_sincos(x).x, x, x == 0.0lf);
}"#,
    ),
    (
        "gf_cos",
        &["gf_sincos", "gf_nan"],
        r#"// cos (see gf_sincos).
fn gf_cos(x: f64) -> f64 {
    return gf_sincos(x).y;
}"#,
    ),
    (
        "gf_tan",
        &["gf_sincos", "gf_nan"],
        r#"// tan as the ratio of sin and cos (a few ulp); tan(-0) = -0.
fn gf_tan(x: f64) -> f64 {
    let sc = gf_sincos(x);
    // One correction of the quotient by its residual: f64 division on NVIDIA's Vulkan
    // driver is not correctly rounded (x / 7 one ulp off, probed on the H100).
    let q = sc.x / sc.y;
    return select(q + fma(-q, sc.y, sc.x) / sc.y, x, x == 0.0lf);
}"#,
    ),
    (
        "gf_atan_unit",
        &[],
        r#"// atan(z) for |z| <= 1: atan(z) = pi/4 + atan((z - 1) / (z + 1)) above tan(pi/8), then the
// series to z^43 (|w| <= 0.415, the next term below 2^-56 of the result).
fn gf_atan_unit(z: f64) -> f64 {
    let a = abs(z);
    var base = 0.0lf;
    var w = a;
    if (a > 0.41421356237309503lf) {
        base = 0.7853981633974483lf;
        w = (a - 1.0lf) / (a + 1.0lf);
    }
    let ww = w * w;
    var p = -0.023255813953488372lf;
    p = p * ww + 0.024390243902439025lf;
    p = p * ww + -0.02564102564102564lf;
    p = p * ww + 0.02702702702702703lf;
    p = p * ww + -0.02857142857142857lf;
    p = p * ww + 0.030303030303030304lf;
    p = p * ww + -0.03225806451612903lf;
    p = p * ww + 0.034482758620689655lf;
    p = p * ww + -0.037037037037037035lf;
    p = p * ww + 0.04lf;
    p = p * ww + -0.043478260869565216lf;
    p = p * ww + 0.047619047619047616lf;
    p = p * ww + -0.05263157894736842lf;
    p = p * ww + 0.058823529411764705lf;
    p = p * ww + -0.06666666666666667lf;
    p = p * ww + 0.07692307692307693lf;
    p = p * ww + -0.09090909090909091lf;
    p = p * ww + 0.1111111111111111lf;
    p = p * ww + -0.14285714285714285lf;
    p = p * ww + 0.2lf;
    p = p * ww + -0.3333333333333333lf;
    p = p * ww + 1.0lf;
    let r = base + w * p;
    return select(r, -r, z < 0.0lf);
}"#,
    ),
    (
        "gf_atan",
        &["gf_atan_unit", "gf_is_nan", "gf_sign_bit"],
        r#"// atan to about 2 ulp: pi/2 - atan(1/|x|) above 1; atan(-0) = -0.
fn gf_atan(x: f64) -> f64 {
    if (gf_is_nan(x)) {
        return x;
    }
    let t = abs(x);
    var r = 0.0lf;
    if (t > 1.0lf) {
        r = 1.5707963267948966lf - gf_atan_unit(1.0lf / t);
    } else {
        r = gf_atan_unit(t);
    }
    return select(r, -r, gf_sign_bit(x));
}"#,
    ),
    (
        "gf_atan2",
        &[
            "gf_atan",
            "gf_atan_unit",
            "gf_is_nan",
            "gf_sign_bit",
            "gf_nan",
            "gf_inf",
        ],
        r#"// Rust's f64::atan2(y, x) (C99 Annex F): quadrants, signed zeros, infinities, NaN.
fn gf_atan2(y: f64, x: f64) -> f64 {
    if (gf_is_nan(x) || gf_is_nan(y)) {
        return gf_nan();
    }
    let y_neg = gf_sign_bit(y);
    let x_neg = gf_sign_bit(x);
    let inf = gf_inf();
    if (abs(x) == inf && abs(y) == inf) {
        let a = select(0.7853981633974483lf, 2.356194490192345lf, x_neg);
        return select(a, -a, y_neg);
    }
    if (abs(y) == inf || x == 0.0lf) {
        if (y == 0.0lf) {
            return select(select(0.0lf, 3.141592653589793lf, x_neg), select(-0.0lf, -3.141592653589793lf, x_neg), y_neg);
        }
        return select(1.5707963267948966lf, -1.5707963267948966lf, y_neg);
    }
    if (abs(x) == inf) {
        return select(select(0.0lf, -0.0lf, y_neg), select(3.141592653589793lf, -3.141592653589793lf, y_neg), x_neg);
    }
    let a = gf_atan(y / x);
    if (!x_neg) {
        return a;
    }
    return select(a + 3.141592653589793lf, a - 3.141592653589793lf, y_neg);
}"#,
    ),
    (
        "gf_asin",
        &[
            "gf_atan2",
            "gf_atan",
            "gf_atan_unit",
            "gf_is_nan",
            "gf_sign_bit",
            "gf_nan",
            "gf_inf",
        ],
        r#"// asin(x) = atan2(x, sqrt((1 - x)(1 + x))): accurate up to |x| = 1.
fn gf_asin(x: f64) -> f64 {
    return gf_atan2(x, sqrt((1.0lf - x) * (1.0lf + x)));
}"#,
    ),
    (
        "gf_acos",
        &[
            "gf_atan2",
            "gf_atan",
            "gf_atan_unit",
            "gf_is_nan",
            "gf_sign_bit",
            "gf_nan",
            "gf_inf",
        ],
        r#"// acos(x) = atan2(sqrt((1 - x)(1 + x)), x): accurate up to |x| = 1.
fn gf_acos(x: f64) -> f64 {
    return gf_atan2(sqrt((1.0lf - x) * (1.0lf + x)), x);
}"#,
    ),
    (
        "gf_hypot",
        &["gf_is_nan", "gf_nan", "gf_inf"],
        r#"// Rust's f64::hypot: infinite if either argument is (even with a NaN), scaled by the larger
// argument so that it overflows only when the result does.
fn gf_hypot(x: f64, y: f64) -> f64 {
    let inf = gf_inf();
    let ax = abs(x);
    let ay = abs(y);
    if (ax == inf || ay == inf) {
        return inf;
    }
    if (gf_is_nan(x) || gf_is_nan(y)) {
        return gf_nan();
    }
    let hi = max(ax, ay);
    if (hi == 0.0lf) {
        return 0.0lf;
    }
    let r = min(ax, ay) / hi;
    return hi * sqrt(1.0lf + r * r);
}"#,
    ),
    (
        "gf_powf",
        &[
            "gf_is_nan",
            "gf_sign_bit",
            "gf_nan",
            "gf_inf",
            "gf_exp",
            "gf_exp_poly",
            "gf_scale",
            "gf_ln",
            "gf_log_parts",
            "gf_log_special",
            "gf_exp_scaled",
        ],
        r#"// Rust's f64::powf (C99 Annex F): 1 for y = 0 or x = 1, NaN for a negative base and a
// non-integer exponent, signed zeros and infinities at the edges; small integer exponents
// by repeated squaring, others as exp(y ln |x|) (about |y ln x| 2^-53 relative).
fn gf_powf(x: f64, y: f64) -> f64 {
    if (y == 0.0lf || x == 1.0lf) {
        return 1.0lf;
    }
    if (y == 1.0lf) {
        return x;
    }
    if (gf_is_nan(x) || gf_is_nan(y)) {
        return gf_nan();
    }
    let inf = gf_inf();
    let ax = abs(x);
    let x_neg = gf_sign_bit(x);
    if (abs(y) == inf) {
        if (ax == 1.0lf) {
            return 1.0lf;
        }
        return select(0.0lf, inf, (ax > 1.0lf) == (y > 0.0lf));
    }
    let y_int = fract(y) == 0.0lf;
    let y_odd = y_int && abs(y) < 9007199254740992.0lf && fract(y * 0.5lf) != 0.0lf;
    if (y_int && abs(y) <= 64.0lf && ax != 0.0lf && ax != inf) {
        var base = select(ax, 1.0lf / ax, y < 0.0lf);
        var e = u32(abs(y));
        var acc = 1.0lf;
        loop {
            if (e == 0u) {
                break;
            }
            if ((e & 1u) == 1u) {
                acc = acc * base;
            }
            base = base * base;
            e = e >> 1u;
        }
        return select(acc, -acc, x_neg && y_odd);
    }
    var m = 0.0lf;
    if (ax == 0.0lf) {
        m = select(0.0lf, inf, y < 0.0lf);
    } else if (ax == inf) {
        m = select(0.0lf, inf, y > 0.0lf);
    } else {
        if (x_neg && !y_int) {
            return gf_nan();
        }
        m = gf_exp(y * gf_ln(ax));
    }
    return select(m, -m, x_neg && y_odd);
}"#,
    ),
];
