// tanh to about 2 ulp (Cephes' tanhf), as gradfuse's generated kernels compute it, so that
// the hand-written kernels compute the same function.
fn tanh_accurate(x: f32) -> f32 {
    let ax = abs(x);
    if (ax >= 0.625) {
        let t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);
        return select(t, -t, x < 0.0);
    }
    let z = x * x;
    return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
}
