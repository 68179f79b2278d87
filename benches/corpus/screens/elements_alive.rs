// Adjoints summing shared gradients whose elements keep many or few values alive, written
// to check the rule on values alive per element (`MAX_VALUES_ALIVE_FOR_FOUR_ELEMENTS`)
// before they were first timed (BENCHMARKS.md, "Small shared gradients").

// A 4-32-1 tanh layer with per-element inputs, 161 shared words.
fn hidden_32(p: [f32; 4], #[shared] w: [f32; 128], #[shared] v: [f32; 33]) -> f32 {
    let mut y = v[32];
    for j in 0..32 {
        let s = w[4 * j] * p[0] + w[4 * j + 1] * p[1] + w[4 * j + 2] * p[2] + w[4 * j + 3] * p[3];
        y += v[j] * s.tanh();
    }
    y * y
}

// Radial basis functions: 16 shared centres and widths, 48 words.
fn rbf_16(p: [f32; 2], #[shared] c: [f32; 48]) -> f32 {
    let mut acc = 0.0;
    for k in 0..16 {
        let dx = p[0] - c[3 * k];
        let dy = p[1] - c[3 * k + 1];
        acc += (-(dx * dx + dy * dy) * c[3 * k + 2]).exp();
    }
    (acc + 1e-6).ln()
}

// A point turned by 6 shared rotations in turn (angle and axis each), 24 words.
fn rotations_6(p: [f32; 3], #[shared] r: [f32; 24]) -> f32 {
    let mut x = p[0];
    let mut y = p[1];
    let mut z = p[2];
    for k in 0..6 {
        let c = r[4 * k].cos();
        let s = r[4 * k].sin();
        let ax = r[4 * k + 1];
        let ay = r[4 * k + 2];
        let az = r[4 * k + 3];
        let d = ax * x + ay * y + az * z;
        let nx = x * c + (ay * z - az * y) * s + ax * d * (1.0 - c);
        let ny = y * c + (az * x - ax * z) * s + ay * d * (1.0 - c);
        let nz = z * c + (ax * y - ay * x) * s + az * d * (1.0 - c);
        x = nx;
        y = ny;
        z = nz;
    }
    x * y + z
}
