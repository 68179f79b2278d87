// Adjoints that sum shared gradients and record a tape (a loop kept as a loop, its
// carried values recorded for the reverse pass), written before they were first timed to
// screen the element count for such kernels (BENCHMARKS.md, "Elements side by side for
// kernels with tapes"). Today they take one element per thread. Inputs lie in [0.5, 2],
// shared words in [-0.45, 0.45] (the corpus bench's); every loop stays bounded on them.

// A damped pendulum per element, its stiffness and damping shared (a fit of two
// parameters to many trajectories), stepped 512 times: no array index, so the loop is kept.
fn pendulum_fit_512(x: f32, v: f32, #[shared] kc: [f32; 2]) -> f32 {
    let mut a = x;
    let mut w = v;
    let mut e = 0.0;
    for _t in 0..512 {
        w = w - 0.01 * (kc[0] * a.sin() + (kc[1] + 0.5) * w);
        a = a + 0.01 * w;
        e += a * a;
    }
    e
}

// A leaky integrator driven by a shared 512-word input signal scaled per element.
fn decay_table_512(u: f32, c: f32, #[shared] table: [f32; 512]) -> f32 {
    let mut h = 0.0;
    let mut s = 0.0;
    for i in 0..512 {
        h = h * 0.98 + table[i] * u;
        s += c * h * h;
    }
    s
}

// A one-unit recurrent scan over a shared sequence, the recurrence weight per element.
fn rnn_scan_512(x: f32, w: f32, #[shared] seq: [f32; 512]) -> f32 {
    let mut h = 0.0;
    let mut acc = 0.0;
    for i in 0..512 {
        h = (0.5 * w * h + seq[i] * x).tanh();
        acc += h;
    }
    acc * acc
}

// Predator and prey with four shared rates, 400 steps of explicit Euler.
fn lotka_400(x: f32, y: f32, #[shared] p: [f32; 4]) -> f32 {
    let mut a = x;
    let mut b = y;
    for _t in 0..400 {
        let da = a * (0.6 + p[0] - (0.5 + p[1]) * b);
        let db = b * ((0.5 + p[2]) * a - 0.6 - p[3]);
        a = a + 0.01 * da;
        b = b + 0.01 * db;
    }
    (a - 1.0) * (a - 1.0) + (b - 1.0) * (b - 1.0)
}

// Logistic growth toward a shared capacity, its rate shared too, summed over 256 steps.
fn logistic_256(x0: f32, #[shared] r: [f32; 2]) -> f32 {
    let mut x = 0.2 * x0;
    let mut s = 0.0;
    for _t in 0..256 {
        x = x + 0.05 * (1.0 + r[0]) * x * (1.0 - x / (1.5 + r[1]));
        s += x;
    }
    s
}

// Two coupled states filtered by a shared 1,024-tap response.
fn filter_1024(u: [f32; 2], #[shared] taps: [f32; 1024]) -> f32 {
    let mut y = 0.0;
    let mut z = u[1];
    for i in 0..1024 {
        y = 0.99 * y + taps[i] * u[0] - 0.01 * z;
        z = 0.995 * z + 0.01 * y;
    }
    y * y + z
}
