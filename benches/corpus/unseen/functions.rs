// Functions of the shapes users write that the corpus does not hold, for
// `GRADFUSE_CORPUS_EXTRA=benches/corpus/unseen/functions.rs .bench/corpus`: the check of
// speed on functions the generator was never measured on (BENCHMARKS.md, "Functions the
// corpus does not hold"). Written before they were first timed; none was changed after.

// A Jacobian wider than the corpus's widest (4 x 32): 6 results of 40 inputs.
fn wide_6x40(u: [f32; 40]) -> [f32; 6] {
    let mut r = [0.0; 6];
    for j in 0..6 {
        let mut s = 0.0;
        for k in 0..40 {
            s += (u[k] * (j as f32 + 1.0)).cos() * u[39 - k];
        }
        r[j] = s;
    }
    r
}

// A recurrence written into an array, then a stencil over it with a shared kernel.
fn scan_48(a: [f32; 48], #[shared] k: [f32; 5]) -> f32 {
    let mut p = [0.0; 48];
    p[0] = a[0];
    for i in 1..48 {
        p[i] = p[i - 1] * 0.9 + a[i];
    }
    let mut e = 0.0;
    for i in 0..43 {
        let mut s = 0.0;
        for t in 0..5 {
            s += k[t] * p[i + t];
        }
        e += s.sin() * s.sin();
    }
    e
}

// A reprojection residual: a camera (angle-axis, translation, focal) and a point, as
// bundle adjustment writes it.
fn reprojection(cam: [f32; 7], pt: [f32; 3], #[constant] obs: [f32; 2]) -> [f32; 2] {
    let theta = (cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2] + 1e-12).sqrt();
    let kx = cam[0] / theta;
    let ky = cam[1] / theta;
    let kz = cam[2] / theta;
    let c = theta.cos();
    let s = theta.sin();
    let dot = kx * pt[0] + ky * pt[1] + kz * pt[2];
    let x = pt[0] * c + (ky * pt[2] - kz * pt[1]) * s + kx * dot * (1.0 - c) + cam[3];
    let y = pt[1] * c + (kz * pt[0] - kx * pt[2]) * s + ky * dot * (1.0 - c) + cam[4];
    let z = pt[2] * c + (kx * pt[1] - ky * pt[0]) * s + kz * dot * (1.0 - c) + cam[5];
    [cam[6] * x / z - obs[0], cam[6] * y / z - obs[1]]
}

// A soft logic gate layer: 16 gates, each a softmax-weighted mix of four relaxed gates
// over two inputs, the mixing logits shared.
fn soft_gates(x: [f32; 32], #[shared] logits: [f32; 64]) -> f32 {
    let mut out = 0.0;
    for g in 0..16 {
        let a = x[2 * g];
        let b = x[2 * g + 1];
        let e0 = logits[4 * g].exp();
        let e1 = logits[4 * g + 1].exp();
        let e2 = logits[4 * g + 2].exp();
        let e3 = logits[4 * g + 3].exp();
        let y = (e0 * a * b + e1 * (a + b - a * b) + e2 * (a + b - 2.0 * a * b) + e3 * (1.0 - a))
            / (e0 + e1 + e2 + e3);
        out += (y - 0.5) * (y - 0.5);
    }
    out
}

// A mass-spring chain stepped 32 times, its final positions scored.
fn chain_32(x: [f32; 8], v: [f32; 8], k: f32) -> f32 {
    let mut p = x;
    let mut q = v;
    for _t in 0..32 {
        let mut f = [0.0; 8];
        for i in 1..7 {
            f[i] = k * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - 0.1 * q[i];
        }
        for i in 0..8 {
            q[i] += 0.01 * f[i];
            p[i] += 0.01 * q[i];
        }
    }
    let mut e = 0.0;
    for i in 0..8 {
        e += p[i] * p[i];
    }
    e
}

// A small network per element, 4-24-24-2, weights per element (no shared gradient),
// softplus activations, squared error.
fn local_net(x: [f32; 4], w1: [f32; 96], w2: [f32; 576], w3: [f32; 48]) -> f32 {
    let mut h = [0.0; 24];
    for j in 0..24 {
        let mut s = 0.0;
        for k in 0..4 {
            s += w1[j * 4 + k] * x[k];
        }
        h[j] = (s.exp() + 1.0).ln();
    }
    let mut g = [0.0; 24];
    for j in 0..24 {
        let mut s = 0.0;
        for k in 0..24 {
            s += w2[j * 24 + k] * h[k];
        }
        g[j] = (s.exp() + 1.0).ln();
    }
    let mut e = 0.0;
    for c in 0..2 {
        let mut s = 0.0;
        for k in 0..24 {
            s += w3[c * 24 + k] * g[k];
        }
        e += s * s;
    }
    e
}

// Polynomial features of three inputs against shared coefficients (a regression's loss).
fn poly_fit(x: f32, y: f32, z: f32, #[constant] t: f32, #[shared] c: [f32; 27]) -> f32 {
    let xs = [1.0, x, x * x];
    let ys = [1.0, y, y * y];
    let zs = [1.0, z, z * z];
    let mut p = 0.0;
    for i in 0..3 {
        for j in 0..3 {
            for k in 0..3 {
                p += c[9 * i + 3 * j + k] * xs[i] * ys[j] * zs[k];
            }
        }
    }
    (p - t) * (p - t)
}

// A signed-distance function of a few primitives, smooth-min blended.
fn sdf(p: [f32; 3], #[shared] r: [f32; 4]) -> f32 {
    let sphere = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt() - r[0];
    let qx = p[0].abs() - r[1];
    let qy = p[1].abs() - r[1];
    let qz = p[2].abs() - r[1];
    let outside = (qx.max(0.0) * qx.max(0.0) + qy.max(0.0) * qy.max(0.0) + qz.max(0.0) * qz.max(0.0)).sqrt();
    let boxd = outside + qx.max(qy.max(qz)).min(0.0);
    let torus = ((p[0] * p[0] + p[2] * p[2]).sqrt() - r[2]).hypot(p[1]) - r[3];
    let k = 0.2;
    let h = (0.5 + 0.5 * (boxd - sphere) / k).clamp(0.0, 1.0);
    let d = boxd * (1.0 - h) + sphere * h - k * h * (1.0 - h);
    let h2 = (0.5 + 0.5 * (torus - d) / k).clamp(0.0, 1.0);
    torus * (1.0 - h2) + d * h2 - k * h2 * (1.0 - h2)
}
