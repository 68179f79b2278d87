// Adjoints summing shared gradients, written to check the element rule on work that depends
// on the shared words alone (`shared_sums::shared_only_share`) before they were first timed
// (BENCHMARKS.md, "Work on the shared words alone"). The first four do such work (a
// camera's rotation, a mixture's normalization, a normalized weight vector, a softmax over
// shared logits); the last four do none.

// A point seen by one shared camera: a rotation from three angles, a translation, a focal
// length; the squared reprojection error against the point's own observation.
fn camera_residual(p: [f32; 5], #[shared] cam: [f32; 7]) -> f32 {
    let ca = cam[0].cos();
    let sa = cam[0].sin();
    let cb = cam[1].cos();
    let sb = cam[1].sin();
    let cc = cam[2].cos();
    let sc = cam[2].sin();
    let r00 = cb * cc;
    let r01 = -cb * sc;
    let r02 = sb;
    let r10 = ca * sc + sa * sb * cc;
    let r11 = ca * cc - sa * sb * sc;
    let r12 = -sa * cb;
    let r20 = sa * sc - ca * sb * cc;
    let r21 = sa * cc + ca * sb * sc;
    let r22 = ca * cb;
    let x = r00 * p[0] + r01 * p[1] + r02 * p[2] + cam[3];
    let y = r10 * p[0] + r11 * p[1] + r12 * p[2] + cam[4];
    let z = r20 * p[0] + r21 * p[1] + r22 * p[2] + cam[5] + 4.0;
    let u = cam[6] * x / z - p[3];
    let v = cam[6] * y / z - p[4];
    u * u + v * v
}

// The negative log-likelihood of a 1-D point under a mixture of 6 Gaussians: shared
// logits, means and log-widths; the weights' softmax and the widths' exponentials are
// the same for every element.
fn mixture_6(x: f32, #[shared] g: [f32; 18]) -> f32 {
    let mut m = g[0];
    for k in 1..6 {
        m = m.max(g[k]);
    }
    let mut z = 0.0;
    for k in 0..6 {
        z += (g[k] - m).exp();
    }
    let mut like = 0.0;
    for k in 0..6 {
        let inv = (-g[12 + k]).exp();
        let d = (x - g[6 + k]) * inv;
        like += (g[k] - m).exp() / z * inv * (-0.5 * d * d).exp();
    }
    -(like + 1e-8).ln()
}

// A linear model whose 12 shared weights are normalized to unit length before use.
fn unit_weights(p: [f32; 12], t: f32, #[shared] w: [f32; 12]) -> f32 {
    let mut n = 0.0;
    for k in 0..12 {
        n += w[k] * w[k];
    }
    let inv = 1.0 / (n + 1e-6).sqrt();
    let mut s = 0.0;
    for k in 0..12 {
        s += w[k] * inv * p[k];
    }
    (s - t) * (s - t)
}

// A soft choice among 8 per-element candidates by shared logits (a softmax).
fn soft_choice_8(c: [f32; 8], t: f32, #[shared] l: [f32; 8]) -> f32 {
    let mut z = 0.0;
    let mut s = 0.0;
    for k in 0..8 {
        let e = l[k].exp();
        z += e;
        s += e * c[k];
    }
    let y = s / z;
    (y - t) * (y - t)
}

// A point against 12 shared atoms (Lennard-Jones, softened): per-element work only.
fn atoms_12(p: [f32; 3], #[shared] a: [f32; 36]) -> f32 {
    let mut e = 0.0;
    for k in 0..12 {
        let dx = p[0] - a[3 * k];
        let dy = p[1] - a[3 * k + 1];
        let dz = p[2] - a[3 * k + 2];
        let r2 = dx * dx + dy * dy + dz * dz + 0.5;
        let s6 = 1.0 / (r2 * r2 * r2);
        e += s6 * s6 - s6;
    }
    e
}

// A Fourier series of 10 shared terms (frequency, phase, amplitude) fitted to a sample.
fn fourier_10(x: f32, t: f32, #[shared] f: [f32; 30]) -> f32 {
    let mut s = 0.0;
    for k in 0..10 {
        s += f[3 * k + 2] * (f[3 * k] * x + f[3 * k + 1]).sin();
    }
    (s - t) * (s - t)
}

// A cubic Bezier curve of 4 shared 2-D control points at the element's parameter,
// against its sample point (de Casteljau).
fn bezier_fit(t: f32, q: [f32; 2], #[shared] c: [f32; 8]) -> f32 {
    let u = 1.0 - t;
    let mut x = [c[0], c[2], c[4], c[6]];
    let mut y = [c[1], c[3], c[5], c[7]];
    for level in 0..3 {
        for k in 0..3 {
            if k + level < 3 {
                x[k] = u * x[k] + t * x[k + 1];
                y[k] = u * y[k] + t * y[k + 1];
            }
        }
    }
    (x[0] - q[0]) * (x[0] - q[0]) + (y[0] - q[1]) * (y[0] - q[1])
}

// A quadratic form of a per-element 6-vector with a shared symmetric 6x6 matrix, squashed.
fn quad_form_6(v: [f32; 6], #[shared] m: [f32; 36]) -> f32 {
    let mut s = 0.0;
    for i in 0..6 {
        let mut r = 0.0;
        for j in 0..6 {
            r += m[6 * i + j] * v[j];
        }
        s += v[i] * r;
    }
    (1.0 + s * s).ln()
}
