// A second screen of adjoints that record tapes and sum shared gradients, written before
// they were first timed, to check 2 against 4 elements per thread after the next-value
// reads landed (BENCHMARKS.md, "Four elements for adjoints with tapes?"). Inputs lie in
// [0.5, 2], shared words in [-0.45, 0.45] (the corpus bench's).

// Two coupled tanh units driven by a shared 256-step input sequence.
fn rnn2_256(x: [f32; 2], #[shared] w: [f32; 4], #[shared] seq: [f32; 256]) -> f32 {
    let mut a = 0.0;
    let mut b = 0.0;
    for i in 0..256 {
        let na = (w[0] * a + w[1] * b + seq[i] * x[0]).tanh();
        let nb = (w[2] * a + w[3] * b + seq[i] * x[1]).tanh();
        a = na;
        b = nb;
    }
    a * b
}

// Six masses on springs of a shared stiffness and damping, stepped 48 times (two 6-word
// arrays carried: a checkpointed loop of arrays).
fn springs_48(p0: [f32; 6], #[shared] kd: [f32; 2]) -> f32 {
    let mut p = p0;
    let mut v = [0.0; 6];
    for _t in 0..48 {
        let mut f = [0.0; 6];
        for i in 1..5 {
            f[i] = (0.5 + kd[0]) * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - (0.2 + kd[1]) * v[i];
        }
        for i in 0..6 {
            v[i] += 0.05 * f[i];
            p[i] += 0.05 * v[i];
        }
    }
    let mut e = 0.0;
    for i in 0..6 {
        e += (p[i] - 1.0) * (p[i] - 1.0);
    }
    e
}

// A decaying amplitude through `exp`, its rate shared, 300 steps.
fn decay_exp_300(a0: f32, t: f32, #[shared] r: [f32; 2]) -> f32 {
    let mut a = a0;
    let mut s = 0.0;
    for _k in 0..300 {
        a = (a.ln() - 0.01 * (1.0 + r[0]) * t).exp();
        s += a * (1.0 + r[1]);
    }
    s
}

// A soft clipping recurrence through `sqrt`, 400 steps, a shared gain.
fn soft_clip_400(x: f32, #[shared] g: f32) -> f32 {
    let mut y = x;
    let mut acc = 0.0;
    for _k in 0..400 {
        y = (0.5 * y * y + 0.2 + 0.1 * g).sqrt();
        acc += y;
    }
    acc
}
