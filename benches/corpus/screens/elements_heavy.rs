// Adjoints that sum shared gradients with much arithmetic per word moved, for the second
// screen of elements side by side (BENCHMARKS.md, "Small shared gradients"): the GPU
// bench's two shared cases, and functions that read many or few shared words per
// operation.

// The GPU bench's 8-16-1 network (benches/common), 161 shared words.
fn mlp_loss(
    #[constant] x: [f32; 8],
    #[constant] target: f32,
    #[shared] w1: [f32; 128],
    #[shared] b1: [f32; 16],
    #[shared] w2: [f32; 16],
    #[shared] b2: f32,
) -> f32 {
    let mut y = b2;
    for j in 0..16 {
        let mut s = b1[j];
        for i in 0..8 {
            s += w1[j * 8 + i] * x[i];
        }
        y += w2[j] * s.tanh();
    }
    (y - target) * (y - target)
}

// The GPU bench's soft gate (benches/common), 16 shared words.
fn soft_gate16(a: f32, b: f32, #[constant] target: f32, #[shared] logits: [f32; 16]) -> f32 {
    let ab = a * b;
    let ops = [
        0.0, ab, a - ab, a, b - ab, b, a + b - 2.0 * ab, a + b - ab,
        1.0 - (a + b - ab), 1.0 - (a + b - 2.0 * ab), 1.0 - b, 1.0 - b + ab,
        1.0 - a, 1.0 - a + ab, 1.0 - ab, 1.0,
    ];
    let mut m = logits[0];
    for k in 1..16 {
        m = m.max(logits[k]);
    }
    let mut z = 0.0;
    let mut out = 0.0;
    for k in 0..16 {
        let e = (logits[k] - m).exp();
        z += e;
        out += e * ops[k];
    }
    let g = out / z;
    (g - target) * (g - target)
}

// A 3-12-1 layer with per-element inputs: many shared reads per operation, 61 words.
fn dense_3x12(p: [f32; 3], #[shared] w: [f32; 48], #[shared] v: [f32; 13]) -> f32 {
    let mut y = v[12];
    for j in 0..12 {
        let s = w[36 + j] + w[3 * j] * p[0] + w[3 * j + 1] * p[1] + w[3 * j + 2] * p[2];
        y += v[j] * s.tanh();
    }
    y * y
}

// Long trigonometric arithmetic on 8 shared words: few shared reads per operation.
fn trig_8(p: [f32; 3], #[shared] c: [f32; 8]) -> f32 {
    let mut a = p[0] * c[0] + c[1];
    let mut b = p[1] * c[2] + c[3];
    for _k in 0..6 {
        let t = (a * c[4]).sin() * (b * c[5]).cos();
        a = a + 0.3 * (t + p[2]).sin();
        b = b - 0.3 * (t * c[6]).cos();
    }
    a * b + c[7]
}

// A point against 20 shared spheres, 80 words.
fn spheres_20(p: [f32; 3], #[shared] s: [f32; 80]) -> f32 {
    let mut acc = 0.0;
    for i in 0..20 {
        let dx = p[0] - s[4 * i];
        let dy = p[1] - s[4 * i + 1];
        let dz = p[2] - s[4 * i + 2];
        let d = (dx * dx + dy * dy + dz * dz).sqrt() - s[4 * i + 3];
        acc += (-d * d).exp();
    }
    acc.ln()
}
