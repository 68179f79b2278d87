// Networks of 32 to 128 inputs, written as users write them, for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/streamed_networks.rs (BENCHMARKS.md,
// "Networks past 32 inputs"). Written by benches/networks/variants/streamed_networks.py.
fn in32_128(#[constant] x: [f32; 32], #[constant] t: f32, #[shared] w1: [f32; 4224], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[32 * 128 + j];
        for k in 0..32 {
            s += w1[j * 32 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in40_128(#[constant] x: [f32; 40], #[constant] t: f32, #[shared] w1: [f32; 5248], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[40 * 128 + j];
        for k in 0..40 {
            s += w1[j * 40 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in64_128(#[constant] x: [f32; 64], #[constant] t: f32, #[shared] w1: [f32; 8320], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[64 * 128 + j];
        for k in 0..64 {
            s += w1[j * 64 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in64_128_relu(#[constant] x: [f32; 64], #[constant] t: f32, #[shared] w1: [f32; 8320], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[64 * 128 + j];
        for k in 0..64 {
            s += w1[j * 64 + k] * x[k];
        }
        h1[j] = s.max(0.0);
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.max(0.0);
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in100_128_2(#[constant] x: [f32; 100], #[constant] t: [f32; 2], #[shared] w1: [f32; 12928], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 258]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[100 * 128 + j];
        for k in 0..100 {
            s += w1[j * 100 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..2 {
        let mut y = w3[128 * 2 + j];
        for k in 0..128 {
            y += w3[j * 128 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn in128_128(#[constant] x: [f32; 128], #[constant] t: f32, #[shared] w1: [f32; 16512], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[128 * 128 + j];
        for k in 0..128 {
            s += w1[j * 128 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

