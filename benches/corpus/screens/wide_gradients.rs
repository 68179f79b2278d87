// Adjoints of light functions with #[shared] arguments and per-element gradients of 33 to
// 128 words: stored from registers (33 strided stores a thread) before the reduction's
// stage took them in up to 16 rounds for kernels of little work per word
// (`abi::reduce_stage_rounds`); BENCHMARKS.md "Wide gradients of light kernels".

fn grad_33(p: [f32; 33], #[shared] s: f32) -> f32 {
    let mut acc = 0.0;
    for k in 0..33 {
        acc += p[k] * p[k] * (k as f32 + s);
    }
    acc
}

fn grad_48(p: [f32; 48], #[shared] w: [f32; 2]) -> f32 {
    let mut acc = 0.0;
    for k in 0..48 {
        acc += (p[k] * w[0]).exp() - p[k] * w[1];
    }
    acc
}

fn grad_64(p: [f32; 64], #[shared] s: f32) -> f32 {
    let mut acc = 0.0;
    for k in 0..64 {
        acc += p[k] * s - p[63 - k] * p[k];
    }
    acc
}

fn grad_128(p: [f32; 128], #[shared] s: [f32; 4]) -> f32 {
    let mut acc = 0.0;
    for k in 0..32 {
        for j in 0..4 {
            acc += p[4 * k + j] * s[j];
        }
    }
    acc * acc
}

fn grammar_14(p0: [f32; 33], #[shared] p1: f32, #[shared] p2: f32) -> f32 {
    let mut a1 = [0.03125; 5];
    ((-3.09375).asin() - ((if 2.734375 >= p2 { -0.125 } else { p0[17] })).exp())
}
