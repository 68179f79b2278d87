#!/usr/bin/env python3
"""tanh.py in.wgsl outdir function: variants of a cooperative network kernel that differ only
in gf_tanh, written as outdir/<function>.adjoint~tanh_<name>.wgsl for the corpus bench
(GRADFUSE_CORPUS_VARIANTS). `cut-unchecked` is a cut (tanh replaced by x / 2), timed for
the share tanh has; `builtin-unchecked` is WGSL's tanh, whose accuracy the driver chooses."""
import re, sys

# XLA's numerator p and denominator q of tanh(x) for x clamped to 7.9.
XLA_RATIONAL = """
    let c = clamp(x, -7.90531110763549805, 7.90531110763549805);
    let z = c * c;
    var p = fma(z, -2.76076847742355e-16, 2.00018790482477e-13);
    p = fma(z, p, -8.60467152213735e-11);
    p = fma(z, p, 5.12229709037114e-08);
    p = fma(z, p, 1.48572235717979e-05);
    p = fma(z, p, 6.37261928875436e-04);
    p = fma(z, p, 4.89352455891786e-03);
    p = c * p;
    var q = fma(z, 1.19825839466702e-06, 1.18534705686654e-04);
    q = fma(z, q, 2.26843463243900e-03);
    q = fma(z, q, 4.89352518554385e-03);
"""

BODIES = {
    # XLA's f32 tanh on GPUs (Eigen's generic_fast_tanh_float): a 13/6 rational, clamped.
    'xla': XLA_RATIONAL + "    return select(p / q, x, abs(x) < 0.0004);\n",
    # The same with the quotient as a product by a reciprocal.
    'xla_rcp': XLA_RATIONAL + "    return select(p * (1.0 / q), x, abs(x) < 0.0004);\n",
    # Only the exponential's form (inaccurate near 0): what dropping the polynomial saves.
    'exp': """
    let e = exp(2.0 * clamp(x, -9.0, 9.0));
    return 1.0 - 2.0 / (e + 1.0);
""",
    # The exponential's form with the polynomial kept, the quotient as a reciprocal.
    'rcp': """
    let ax = abs(x);
    let e = 1.0 - 2.0 * (1.0 / (exp(2.0 * min(ax, 9.0)) + 1.0));
    let z = x * x;
    let p = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
    return select(p, select(e, -e, x < 0.0), ax >= 0.625);
""",
    'builtin-unchecked': """
    return tanh(x);
""",
    'cut-unchecked': """
    return x * 0.5;
""",
}

src = open(sys.argv[1]).read()
m = re.search(r'fn gf_tanh\(x: f32\) -> f32 \{\n(.*?)\n\}\n', src, re.S)
assert m, 'no gf_tanh'
for name, body in BODIES.items():
    out = src[:m.start(1)] + body.strip('\n') + src[m.end(1):]
    open(f'{sys.argv[2]}/{sys.argv[3]}.adjoint~tanh_{name}.wgsl', 'w').write(out)
