// Adjoints that sum small shared gradients, for the screen of elements side by side and
// of staged gradient stores (BENCHMARKS.md, "Small shared gradients"): odd per-element
// word counts (3, 5, 7) and shared gradients of 6 to 40 words.

// 5 words per element, 6 shared.
fn odd5(p: [f32; 5], #[shared] r: [f32; 6]) -> f32 {
    let a = (p[0] * r[0] + p[1] * r[1]).tanh();
    let b = (p[2] * r[2] - p[3] * r[3]).sin();
    let c = (p[4] * r[4] + a * b).exp() - r[5];
    a * b + c * c + (p[0] - p[4]).abs() * r[5]
}

// 7 words per element, 24 shared: three weighted sums of the words through a softplus.
fn odd7(p: [f32; 7], #[shared] w: [f32; 24]) -> f32 {
    let mut e = 0.0;
    for j in 0..3 {
        let mut s = w[21 + j];
        for k in 0..7 {
            s += w[7 * j + k] * p[k];
        }
        e += (s.exp() + 1.0).ln();
    }
    e * e
}

// 3 words per element, 40 shared: a point against a table of 10 spheres.
fn spheres_10(p: [f32; 3], #[shared] s: [f32; 40]) -> f32 {
    let mut acc = 0.0;
    for i in 0..10 {
        let dx = p[0] - s[4 * i];
        let dy = p[1] - s[4 * i + 1];
        let dz = p[2] - s[4 * i + 2];
        let d = (dx * dx + dy * dy + dz * dz).sqrt() - s[4 * i + 3];
        acc += (-d * d).exp();
    }
    acc.ln()
}

// 4 words per element (a vector view), 8 shared.
fn even4(p: [f32; 4], #[shared] c: [f32; 8]) -> f32 {
    let u = c[0] * p[0] + c[1] * p[1] + c[2] * p[2] + c[3] * p[3];
    let v = c[4] * p[0] * p[1] + c[5] * p[2] * p[3] + c[6];
    (u.sin() + v.cos()) * c[7]
}
